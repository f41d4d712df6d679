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

    /// Per text: the index of the best class and its probability, ties to the first class.
    /// A text with no feature gets uniform scores (py3langid's 0.0 fill under norm_probs).
    pub fn classify(&self, text: &[u8], scratch: &mut Scratch) -> (usize, f64) {
        let c = self.classes;
        if scratch.counts.len() != self.ptc.len() / c {
            *scratch = Scratch { counts: vec![0; self.ptc.len() / c], seen: Vec::new(), scores: vec![0.0; c] };
        }
        let mut state = 0usize;
        for &b in text {
            state = self.nextmove[((self.row[state] as usize) << 8) | b as usize] as usize;
            let f = self.out[state];
            if f >= 0 {
                let n = &mut scratch.counts[f as usize];
                if *n == 0 {
                    scratch.seen.push(f as u32);
                }
                *n += 1;
            }
        }
        let s = &mut scratch.scores;
        if scratch.seen.is_empty() {
            s.iter_mut().for_each(|x| *x = 0.0);
        } else {
            for (x, &p) in s.iter_mut().zip(&self.pc) {
                *x = p as f64;
            }
            for &f in &scratch.seen {
                let w = (scratch.counts[f as usize] as f64).ln_1p();
                scratch.counts[f as usize] = 0;
                let base = f as usize * c;
                for (x, &l) in s.iter_mut().zip(&self.ptc[base..base + c]) {
                    *x += w * l as f64;
                }
            }
            scratch.seen.clear();
        }
        let t = 1.0 / (text.len().max(1) as f64).sqrt();
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

#[derive(Default)]
pub struct Scratch {
    counts: Vec<u32>,
    seen: Vec<u32>,
    scores: Vec<f64>,
}
