//! shardforge._native: the web quality rules (Gopher repetition and quality, C4, FineWeb)
//! over a batch of texts held in Arrow buffers (int64 offsets + UTF-8 data), with spaCy's
//! English tokenizer ported to Rust. Python builds a `Quality` kernel once from the pinned
//! spaCy's data and the character classes (shardforge/clean/quality/native.py). `PiiScan`:
//! the PII detectors' shared scan of a text (pii.rs; shardforge/redact/pii/scan.py).
//! `LangId`: py3langid's language identifier over a batch of texts (langid.rs;
//! shardforge/clean/langid.py). `BpeEncoder`: byte-level BPE with the ids Hugging Face
//! tokenizers gives for the same tokenizer.json (bpe.rs; shardforge/tokenize/native.py).
//! `LowerAlnum`: dedup's `lower_alnum` text normalisation (alnum.rs; shardforge/dedup/normalize.py).
//! `KnownKeys`: whether a JSONL line's object has top-level keys beyond the known ones
//! (jsonkeys.rs; shardforge/ingest/readers/spark.py). `NamedFields`: a JSONL line's named string
//! fields decoded in the same scan, where JSON leaves no doubt (jsonkeys.rs; the same reader).
//! `UrlCredentials`: URL userinfo and credential parameters replaced as the JVM's patterns
//! replace them (urls.rs; shardforge/redact/privacy.py).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod alnum;
mod bpe;
mod jsonkeys;
mod langid;
mod multi;
mod normalize;
mod pii;
mod repetition;
mod rules;
mod text;
mod tokenizer;
mod urls;
mod urls_tables;

use rules::{Classes, Kernel, Params, Sig, SIGNALS};
use text::CharSet;

fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

#[pyclass(module = "shardforge._native")]
struct Quality {
    k: Kernel,
}

fn slice<'a, T: pyo3::buffer::Element>(b: &'a PyBuffer<T>, what: &str) -> PyResult<&'a [T]> {
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err(format!("{what}: not a contiguous buffer")));
    }
    // SAFETY: a C-contiguous buffer of item_count() elements of T, alive while `b` is
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const T, b.item_count()) })
}

fn texts<'a>(offsets: &'a [i64], data: &'a [u8]) -> PyResult<Vec<&'a str>> {
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if w[0] < 0 || a > b || b > data.len() {
            return Err(PyValueError::new_err("texts: offsets out of range"));
        }
        out.push(std::str::from_utf8(&data[a..b]).map_err(|e| PyValueError::new_err(format!("texts: not UTF-8: {e}")))?);
    }
    Ok(out)
}

#[pymethods]
impl Quality {
    #[new]
    #[pyo3(signature = (prefix, suffix, infix, url, specials, classes, lower))]
    fn new(prefix: tokenizer::Runs, suffix: tokenizer::Runs, infix: tokenizer::Runs, url: Option<tokenizer::Runs>, specials: Vec<(String, Vec<String>)>,
           classes: Vec<Vec<(u32, u32)>>, lower: Vec<(char, String)>) -> PyResult<Self> {
        if classes.len() != 6 {
            return Err(PyValueError::new_err("classes: six range lists expected"));
        }
        let mut c = classes.into_iter().map(CharSet::new);
        let cls = Classes {
            ws: c.next().unwrap(), letter: c.next().unwrap(), punct: c.next().unwrap(),
            symbol: c.next().unwrap(), terminal: c.next().unwrap(), sentence_end: c.next().unwrap(),
            lower: lower.into_iter().collect(),
        };
        let tok = tokenizer::Tokenizer::new(prefix, suffix, infix, url, specials).map_err(err)?;
        Ok(Quality { k: Kernel::new(tok, cls) })
    }

    /// spaCy's tokens of each whitespace-free chunk (no memo, letters-only shortcut off).
    fn tokenize_chunks(&self, chunks: Vec<String>) -> PyResult<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(chunks.len());
        for c in &chunks {
            let toks = self.k.tok.tokenize(c, true).map_err(err)?;
            out.push(toks.iter().map(|&(a, b)| c[a as usize..b as usize].to_string()).collect());
        }
        Ok(out)
    }

    /// Forget the memoised chunk tokens (results never depend on them; only time does).
    fn clear_memo(&mut self) {
        self.k.clear_memo();
    }

    /// The words of each text, as the rules count them.
    fn words(&mut self, texts: Vec<String>) -> PyResult<Vec<Vec<String>>> {
        let mut out = Vec::new();
        for t in &texts {
            let mut w = Vec::new();
            self.k.words(t, &mut w).map_err(err)?;
            out.push(w.iter().map(|s| s.to_string()).collect());
        }
        Ok(out)
    }

    /// The groups on a batch: (reason codes as bytes, one per text: 0 = kept, else
    /// REASONS[code - 1]; int64 offsets as bytes; UTF-8 data) of the texts after C4; with
    /// `signals`, also every group's quantities (SIGNALS, float64 little-endian, a row per
    /// text), else empty bytes.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (offsets, data, groups, rep, top, dup, gq, min_stop, stop_words, c4_max_word_length,
                        c4_flags, c4_min_words_per_line, c4_min_sentences, fw, signals=false))]
    fn apply<'py>(&mut self, py: Python<'py>, offsets: PyBuffer<i64>, data: PyBuffer<u8>, groups: [bool; 4],
                  rep: [f64; 4], top: Vec<f64>, dup: Vec<f64>, gq: [f64; 8], min_stop: f64,
                  stop_words: Vec<String>, c4_max_word_length: f64, c4_flags: [bool; 6],
                  c4_min_words_per_line: f64, c4_min_sentences: f64, fw: [f64; 5], signals: bool)
                  -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let p = Params { groups, rep, top, dup, gq, min_stop, stop_words, c4_max_word_length, c4_flags,
                         c4_min_words_per_line, c4_min_sentences, fw };
        let offs = slice(&offsets, "offsets")?;
        let bytes = slice(&data, "data")?;
        let docs = texts(offs, bytes)?;
        let k = &mut self.k;
        let ns = SIGNALS.len();
        let res: Result<(Vec<u8>, Vec<i64>, Vec<u8>, Vec<f64>), String> = py.allow_threads(|| {
            let mut codes = Vec::with_capacity(docs.len());
            let mut out_offs = Vec::with_capacity(docs.len() + 1);
            let mut out = Vec::with_capacity(bytes.len());
            let mut sig = vec![0.0f64; if signals { docs.len() * ns } else { 0 }];
            let mut scratch = vec![0.0f64; ns];
            out_offs.push(0i64);
            for (i, d) in docs.iter().enumerate() {
                let v = if signals { &mut sig[i * ns..(i + 1) * ns] } else { &mut scratch[..] };
                let (code, new) = k.apply_one(d, &p, &mut Sig { full: signals, v })?;
                codes.push(code);
                out.extend_from_slice(new.as_deref().unwrap_or(d).as_bytes());
                out_offs.push(out.len() as i64);
            }
            Ok((codes, out_offs, out, sig))
        });
        let (codes, out_offs, out, sig) = res.map_err(err)?;
        let ob: Vec<u8> = out_offs.iter().flat_map(|x| x.to_le_bytes()).collect();
        let sb: Vec<u8> = sig.iter().flat_map(|x| x.to_le_bytes()).collect();
        Ok((PyBytes::new(py, &codes), PyBytes::new(py, &ob), PyBytes::new(py, &out), PyBytes::new(py, &sb)))
    }
}

#[pyclass(module = "shardforge._native")]
struct LangId {
    m: langid::Model,
    scratch: langid::Scratch,
}

#[pymethods]
impl LangId {
    #[new]
    fn new(nextmove: PyBuffer<u32>, row: PyBuffer<u32>, out: PyBuffer<i32>, ptc: PyBuffer<f32>, pc: PyBuffer<f32>,
           aliases: Vec<(usize, usize)>) -> PyResult<Self> {
        let m = langid::Model::new(slice(&nextmove, "nextmove")?.to_vec(), slice(&row, "row")?.to_vec(),
                                   slice(&out, "out")?.to_vec(), slice(&ptc, "ptc")?.to_vec(),
                                   slice(&pc, "pc")?.to_vec(), aliases).map_err(err)?;
        Ok(LangId { m, scratch: langid::Scratch::default() })
    }

    /// The texts between consecutive `offsets` in `data` (UTF-8 bytes, NFC, as py3langid
    /// encodes them): each one's best class index (uint32) and its probability (float64),
    /// as little-endian bytes.
    fn classify<'py>(&mut self, py: Python<'py>, offsets: PyBuffer<i64>, data: PyBuffer<u8>)
                     -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let offs = slice(&offsets, "offsets")?;
        let bytes = slice(&data, "data")?;
        for w in offs.windows(2) {
            if w[0] < 0 || w[0] > w[1] || w[1] as usize > bytes.len() {
                return Err(PyValueError::new_err("classify: offsets out of range"));
            }
        }
        let (m, scratch) = (&self.m, &mut self.scratch);
        let (idx, prob): (Vec<u8>, Vec<u8>) = py.allow_threads(|| {
            let (mut idx, mut prob) = (Vec::new(), Vec::new());
            let offsets: Vec<usize> = offs.iter().map(|&o| o as usize).collect();
            for (c, p) in m.classify_many(&offsets, bytes, scratch) {
                idx.extend_from_slice(&(c as u32).to_le_bytes());
                prob.extend_from_slice(&p.to_le_bytes());
            }
            (idx, prob)
        });
        Ok((PyBytes::new(py, &idx), PyBytes::new(py, &prob)))
    }
}

/// The clean stage's normalisation (normalize.rs) of the texts between consecutive
/// `offsets` in `data`: (int64 offsets, UTF-8 data) of the results, as little-endian bytes.
#[pyfunction]
fn normalize_texts<'py>(py: Python<'py>, offsets: PyBuffer<i64>, data: PyBuffer<u8>)
                        -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let docs = texts(slice(&offsets, "offsets")?, slice(&data, "data")?)?;
    let (offs, out) = py.allow_threads(|| {
        let mut out = String::new();
        let mut offs: Vec<u8> = Vec::with_capacity((docs.len() + 1) * 8);
        offs.extend_from_slice(&0i64.to_le_bytes());
        for d in &docs {
            out.push_str(&normalize::normalize(d));
            offs.extend_from_slice(&(out.len() as i64).to_le_bytes());
        }
        (offs, out)
    });
    Ok((PyBytes::new(py, &offs), PyBytes::new(py, out.as_bytes())))
}

/// dedup's `lower_alnum` normalisation (alnum.rs), built once per process from the code point
/// ranges (inclusive) of the letters and digits, and of the characters Python's Unicode assigns.
#[pyclass(module = "shardforge._native")]
struct LowerAlnum {
    keep: CharSet,
    assigned: CharSet,
}

#[pymethods]
impl LowerAlnum {
    #[new]
    fn new(keep: Vec<(u32, u32)>, assigned: Vec<(u32, u32)>) -> Self {
        LowerAlnum { keep: CharSet::new(keep), assigned: CharSet::new(assigned) }
    }

    /// The normalised texts between consecutive `offsets` in `data`: (int64 offsets, UTF-8
    /// data) of the results, as little-endian bytes, and the indices (uint32, little-endian
    /// bytes) of the texts that hold a capital sigma (their result is right only for a text
    /// lower-cased before).
    fn apply<'py>(&self, py: Python<'py>, offsets: PyBuffer<i64>, data: PyBuffer<u8>)
                  -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let docs = texts(slice(&offsets, "offsets")?, slice(&data, "data")?)?;
        let (offs, out, sigma) = py.allow_threads(|| {
            let mut out = String::with_capacity(docs.iter().map(|d| d.len()).sum());
            let mut offs: Vec<u8> = Vec::with_capacity((docs.len() + 1) * 8);
            let mut sigma: Vec<u8> = Vec::new();
            offs.extend_from_slice(&0i64.to_le_bytes());
            for (i, d) in docs.iter().enumerate() {
                if alnum::lower_alnum(d, &self.keep, &self.assigned, &mut out) {
                    sigma.extend_from_slice(&(i as u32).to_le_bytes());
                }
                offs.extend_from_slice(&(out.len() as i64).to_le_bytes());
            }
            (offs, out, sigma)
        });
        Ok((PyBytes::new(py, &offs), PyBytes::new(py, out.as_bytes()), PyBytes::new(py, &sigma)))
    }
}

#[pyfunction]
fn reasons() -> Vec<&'static str> {
    rules::REASONS.to_vec()
}

/// The names of the quantities `apply(..., signals=True)` gives, in column order, and each
/// group's (start, end) slice of them.
#[pyfunction]
fn signals() -> (Vec<&'static str>, Vec<(usize, usize)>) {
    (SIGNALS.to_vec(), rules::GROUP_SIGNALS.to_vec())
}

#[pyclass(module = "shardforge._native")]
struct BpeEncoder {
    b: bpe::Bpe,
}

#[pymethods]
impl BpeEncoder {
    #[new]
    #[pyo3(signature = (byte_ids, merges, added, nfc, add_prefix_space))]
    fn new(byte_ids: Vec<u32>, merges: Vec<(u32, u32, u32)>, added: Vec<(String, u32)>, nfc: bool,
           add_prefix_space: bool) -> PyResult<Self> {
        Ok(BpeEncoder { b: bpe::Bpe::new(byte_ids, merges, added, nfc, add_prefix_space).map_err(err)? })
    }

    /// Token ids of texts held as Arrow buffers (int64 offsets, UTF-8 data): (int32 offsets,
    /// int32 ids) as little-endian bytes, the buffers of an Arrow list<int32> array. `bos`/`eos`
    /// (when >= 0) open and close every text's ids.
    #[pyo3(signature = (offsets, data, bos = -1, eos = -1))]
    fn encode_arrow<'py>(&mut self, py: Python<'py>, offsets: PyBuffer<i64>, data: PyBuffer<u8>, bos: i64, eos: i64)
                         -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let docs = texts(slice(&offsets, "offsets")?, slice(&data, "data")?)?;
        let b = &mut self.b;
        let (offs, ids) = py.allow_threads(|| {
            let mut ids: Vec<u32> = Vec::new();
            let mut offs: Vec<u8> = Vec::with_capacity((docs.len() + 1) * 4);
            offs.extend_from_slice(&0i32.to_le_bytes());
            for d in &docs {
                if bos >= 0 {
                    ids.push(bos as u32);
                }
                b.encode(d, &mut ids);
                if eos >= 0 {
                    ids.push(eos as u32);
                }
                let end = i32::try_from(ids.len()).map_err(|_| "more than 2^31 - 1 token ids in one batch".to_string())?;
                offs.extend_from_slice(&end.to_le_bytes());
            }
            Ok::<_, String>((offs, ids))
        }).map_err(err)?;
        // SAFETY: u32 has no padding; the bytes are the ids' little-endian representation on x86/arm
        let raw = unsafe { std::slice::from_raw_parts(ids.as_ptr() as *const u8, ids.len() * 4) };
        Ok((PyBytes::new(py, &offs), PyBytes::new(py, raw)))
    }

    /// The ids of one text.
    fn encode(&mut self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.b.encode(text, &mut out);
        out
    }

    /// GPT-2's pre-tokenizer splits of one piece (for tests).
    fn pretokenize(&self, piece: &str) -> Vec<String> {
        self.b.pretokenize(piece)
    }
}

#[pyclass(module = "shardforge._native")]
struct KnownKeys {
    k: jsonkeys::KnownKeys,
}

#[pymethods]
impl KnownKeys {
    #[new]
    fn new(keys: Vec<String>) -> Self {
        KnownKeys { k: jsonkeys::KnownKeys::new(keys) }
    }

    /// For the lines between consecutive `offsets` (int32, an Arrow string array's) in
    /// `data`, one byte each: 0 = a JSON object whose top-level keys are all known, 1 = one
    /// with another key, 2 = cannot tell (not one object, an escaped key, malformed).
    fn other_keys<'py>(&self, py: Python<'py>, offsets: PyBuffer<i32>, data: PyBuffer<u8>) -> PyResult<Bound<'py, PyBytes>> {
        let offs = slice(&offsets, "offsets")?;
        let bytes = slice(&data, "data")?;
        for w in offs.windows(2) {
            if w[0] < 0 || w[0] > w[1] || w[1] as usize > bytes.len() {
                return Err(PyValueError::new_err("other_keys: offsets out of range"));
            }
        }
        let out: Vec<u8> = py.allow_threads(|| {
            offs.windows(2)
                .map(|w| match self.k.other_keys(&bytes[w[0] as usize..w[1] as usize]) {
                    Some(false) => 0,
                    Some(true) => 1,
                    None => 2,
                })
                .collect()
        });
        Ok(PyBytes::new(py, &out))
    }
}

#[pyclass(module = "shardforge._native")]
struct NamedFields {
    f: jsonkeys::NamedFields,
}

#[pymethods]
impl NamedFields {
    #[new]
    fn new(named: Vec<String>, known: Vec<String>, max_line: usize) -> Self {
        NamedFields { f: jsonkeys::NamedFields::new(named, known, max_line) }
    }

    /// For the lines between consecutive `offsets` (int32) in `data`: the key scan's answer
    /// per line (as `KnownKeys.other_keys`), one byte per line that is 1 where the named fields
    /// were decoded, and per named field an Arrow string column's parts (int32 offsets, data,
    /// one validity byte per line; null where absent, null, or the line was not decoded).
    #[allow(clippy::type_complexity)]
    fn read<'py>(&self, py: Python<'py>, offsets: PyBuffer<i32>, data: PyBuffer<u8>)
        -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>)> {
        let offs = slice(&offsets, "offsets")?;
        let bytes = slice(&data, "data")?;
        for w in offs.windows(2) {
            if w[0] < 0 || w[0] > w[1] || w[1] as usize > bytes.len() {
                return Err(PyValueError::new_err("NamedFields.read: offsets out of range"));
            }
        }
        let width = self.f.width();
        let n = offs.len().saturating_sub(1);
        let (others, parsed, cols) = py.allow_threads(|| {
            let mut others = Vec::with_capacity(n);
            let mut parsed = Vec::with_capacity(n);
            let mut cols: Vec<jsonkeys::Column> = (0..width).map(|_| jsonkeys::Column::new(n, bytes.len())).collect();
            for w in offs.windows(2) {
                let line = self.f.read(&bytes[w[0] as usize..w[1] as usize], &mut cols);
                others.push(line.others);
                parsed.push(line.parsed as u8);
            }
            (others, parsed, cols)
        });
        if cols.iter().any(|c| c.data.len() > i32::MAX as usize) {
            return Err(PyValueError::new_err("NamedFields.read: a column over 2 GiB"));
        }
        let cols = cols
            .into_iter()
            .map(|c| {
                let ob: Vec<u8> = c.offsets.iter().flat_map(|x| x.to_le_bytes()).collect();
                (PyBytes::new(py, &ob), PyBytes::new(py, &c.data), PyBytes::new(py, &c.valid))
            })
            .collect();
        Ok((PyBytes::new(py, &others), PyBytes::new(py, &parsed), cols))
    }
}

#[pyclass(module = "shardforge._native")]
struct UrlCredentials {
    c: urls::Credentials,
}

#[pymethods]
impl UrlCredentials {
    #[new]
    fn new(names: Vec<String>, redacted: String) -> Self {
        UrlCredentials { c: urls::Credentials::new(names, redacted) }
    }

    /// Each text with URL userinfo and credential parameters replaced; the same object where
    /// nothing is (None stays None).
    fn strip_many<'py>(&self, py: Python<'py>, texts: Vec<Option<Bound<'py, PyAny>>>) -> PyResult<Vec<Option<PyObject>>> {
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            out.push(match t {
                None => None,
                Some(obj) => {
                    let s: &str = obj.extract()?;
                    Some(match self.c.strip(s) {
                        Some(new) => new.into_pyobject(py)?.into_any().unbind(),
                        None => obj.unbind(),
                    })
                }
            });
        }
        Ok(out)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Quality>()?;
    m.add_class::<pii::PiiScan>()?;
    m.add_class::<LangId>()?;
    m.add_class::<BpeEncoder>()?;
    m.add_class::<LowerAlnum>()?;
    m.add_class::<UrlCredentials>()?;
    m.add_class::<KnownKeys>()?;
    m.add_class::<NamedFields>()?;
    m.add_function(wrap_pyfunction!(reasons, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_texts, m)?)?;
    m.add_function(wrap_pyfunction!(signals, m)?)?;
    Ok(())
}
