"""Language identification in the compiled kernel (native/src/langid.rs) against py3langid
itself, the independent reference: on real text in ten languages (Debian's translated manual
pages, tests/data/quality/multilang.jsonl.gz) the language is py3langid's and the probability
agrees within float32 rounding; and against the module's Python twin of the kernel (the
`--py-files` path), which must give the kernel's bytes exactly."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from shardforge.clean import langid

DATA = Path(__file__).parent / "data" / "quality" / "multilang.jsonl.gz"

EDGE = [
    "THIS TEXT IS WRITTEN ALL IN UPPER CASE, AS SOME PAGES SHOUT THEIR TITLES.",
    "Ceci est un texte français, écrit avec des accents composés: e\u0301te\u0301.",   # NFD: NFC first
    "这是一个用中文写的句子，用来检查多字节字符。",
    "Это предложение написано по-русски, чтобы проверить кириллицу.",
    "\x00\x01\x02",                   # bytes the model has no feature for: uniform scores
    "x",
    "🙂🙃 emoji only 🙂",
    "a" * 30_000,                     # longer than MAX_CHARS
]


@pytest.fixture(scope="module")
def docs() -> list[str]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="module")
def reference():
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)


def test_same_language_as_py3langid_on_real_text(docs, reference):
    texts = docs + EDGE
    langs, probs = langid.identify_many(texts)
    expected = [reference.classify(t[:langid.MAX_CHARS]) for t in texts]
    assert langs == [lang for lang, _ in expected]
    # py3langid sums in float32 (BLAS order), the kernel in float64: the probabilities agree
    # to float32's precision, and the rounded value to one unit in the fourth place
    worst = max(abs(p - float(e)) for p, (_, e) in zip(probs, expected))
    assert worst <= 1.5e-4, worst
    assert len({lang for lang in langs}) >= 10     # the corpus really holds ten languages


def test_kernel_equals_its_python_twin_bit_for_bit(docs):
    m = langid.model()
    k = langid.kernel()
    for text in docs[::10] + EDGE:
        data = langid.encode(text)
        idx, prob = k.classify(np.array([0, len(data)], dtype=np.int64), data)
        got = (int(np.frombuffer(idx, "<u4")[0]), float(np.frombuffer(prob, "<f8")[0]))
        assert got == langid._classify_reference(m, data), text[:60]


def test_batch_order_blanks_and_the_zip_path(docs, monkeypatch):
    texts = [docs[0], None, "", "   \n\t", docs[1], EDGE[0], docs[2]]
    langs, probs = langid.identify_many(texts)
    assert langs[1:4] == [None, None, None] and probs[1:4] == [None, None, None]
    assert [langid.identify(t) for t in texts] == list(zip(langs, probs))
    assert all(isinstance(p, float) and 0 < p <= 1 for p in probs if p is not None)
    monkeypatch.setattr(langid, "COMPILED", False)        # as imported from the --py-files zip
    assert langid.identify_many(texts) == (langs, probs)


def test_a_batch_result_does_not_depend_on_its_neighbours(docs):
    one = [langid.identify(t) for t in docs[:40]]
    langs, probs = langid.identify_many(docs[:40][::-1])
    assert list(zip(langs, probs))[::-1] == one


def test_a_batch_walked_in_lanes_gives_each_texts_own_bytes(docs):
    """The kernel walks several texts side by side, each lane taking the next text when its
    own ends: a whole batch of texts of every length (empty ones between them, which take
    no lane) gives, text by text, the Python twin's bytes of that text alone."""
    m = langid.model()
    encoded = []
    for i, text in enumerate(docs + EDGE + docs[:7][::-1]):
        encoded.append(langid.encode(text))
        if i % 5 == 0:
            encoded.append(b"")
    offsets = np.cumsum([0] + [len(b) for b in encoded], dtype=np.int64)
    idx, prob = langid.kernel().classify(offsets, b"".join(encoded))
    got = list(zip(np.frombuffer(idx, "<u4").tolist(), np.frombuffer(prob, "<f8").tolist()))
    assert len(got) == len(encoded) and len({len(b) for b in encoded}) > 20
    assert got == [langid._classify_reference(m, b) for b in encoded]


def test_the_cached_model_is_the_converted_model_and_a_damaged_cache_is_converted_again(tmp_path, monkeypatch, docs):
    """The model arrays a process reads from the cache folder are those converted from
    py3langid's file; a cache folder with a missing array is converted again, not trusted."""
    import subprocess
    import sys

    monkeypatch.setenv("SHARDFORGE_CACHE", str(tmp_path))
    want = langid.convert_model()
    langid.model.cache_clear()
    try:
        first = langid.model()                      # converts and writes the folder
        (folder,) = tmp_path.glob("langid-model-*")
        assert sorted(p.name for p in folder.iterdir()) == ["model.json", "nextmove.npy", "out.npy", "pc.npy",
                                                            "ptc.npy", "row.npy"]
        langid.model.cache_clear()
        cached = langid.model()                     # reads it back, memory-mapped
        assert isinstance(cached.ptc, np.memmap)
        for m in (first, cached):
            assert m.classes == want.classes and m.aliases == want.aliases
            for name in ("nextmove", "row", "out", "ptc", "pc"):
                got, ref = getattr(m, name), getattr(want, name)
                assert got.dtype == ref.dtype and np.array_equal(got, ref), name
        # a fresh process classifies with the cached model as this one does with the converted one
        texts = [d for d in docs[:40]]
        code = ("import json,sys; from shardforge.clean import langid; "
                "print(json.dumps(langid.identify_many(json.load(sys.stdin))))")
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                             check=True, env={**__import__("os").environ, "SHARDFORGE_CACHE": str(tmp_path)})
        langid.model.cache_clear()
        langid.kernel.cache_clear()
        assert json.loads(out.stdout) == [list(x) for x in langid.identify_many(texts)]
        (folder / "ptc.npy").unlink()
        langid.model.cache_clear()
        again = langid.model()
        assert not isinstance(again.ptc, np.memmap) and np.array_equal(again.ptc, want.ptc)
    finally:
        langid.model.cache_clear()
        langid.kernel.cache_clear()
