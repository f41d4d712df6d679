//! dedup's `lower_alnum` normalisation (shardforge/dedup/normalize.py `normalize`, which
//! stays the reference): the text lower-cased (Unicode's full mapping, as Python's
//! `str.lower`), then every run of characters that are not letters or digits one space,
//! trimmed. Which characters are letters or digits (general categories L* and N*) comes from
//! Python's `unicodedata`, so the kernel and the reference agree on them.
//! Rust's case tables may be of a newer Unicode than Python's: a character Python does not
//! know (`assigned`) is a separator here, which is what it is to the reference (no case, no
//! letter or digit). Characters are lower-cased one by one, without context: the one
//! context-dependent mapping, the final-sigma rule of a capital sigma, reads case properties
//! that newer Unicode changed for a few letters, so a text holding a capital sigma is flagged
//! and the caller lower-cases it in Python first.

use crate::text::CharSet;

const CAPITAL_SIGMA: char = '\u{3a3}';

/// Appends the normalised `text` to `out`; true when the text holds a capital sigma.
pub fn lower_alnum(text: &str, keep: &CharSet, assigned: &CharSet, out: &mut String) -> bool {
    let start = out.len();
    let mut gap = false;
    let mut sigma = false;
    let push = |c: char, out: &mut String, gap: &mut bool| {
        if keep.has(c) {
            if *gap && out.len() > start {
                out.push(' ');
            }
            *gap = false;
            out.push(c);
        } else {
            *gap = true;
        }
    };
    for c in text.chars() {
        if c.is_ascii() {
            push(c.to_ascii_lowercase(), out, &mut gap);
        } else if !assigned.has(c) {
            gap = true;
        } else {
            sigma |= c == CAPITAL_SIGMA;
            for l in c.to_lowercase() {
                push(l, out, &mut gap);
            }
        }
    }
    sigma
}
