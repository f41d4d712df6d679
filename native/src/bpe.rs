//! Byte-level BPE (the GPT-2 family of `tokenizer.json`: the BPE model under the ByteLevel
//! pre-tokenizer), giving the ids Hugging Face tokenizers' `encode` gives for the same file.
//!
//! The steps are tokenizers' own, in its order:
//! 1. added tokens (e.g. `<eos>`) are cut out of the raw text, leftmost-longest;
//! 2. each piece between them is normalised (NFC, when the file asks for it, by the crate and
//!    Unicode tables tokenizers itself uses: unicode-normalization-alignments 0.1.12, Unicode
//!    9.0; newer tables order the combining marks assigned since differently) and, with
//!    `add_prefix_space`, given a leading space unless it has one;
//! 3. the piece is split by GPT-2's pattern
//!    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!    (the `regex` crate has no look-ahead: the `\s+(?!\S)` branch is a `\s+` run that gives
//!    back its last character when a non-space follows);
//! 4. each split's UTF-8 bytes start as one symbol per byte and are merged by the lowest merge
//!    rank first, leftmost among equal ranks; a queued merge is applied only if the pair at its
//!    position still makes the same token (tokenizers' rule for stale queue entries).
//!
//! Words repeat, so each split's ids are cached (bounded; cleared when full).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use rustc_hash::FxHashMap;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

const PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+";
const CACHE_WORDS: usize = 1 << 20;
const CACHE_WORD_BYTES: usize = 128;

pub struct Bpe {
    byte_ids: [u32; 256],
    merges: FxHashMap<(u32, u32), (u32, u32)>, // pair -> (rank, merged id)
    added: Option<(AhoCorasick, Vec<u32>)>,
    nfc: bool,
    add_prefix_space: bool,
    split: Regex,
    cache: FxHashMap<Box<[u8]>, Box<[u32]>>,
}

impl Bpe {
    /// `byte_ids[b]`: the id of byte b's symbol; `merges`: (left, right, merged) ids in rank
    /// order; `added`: (content, id) of the added tokens cut out of the raw text.
    pub fn new(byte_ids: Vec<u32>, merges: Vec<(u32, u32, u32)>, added: Vec<(String, u32)>, nfc: bool,
               add_prefix_space: bool) -> Result<Self, String> {
        let byte_ids: [u32; 256] = byte_ids.try_into().map_err(|v: Vec<u32>| format!("{} byte ids, not 256", v.len()))?;
        let mut map = FxHashMap::default();
        for (rank, (a, b, m)) in merges.into_iter().enumerate() {
            map.entry((a, b)).or_insert((rank as u32, m));      // tokenizers keeps the first rule of a pair
        }
        let added = if added.is_empty() {
            None
        } else {
            let ac = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest)
                .build(added.iter().map(|(s, _)| s.as_str())).map_err(|e| e.to_string())?;
            Some((ac, added.iter().map(|(_, id)| *id).collect()))
        };
        Ok(Bpe { byte_ids, merges: map, added, nfc, add_prefix_space, split: Regex::new(PATTERN).unwrap(),
                 cache: FxHashMap::default() })
    }

    /// The ids of `text`, appended to `out`.
    pub fn encode(&mut self, text: &str, out: &mut Vec<u32>) {
        let mut pos = 0;
        if let Some((ac, ids)) = &self.added {
            let cuts: Vec<(usize, usize, u32)> = ac.find_iter(text).map(|m| (m.start(), m.end(), ids[m.pattern().as_usize()])).collect();
            for (a, b, id) in cuts {
                self.piece(&text[pos..a], out);
                out.push(id);
                pos = b;
            }
        }
        self.piece(&text[pos..], out);
    }

    fn piece(&mut self, piece: &str, out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        let mut owned: Option<String> = None;
        if self.nfc && is_nfc_quick(piece.chars()) != IsNormalized::Yes {
            owned = Some(piece.nfc().map(|(c, _)| c).collect());
        }
        if self.add_prefix_space {
            let s = owned.as_deref().unwrap_or(piece);
            if !s.starts_with(' ') {
                owned = Some(format!(" {s}"));
            }
        }
        let s = owned.as_deref().unwrap_or(piece);
        let mut pos = 0;
        while pos < s.len() {
            let end = split_end(&self.split, s, pos);
            self.word(s[pos..end].as_bytes(), out);
            pos = end;
        }
    }

    fn word(&mut self, bytes: &[u8], out: &mut Vec<u32>) {
        if bytes.len() == 1 {
            out.push(self.byte_ids[bytes[0] as usize]);
            return;
        }
        if bytes.len() <= CACHE_WORD_BYTES {
            if let Some(ids) = self.cache.get(bytes) {
                out.extend_from_slice(ids);
                return;
            }
        }
        let start = out.len();
        self.merge(bytes, out);
        if bytes.len() <= CACHE_WORD_BYTES {
            if self.cache.len() >= CACHE_WORDS {
                self.cache.clear();
            }
            self.cache.insert(bytes.into(), out[start..].into());
        }
    }

    fn merge(&self, bytes: &[u8], out: &mut Vec<u32>) {
        let n = bytes.len();
        let mut sym: Vec<u32> = bytes.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let mut prev: Vec<i32> = (0..n as i32).map(|i| i - 1).collect();
        let mut next: Vec<i32> = (1..=n as i32).map(|i| if i == n as i32 { -1 } else { i }).collect();
        let mut alive = vec![true; n];
        let mut queue = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            if let Some(&(rank, id)) = self.merges.get(&(sym[i], sym[i + 1])) {
                queue.push(Reverse((rank, i as u32, id)));
            }
        }
        while let Some(Reverse((_, pos, id))) = queue.pop() {
            let p = pos as usize;
            if !alive[p] || next[p] < 0 {
                continue;
            }
            let q = next[p] as usize;
            match self.merges.get(&(sym[p], sym[q])) {
                Some(&(_, now)) if now == id => {}
                _ => continue,
            }
            sym[p] = id;
            alive[q] = false;
            let after = next[q];
            next[p] = after;
            if after >= 0 {
                prev[after as usize] = p as i32;
            }
            if prev[p] >= 0 {
                let l = prev[p] as usize;
                if let Some(&(rank, m)) = self.merges.get(&(sym[l], sym[p])) {
                    queue.push(Reverse((rank, l as u32, m)));
                }
            }
            if after >= 0 {
                if let Some(&(rank, m)) = self.merges.get(&(sym[p], sym[after as usize])) {
                    queue.push(Reverse((rank, p as u32, m)));
                }
            }
        }
        let mut i = 0i32;
        while i >= 0 {
            out.push(sym[i as usize]);
            i = next[i as usize];
        }
    }

    /// The splits of step 3 for one piece (for the tests that hold them to tokenizers').
    pub fn pretokenize(&self, piece: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < piece.len() {
            let end = split_end(&self.split, piece, pos);
            out.push(piece[pos..end].to_string());
            pos = end;
        }
        out
    }
}

/// The end of the split that starts at `pos` (every character starts one).
fn split_end(re: &Regex, s: &str, pos: usize) -> usize {
    let m = re.find_at(s, pos).expect("every character starts a split");
    debug_assert_eq!(m.start(), pos);
    let (a, b) = (m.start(), m.end());
    let mut chars = s[a..b].chars();
    let first = chars.next().unwrap();
    if first.is_whitespace() && b < s.len() && chars.next().is_some_and(char::is_whitespace) {
        // a run of 2+ whitespace characters followed by a non-space: `\s+(?!\S)` keeps all
        // but the last, which starts the next split
        return a + s[a..b].char_indices().last().unwrap().0;
    }
    b
}
