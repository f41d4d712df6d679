//! URL credentials out of text (shardforge/redact/privacy.py): the replacements the JVM's
//! `sanitize_urls` makes with Java 17's regular expressions, without a regular expression.
//!
//! - userinfo, `://(?<=(?i:\b[a-z][a-z0-9+.\-]{0,255})://)[^/\s@"'<>?#]+@` -> `://REDACTED@`:
//!   a `://` whose scheme (an ASCII letter at a word boundary, then up to 255 of
//!   `[A-Za-z0-9+.-]`) ends there, then at least one character up to an `@` that none of
//!   `/ \s @ " ' < > ? #` comes before;
//! - then credential parameters, `(?i)([?&;](?:<names>)=)[^&#\s"'<>]*` -> `$1REDACTED`: one of
//!   `? & ;`, a name (ASCII case-insensitive), `=`, and the value up to `& # \s " ' < >`.
//!
//! Java's `\s` is ASCII whitespace (space, \t, \n, \x0B, \f, \r); its `\b` (Java 17) treats a
//! character as a word character when it is `_` or `Character.isLetterOrDigit` (general
//! categories Lu Ll Lt Lm Lo Nd), and a non-spacing mark (Mn) as one when the first character
//! before its run of marks is a letter or digit (urls_tables.rs). Every character the patterns
//! name is ASCII, so the scan runs over UTF-8 bytes; only the word boundary before a scheme
//! decodes the character before it. A pattern is tried at each position in order, a match
//! resumes the scan at its end, and the look-behind sees the original text, as Java's matcher.

use crate::urls_tables::{LETTER_OR_DIGIT, NON_SPACING_MARK};

pub struct Credentials {
    names: Vec<Vec<u8>>, // lower case
    redacted: String,
}

const SCHEME_MAX: usize = 256; // a letter and up to 255 more characters

fn in_ranges(table: &[(u32, u32)], cp: u32) -> bool {
    table.binary_search_by(|&(a, b)| if b < cp { std::cmp::Ordering::Less } else if a > cp { std::cmp::Ordering::Greater } else { std::cmp::Ordering::Equal }).is_ok()
}

fn letter_or_digit(c: char) -> bool {
    if c.is_ascii() { c.is_ascii_alphanumeric() } else { in_ranges(LETTER_OR_DIGIT, c as u32) }
}

fn mark(c: char) -> bool {
    !c.is_ascii() && in_ranges(NON_SPACING_MARK, c as u32)
}

fn java_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn scheme_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')
}

/// Java 17's `\b` test before the ASCII letter at byte `q` of `s`: is the text before it a word?
fn word_before(s: &str, q: usize) -> bool {
    let mut before = s[..q].chars().rev();
    match before.next() {
        None => false,
        Some(c) if c == '_' || letter_or_digit(c) => true,
        Some(c) if mark(c) => {
            // hasBaseCharacter: the first character before the marks must be a letter or digit
            for d in before {
                if letter_or_digit(d) {
                    return true;
                }
                if !mark(d) {
                    return false;
                }
            }
            false
        }
        Some(_) => false,
    }
}

/// Does a scheme end at byte `p` (where `://` starts)?
fn scheme_ends_at(s: &str, p: usize) -> bool {
    let b = s.as_bytes();
    let floor = p.saturating_sub(SCHEME_MAX);
    let mut q = p;
    while q > floor && scheme_char(b[q - 1]) {
        q -= 1;
    }
    // candidates: every letter in b[q..p]; inside the run the byte before decides the boundary
    (q..p).any(|r| b[r].is_ascii_alphabetic() && !word_before(s, r))
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

impl Credentials {
    pub fn new(names: Vec<String>, redacted: String) -> Self {
        Credentials { names: names.into_iter().map(|n| n.to_ascii_lowercase().into_bytes()).collect(), redacted }
    }

    /// `s` with URL userinfo, then credential parameters, replaced; None when nothing is.
    pub fn strip(&self, s: &str) -> Option<String> {
        let first = if find(s.as_bytes(), b"://", 0).is_some() { self.userinfo(s) } else { None };
        let text = first.as_deref().unwrap_or(s);
        let second = if text.as_bytes().contains(&b'=') { self.params(text) } else { None };
        second.or(first)
    }

    fn userinfo(&self, s: &str) -> Option<String> {
        let b = s.as_bytes();
        let (mut out, mut last, mut from) = (String::new(), 0usize, 0usize);
        while let Some(p) = find(b, b"://", from) {
            if scheme_ends_at(s, p) {
                let mut j = p + 3;
                while j < b.len() && !matches!(b[j], b'/' | b'@' | b'"' | b'\'' | b'<' | b'>' | b'?' | b'#') && !java_space(b[j]) {
                    j += 1;
                }
                if j > p + 3 && j < b.len() && b[j] == b'@' {
                    out.push_str(&s[last..p]);
                    out.push_str("://");
                    out.push_str(&self.redacted);
                    out.push('@');
                    last = j + 1;
                    from = j + 1;
                    continue;
                }
            }
            from = p + 1;
        }
        if last == 0 {
            return None;
        }
        out.push_str(&s[last..]);
        Some(out)
    }

    fn params(&self, s: &str) -> Option<String> {
        let b = s.as_bytes();
        let (mut out, mut last, mut i) = (String::new(), 0usize, 0usize);
        let mut changed = false;
        while i < b.len() {
            if matches!(b[i], b'?' | b'&' | b';') {
                let rest = &b[i + 1..];
                let hit = self.names.iter().find(|n| {
                    rest.len() > n.len() && rest[n.len()] == b'=' && rest[..n.len()].eq_ignore_ascii_case(n)
                });
                if let Some(n) = hit {
                    let v = i + 1 + n.len() + 1;
                    let mut j = v;
                    while j < b.len() && !matches!(b[j], b'&' | b'#' | b'"' | b'\'' | b'<' | b'>') && !java_space(b[j]) {
                        j += 1;
                    }
                    out.push_str(&s[last..v]);
                    out.push_str(&self.redacted);
                    last = j;
                    changed = true;
                    i = j;
                    continue;
                }
            }
            i += 1;
        }
        if !changed {
            return None;
        }
        out.push_str(&s[last..]);
        Some(out)
    }
}
