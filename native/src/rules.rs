//! The quality rules for one document at a time, in the reference's order and with its
//! definitions (shardforge/clean/quality/{gopher,ngrams,c4,fineweb}.py): each group returns the
//! first rule the document fails (an index into REASONS) or None; C4 also gives the text with
//! its lines removed. Every fraction is computed in f64 as num / den, 0 when den is 0.

use hashbrown::HashTable;

use crate::repetition::dups;
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

use crate::text::{count, cp_len, lower, ltrim, rtrim, split_ws, splitlines, trim, CharSet};
use crate::tokenizer::Tokenizer;

pub const REASONS: &[&str] = &[
    "gopher_empty", "gopher_max_dup_para_frac", "gopher_max_dup_para_char_frac", "gopher_max_dup_line_frac",
    "gopher_max_dup_line_char_frac", "gopher_top_2gram", "gopher_top_3gram", "gopher_top_4gram",
    "gopher_dup_5gram", "gopher_dup_6gram", "gopher_dup_7gram", "gopher_dup_8gram", "gopher_dup_9gram",
    "gopher_dup_10gram",
    "gopher_min_words", "gopher_max_words", "gopher_min_avg_word_length", "gopher_max_avg_word_length",
    "gopher_max_symbol_word_ratio", "gopher_max_bullet_lines_ratio", "gopher_max_ellipsis_lines_ratio",
    "gopher_min_alpha_words_ratio", "gopher_min_stop_words",
    "c4_lorem_ipsum", "c4_curly_bracket", "c4_min_sentences",
    "fineweb_empty", "fineweb_min_line_punct_ratio", "fineweb_max_short_line_ratio",
    "fineweb_max_dup_line_char_ratio", "fineweb_max_newline_word_ratio",
];

/// The per-document quantities the rules compare with their thresholds (annotate mode), one
/// f64 each, named after the rule that reads them; groups' slices: REP, GQ, C4, FW.
pub const SIGNALS: &[&str] = &[
    "gopher_dup_para_frac", "gopher_dup_para_char_frac", "gopher_dup_line_frac", "gopher_dup_line_char_frac",
    "gopher_top_2gram_frac", "gopher_top_3gram_frac", "gopher_top_4gram_frac",
    "gopher_dup_5gram_frac", "gopher_dup_6gram_frac", "gopher_dup_7gram_frac", "gopher_dup_8gram_frac",
    "gopher_dup_9gram_frac", "gopher_dup_10gram_frac",
    "gopher_words", "gopher_avg_word_length", "gopher_hash_word_ratio", "gopher_ellipsis_word_ratio",
    "gopher_bullet_lines_ratio", "gopher_ellipsis_lines_ratio", "gopher_alpha_words_ratio", "gopher_stop_words",
    "c4_lorem_ipsum", "c4_curly_bracket", "c4_sentences",
    "fineweb_line_punct_ratio", "fineweb_short_line_ratio", "fineweb_dup_line_char_ratio",
    "fineweb_newline_word_ratio",
];
pub const GROUP_SIGNALS: [(usize, usize); 4] = [(0, 13), (13, 21), (21, 24), (24, 28)];

/// Where a group writes its quantities: `full` (annotate mode) computes every one of them and
/// records the first failed rule; otherwise a group stops at its first failed rule.
pub struct Sig<'a> {
    pub full: bool,
    pub v: &'a mut [f64],
}

pub(crate) fn reason(name: &str) -> u8 {
    REASONS.iter().position(|r| *r == name).expect("known reason") as u8
}

/// The QualitySection's values (0 = off), in the order Python hands them over.
pub struct Params {
    pub groups: [bool; 4],
    pub rep: [f64; 4],                  // dup para frac, para char frac, line frac, line char frac
    pub top: Vec<f64>,                  // n = 2, 3, 4
    pub dup: Vec<f64>,                  // n = 5 ... 10
    pub gq: [f64; 8],                   // min words, max words, min avg, max avg, symbol, bullet, ellipsis, alpha
    pub min_stop: f64,
    pub stop_words: Vec<String>,
    pub c4_max_word_length: f64,
    pub c4_flags: [bool; 6],            // citations, terminal punct, lorem, javascript, curly, policy
    pub c4_min_words_per_line: f64,
    pub c4_min_sentences: f64,
    pub fw: [f64; 5],                   // punct ratio, short ratio, short length, dup char ratio, newline ratio
}

pub struct Classes {
    pub ws: CharSet,
    pub letter: CharSet,
    pub punct: CharSet,
    pub symbol: CharSet,
    pub terminal: CharSet,
    pub sentence_end: CharSet,
    pub lower: FxHashMap<char, String>,
}

pub struct Kernel {
    pub tok: Tokenizer,
    pub cls: Classes,
    memo: HashTable<u32>,                       // index into memo_entries
    memo_entries: Vec<(u64, Box<str>, Box<[(u32, u32)]>)>,
    /// words of the text C4 gave (set by c4 when it counted sentences, read by fineweb)
    c4_words: Option<usize>,
}

const MEMO_MAX: usize = 1_000_000;

#[inline]
pub(crate) fn ratio(num: f64, den: f64) -> f64 {
    if den != 0.0 { num / den } else { 0.0 }
}

pub(crate) fn hash_str(s: &str) -> u64 {
    let mut h = FxHasher::default();
    s.hash(&mut h);
    h.finish()
}

impl Kernel {
    pub fn new(tok: Tokenizer, cls: Classes) -> Self {
        Kernel { tok, cls, memo: HashTable::new(), memo_entries: Vec::new(), c4_words: None }
    }

    pub fn clear_memo(&mut self) {
        self.memo.clear();
        self.memo_entries.clear();
    }

    /// One whitespace-free chunk's tokens (byte ranges): letters-only chunks that are not a
    /// special case are one token (as the reference), others spaCy's; memoised.
    pub fn chunk_tokens(&mut self, chunk: &str) -> Result<&[(u32, u32)], String> {
        let h = hash_str(chunk);
        let entries = &self.memo_entries;
        if let Some(&i) = self.memo.find(h, |&i| &*entries[i as usize].1 == chunk) {
            return Ok(&self.memo_entries[i as usize].2);
        }
        let toks = if chunk.chars().all(|c| self.cls.letter.has(c)) && !self.tok.is_special(chunk) {
            vec![(0, chunk.len() as u32)]
        } else {
            self.tok.tokenize(chunk, true)?
        };
        if self.memo_entries.len() >= MEMO_MAX {
            self.clear_memo();
        }
        let i = self.memo_entries.len();
        self.memo_entries.push((h, chunk.into(), toks.into_boxed_slice()));
        let entries = &self.memo_entries;
        self.memo.insert_unique(h, i as u32, |&j| entries[j as usize].0);
        Ok(&self.memo_entries[i].2)
    }

    /// The words of a text (datatrove's split_into_words, whitespace tokens dropped).
    pub fn words<'a>(&mut self, text: &'a str, out: &mut Vec<&'a str>) -> Result<(), String> {
        let mut chunks = Vec::new();
        split_ws(text, &self.cls.ws, &mut chunks);
        for c in chunks {
            for &(a, b) in self.chunk_tokens(c)? {
                out.push(&c[a as usize..b as usize]);
            }
        }
        Ok(())
    }

    pub fn quality(&self, text: &str, words: &[&str], p: &Params, sig: &mut Sig) -> Option<u8> {
        let c = &self.cls;
        let n_words = words.len() as f64;
        let (mut n_ns, mut len_ns, mut alpha) = (0usize, 0usize, 0usize);
        let mut stop_seen = vec![false; p.stop_words.len()];
        for w in words {
            if !w.chars().all(|ch| c.symbol.has(ch)) {
                n_ns += 1;
                len_ns += cp_len(w);
            }
            if w.chars().any(|ch| c.letter.has(ch)) {
                alpha += 1;
            }
            if let Some(k) = p.stop_words.iter().position(|s| s == w) {
                stop_seen[k] = true;
            }
        }
        let n_ns = n_ns as f64;
        let mean_len = ratio(len_ns as f64, n_ns);
        let hashes = count(text, "#") as f64;
        let ellipses = (count(text, "...") + count(text, "\u{2026}")) as f64;
        let mut lines = Vec::new();
        splitlines(text, &mut lines);
        let (mut bullets, mut end_ell) = (0usize, 0usize);
        for l in &lines {
            let s = ltrim(l, &c.ws);
            if s.starts_with('\u{2022}') || s.starts_with('-') {
                bullets += 1;
            }
            let s = rtrim(l, &c.ws);
            if s.ends_with("...") || s.ends_with('\u{2026}') {
                end_ell += 1;
            }
        }
        let n_lines = lines.len() as f64;
        let stops = stop_seen.iter().filter(|&&x| x).count() as f64;
        let g = &p.gq;
        let (hash_r, ell_r) = (ratio(hashes, n_words), ratio(ellipses, n_words));
        let vals = [n_ns, mean_len, hash_r, ell_r, ratio(bullets as f64, n_lines), ratio(end_ell as f64, n_lines),
                    ratio(alpha as f64, n_words), stops];
        sig.v[13..21].copy_from_slice(&vals);
        let checks = [
            (g[0] != 0.0 && n_ns < g[0], "gopher_min_words"),
            (g[1] != 0.0 && n_ns > g[1], "gopher_max_words"),
            (g[2] != 0.0 && mean_len < g[2], "gopher_min_avg_word_length"),
            (g[3] != 0.0 && mean_len > g[3], "gopher_max_avg_word_length"),
            (g[4] != 0.0 && (hash_r > g[4] || ell_r > g[4]),
             "gopher_max_symbol_word_ratio"),
            (g[5] != 0.0 && ratio(bullets as f64, n_lines) > g[5], "gopher_max_bullet_lines_ratio"),
            (g[6] != 0.0 && ratio(end_ell as f64, n_lines) > g[6], "gopher_max_ellipsis_lines_ratio"),
            (g[7] != 0.0 && ratio(alpha as f64, n_words) < g[7], "gopher_min_alpha_words_ratio"),
            (p.min_stop != 0.0 && stops < p.min_stop, "gopher_min_stop_words"),
        ];
        checks.iter().find(|(hit, _)| *hit).map(|(_, name)| reason(name))
    }

    /// Sentences of one line as spaCy's sentencizer counts them (at least 1), and its words.
    /// (sentences, words) of one line.
    fn sentences(&mut self, line: &str) -> Result<(usize, usize), String> {
        let mut toks = Vec::new();
        self.words(line, &mut toks)?;
        let nw = toks.len();
        let c = &self.cls;
        let (mut n, mut pending) = (1usize, false);
        for t in toks {
            let mut it = t.chars();
            let first = it.next();
            let term = first.is_some() && it.next().is_none() && c.sentence_end.has(first.unwrap());
            let punct = term || t.chars().all(|ch| c.punct.has(ch));
            if !punct {
                if pending {
                    n += 1;
                }
                pending = false;
            } else if term {
                pending = true;
            }
        }
        Ok((n, nw))
    }

    pub fn c4(&mut self, text: &str, p: &Params, out: &mut String, sig: &mut Sig) -> Result<Option<u8>, String> {
        let [citations, terminal, lorem_on, js_on, curly_on, policy_on] = p.c4_flags;
        let mut result: Option<u8> = None;
        let (mut any_lorem, mut any_curly) = (false, false);
        let mut kept: Vec<String> = Vec::new();
        let mut words = Vec::new();
        let mut low = String::new();
        for line in text.split('\n') {
            let stripped = trim(line, &self.cls.ws);
            words.clear();
            split_ws(stripped, &self.cls.ws, &mut words);
            let maxlen = words.iter().map(|w| cp_len(w)).max().unwrap_or(0) as f64;
            let t = if citations { remove_citations(stripped) } else { stripped.to_string() };
            let mut drop = p.c4_max_word_length != 0.0 && maxlen > p.c4_max_word_length;
            if terminal {
                let ends = [".", "?", "!", "\"", "'"].iter().any(|e| t.ends_with(e));
                drop |= !ends || t.ends_with("...");
            }
            drop |= (words.len() as f64) < p.c4_min_words_per_line;
            lower(&t, &self.cls.lower, &mut low);
            let lorem = lorem_on && !drop && low.contains("lorem ipsum");
            drop |= lorem;
            let js = js_on && !drop && low.contains("javascript");
            drop |= js;
            let curly = curly_on && !drop && t.contains('{');
            drop |= curly;
            if policy_on {
                drop |= ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"]
                    .iter().any(|ph| low.contains(ph));
            }
            any_lorem |= lorem;
            any_curly |= curly;
            if result.is_none() && (lorem || curly) {
                result = Some(reason(if lorem { "c4_lorem_ipsum" } else { "c4_curly_bracket" }));
            }
            if !drop {
                kept.push(t);
            }
        }
        self.c4_words = None;
        sig.v[21] = any_lorem as u8 as f64;
        sig.v[22] = any_curly as u8 as f64;
        if p.c4_min_sentences != 0.0 || sig.full {
            let (mut sent, mut nw) = (0usize, 0usize);
            for l in &kept {
                let (s, w) = self.sentences(l)?;
                sent += s;
                nw += w;
            }
            self.c4_words = Some(nw); // the output's chunks are the kept lines' chunks
            sig.v[23] = sent as f64;
            if p.c4_min_sentences != 0.0 && (sent as f64) < p.c4_min_sentences && result.is_none() {
                result = Some(reason("c4_min_sentences"));
            }
        }
        let joined = kept.join("\n");
        out.clear();
        out.push_str(trim(&joined, &self.cls.ws));
        Ok(result)
    }

    pub fn fineweb(&mut self, text: &str, p: &Params, sig: &mut Sig) -> Result<Option<u8>, String> {
        let lines: Vec<&str> = text.split('\n').filter(|l| !trim(l, &self.cls.ws).is_empty()).collect();
        let nl = lines.len() as f64;
        if nl == 0.0 {
            return Ok(Some(reason("fineweb_empty")));
        }
        let f = &p.fw;
        let mut first: Option<u8> = None;
        // (quantity, failed); a group in filter mode stops at its first failed rule
        let mut note = |i: usize, v: f64, failed: bool, name: &str, full: bool| -> bool {
            sig.v[24 + i] = v;
            if failed && first.is_none() {
                first = Some(reason(name));
            }
            failed && !full
        };
        let full = sig.full;
        if f[0] != 0.0 || full {
            let ends = lines.iter().filter(|l| l.chars().last().is_some_and(|c| self.cls.terminal.has(c))).count();
            let r = ratio(ends as f64, nl);
            if note(0, r, f[0] != 0.0 && r < f[0], "fineweb_min_line_punct_ratio", full) {
                return Ok(first);
            }
        }
        if f[1] != 0.0 || full {
            let short = lines.iter().filter(|l| cp_len(l) as f64 <= f[2]).count();
            let r = ratio(short as f64, nl);
            if note(1, r, f[1] != 0.0 && r > f[1], "fineweb_max_short_line_ratio", full) {
                return Ok(first);
            }
        }
        let newlines = count(text, "\n") as f64;
        if f[3] != 0.0 || full {
            let (_, dup_chars) = dups(&lines);
            let chars = cp_len(text) as f64 - newlines;
            let r = ratio(dup_chars, chars);
            if note(2, r, f[3] != 0.0 && r > f[3], "fineweb_max_dup_line_char_ratio", full) {
                return Ok(first);
            }
        }
        if f[4] != 0.0 || full {
            let nw = match self.c4_words.take() {
                Some(n) => n,
                None => {
                    let mut w = Vec::new();
                    self.words(text, &mut w)?;
                    w.len()
                }
            };
            let r = ratio(newlines, nw as f64);
            note(3, r, f[4] != 0.0 && r > f[4], "fineweb_max_newline_word_ratio", full);
        }
        Ok(first)
    }

    /// The groups in FineWeb's order on one document: (first failed rule + 1, or 0; the text
    /// after C4 when C4 ran, else None). With `sig.full` every configured group runs on every
    /// document and writes its quantities (the decision is the same: the first failed rule).
    pub fn apply_one(&mut self, text: &str, p: &Params, sig: &mut Sig) -> Result<(u8, Option<String>), String> {
        let mut cur: Option<String> = None;
        let mut words: Vec<&str> = Vec::new();
        let mut have_words = false;
        let mut first: Option<u8> = None;
        self.c4_words = None;
        for g in 0..4 {
            if !p.groups[g] {
                continue;
            }
            let got = match g {
                0 | 1 => {
                    if !have_words {
                        self.words(text, &mut words)?;
                        have_words = true;
                    }
                    if g == 0 { self.repetition(text, &words, p, sig) } else { self.quality(text, &words, p, sig) }
                }
                2 => {
                    let mut out = String::new();
                    let r = self.c4(text, p, &mut out, sig)?;
                    cur = Some(out);
                    r
                }
                _ => {
                    let t = cur.take();
                    let r = self.fineweb(t.as_deref().unwrap_or(text), p, sig)?;
                    cur = t;
                    r
                }
            };
            if let Some(r) = got {
                if first.is_none() {
                    first = Some(r);
                }
                if !sig.full {
                    break;
                }
            }
        }
        Ok((first.map_or(0, |r| r + 1), cur))
    }
}

/// C4's citation marks removed: "[" digits "]", "[edit]", "[citation needed]".
fn remove_citations(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] == b'[' {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let end = if j < b.len() && b[j] == b']' {
                Some(j + 1)
            } else if s[i..].starts_with("[edit]") {
                Some(i + 6)
            } else if s[i..].starts_with("[citation needed]") {
                Some(i + 17)
            } else {
                None
            };
            if let Some(e) = end {
                out.push_str(&s[copied..i]);
                copied = e;
                i = e;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[copied..]);
    out
}
