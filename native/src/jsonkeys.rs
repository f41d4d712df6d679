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
        match b[i] {
            b'"' => return Some((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                i += 2;
            }
            _ => i += 1,
        }
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
