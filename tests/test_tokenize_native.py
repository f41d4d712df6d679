"""The compiled byte-level BPE (native/src/bpe.rs, shardforge.tokenize.native) against Hugging
Face tokenizers itself, the reference, loading the same tokenizer.json: the same ids on real
text in ten languages (tests/data/quality/multilang.jsonl.gz) and the bundled sample, on every
Unicode code point in several contexts, and on generated text; the same splits as tokenizers'
ByteLevel pre-tokenizer; and files it does not reproduce go to tokenizers, with the reason."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardforge.tokenize import native
from shardforge.tokenize.stage import load_tokenizer, train_bpe

HERE = Path(__file__).parent
MULTILANG = HERE / "data" / "quality" / "multilang.jsonl.gz"
SAMPLE = HERE.parent / "data" / "sample" / "docs.jsonl"


def _texts() -> list[str]:
    with gzip.open(MULTILANG, "rt", encoding="utf-8") as f:
        out = [json.loads(line)["text"] for line in f]
    with open(SAMPLE, encoding="utf-8") as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue                  # the sample holds broken lines on purpose (ingest's tests)
            if isinstance(doc, dict) and isinstance(doc.get("text"), str):
                out.append(doc["text"])
    return out


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _texts()


def _tokenizer(path: Path, texts: list[str], vocab: int, *, nfc: bool = True, prefix_space: bool = False) -> str:
    """A byte-level BPE trained on half the texts (the other half is unseen), optionally without
    the NFC normaliser or with add_prefix_space."""
    train_bpe(texts[::2], str(path), vocab_size=vocab)
    doc = json.loads(path.read_text())
    if not nfc:
        doc["normalizer"] = None
    doc["pre_tokenizer"]["add_prefix_space"] = prefix_space
    path.write_text(json.dumps(doc))
    return path.read_text()


VARIANTS = {"32k": dict(vocab=32_000), "1k": dict(vocab=1_000), "no-nfc": dict(vocab=4_000, nfc=False),
            "prefix-space": dict(vocab=4_000, prefix_space=True)}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, tmp_path_factory, texts):
    """(compiled encoder, tokenizers' Tokenizer) of the same file."""
    from tokenizers import Tokenizer

    path = tmp_path_factory.mktemp("tok") / f"{request.param}.json"
    text = _tokenizer(path, texts, **VARIANTS[request.param])
    args, why = native.native_args(json.loads(text))
    assert args is not None, why
    from shardforge._native import BpeEncoder

    return BpeEncoder(*args), Tokenizer.from_str(text)


def _ids(ref, batch: list[str]) -> list[list[int]]:
    return [e.ids for e in ref.encode_batch_fast(batch, add_special_tokens=False)]


def test_same_ids_as_tokenizers_on_real_text(pair, texts):
    enc, ref = pair
    want = _ids(ref, texts)
    got = [enc.encode(t) for t in texts]
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, first: {texts[bad[0]][:200]!r}"
    assert sum(map(len, want)) > 50_000          # the texts are real documents, not a handful of words


def _code_point_texts() -> list[str]:
    """Every code point of the Basic Multilingual Plane (surrogates excluded) and every one above
    it that Python's tables assign, plus every 7th unassigned one (a block assigned by a newer
    Unicode than one side's tables would show), in runs of 64, in six contexts: as a run, each
    after a letter, each after a space, each between two spaces and a newline, each doubled
    after a digit, each after 'a' and before '<eos>'."""
    import unicodedata

    cps = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
           and (c < 0x10000 or c % 7 == 0 or unicodedata.category(chr(c)) != "Cn")]
    out = []
    for i in range(0, len(cps), 64):
        run = cps[i:i + 64]
        out += ["".join(run), "".join("a" + c for c in run), "".join(" " + c for c in run),
                "".join("  " + c + "\n" for c in run), "".join("1" + c + c for c in run),
                "".join(f"a{c}<eos>" for c in run)]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["32k", "prefix-space"])
def test_same_ids_on_every_code_point(variant, tmp_path, texts):
    """(The real-text test covers all four files; the code points take two: the splits and NFC
    do not depend on the vocabulary.)"""
    from tokenizers import Tokenizer

    from shardforge._native import BpeEncoder

    text = _tokenizer(tmp_path / "t.json", texts, **VARIANTS[variant])
    enc, ref = BpeEncoder(*native.native_args(json.loads(text))[0]), Tokenizer.from_str(text)
    batch = _code_point_texts()
    want = _ids(ref, batch)
    bad = [i for i, t in enumerate(batch) if enc.encode(t) != want[i]]
    assert not bad, f"{len(bad)} differ, first {batch[bad[0]][:20]!r}"


@pytest.mark.slow
def test_same_splits_as_the_byte_level_pre_tokenizer():
    """The GPT-2 split (regex with look-ahead in tokenizers; a look-ahead-free pattern plus the
    give-back rule here) on every code point after one and after two spaces: the split strings,
    not only the ids."""
    from tokenizers import pre_tokenizers

    ref = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    from shardforge._native import BpeEncoder

    enc = BpeEncoder(list(range(256)), [], [], False, False)
    inv = {v: k for k, v in native.bytes_to_unicode().items()}
    spaced = [t for i, t in enumerate(_code_point_texts()) if i % 6 in (2, 3)]   # " c" and "  c\n" runs
    for text in spaced + ["a  b", "a \n b", "x\t\t\ty", "  ", " \n", "end  ", "'s'll'S"]:
        want = [bytes(inv[ch] for ch in s).decode("utf-8") for s, _ in ref.pre_tokenize_str(text)]
        assert enc.pretokenize(text) == want, repr(text[:40])


ALPHABET = st.sampled_from(list("aZé\u0301 \t\n\r'sdmtlvre0123456789.,;:!?-_=()[]{}<>\"/\\@#") +
                           ["<eos>", "<bos>", "[UNK]", "\u00a0", "\u3000", "\u2028", "\u200b", "\U0001f600",
                            "\u65e5", "\u0627", "\u0939\u093f", "\u00c5", "A\u030a", "\ufb01", "\u2167", "'ll", "'ve"])


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_same_ids_on_generated_text(tmp_path_factory, text):
    enc, ref = _generated_pair(tmp_path_factory)
    assert enc.encode(text) == ref.encode(text, add_special_tokens=False).ids


_PAIR = {}


def _generated_pair(tmp_path_factory):
    if not _PAIR:
        from tokenizers import Tokenizer

        from shardforge._native import BpeEncoder

        text = _tokenizer(tmp_path_factory.mktemp("gen") / "t.json", _texts(), 2_000)
        _PAIR["p"] = (BpeEncoder(*native.native_args(json.loads(text))[0]), Tokenizer.from_str(text))
    return _PAIR["p"]


def test_arrow_column_with_nulls_slices_and_bos_eos(tmp_path, texts):
    """encode_column: the list<int32> column the stage writes (BOS/EOS around each text, a null
    text as an empty one), on a sliced Arrow array (nonzero offset)."""
    from tokenizers import Tokenizer

    text = _tokenizer(tmp_path / "t.json", texts, 2_000)
    ref = Tokenizer.from_str(text)
    col = pa.array([None, *texts[:50], "", None]).slice(1)
    ids, counts = native.encode_column(text, col, 2, 1)
    want = [[2, *e.ids, 1] for e in ref.encode_batch_fast([t or "" for t in col.to_pylist()], add_special_tokens=False)]
    assert ids.to_pylist() == want
    assert counts.to_pylist() == [len(w) for w in want]
    assert ids.type == pa.list_(pa.int32()) and counts.type == pa.int32()


def test_choose_names_the_encoder_and_why(tmp_path, texts):
    text = _tokenizer(tmp_path / "t.json", texts, 1_000)
    info = load_tokenizer(str(tmp_path / "t.json"))
    assert (info.encoder, info.encoder_note) == ("shardforge", "")
    for change, why in ((lambda d: d["model"].update(dropout=0.1), "dropout"),
                        (lambda d: d.update(normalizer={"type": "NFKC"}), "normalizer 'NFKC'"),
                        (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizer 'Whitespace'"),
                        (lambda d: d["added_tokens"][1].update(lstrip=True), "added token '<eos>'")):
        doc = json.loads(text)
        change(doc)
        path = tmp_path / "changed.json"
        path.write_text(json.dumps(doc))
        info = load_tokenizer(str(path))
        assert info.encoder == "tokenizers" and why in info.encoder_note, info.encoder_note
