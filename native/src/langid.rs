//! Language identification: py3langid's naive Bayes classifier (langid.py's model) over a
//! batch of UTF-8 texts. The model comes from Python (shardforge/clean/langid.py reads the
//! pinned py3langid's arrays once per process); each text is walked byte by byte through the
//! model's DFA, the features it visits are counted, and the class scores are
//! `pc + sum over features of log1p(count) * ptc[feature]`, then (as py3langid's
//! `norm_probs=True`) scaled by 1/sqrt(bytes), turned into probabilities, and script aliases
//! folded into their first column. Sums run in f64 in feature order of first visit, so a
//! result depends on the text only. Python keeps py3langid itself as the reference the tests
//! compare this kernel against.

pub struct Model {
    nextmove: Vec<u32>, // distinct 256-entry transition rows, concatenated
    row: Vec<u32>,      // state -> its row in `nextmove`
    out: Vec<i32>,      // state -> the feature it emits, or -1
    ptc: Vec<f32>,      // feature x class log-likelihoods, row-major
    pc: Vec<f32>,       // class priors
    classes: usize,
    aliases: Vec<(usize, usize)>, // (first column, duplicate column) of a label that appears twice
}

impl Model {
    pub fn new(nextmove: Vec<u32>, row: Vec<u32>, out: Vec<i32>, ptc: Vec<f32>, pc: Vec<f32>,
               aliases: Vec<(usize, usize)>) -> Result<Self, String> {
        let classes = pc.len();
        if classes == 0 || ptc.len() % classes != 0 {
            return Err(format!("langid model: {} log-likelihoods for {} classes", ptc.len(), classes));
        }
        let features = ptc.len() / classes;
        if row.len() != out.len() || nextmove.len() % 256 != 0 {
            return Err("langid model: DFA tables of inconsistent sizes".into());
        }
        let rows = (nextmove.len() / 256) as u32;
        if row.iter().any(|&r| r >= rows)
            || nextmove.iter().any(|&s| s as usize >= row.len())
            || out.iter().any(|&f| f >= features as i32)
            || aliases.iter().any(|&(a, b)| a >= classes || b >= classes)
        {
            return Err("langid model: an index out of range".into());
        }
        Ok(Model { nextmove, row, out, ptc, pc, classes, aliases })
    }

    /// Per text between consecutive `offsets` in `data`, in order: the index of the best
    /// class and its probability, ties to the first class. A text with no feature gets uniform
    /// scores (py3langid's 0.0 fill under norm_probs). The walk
    /// through the DFA is a chain of dependent loads from a 39 MB table, so one text at a time
    /// waits on memory at nearly every byte: LANES texts are walked side by side (their loads
    /// are independent, and the processor overlaps them), each lane taking the next text when
    /// its own ends. Each text's features and their order are those of its own walk, so a
    /// result depends on its text only.
    pub fn classify_many(&self, offsets: &[usize], data: &[u8], scratch: &mut Scratch) -> Vec<(usize, f64)> {
        const LANES: usize = 8;
        let n = offsets.len().saturating_sub(1);
        let mut results = vec![(0usize, 0.0f64); n];
        // lane l walks text doc[l] at pos[l] (up to end[l]) in DFA state state[l]; lanes 0..k are busy
        let (mut doc, mut pos, mut end, mut state) = ([0usize; LANES], [0usize; LANES], [0usize; LANES], [0usize; LANES]);
        let mut emitted: [Vec<u32>; LANES] = Default::default();
        let (mut k, mut next) = (0usize, 0usize);
        loop {
            while k < LANES && next < n {
                let (a, b) = (offsets[next], offsets[next + 1]);
                if a == b {
                    results[next] = self.score(&[], 0, scratch);
                } else {
                    (doc[k], pos[k], end[k], state[k]) = (next, a, b, 0);
                    emitted[k].clear();
                    k += 1;
                }
                next += 1;
            }
            if k == 0 {
                return results;
            }
            let steps = (0..k).map(|l| end[l] - pos[l]).min().unwrap_or(0);
            if k == LANES {
                for _ in 0..steps {
                    for l in 0..LANES {
                        self.advance(data[pos[l]], &mut state[l], &mut emitted[l]);
                        pos[l] += 1;
                    }
                }
            } else {
                for _ in 0..steps {
                    for l in 0..k {
                        self.advance(data[pos[l]], &mut state[l], &mut emitted[l]);
                        pos[l] += 1;
                    }
                }
            }
            let mut l = 0;
            while l < k {
                if pos[l] == end[l] {
                    let d = doc[l];
                    results[d] = self.score(&emitted[l], offsets[d + 1] - offsets[d], scratch);
                    k -= 1;
                    (doc[l], pos[l], end[l], state[l]) = (doc[k], pos[k], end[k], state[k]);
                    emitted.swap(l, k);
                } else {
                    l += 1;
                }
            }
        }
    }

    #[inline(always)]
    fn advance(&self, b: u8, state: &mut usize, emitted: &mut Vec<u32>) {
        *state = self.nextmove[((self.row[*state] as usize) << 8) | b as usize] as usize;
        let f = self.out[*state];
        if f >= 0 {
            emitted.push(f as u32);
        }
    }

    /// The best class and its probability from a text's emitted features (in walk order) and
    /// its length in bytes.
    fn score(&self, emitted: &[u32], len: usize, scratch: &mut Scratch) -> (usize, f64) {
        let c = self.classes;
        if scratch.counts.len() != self.ptc.len() / c {
            scratch.counts = vec![0; self.ptc.len() / c];
            scratch.scores = vec![0.0; c];
            scratch.seen.clear();
        }
        for &f in emitted {
            let n = &mut scratch.counts[f as usize];
            if *n == 0 {
                scratch.seen.push(f);
            }
            *n += 1;
        }
        let s = &mut scratch.scores;
        if scratch.seen.is_empty() {
            s.iter_mut().for_each(|x| *x = 0.0);
        } else {
            for (x, &p) in s.iter_mut().zip(&self.pc) {
                *x = p as f64;
            }
            const AHEAD: usize = 4;
            for (i, &f) in scratch.seen.iter().enumerate() {
                // the rows are scattered over a 57 MB table: ask for one a few features ahead
                if let Some(&g) = scratch.seen.get(i + AHEAD) {
                    prefetch(&self.ptc[g as usize * c..(g as usize + 1) * c]);
                }
                let w = (scratch.counts[f as usize] as f64).ln_1p();
                scratch.counts[f as usize] = 0;
                let base = f as usize * c;
                for (x, &l) in s.iter_mut().zip(&self.ptc[base..base + c]) {
                    *x += w * l as f64;
                }
            }
            scratch.seen.clear();
        }
        let t = 1.0 / (len.max(1) as f64).sqrt();
        let max = s.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x * t));
        let mut sum = 0.0;
        for x in s.iter_mut() {
            *x = (*x * t - max).exp();
            sum += *x;
        }
        for x in s.iter_mut() {
            *x /= sum;
        }
        for &(a, b) in &self.aliases {
            s[a] += s[b];
            s[b] = 0.0;
        }
        let mut best = 0;
        for (i, &x) in s.iter().enumerate() {
            if x > s[best] {
                best = i;
            }
        }
        (best, s[best])
    }
}

/// Hints the processor to bring `row` into cache (no effect on results; none off x86_64).
#[inline(always)]
fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(16) {
        // SAFETY: prefetching reads nothing and faults on nothing; the pointer is in bounds
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr() as *const i8) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

#[derive(Default)]
pub struct Scratch {
    counts: Vec<u32>,
    seen: Vec<u32>,
    scores: Vec<f64>,
}
