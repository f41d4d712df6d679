//! Gopher's repetition rules for one document (the reference: gopher.py `repetition` and
//! ngrams.py): duplicate paragraphs and lines, the most frequent 2-4-gram's characters, and
//! datatrove's walk over duplicate 5-10-grams. N-grams are compared as token sequences (ids
//! per distinct token), found through 64-bit window hashes and checked exactly.

use hashbrown::HashTable;

use crate::rules::{hash_str, ratio, reason, Kernel, Params, Sig};
use crate::text::{cp_len, split_newlines, trim};

/// How many pieces repeat an earlier one, and their code points.
pub(crate) fn dups(pieces: &[&str]) -> (f64, f64) {
    let mut seen: HashTable<usize> = HashTable::with_capacity(pieces.len());
    let (mut n, mut chars) = (0usize, 0usize);
    for (i, p) in pieces.iter().enumerate() {
        let h = hash_str(p);
        if seen.find(h, |&j| pieces[j] == *p).is_some() {
            n += 1;
            chars += cp_len(p);
        } else {
            seen.insert_unique(h, i, |&j| hash_str(pieces[j]));
        }
    }
    (n as f64, chars as f64)
}

#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D049BB133111EB);
    x ^ (x >> 31)
}

impl Kernel {
    pub fn repetition(&self, text: &str, words: &[&str], p: &Params, sig: &mut Sig) -> Option<u8> {
        let chars = cp_len(text) as f64;
        if chars == 0.0 {
            return Some(0);
        }
        let mut paras = Vec::new();
        split_newlines(trim(text, &self.cls.ws), 2, &mut paras);
        let mut lines = Vec::new();
        split_newlines(text, 1, &mut lines);
        let (p_dup, p_chars) = dups(&paras);
        let (l_dup, l_chars) = dups(&lines);
        let fr = [ratio(p_dup, paras.len() as f64), ratio(p_chars, chars), ratio(l_dup, lines.len() as f64),
                  ratio(l_chars, chars)];
        sig.v[0..4].copy_from_slice(&fr);
        let mut failed: Option<u8> = None;
        for k in 0..4 {
            if p.rep[k] != 0.0 && fr[k] > p.rep[k] {
                if !sig.full {
                    return Some(1 + k as u8);
                }
                failed = failed.or(Some(1 + k as u8));
            }
        }
        // token ids (equal strings, equal ids), lengths, hashes
        let mut ids: Vec<u32> = Vec::with_capacity(words.len());
        let mut lens: Vec<u64> = Vec::with_capacity(words.len());
        let mut table: HashTable<(u64, u32)> = HashTable::with_capacity(words.len());
        let mut first: Vec<usize> = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let h = hash_str(w);
            let id = match table.find(h, |&(hh, id)| hh == h && words[first[id as usize]] == *w) {
                Some(&(_, id)) => id,
                None => {
                    let id = first.len() as u32;
                    first.push(i);
                    table.insert_unique(h, (h, id), |&(hh, _)| hh);
                    id
                }
            };
            ids.push(id);
            lens.push(cp_len(w) as u64);
        }
        let m = ids.len();
        // window hashes for n = 1, 2, ...: h_n[i] = mix(h_{n-1}[i] ^ id[i + n - 1])
        let mut wh: Vec<u64> = ids.iter().map(|&x| mix(x as u64 + 1)).collect();
        let mut wl: Vec<u64> = lens.clone();
        let mut no_repeats = false;
        for n in 2..=10usize {
            if m < n {
                break;
            }
            let cnt = m - n + 1;
            for i in 0..cnt {
                wh[i] = mix(wh[i] ^ (ids[i + n - 1] as u64).wrapping_add(n as u64 * 0x9E3779B97F4A7C15));
                wl[i] += lens[i + n - 1];
            }
            let frac = if n <= 4 { p.top.get(n - 2) } else { p.dup.get(n - 5) };
            let frac = match frac {
                Some(&f) if f != 0.0 => f,
                _ if sig.full => 0.0,
                _ => continue,
            };
            let slot = if n <= 4 { 4 + n - 2 } else { 7 + n - 5 };
            let same = |a: usize, b: usize| ids[a..a + n] == ids[b..b + n];
            if n <= 4 {
                let mut t: HashTable<(usize, u32)> = HashTable::with_capacity(cnt);
                for i in 0..cnt {
                    match t.find_mut(wh[i], |e| same(e.0, i)) {
                        Some(e) => e.1 += 1,
                        None => { t.insert_unique(wh[i], (i, 1), |e| wh[e.0]); }
                    }
                }
                let mut best = (0u32, usize::MAX);
                for &(s, c) in t.iter() {
                    if c > best.0 || (c == best.0 && s < best.1) {
                        best = (c, s);
                    }
                }
                let top = (wl[best.1] + (n as u64 - 1)) * best.0 as u64;
                sig.v[slot] = ratio(top as f64, chars);
                if frac != 0.0 && sig.v[slot] > frac {
                    failed = failed.or(Some(reason(&format!("gopher_top_{n}gram"))));
                    if !sig.full {
                        return failed;
                    }
                }
            } else {
                if no_repeats {
                    continue; // no repeated shorter n-gram: no repeated n-gram either
                }
                let mut t: HashTable<usize> = HashTable::with_capacity(cnt);
                let (mut i, mut total, mut any) = (0usize, 0u64, false);
                while i < cnt {
                    if t.find(wh[i], |&j| same(j, i)).is_some() {
                        total += wl[i];
                        any = true;
                        i += n;
                    } else {
                        t.insert_unique(wh[i], i, |&j| wh[j]);
                        i += 1;
                    }
                }
                if !any {
                    no_repeats = true;
                }
                sig.v[slot] = ratio(total as f64, chars);
                if frac != 0.0 && sig.v[slot] > frac {
                    failed = failed.or(Some(reason(&format!("gopher_dup_{n}gram"))));
                    if !sig.full {
                        return failed;
                    }
                }
            }
        }
        failed
    }

}
