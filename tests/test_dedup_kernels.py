"""The dedup kernels without Spark: hashing, MinHash estimates, bands x rows, normalisation."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from shardforge.dedup import minhash as mh
from shardforge.dedup.normalize import normalize


def test_hash_strings_is_stable_and_spreads():
    a = mh.hash_strings(pa.array(["alpha", "beta", "alpha", "", "é"]))
    assert a[0] == a[2] and len(set(a.tolist())) == 4
    # fixed values: the same text gives the same hash in every process and run
    assert mh.hash_strings(pa.array(["alpha"]))[0] == mh.hash_strings(pa.array(["x", "alpha"]).slice(1))[0]
    words = pa.array([f"w{i}" for i in range(20000)])
    assert len(np.unique(mh.hash_strings(words))) == 20000


def test_signature_estimate_is_unbiased_against_exact_jaccard():
    rng = random.Random(1)
    p = mh.MinHashParams(bands=14, rows=9)
    vocab = [f"v{i}" for i in range(3000)]
    a, b = [], []
    for _ in range(200):
        doc = [rng.choice(vocab) for _ in range(200)]
        rate = rng.choice([0.0, 0.01, 0.03, 0.06])
        a.append(" ".join(doc))
        b.append(" ".join(t if rng.random() > rate else rng.choice(vocab) for t in doc))
    sa, ha = mh.signatures(pa.array(a), p)
    sb, hb = mh.signatures(pa.array(b), p)
    assert ha.all() and hb.all()
    est = mh.estimated_jaccard(sa, sb)
    ex = mh.exact_jaccard(pa.array(a), pa.array(b), 5)
    assert abs(float(np.mean(est - ex))) < 0.01
    assert float(np.sqrt(np.mean((est - ex) ** 2))) < 0.05       # ~ sqrt(J(1-J)/128)


def test_short_documents_have_no_signature():
    p = mh.MinHashParams()
    sig, has = mh.signatures(pa.array(["one two three four", "a b c d e", "", None]), p)
    assert has.tolist() == [False, True, False, False]
    assert (sig[0] == np.iinfo(np.uint64).max).all()
    assert mh.token_counts(pa.array(["one two  three", None])).tolist() == [3, 0]


@pytest.mark.parametrize("block", [1, 7, 300, 1 << 16])
def test_signatures_equal_the_per_document_definition_for_any_block_size(monkeypatch, block):
    """The blocked permutation passes give, for every document, min over its shingles of
    a_p * s + b_p mod 2^64, computed here one document and one permutation at a time (with
    Python integers, not numpy); documents without shingles sit between others."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choice(words) for _ in range(rng.choice([0, 3, 5, 6, 40, 700]))) for _ in range(60)]
    params = mh.MinHashParams(num_perm=16, shingle_size=5, bands=4, rows=4, seed=9)
    monkeypatch.setattr(mh, "BLOCK_SHINGLES", block)
    sig, has = mh.signatures(pa.array(texts), params)
    sh, starts, counts = mh.shingle_hashes(pa.array(texts), 5)
    a, b = [int(x) for x in params.perm_a()], [int(x) for x in params.perm_b()]
    for i, t in enumerate(texts):
        assert has[i] == (len(t.split()) >= 5)
        mine = [int(x) for x in sh[starts[i]:starts[i] + counts[i]]]
        # a document's shingles do not depend on the documents beside it in the batch
        assert mine == [int(x) for x in mh.shingle_hashes(pa.array([t]), 5)[0]], i
        assert len(mine) == max(0, len(t.split()) - 4)
        expect = [min((ap * x + bp) % 2**64 for x in mine) if mine else 2**64 - 1 for ap, bp in zip(a, b)]
        assert [int(x) for x in sig[i]] == expect, i


def test_signature_bytes_round_trip_and_bands():
    p = mh.MinHashParams(bands=4, rows=2, num_perm=8)
    sig, _ = mh.signatures(pa.array(["a b c d e f g", "h i j k l m n"]), p)
    back = mh.signature_from_bytes(mh.signature_to_bytes(sig), 8)
    assert (back == sig).all()
    bands = mh.band_hashes(sig, p)
    assert bands.shape == (2, 4) and bands.dtype == np.int64
    same = mh.band_hashes(sig[[0, 0]], p)
    assert (same[0] == same[1]).all()


@pytest.mark.parametrize("threshold,num_perm", [(0.8, 128), (0.7, 128), (0.9, 256), (0.5, 64)])
def test_derived_bands_rows_fit_and_favour_recall(threshold, num_perm):
    b, r = mh.derive_bands_rows(threshold, num_perm)
    assert b * r <= num_perm
    # a pair a little above the threshold is a candidate with high probability
    assert mh.candidate_probability(min(1.0, threshold + 0.05), b, r) >= 0.9
    assert mh.candidate_probability(threshold - 0.3, b, r) < 0.2


def test_default_derivation_is_documented():
    assert mh.derive_bands_rows(0.8, 128) == (14, 9)
    assert 0.69 < mh.estimate_floor(0.8, 128) < 0.70


def test_params_refuse_bad_shapes():
    with pytest.raises(ValueError, match="does not fit"):
        mh.MinHashParams(num_perm=64, bands=10, rows=8)


@pytest.mark.parametrize("mode,text,expected", [
    ("none", " A  b ", " A  b "),
    ("whitespace", " A \t\n b ", "A b"),
    ("lower", " A \u00a0B ", "a b"),
    ("lower_alnum", "Héllo, WORLD!! 42_x", "héllo world 42 x"),
    ("lower_alnum", None, ""),
])
def test_normalize_modes(mode, text, expected):
    assert normalize(text, mode) == expected


def test_near_map_in_memory_on_a_graph_labelled_by_hand():
    """Seven documents, two bands, signatures of 4 rows. Bucket members and similarities are
    set by hand: p~q (band 0) and q~r (band 1) chain into one component although p and r share
    no bucket; s and t share a bucket but agree on 1 of 4 rows (below the floor); u is old (an
    earlier batch) and shares a bucket with v; w is alone. rank: smaller is better."""
    from shardforge.dedup.near import near_map_in_memory

    ids = ["p", "q", "r", "s", "t", "u", "v", "w"]
    node = np.array([50, 10, 30, 40, 20, 60, 70, 80], dtype=np.int64)
    old = np.array([False, False, False, False, False, True, False, False])
    rk = np.array([-300.0, -100.0, -500.0, -1.0, -2.0, -1.0, -900.0, -1.0])
    sig = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 2, 3, 9], [1, 1, 1, 1], [1, 2, 2, 2],
                    [5, 5, 5, 5], [5, 5, 5, 6], [8, 8, 8, 8]], dtype=np.uint64)
    bands = np.array([[100, 200], [100, 201], [101, 201], [102, 202], [102, 203],
                      [103, 204], [103, 205], [104, 206]], dtype=np.int64)
    e, r, est = near_map_in_memory(node, ids, old, rk, sig, bands, floor=0.7)
    got = dict(zip(e, zip(r, est.tolist())))
    # {p, q, r}: r has the best rank (-500) and stays; p agrees with r on 2 of 4 rows, q on 3
    # {u, v}: u is old, so it stays whatever v's rank; v agrees with u on 3 of 4 rows
    # s, t: 1 of 4 (< 0.7), no edge; w: no bucket mate
    assert got == {"p": ("r", 0.5), "q": ("r", 0.75), "v": ("u", 0.75)}
    assert e == sorted(e)
    # nothing to do: no buckets shared, or no documents
    assert near_map_in_memory(node[-1:], ids[-1:], old[-1:], rk[-1:], sig[-1:], bands[-1:], 0.7)[0] == []
    assert near_map_in_memory(node[:0], [], old[:0], rk[:0], sig[:0], bands[:0], 0.7)[0] == []


def test_near_map_in_memory_breaks_rank_ties_by_id_then_node():
    from shardforge.dedup.near import near_map_in_memory

    ids = ["b", "a", "c"]
    node = np.array([1, 2, 3], dtype=np.int64)
    sig = np.ones((3, 4), dtype=np.uint64)
    bands = np.array([[7], [7], [7]], dtype=np.int64)
    e, r, _ = near_map_in_memory(node, ids, np.zeros(3, bool), np.zeros(3), sig, bands, floor=0.5)
    assert (e, r) == (["b", "c"], ["a", "a"])          # equal ranks: the smallest id stays
    rk = np.array([0.0, float("nan"), 0.0])            # NaN ranks after every number, as in Spark
    e, r, _ = near_map_in_memory(node, ids, np.zeros(3, bool), rk, sig, bands, floor=0.5)
    assert (e, r) == (["a", "c"], ["b", "b"])
    ids = ["a", "b", "c"]                               # the NaN row first, then the rest
    rk = np.array([float("nan"), 0.0, 0.0])
    e, r, _ = near_map_in_memory(node, ids, np.zeros(3, bool), rk, sig, bands, floor=0.5)
    assert (e, r) == (["a", "c"], ["b", "b"])
