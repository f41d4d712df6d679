//! Character classes and string pieces the rules use, with the exact definitions of the
//! Python reference: the classes arrive from Python as code point ranges (derived there from
//! the engines the reference uses: pyarrow's whitespace, RE2's \pL and \pP, datatrove's
//! punctuation), so this file holds no Unicode table of its own.

use rustc_hash::FxHashMap;

pub struct CharSet {
    ascii: [bool; 128],
    ranges: Vec<(u32, u32)>, // sorted, inclusive, non-ASCII part
}

impl CharSet {
    pub fn new(mut ranges: Vec<(u32, u32)>) -> Self {
        ranges.sort();
        let mut ascii = [false; 128];
        for &(lo, hi) in &ranges {
            for c in lo..=hi.min(127) {
                ascii[c as usize] = true;
            }
        }
        CharSet { ascii, ranges: ranges.into_iter().filter(|r| r.1 >= 128).collect() }
    }

    #[inline]
    pub fn has(&self, c: char) -> bool {
        let u = c as u32;
        if u < 128 {
            return self.ascii[u as usize];
        }
        let i = self.ranges.partition_point(|r| r.1 < u);
        i < self.ranges.len() && self.ranges[i].0 <= u
    }
}

/// Code points (Python's len / Arrow's utf8_length).
#[inline]
pub fn cp_len(s: &str) -> usize {
    s.bytes().filter(|&b| (b & 0xC0) != 0x80).count()
}

pub fn trim<'a>(s: &'a str, ws: &CharSet) -> &'a str {
    s.trim_matches(|c| ws.has(c))
}

pub fn ltrim<'a>(s: &'a str, ws: &CharSet) -> &'a str {
    s.trim_start_matches(|c| ws.has(c))
}

pub fn rtrim<'a>(s: &'a str, ws: &CharSet) -> &'a str {
    s.trim_end_matches(|c| ws.has(c))
}

/// The non-empty runs between characters of `ws` (str.split()).
pub fn split_ws<'a>(s: &'a str, ws: &CharSet, out: &mut Vec<&'a str>) {
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        if ws.has(c) {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
}

/// str.splitlines(): "\r\n" and each of Python's line boundaries end a line; no empty line
/// after a final boundary; none for "".
pub fn splitlines<'a>(s: &'a str, out: &mut Vec<&'a str>) {
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let brk = matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if brk {
            out.push(&s[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(_, '\n')) = it.peek() {
                    it.next();
                    end += 1;
                }
            }
            start = end;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
}

/// Split at every maximal run of at least `min` newlines (RE2's split at `\n+` / `\n{2,}`):
/// every piece, empty ones included.
pub fn split_newlines<'a>(s: &'a str, min: usize, out: &mut Vec<&'a str>) {
    let b = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\n' {
            let mut j = i;
            while j < b.len() && b[j] == b'\n' {
                j += 1;
            }
            if j - i >= min {
                out.push(&s[start..i]);
                start = j;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out.push(&s[start..]);
}

/// Non-overlapping occurrences, left to right (str.count).
pub fn count(s: &str, pat: &str) -> usize {
    s.matches(pat).count()
}

/// Lower case as pyarrow's utf8_lower: one code point each, ASCII directly, others by a table.
pub fn lower(s: &str, table: &FxHashMap<char, String>, out: &mut String) {
    out.clear();
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else if let Some(l) = table.get(&c) {
            out.push_str(l);
        } else {
            out.push(c);
        }
    }
}
