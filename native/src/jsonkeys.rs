//! The ingest stage's question about each JSONL line (shardforge/ingest/readers/spark.py): does
//! the object have a top-level key other than the ones the stage reads into columns? Answered
//! by one scan of the line's bytes, where Spark would parse the whole line a second time
//! (`json_object_keys`) to ask it.
//!
//! The answer is `Some(false)` (every top-level key is known), `Some(true)` (a key is not), or
//! `None` when the scan cannot tell for sure (not one JSON object, a key written with escapes,
//! anything malformed): the caller then asks Spark, so a `None` costs time, never a key.

pub struct KnownKeys {
    keys: Vec<Vec<u8>>,
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The index after the string that opens at `b[i]` (a `"`), and whether it held a backslash.
fn string_end(b: &[u8], mut i: usize) -> Option<(usize, bool)> {
    i += 1;
    let mut escaped = false;
    while i < b.len() {
        i += memchr::memchr2(b'"', b'\\', &b[i..])?;
        if b[i] == b'"' {
            return Some((i + 1, escaped));
        }
        escaped = true;
        i += 2;
    }
    None
}

/// The index after the value that starts at `b[i]` (any JSON value; nested ones by depth).
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i).map(|(e, _)| e),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            // a number or a literal: up to the next delimiter
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

impl KnownKeys {
    pub fn new(keys: Vec<String>) -> Self {
        KnownKeys { keys: keys.into_iter().map(String::into_bytes).collect() }
    }

    pub fn other_keys(&self, line: &[u8]) -> Option<bool> {
        let b = line;
        let mut i = ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i = ws(b, i + 1);
        if b.get(i) == Some(&b'}') {
            return (ws(b, i + 1) == b.len()).then_some(false);
        }
        let mut other = false;
        loop {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let (end, escaped) = string_end(b, i)?;
            if escaped {
                return None;
            }
            let key = &b[i + 1..end - 1];
            other |= !self.keys.iter().any(|k| k.as_slice() == key);
            i = ws(b, end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = value_end(b, ws(b, i + 1))?;
            i = ws(b, i);
            match b.get(i) {
                Some(b',') => i = ws(b, i + 1),
                Some(b'}') => return (ws(b, i + 1) == b.len()).then_some(other),
                _ => return None,
            }
        }
    }
}

/// The ingest stage's named fields of one JSONL line, read in the same scan (the reader's
/// `parse`): where a line is one JSON object whose keys are all named ones, none twice, each
/// value a string or `null`, strictly as JSON writes them, its fields are decoded here and
/// Spark's `from_json` is not asked. Anything else (another key, a number, an escape JSON
/// does not have, a raw control character, a lone surrogate, a line over the size cap) is left
/// to Spark, which decides as it always did: a line this reader declines costs time, never a
/// value.
pub struct NamedFields {
    named: Vec<Vec<u8>>,
    known: KnownKeys,
    max_line: usize,
}

/// A string's decoded bytes appended to `out`; None when JSON (as Spark's parser reads it by
/// default) would not accept it, or it holds a lone surrogate. `b[i]` is the opening quote.
fn decode_string(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    i += 1;
    let mut run = i;
    loop {
        // the next quote or backslash; the bytes before it must hold no raw control character
        let next = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[i..next].iter().fold(false, |acc, &c| acc | (c < 0x20)) {
            return None;
        }
        i = next;
        let c = b[i];
        match c {
            b'"' => {
                out.extend_from_slice(&b[run..i]);
                return Some(i + 1);
            }
            b'\\' => {
                out.extend_from_slice(&b[run..i]);
                let e = *b.get(i + 1)?;
                i += 2;
                match e {
                    b'"' | b'\\' | b'/' => out.push(e),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let hi = hex4(b, i)?;
                        i += 4;
                        let cp = if (0xD800..0xDC00).contains(&hi) {
                            if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
                                return None;
                            }
                            let lo = hex4(b, i + 2)?;
                            if !(0xDC00..0xE000).contains(&lo) {
                                return None;
                            }
                            i += 6;
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        } else if (0xDC00..0xE000).contains(&hi) {
                            return None;
                        } else {
                            hi
                        };
                        let ch = char::from_u32(cp)?;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    _ => return None,
                }
                run = i;
            }
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i..i + 4)?;
    let mut v = 0u32;
    for &c in s {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

/// What one line gave: the key scan's answer (0 all known, 1 another key, 2 cannot tell), and
/// whether its named fields were decoded.
pub struct Line {
    pub others: u8,
    pub parsed: bool,
}

/// One named field's Arrow string column being built: offsets, data, one validity byte per line.
pub struct Column {
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    pub valid: Vec<u8>,
}

impl Column {
    /// For `lines` lines of `bytes` bytes in all (no field's data can be longer).
    pub fn new(lines: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(lines + 1);
        offsets.push(0);
        Column { offsets, data: Vec::with_capacity(bytes), valid: Vec::with_capacity(lines) }
    }
}

impl NamedFields {
    pub fn new(named: Vec<String>, known: Vec<String>, max_line: usize) -> Self {
        NamedFields { named: named.into_iter().map(String::into_bytes).collect(), known: KnownKeys::new(known), max_line }
    }

    pub fn width(&self) -> usize {
        self.named.len()
    }

    /// Scans `line` and appends one row to each of `cols` (one per named field): the decoded
    /// value, or null (absent, JSON null, or the line not decoded).
    pub fn read(&self, line: &[u8], cols: &mut [Column]) -> Line {
        let others = match self.known.other_keys(line) {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        };
        let start: Vec<usize> = cols.iter().map(|c| c.data.len()).collect();
        let mut set = [false; 8];
        let parsed = others == 0 && line.len() <= self.max_line && self.named.len() <= set.len()
            && self.fields(line, cols, &mut set).is_some();
        for (k, c) in cols.iter_mut().enumerate() {
            if !parsed {
                c.data.truncate(start[k]);
            }
            c.valid.push((parsed && set[k]) as u8);
            c.offsets.push(c.data.len() as i32);
        }
        Line { others, parsed }
    }

    /// The fields of a line the key scan found well formed with known keys only, appended to
    /// `cols` (`set[k]`: field k had a string value).
    fn fields(&self, b: &[u8], cols: &mut [Column], set: &mut [bool; 8]) -> Option<()> {
        let mut seen = [false; 8];
        let mut i = ws(b, 0) + 1; // past '{'
        i = ws(b, i);
        if b.get(i) == Some(&b'}') {
            return Some(());
        }
        loop {
            let (end, _) = string_end(b, i)?;
            let k = self.named.iter().position(|n| n.as_slice() == &b[i + 1..end - 1])?;
            if seen[k] {
                return None; // a key twice: Spark decides which value wins
            }
            seen[k] = true;
            i = ws(b, ws(b, end) + 1); // past ':'
            match b.get(i)? {
                b'"' => {
                    i = decode_string(b, i, &mut cols[k].data)?;
                    set[k] = true;
                }
                b'n' if b.get(i..i + 4) == Some(b"null") => {
                    i += 4;
                }
                _ => return None,
            }
            i = ws(b, i);
            match b.get(i)? {
                b',' => i = ws(b, i + 1),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }
}
