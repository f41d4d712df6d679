//! spaCy's rule-based tokenizer (spacy/tokenizer.pyx, version pinned in setup.py) for one
//! whitespace-free chunk, ported step for step over the pinned spaCy's own data: its special
//! cases and its prefix, suffix, infix and URL patterns (handed over by Python, translated to
//! fancy-regex syntax there). Steps: a special case for the whole chunk; otherwise
//! `_split_affixes` (prefixes and suffixes, stopping at a special case), `_attach_tokens`
//! (special case, URL match, infix splits), then `_apply_special_cases` (special cases whose
//! affix tokenization occurs as a run of the chunk's tokens). Tokens are byte ranges of the chunk.

use rustc_hash::FxHashMap;

use crate::multi::Multi;

pub type Span = (u32, u32);

pub struct Tokenizer {
    prefix: Multi,
    suffix: Multi,
    infix: Multi,
    url: Option<Multi>,
    /// special case -> its tokens' byte lengths
    specials: FxHashMap<String, Vec<u32>>,
    /// special cases the phrase matcher looks for -> their affix tokenization (byte lengths)
    matcher: FxHashMap<String, Vec<u32>>,
    max_pattern: usize,
}

pub type Runs = Vec<(String, String)>;

fn lengths(orths: &[String]) -> Vec<u32> {
    orths.iter().map(|o| o.len() as u32).collect()
}

impl Tokenizer {
    pub fn new(prefix: Runs, suffix: Runs, infix: Runs, url: Option<Runs>,
               specials: Vec<(String, Vec<String>)>) -> Result<Self, String> {
        let mut t = Tokenizer {
            prefix: Multi::new("prefix", prefix)?,
            suffix: Multi::new("suffix", suffix)?,
            infix: Multi::new("infix", infix)?,
            url: match url { Some(u) => Some(Multi::new("url", u)?), None => None },
            specials: FxHashMap::default(),
            matcher: FxHashMap::default(),
            max_pattern: 0,
        };
        for (key, orths) in &specials {
            if orths.concat() != *key {
                return Err(format!("special case {key:?}: its tokens do not spell it"));
            }
            t.specials.insert(key.clone(), lengths(orths));
        }
        // add_special_case with faster_heuristics: the matcher gets the special cases that have
        // an affix or a space, as their affix tokenization without special cases
        let mut pats = Vec::new();
        for (key, _) in &specials {
            if key.contains(' ') || t.find_prefix(key)? != 0 || t.find_suffix(key)? != 0
                || !t.find_infix(key)?.is_empty() {
                let toks = t.tokenize(key, false)?;
                pats.push((key.clone(), toks.iter().map(|&(a, b)| b - a).collect::<Vec<u32>>()));
            }
        }
        for (k, p) in pats {
            t.max_pattern = t.max_pattern.max(p.len());
            t.matcher.insert(k, p);
        }
        Ok(t)
    }

    pub fn is_special(&self, s: &str) -> bool {
        self.specials.contains_key(s)
    }

    fn find_prefix(&self, s: &str) -> Result<usize, String> {
        Ok(self.prefix.find(s)?.map_or(0, |(a, b)| b - a))
    }

    fn find_suffix(&self, s: &str) -> Result<usize, String> {
        Ok(self.suffix.find(s)?.map_or(0, |(a, b)| b - a))
    }

    fn find_infix(&self, s: &str) -> Result<Vec<(usize, usize)>, String> {
        self.infix.find_iter(s)
    }

    fn push_special(&self, key: &str, at: usize, out: &mut Vec<Span>) -> bool {
        match self.specials.get(key) {
            Some(lens) => {
                let mut p = at as u32;
                for &l in lens {
                    out.push((p, p + l));
                    p += l;
                }
                true
            }
            None => false,
        }
    }

    /// The chunk's tokens as spaCy gives them (`with_specials` = false: affix rules only, as
    /// spaCy builds its matcher's patterns).
    pub fn tokenize(&self, chunk: &str, with_specials: bool) -> Result<Vec<Span>, String> {
        let mut out = Vec::new();
        if chunk.is_empty() {
            return Ok(out);
        }
        if with_specials && self.push_special(chunk, 0, &mut out) {
            return Ok(out);
        }
        // _split_affixes
        let (mut a, mut b) = (0usize, chunk.len());
        let mut prefixes: Vec<Span> = Vec::new();
        let mut suffixes: Vec<Span> = Vec::new();
        let mut last = 0usize;
        while a < b && b - a != last {
            let s = &chunk[a..b];
            if with_specials && self.is_special(s) {
                break;
            }
            last = b - a;
            let pre = self.find_prefix(s)?;
            if pre != 0 {
                let minus_pre = &chunk[a + pre..b];
                if !minus_pre.is_empty() && with_specials && self.is_special(minus_pre) {
                    prefixes.push((a as u32, (a + pre) as u32));
                    a += pre;
                    break;
                }
            }
            let suf = self.find_suffix(&chunk[a + pre..b])?;
            if suf != 0 {
                let minus_suf = &chunk[a..b - suf];
                if !minus_suf.is_empty() && with_specials && self.is_special(minus_suf) {
                    suffixes.push(((b - suf) as u32, b as u32));
                    b -= suf;
                    break;
                }
            }
            if pre != 0 && suf != 0 && pre + suf <= b - a {
                prefixes.push((a as u32, (a + pre) as u32));
                suffixes.push(((b - suf) as u32, b as u32));
                a += pre;
                b -= suf;
            } else if pre != 0 {
                prefixes.push((a as u32, (a + pre) as u32));
                a += pre;
            } else if suf != 0 {
                suffixes.push(((b - suf) as u32, b as u32));
                b -= suf;
            }
        }
        // _attach_tokens
        out.extend_from_slice(&prefixes);
        if a < b {
            let s = &chunk[a..b];
            let url = match &self.url {
                Some(u) => u.is_match(s)?,
                None => false,
            };
            if with_specials && self.push_special(s, a, &mut out) {
            } else if url {
                out.push((a as u32, b as u32));
            } else {
                let matches = self.find_infix(s)?;
                let mut start = 0usize;
                for (is, ie) in matches {
                    if is == 0 {
                        continue;
                    }
                    if is != start {
                        out.push(((a + start) as u32, (a + is) as u32));
                    }
                    if is != ie {
                        out.push(((a + is) as u32, (a + ie) as u32));
                    }
                    start = ie;
                }
                if start < s.len() {
                    out.push(((a + start) as u32, b as u32));
                }
            }
        }
        out.extend(suffixes.iter().rev());
        if with_specials && !self.matcher.is_empty() && out.len() > 1 {
            out = self.apply_matcher(chunk, out);
        }
        Ok(out)
    }

    /// `_apply_special_cases` within one chunk: every run of tokens that is a matcher pattern
    /// (same text, same split); longest first, then leftmost, a run is kept when neither its
    /// first nor its last token was covered by a run looked at before; kept runs become the
    /// special case's tokens.
    fn apply_matcher(&self, chunk: &str, toks: Vec<Span>) -> Vec<Span> {
        let n = toks.len();
        let mut found: Vec<(usize, usize)> = Vec::new();
        for i in 0..n {
            for len in 1..=self.max_pattern.min(n - i) {
                let text = &chunk[toks[i].0 as usize..toks[i + len - 1].1 as usize];
                if let Some(p) = self.matcher.get(text) {
                    if p.len() == len && (0..len).all(|k| toks[i + k].1 - toks[i + k].0 == p[k]) {
                        found.push((i, i + len));
                    }
                }
            }
        }
        if found.is_empty() {
            return toks;
        }
        found.sort_by(|x, y| (y.1 - y.0).cmp(&(x.1 - x.0)).then(x.0.cmp(&y.0)));
        let mut seen = vec![false; n];
        let mut kept: Vec<(usize, usize)> = Vec::new();
        for &(s, e) in &found {
            if !seen[s] && !seen[e - 1] {
                kept.push((s, e));
            }
            for x in seen.iter_mut().take(e).skip(s) {
                *x = true;
            }
        }
        kept.sort();
        let mut out = Vec::with_capacity(n);
        let mut i = 0;
        let mut k = 0;
        while i < n {
            if k < kept.len() && kept[k].0 == i {
                let (s, e) = kept[k];
                let text = &chunk[toks[s].0 as usize..toks[e - 1].1 as usize];
                if !self.push_special(text, toks[s].0 as usize, &mut out) {
                    out.extend_from_slice(&toks[s..e]);
                }
                i = e;
                k += 1;
            } else {
                out.push(toks[i]);
                i += 1;
            }
        }
        out
    }
}
