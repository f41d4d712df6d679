//! The PII detectors' shared scan (shardforge/redact/pii/scan.py): one pass over a text
//! that gives what the Python detectors would otherwise find with a dozen scans of their
//! own. The text comes as one byte per character (Python encodes it to ASCII with every
//! other character replaced by `?`, which no rule reads), so offsets are character
//! offsets; bytes above 127 belong to no class. Each output is defined by the Python
//! function it replaces, which the tests hold it to:
//! - number starts: `spans.number_starts`;
//! - per literal group, the first offset of any of its literals (case-sensitive), `-1`
//!   when none occurs: `str.find`;
//! - per keyword group, every occurrence of its keywords, ASCII case-insensitive,
//!   overlapping, as its sorted unique starts and sorted unique ends: `text.lower().find`
//!   in a loop;
//! - IBAN heads (two upper-case letters then two digits): `iban.heads`;
//! - whether a run of 40 characters of `[A-Za-z0-9+/]` occurs (AWS secret keys need one);
//! - whether a run of `[0-9A-Fa-f:.]` holds `::` or six colons (IPv6 addresses need one).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

const DIGIT: u8 = 1;
const UPPER: u8 = 2;
const GLUE: u8 = 4; //   [A-Za-z0-9_.\-/]: a number start may not follow one
const SEP: u8 = 8; //    [ .\-()]: at most three between the digits of a number
const START: u8 = 16; // [+(0-9]: a number may start here
const B64: u8 = 32; //   [A-Za-z0-9+/]
const V6: u8 = 64; //    [0-9A-Fa-f:.]

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 128 {
        let b = c as u8;
        let mut k = 0;
        if b.is_ascii_digit() {
            k |= DIGIT | GLUE | START | B64;
        }
        if b.is_ascii_uppercase() {
            k |= UPPER | GLUE | B64;
        }
        if b.is_ascii_lowercase() {
            k |= GLUE | B64;
        }
        if b == b'_' || b == b'.' || b == b'-' || b == b'/' {
            k |= GLUE;
        }
        if b == b' ' || b == b'.' || b == b'-' || b == b'(' || b == b')' {
            k |= SEP;
        }
        if b == b'+' || b == b'(' {
            k |= START;
        }
        if b == b'+' || b == b'/' {
            k |= B64;
        }
        if b.is_ascii_hexdigit() || b == b':' || b == b'.' {
            k |= V6;
        }
        t[c] = k;
        c += 1;
    }
    t
}

static CLASS: [u8; 256] = classes();

/// Six more digits follow `i`, each after at most three separators (the lookahead of
/// `spans._NUMBER_START`; separators and digits are disjoint, so it never backtracks).
fn digits_follow(b: &[u8], mut i: usize) -> bool {
    for _ in 0..6 {
        let mut k = 0;
        while k < 3 && i < b.len() && CLASS[b[i] as usize] & SEP != 0 {
            i += 1;
            k += 1;
        }
        if i < b.len() && CLASS[b[i] as usize] & DIGIT != 0 {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

type Scan = (Vec<usize>, Vec<i64>, Vec<(Vec<usize>, Vec<usize>)>, Vec<usize>, bool, bool);

#[pyclass(module = "shardforge._native", frozen)]
pub struct PiiScan {
    /// literals and keywords in one ASCII case-insensitive automaton (one pass); a literal's
    /// hit is then checked case-sensitively
    all: AhoCorasick,
    /// per pattern: Some(literal group) for a literal, None for a keyword
    literal_group: Vec<Option<usize>>,
    keyword_group: Vec<usize>,
    patterns: Vec<String>,
    n_literal_groups: usize,
    n_keyword_groups: usize,
}

#[pymethods]
impl PiiScan {
    #[new]
    fn new(literal_groups: Vec<Vec<String>>, keyword_groups: Vec<Vec<String>>) -> PyResult<Self> {
        if literal_groups.iter().chain(keyword_groups.iter()).flatten().any(|s| s.is_empty() || !s.is_ascii()) {
            return Err(PyValueError::new_err("PiiScan: literals and keywords must be non-empty ASCII"));
        }
        let (mut patterns, mut literal_group, mut keyword_group) = (Vec::new(), Vec::new(), Vec::new());
        for (g, lits) in literal_groups.iter().enumerate() {
            for l in lits {
                patterns.push(l.clone());
                literal_group.push(Some(g));
                keyword_group.push(0);
            }
        }
        for (g, kws) in keyword_groups.iter().enumerate() {
            for k in kws {
                patterns.push(k.clone());
                literal_group.push(None);
                keyword_group.push(g);
            }
        }
        let all = AhoCorasickBuilder::new().match_kind(MatchKind::Standard).ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA)).build(&patterns)
            .map_err(|e| PyValueError::new_err(format!("PiiScan: {e}")))?;
        Ok(PiiScan { all, literal_group, keyword_group, patterns, n_literal_groups: literal_groups.len(),
                     n_keyword_groups: keyword_groups.len() })
    }

    /// (number starts; per literal group, the first offset of any of its literals or -1;
    /// per keyword group, the sorted unique starts and ends of its keywords; IBAN heads;
    /// whether a 40-character base64 run occurs; whether an IPv6-like run does), with byte
    /// offsets into `text`.
    fn scan(&self, b: &[u8]) -> Scan {
        let mut starts = Vec::new();
        let mut heads = Vec::new();
        let (mut run, mut longest) = (0usize, 0usize);
        let (mut colons, mut v6) = (0usize, false);      // colons in the current [0-9A-Fa-f:.] run
        for i in 0..b.len() {
            let k = CLASS[b[i] as usize];
            run = if k & B64 != 0 { run + 1 } else { 0 };
            longest = longest.max(run);
            if b[i] == b':' {
                colons += 1;
                v6 |= colons >= 6 || (i > 0 && b[i - 1] == b':');
            } else if k & V6 == 0 {
                colons = 0;
            }
            if k & (START | UPPER) == 0 {
                continue;
            }
            if k & START != 0 && (i == 0 || CLASS[b[i - 1] as usize] & GLUE == 0) && digits_follow(b, i + 1) {
                starts.push(i);
            }
            if k & UPPER != 0 && i + 3 < b.len() && CLASS[b[i + 1] as usize] & UPPER != 0
                && CLASS[b[i + 2] as usize] & DIGIT != 0 && CLASS[b[i + 3] as usize] & DIGIT != 0 {
                heads.push(i);
            }
        }
        let mut first = vec![-1i64; self.n_literal_groups];
        let mut groups = vec![(Vec::new(), Vec::new()); self.n_keyword_groups];
        for m in self.all.find_overlapping_iter(b) {
            let p = m.pattern().as_usize();
            match self.literal_group[p] {
                Some(g) => {
                    let exact = self.patterns[p].as_bytes() == &b[m.start()..m.end()];
                    if exact && (first[g] < 0 || (m.start() as i64) < first[g]) {
                        first[g] = m.start() as i64;
                    }
                }
                None => {
                    let g = &mut groups[self.keyword_group[p]];
                    g.0.push(m.start());
                    g.1.push(m.end());
                }
            }
        }
        for (starts, ends) in groups.iter_mut() {
            for v in [starts, ends] {
                v.sort_unstable();
                v.dedup();
            }
        }
        (starts, first, groups, heads, longest >= 40, v6)
    }
}
