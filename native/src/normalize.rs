//! The clean stage's whitespace and control-character normalisation
//! (shardforge/clean/text.py `normalize`, after its surrogate removal and Unicode NFC/NFKC,
//! which Python does): the same six substitutions in the same order, then the strip.
//! Python's `normalize` stays the reference; tests/test_clean_normalize.py holds the two equal
//! on generated and real text.

#[inline]
fn is_control(c: char) -> bool {
    matches!(c as u32, 0x00..=0x08 | 0x0e..=0x1f | 0x7f..=0x84 | 0x86..=0x9f | 0x200b | 0x200c | 0x200e | 0x200f
        | 0x202a..=0x202e | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff | 0xfffe | 0xffff)
}

#[inline]
fn is_uni_space(c: char) -> bool {
    matches!(c as u32, 0xa0 | 0x1680 | 0x2000..=0x200a | 0x202f | 0x205f | 0x3000)
}

#[inline]
fn blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// After the first three steps the only whitespace left (Python's str.isspace) is
/// space, tab and newline: every other whitespace character is a newline, a control or a
/// Unicode space by then.
#[inline]
fn space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\n'
}

pub fn normalize(text: &str) -> String {
    // 1. "\r\n|[\r\u0085\u2028\u2029\x0b\x0c]" -> "\n"; 2. controls removed; 3. Unicode spaces -> " "
    let mut a: Vec<char> = Vec::with_capacity(text.len());
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\r' => {
                if it.peek() == Some(&'\n') {
                    it.next();
                }
                a.push('\n');
            }
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{0b}' | '\u{0c}' => a.push('\n'),
            c if is_control(c) => {}
            c if is_uni_space(c) => a.push(' '),
            c => a.push(c),
        }
    }
    // 4. "(?<=\S)[ \t]+" -> " ": a run of spaces and tabs after a non-space character
    let mut b: Vec<char> = Vec::with_capacity(a.len());
    let mut i = 0;
    while i < a.len() {
        if blank(a[i]) {
            let start = i;
            while i < a.len() && blank(a[i]) {
                i += 1;
            }
            if start > 0 && !space(a[start - 1]) {
                b.push(' ');
            } else {
                b.extend_from_slice(&a[start..i]);
            }
        } else {
            b.push(a[i]);
            i += 1;
        }
    }
    // 5. "[ \t]+(?=\n)|^[ \t]+$" (multiline) -> "": a run before a newline, or a last line of
    // spaces and tabs only
    let mut c: Vec<char> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if blank(b[i]) {
            let start = i;
            while i < b.len() && blank(b[i]) {
                i += 1;
            }
            let before_newline = i < b.len() && b[i] == '\n';
            let whole_last_line = i == b.len() && (start == 0 || b[start - 1] == '\n');
            if !(before_newline || whole_last_line) {
                c.extend_from_slice(&b[start..i]);
            }
        } else {
            c.push(b[i]);
            i += 1;
        }
    }
    // 6. "\n{3,}" -> "\n\n", then strip
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\n' {
            let start = i;
            while i < c.len() && c[i] == '\n' {
                i += 1;
            }
            out.push_str(if i - start >= 2 { "\n\n" } else { "\n" });
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out.trim_matches(space).to_string()
}
