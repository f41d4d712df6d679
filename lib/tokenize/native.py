"""The tokenize stage's encoder: shardforge's compiled byte-level BPE (native/src/bpe.rs) for the
tokenizer files it reproduces exactly, Hugging Face `tokenizers` for every other file.

The compiled encoder takes the GPT-2 family of tokenizer.json: a BPE model (no dropout, no
subword prefix or suffix, no byte fallback, merges not ignored) under the ByteLevel
pre-tokenizer with its regex, no normaliser or NFC, no post-processor other than ByteLevel's
(which only moves offsets), added tokens matched as written (not single-word, not stripped,
not normalised), and a symbol for each of the 256 bytes. That is what `train_bpe` writes and
what GPT-2-style tokenizers ship. On the driver `choose` also encodes a set of probe texts both
ways (every feature the port covers: added tokens, contractions, runs of every kind of space,
digits, combining marks, scripts, emoji) and keeps the compiled encoder only if every id
matches. The choice and its reason go into the stage's report (`tokens.encoder`); both
encoders give the same ids, the compiled one several times faster (BENCHMARKS.md).
"""
from __future__ import annotations

import json
import zipimport
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)
NATIVE = "shardforge"
PROBES = (
    "Hello world! It's a test: we'll see, they've gone, I'm here, you're right, he'd go, it'S ok.",
    "  leading spaces,\ttabs\t\tand\n\nnew lines   \n  \r\n trailing   ",
    "numbers 12345 and 3.14159, 1,000,000; x2 v1.2.3 \u0661\u0662\u0663 \u2167 \u00bd",
    "caf\u00e9 cafe\u0301 \u1e9b\u0323 \u00c5ngstr\u00f6m \u212b \u0041\u030a fi\ufb01 \u2126 Kelvin \u212a",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002 \ud55c\uad6d\uc5b4 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 "
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22 \u0420\u0443\u0441\u0441\u043a\u0438\u0439",
    "emoji \U0001f600\U0001f44d\U0001f3fd and ZWJ \U0001f468\u200d\U0001f469\u200d\U0001f467 \u200b\u00a0\u3000\u2028x",
    "<eos>text<bos> <eos><eos>  <eos>\n<bos>x [UNK] <eo s> <<eos>> eos>",
    "def f(x):\n    return {'a': [1, 2]}  # comment\n\n\n\tif x != y: pass\n",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ==================== " * 3,
    "'s's'S 't're've'm'll'd ''s '' 's x's", "", " ", "\n", "a", "\u0301", "\ufeffBOM",
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to the printable character that stands for it in a
    byte-level vocabulary."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars)))


def native_args(doc: dict) -> tuple[tuple | None, str]:
    """The compiled encoder's constructor arguments for a parsed tokenizer.json, or None and
    the reason it is not one the compiled encoder reproduces."""
    model = doc.get("model") or {}
    if model.get("type") != "BPE":
        return None, f"model {model.get('type')!r} is not BPE"
    for key, ok in (("dropout", None), ("continuing_subword_prefix", None), ("end_of_word_suffix", None)):
        if model.get(key) not in (ok, ""):
            return None, f"BPE {key} = {model.get(key)!r}"
    if model.get("byte_fallback") or model.get("ignore_merges"):
        return None, "BPE byte_fallback or ignore_merges is set"
    norm = doc.get("normalizer")
    if norm is not None and norm.get("type") != "NFC":
        return None, f"normalizer {norm.get('type')!r}"
    pre = doc.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        return None, f"pre-tokenizer {pre.get('type')!r}" + ("" if pre.get("use_regex", True) else " without its regex")
    post = doc.get("post_processor")
    if post is not None and post.get("type") != "ByteLevel":
        return None, f"post-processor {post.get('type')!r}"
    if doc.get("truncation") or doc.get("padding"):
        return None, "truncation or padding is set"
    added = []
    for t in doc.get("added_tokens") or []:
        if t.get("single_word") or t.get("lstrip") or t.get("rstrip") or t.get("normalized"):
            return None, f"added token {t.get('content')!r} is single-word, stripped or normalised"
        if t.get("content"):
            added.append((t["content"], int(t["id"])))
    vocab = model.get("vocab") or {}
    b2u = bytes_to_unicode()
    try:
        byte_ids = [int(vocab[b2u[b]]) for b in range(256)]
    except KeyError as e:
        return None, f"the vocabulary has no symbol for byte {e.args[0]!r}"
    merges = []
    for m in model.get("merges") or []:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        try:
            merges.append((int(vocab[a]), int(vocab[b]), int(vocab[a + b])))
        except KeyError:
            return None, f"merge {a!r} {b!r} names a token missing from the vocabulary"
    return (byte_ids, merges, added, norm is not None, bool(pre.get("add_prefix_space"))), ""


@lru_cache(maxsize=4)
def _native_encoder(text: str):
    from shardforge._native import BpeEncoder

    args, _ = native_args(json.loads(text))
    return BpeEncoder(*args)


def choose(text: str, reference) -> tuple[str, str]:
    """("shardforge", "") when the compiled encoder reproduces this tokenizer.json (its shape,
    then every probe text's ids against `reference`, a loaded `tokenizers.Tokenizer`), else
    ("tokenizers", why)."""
    if not COMPILED:
        return "tokenizers", "shardforge's compiled kernels are not importable from a zip archive"
    try:
        from shardforge._native import BpeEncoder  # noqa: F401
    except ImportError:
        return "tokenizers", "shardforge._native is not built (make setup)"
    args, why = native_args(json.loads(text))
    if args is None:
        return "tokenizers", why
    enc = _native_encoder(text)
    want = [e.ids for e in reference.encode_batch(list(PROBES), add_special_tokens=False)]
    for probe, ids in zip(PROBES, want):
        if enc.encode(probe) != ids:
            return "tokenizers", f"the compiled encoder differs from tokenizers on the probe text {probe[:40]!r}"
    return NATIVE, ""


def encode_column(text: str, column: pa.Array, bos: int, eos: int) -> tuple[pa.Array, pa.Array]:
    """(list<int32> token ids, int32 counts) of a string column with the compiled encoder; a
    null text gives an empty list (plus BOS/EOS)."""
    col = pc.fill_null(column, "").cast(pa.large_string())
    if col.offset:
        col = pa.concat_arrays([col])          # offsets from 0
    _, offsets, data = col.buffers()
    n = len(col)
    offs = np.frombuffer(offsets, dtype=np.int64, count=n + 1)
    base = int(offs[0])
    raw = np.frombuffer(data, dtype=np.uint8)[base:int(offs[-1])] if data is not None else np.zeros(0, np.uint8)
    offs, ids = _native_encoder(text).encode_arrow(offs - base if base else offs, raw, bos, eos)
    offsets32 = np.frombuffer(offs, dtype=np.int32)
    values = pa.Array.from_buffers(pa.int32(), len(ids) // 4, [None, pa.py_buffer(ids)])
    return pa.ListArray.from_arrays(pa.array(offsets32), values), pa.array(np.diff(offsets32), type=pa.int32())
