//! The PII detectors' shared scan (shardforge/redact/pii/scan.py): one pass over an ASCII
//! text that gives what the Python detectors would otherwise find with a dozen scans of
//! their own. Each output is defined by the Python function it replaces, which the tests
//! hold it to:
//! - number starts: `spans.number_starts`;
//! - per literal group, the first offset of any of its literals (case-sensitive), `-1`
//!   when none occurs: `str.find`;
//! - per keyword group, every occurrence of its keywords, ASCII case-insensitive,
//!   overlapping, as sorted unique (start, end): `text.lower().find` in a loop;
//! - IBAN heads (two upper-case letters then two digits): `iban.find`'s shape search;
//! - whether a run of 40 characters of `[A-Za-z0-9+/]` occurs (AWS secret keys need one).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

const DIGIT: u8 = 1;
const UPPER: u8 = 2;
const GLUE: u8 = 4; //   [A-Za-z0-9_.\-/]: a number start may not follow one
const SEP: u8 = 8; //    [ .\-()]: at most three between the digits of a number
const START: u8 = 16; // [+(0-9]: a number may start here
const B64: u8 = 32; //   [A-Za-z0-9+/]

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

type Scan = (Vec<usize>, Vec<i64>, Vec<Vec<(usize, usize)>>, Vec<usize>, bool);

#[pyclass(module = "shardforge._native", frozen)]
pub struct PiiScan {
    literals: AhoCorasick,
    literal_group: Vec<usize>,
    n_literal_groups: usize,
    keywords: AhoCorasick,
    group_of: Vec<usize>,
    n_groups: usize,
}

#[pymethods]
impl PiiScan {
    #[new]
    fn new(literal_groups: Vec<Vec<String>>, keyword_groups: Vec<Vec<String>>) -> PyResult<Self> {
        let err = |e: aho_corasick::BuildError| PyValueError::new_err(format!("PiiScan: {e}"));
        if literal_groups.iter().chain(keyword_groups.iter()).flatten().any(|s| s.is_empty() || !s.is_ascii()) {
            return Err(PyValueError::new_err("PiiScan: literals and keywords must be non-empty ASCII"));
        }
        let group_of = |groups: &Vec<Vec<String>>| -> Vec<usize> {
            groups.iter().enumerate().flat_map(|(g, ks)| std::iter::repeat(g).take(ks.len())).collect()
        };
        let lits: Vec<&String> = literal_groups.iter().flatten().collect();
        let kws: Vec<&String> = keyword_groups.iter().flatten().collect();
        Ok(PiiScan {
            literals: AhoCorasickBuilder::new().match_kind(MatchKind::Standard).build(&lits).map_err(err)?,
            literal_group: group_of(&literal_groups),
            n_literal_groups: literal_groups.len(),
            keywords: AhoCorasickBuilder::new().match_kind(MatchKind::Standard).ascii_case_insensitive(true)
                .build(&kws).map_err(err)?,
            group_of: group_of(&keyword_groups),
            n_groups: keyword_groups.len(),
        })
    }

    /// (number starts; per literal group, the first offset of any of its literals or -1;
    /// per keyword group, its sorted unique (start, end) occurrences; IBAN heads; whether
    /// a 40-character base64 run occurs). Offsets count characters: `text` must be ASCII
    /// (a ValueError otherwise).
    fn scan(&self, text: &str) -> PyResult<Scan> {
        let b = text.as_bytes();
        if !b.is_ascii() {
            return Err(PyValueError::new_err("PiiScan.scan: the text is not ASCII"));
        }
        let mut starts = Vec::new();
        let mut heads = Vec::new();
        let (mut run, mut b64_40) = (0usize, false);
        for i in 0..b.len() {
            let k = CLASS[b[i] as usize];
            if k & B64 != 0 {
                run += 1;
                b64_40 |= run >= 40;
            } else {
                run = 0;
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
        for m in self.literals.find_overlapping_iter(b) {
            let f = &mut first[self.literal_group[m.pattern().as_usize()]];
            if *f < 0 || (m.start() as i64) < *f {
                *f = m.start() as i64;
            }
        }
        let mut groups = vec![Vec::new(); self.n_groups];
        for m in self.keywords.find_overlapping_iter(b) {
            groups[self.group_of[m.pattern().as_usize()]].push((m.start(), m.end()));
        }
        for g in groups.iter_mut() {
            g.sort_unstable();
            g.dedup();
        }
        Ok((starts, first, groups, heads, b64_40))
    }
}
