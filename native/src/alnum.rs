//! dedup's `lower_alnum` normalisation (shardforge/dedup/normalize.py `normalize`, which
//! stays the reference): the text lower-cased (Unicode's full mapping with the final-sigma
//! rule, as Python's `str.lower`), then every run of characters that are not letters or
//! digits one space, trimmed. Which characters are letters or digits (general categories L*
//! and N*) comes from Python's `unicodedata`, so the kernel and the reference agree on them.
//! Rust's case tables may be of a newer Unicode than Python's: a character Python does not
//! know (`assigned`) becomes a space before lower-casing, which is what it is to the
//! reference (no case, no letter or digit, and a boundary for the final-sigma rule).

use std::borrow::Cow;

use crate::text::CharSet;

/// Appends the normalised `text` to `out`.
pub fn lower_alnum(text: &str, keep: &CharSet, assigned: &CharSet, out: &mut String) {
    let known: Cow<str> = if text.chars().all(|c| c.is_ascii() || assigned.has(c)) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().map(|c| if c.is_ascii() || assigned.has(c) { c } else { ' ' }).collect())
    };
    let low = known.to_lowercase();
    let start = out.len();
    let mut gap = false;
    for c in low.chars() {
        if keep.has(c) {
            if gap && out.len() > start {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
}
