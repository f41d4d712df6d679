"""The web-text quality rules (shardforge.clean.quality), without Spark: each rule fires on a document
built to fail it and only on that; a 0 turns a rule off; the vectorised n-gram kernels equal a
plain per-document reference (datatrove's loops, written out here); batch composition does
not change a document's result; and the clean stage's language filter."""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from shardforge.config import CleanSection, QualitySection
from shardforge.clean.quality import apply
from shardforge.clean.quality.ngrams import dup_ngram_chars, top_ngram_chars

PROSE = ("The old mill stands by the river, and the people of the town walk along it in the evening. "
         "They talk about the harvest and the weather, and they have done that for many years. ")


def _prose(n_sentences: int) -> str:
    """Varied, well-formed English sentences, one per line (seeded)."""
    rnd = random.Random(n_sentences)
    adj = ["old", "quiet", "busy", "small", "green", "famous", "narrow", "bright", "cold", "early"]
    nouns = ["river", "garden", "market", "village", "teacher", "doctor", "window", "letter", "winter",
             "summer", "bridge", "station", "harbour", "library", "painter", "farmer", "road", "school"]
    verbs = ["watches", "remembers", "describes", "visits", "paints", "follows", "carries", "answers",
             "crosses", "finds", "keeps", "opens"]
    tails = ["before the rain came", "with a smile", "in the morning", "after a long day", "near the coast",
             "for the first time", "without a word", "during the storm", "at the end of the week", "by chance"]
    lines = []
    for _ in range(n_sentences):
        lines.append(f"The {rnd.choice(adj)} {rnd.choice(nouns)} {rnd.choice(verbs)} a {rnd.choice(adj)} "
                     f"{rnd.choice(nouns)} {rnd.choice(tails)}, and then it {rnd.choice(verbs)} the "
                     f"{rnd.choice(nouns)} {rnd.choice(tails)}.")
    return "\n".join(lines)


def _one(text: str, **kw) -> str | None:
    reasons, _ = apply(pa.array([text]), QualitySection(**kw))
    return reasons[0]


GOOD = "\n".join([
    "The town sits on a bend of the river, where the water slows down before it reaches the sea.",
    "Most families here have kept small gardens for generations, and they trade vegetables every Saturday.",
    "In winter the bridge freezes, so children walk the long way round to reach their school.",
    "A retired doctor opened a library in the old station last year, with books donated by neighbours.",
    "Visitors often ask why the clock on the church tower is always ten minutes late.",
    "Nobody remembers exactly, but the baker says it has been wrong since the great storm of 1953.",
    "Fishermen still leave the harbour before dawn and return with their catch around noon.",
    "On summer evenings people gather near the fountain to talk about the weather and the news.",
])


@pytest.mark.parametrize("group", ["gopher_repetition", "gopher_quality", "c4", "fineweb"])
def test_good_prose_passes_every_group(group):
    assert _one(GOOD, filters=(group,)) is None


@pytest.mark.parametrize("text, group, rule", [
    ("word " * 10, "gopher_quality", "gopher_min_words"),
    (" ".join(["supercalifragilistic"] * 60) + " the and", "gopher_quality", "gopher_max_avg_word_length"),
    (GOOD + "\n" + "# tag " * 80, "gopher_quality", "gopher_max_symbol_word_ratio"),
    ("\n".join(["- " + s for s in GOOD.split("\n")]), "gopher_quality", "gopher_max_bullet_lines_ratio"),
    ("\n".join(s + " and so on..." for s in GOOD.split("\n")), "gopher_quality", "gopher_max_ellipsis_lines_ratio"),
    ("\n".join([GOOD.split("\n")[0]] * 10), "gopher_repetition", "gopher_max_dup_line_frac"),
    ("\n\n".join([GOOD.split("\n")[0]] * 10), "gopher_repetition", "gopher_max_dup_para_frac"),
    (GOOD + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit.", "c4", "c4_lorem_ipsum"),
    (GOOD + "\nIn code we write f() { return x; } to get the value.", "c4", "c4_curly_bracket"),
    ("Only one sentence here, it ends.", "c4", "c4_min_sentences"),
    ("\n".join(s.rstrip(".") for s in GOOD.split("\n")), "fineweb", "fineweb_min_line_punct_ratio"),
    ("\n".join(["Short line."] * 3 + ["Another short one."] * 3 + [GOOD.split("\n")[0]]), "fineweb",
     "fineweb_max_short_line_ratio"),
])
def test_each_rule_fires_on_its_document(text, group, rule):
    assert _one(text, filters=(group,)) == rule


def test_a_zero_turns_a_rule_off():
    short = "word " * 10
    assert _one(short, filters=("gopher_quality",)) == "gopher_min_words"
    # with the word count off, the same text meets the next rule that holds for it: "word" is
    # 4 letters (a mean inside 3..10), no '#', bullet or ellipsis, every word alphabetic, and
    # none of the default stop words ("the", "be", "to", ...): too few stop words
    assert _one(short, filters=("gopher_quality",), gopher_min_words=0) == "gopher_min_stop_words"
    # nine words with three stop words fail only the word count: with it off, nothing fails
    few = "The cat and the dog sat with the bird."
    assert _one(few, filters=("gopher_quality",)) == "gopher_min_words"
    assert _one(few, filters=("gopher_quality",), gopher_min_words=0) is None
    dup = "\n".join([GOOD.split("\n")[0]] * 10)
    assert _one(dup, filters=("gopher_repetition",), gopher_max_dup_line_frac=0) == "gopher_max_dup_line_char_frac"


def test_c4_removes_lines_and_keeps_the_rest():
    text = GOOD + "\nPlease enable JavaScript to view this page.\nno punctuation at the end\nTerms of use apply here."
    reasons, new = apply(pa.array([text]), QualitySection(filters=("c4",)))
    assert reasons == [None]
    assert new.to_pylist() == [GOOD]


def test_c4_counts_sentences_that_end_in_a_cjk_full_stop():
    # spaCy's sentencizer (datatrove's) ends a sentence at "。" as at "."; five of them are five sentences
    five = " ".join(f"第{i} 句 话 很 好。" for i in range(5))
    assert _one(five, filters=("c4",), c4_terminal_punct=False) is None
    assert _one(five.replace("。", ""), filters=("c4",), c4_terminal_punct=False) == "c4_min_sentences"


def test_groups_run_in_order_and_results_do_not_depend_on_the_batch():
    docs = [GOOD, "alpha beta gamma delta epsilon zeta eta theta iota kappa", "\n".join([GOOD.split("\n")[0]] * 10), _prose(3), _prose(30), ""]
    q = QualitySection(filters=("gopher_repetition", "gopher_quality", "c4", "fineweb"))
    together, texts = apply(pa.array(docs), q)
    alone = [apply(pa.array([d]), q)[0][0] for d in docs]
    assert together == alone
    # 10 distinct words: the 3-gram "alpha beta gamma" is 16 of 58 characters (> 0.18); 2-grams 10/58 (< 0.2)
    assert together[1] == "gopher_top_3gram" and together[2] == "gopher_max_dup_line_frac"
    assert together[5] == "gopher_empty"


# --- the n-gram kernels against datatrove's loops, written plainly ---------------------------

def _ref_top(words: list[str], n: int) -> int:
    grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0
    gram, count = Counter(grams).most_common(1)[0]       # ties: the first seen (insertion order)
    return len(gram) * count


def _ref_dup(words: list[str], n: int) -> int:
    seen, total, i = set(), 0, 0
    while i < len(words) - n + 1:
        gram = tuple(words[i:i + n])
        if gram in seen:
            total += sum(map(len, gram))
            i += n
        else:
            seen.add(gram)
            i += 1
    return total


def test_ngram_kernels_equal_the_reference_loops():
    rnd = random.Random(7)
    vocab = ["abc", "def", "ghi", "jkl", "mno"]          # equal lengths: no "".join collisions
    docs = [[rnd.choice(vocab[:rnd.randint(1, 5)]) for _ in range(rnd.randint(0, 60))] for _ in range(300)]
    flat = [w for d in docs for w in d]
    doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs]).astype(np.int64)
    ids = np.array([vocab.index(w) for w in flat], dtype=np.int64)
    lens = np.array([len(w) for w in flat], dtype=np.int64)
    for n in (2, 3, 4):
        got = top_ngram_chars(doc, ids, lens, n, len(docs))
        assert got.tolist() == [_ref_top(d, n) for d in docs], n
    for n in range(5, 11):
        got = dup_ngram_chars(doc, ids, lens, n, len(docs))
        assert got.tolist() == [_ref_dup(d, n) for d in docs], n


# --- the clean stage's language filter (Arrow batch kernel, no Spark) ----------------------

def test_language_columns_and_filter():
    from shardforge.clean.stage import REASON_COL as REASON, clean_batch, rules_from_config

    de = ("Der Fluss fliesst an der alten Muehle vorbei, und die Leute der Stadt gehen am Abend an ihm "
          "entlang und sprechen ueber das Wetter.")
    batch = pa.RecordBatch.from_pylist([{"id": "en", "text": PROSE, "kind": "document"},
                                        {"id": "de", "text": de, "kind": "document"},
                                        {"id": "img", "text": "a red bus in the city street at night", "kind": "image"}])
    cfg = replace(CleanSection(), languages=("en",), min_words=3)
    out = clean_batch(batch, rules_from_config(cfg), "NFC", cfg, QualitySection()).to_pylist()
    by = {r["id"]: r for r in out}
    assert by["en"]["language"] == "en" and by["en"]["language_score"] > 0.9 and by["en"][REASON] is None
    assert by["de"]["language"] == "de" and by["de"][REASON] == "filter:language"
    assert by["img"]["language"] is None and by["img"][REASON] is None      # captions are never filtered
    strict = replace(CleanSection(), min_language_score=1.01, min_words=3)
    out = clean_batch(batch, rules_from_config(strict), "NFC", strict, QualitySection()).to_pylist()
    assert [r[REASON] for r in out] == ["filter:language", "filter:language", None]
