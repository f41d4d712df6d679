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

// After the first three steps the only whitespace left (Python's str.isspace) is space, tab
// and newline: every other whitespace character is a newline, a control or a Unicode space by
// then.

/// Whether steps 1-3 could change `text`: an ASCII control other than tab and newline, or a
/// character in a block that holds one they replace or remove (U+0080-U+00BF, U+1000-U+3FFF,
/// U+F000-U+FFFF; most characters of those blocks pass unchanged, the slow path decides).
#[inline]
fn may_change(text: &[u8]) -> bool {
    text.iter().any(|&b| (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f || matches!(b, 0xc2 | 0xe1..=0xe3 | 0xef))
}

pub fn normalize(text: &str) -> String {
    // 1. "\r\n|[\r\u0085\u2028\u2029\x0b\x0c]" -> "\n"; 2. controls removed; 3. Unicode spaces -> " "
    let owned;
    let a: &[u8] = if may_change(text.as_bytes()) {
        let mut s = String::with_capacity(text.len());
        let mut it = text.chars().peekable();
        while let Some(c) = it.next() {
            match c {
                '\r' => {
                    if it.peek() == Some(&'\n') {
                        it.next();
                    }
                    s.push('\n');
                }
                '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{0b}' | '\u{0c}' => s.push('\n'),
                c if is_control(c) => {}
                c if is_uni_space(c) => s.push(' '),
                c => s.push(c),
            }
        }
        owned = s;
        owned.as_bytes()
    } else {
        text.as_bytes()
    };
    // Steps 4-6 in one pass over bytes: the characters they look at (space, tab, newline) are
    // ASCII, and a multi-byte character's bytes are never one of them, so "the character
    // before is not a space" is "the byte before is not one".
    // 4. "(?<=\S)[ \t]+" -> " "; 5. "[ \t]+(?=\n)|^[ \t]+$" (multiline) -> ""; 6. "\n{3,}" -> "\n\n".
    // A run of spaces and tabs keeps its bounds through step 4, so step 5 drops it on the same
    // conditions either way; the runs it drops between newlines join their newlines for step 6.
    let blank = |b: u8| b == b' ' || b == b'\t';
    let space = |b: u8| b == b' ' || b == b'\t' || b == b'\n';
    let n = a.len();
    let run_end = |mut j: usize| {
        while j < n && blank(a[j]) {
            j += 1;
        }
        j
    };
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let x = a[i];
        if blank(x) {
            let j = run_end(i);
            let before_newline = j < n && a[j] == b'\n';
            let whole_last_line = j == n && (i == 0 || a[i - 1] == b'\n');
            if !(before_newline || whole_last_line) {
                if i > 0 && !space(a[i - 1]) {
                    out.push(b' ');
                } else {
                    out.extend_from_slice(&a[i..j]);
                }
            }
            i = j;
        } else if x == b'\n' {
            let mut k = 0;
            let mut j = i;
            loop {
                while j < n && a[j] == b'\n' {
                    k += 1;
                    j += 1;
                }
                let e = run_end(j);
                if e > j && e < n && a[e] == b'\n' {
                    j = e; // spaces and tabs before a newline: dropped, the newlines join
                } else {
                    break;
                }
            }
            out.extend_from_slice(if k >= 2 { b"\n\n" } else { b"\n" });
            i = j;
        } else {
            let j = memchr::memchr3(b' ', b'\t', b'\n', &a[i..]).map_or(n, |p| i + p);
            out.extend_from_slice(&a[i..j]);
            i = j;
        }
    }
    let lo = out.iter().position(|&x| !space(x)).unwrap_or(out.len());
    let hi = out.iter().rposition(|&x| !space(x)).map_or(lo, |p| p + 1);
    // only ASCII bytes were added or removed, at character boundaries: still UTF-8
    String::from_utf8(out[lo..hi].to_vec()).expect("normalised text is UTF-8")
}
