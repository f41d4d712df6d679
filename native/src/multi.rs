//! One of spaCy's patterns as runs of its top-level alternatives, in order: runs without
//! lookaround go to the `regex` crate (a lazy DFA); each alternative with a lookaround goes to
//! fancy-regex, tried only on strings where its prefilter (the alternative with positive
//! lookarounds consuming and negative ones dropped: it matches wherever the alternative does;
//! all prefilters in one `RegexSet`) matches. A search gives what Python's `re` gives for the
//! whole alternation: the leftmost start, and at that start the earliest alternative (the
//! earliest run holding a match there, and within a run the regex engines' own
//! leftmost-first order).

use fancy_regex::Regex as Fancy;
use regex::{Regex, RegexSet, SetMatches};

enum Run {
    Plain(Regex),
    Fancy(Fancy, usize), // its prefilter's index in the set
}

pub struct Multi {
    runs: Vec<Run>,
    prefilters: RegexSet,
}

impl Multi {
    /// `runs`: (pattern, "" for a plain run, or the prefilter of a lookaround alternative).
    pub fn new(what: &str, runs: Vec<(String, String)>) -> Result<Self, String> {
        let bad = |e: String| format!("spaCy's {what} pattern does not compile: {e}");
        let mut out = Vec::new();
        let mut pre = Vec::new();
        for (p, relaxed) in runs {
            if relaxed.is_empty() {
                out.push(Run::Plain(Regex::new(&p).map_err(|e| bad(e.to_string()))?));
            } else {
                out.push(Run::Fancy(Fancy::new(&p).map_err(|e| bad(e.to_string()))?, pre.len()));
                pre.push(relaxed);
            }
        }
        let prefilters = RegexSet::new(&pre).map_err(|e| bad(e.to_string()))?;
        Ok(Multi { runs: out, prefilters })
    }

    fn candidates(&self, s: &str) -> Option<SetMatches> {
        if self.prefilters.is_empty() { None } else { Some(self.prefilters.matches(s)) }
    }

    fn find_at(&self, s: &str, pos: usize, candidates: &Option<SetMatches>) -> Result<Option<(usize, usize)>, String> {
        let mut best: Option<(usize, usize)> = None;
        for r in &self.runs {
            let m = match r {
                Run::Plain(re) => re.find_at(s, pos).map(|m| (m.start(), m.end())),
                Run::Fancy(re, k) => {
                    if !candidates.as_ref().is_some_and(|c| c.matched(*k)) {
                        continue;
                    }
                    re.find_from_pos(s, pos).map_err(|e| e.to_string())?.map(|m| (m.start(), m.end()))
                }
            };
            if let Some((a, b)) = m {
                if best.is_none_or(|(ba, _)| a < ba) {
                    best = Some((a, b));
                }
            }
        }
        Ok(best)
    }

    pub fn find(&self, s: &str) -> Result<Option<(usize, usize)>, String> {
        self.find_at(s, 0, &self.candidates(s))
    }

    /// Non-overlapping matches left to right (Python's finditer; an empty match moves on a character).
    pub fn find_iter(&self, s: &str) -> Result<Vec<(usize, usize)>, String> {
        let mut out = Vec::new();
        let mut pos = 0;
        let candidates = self.candidates(s);
        while pos <= s.len() {
            match self.find_at(s, pos, &candidates)? {
                None => break,
                Some((a, b)) => {
                    out.push((a, b));
                    pos = if b > a { b } else { b + s[b..].chars().next().map_or(1, |c| c.len_utf8()) };
                }
            }
        }
        Ok(out)
    }

    pub fn is_match(&self, s: &str) -> Result<bool, String> {
        Ok(self.find(s)?.is_some())
    }
}
