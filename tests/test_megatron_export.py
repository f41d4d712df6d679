"""`shardforge export-megatron`: the `.bin`/`.idx` pair read back with megatron-core's own
`IndexedDataset` holds every document's tokens (read independently with pyarrow from the
shard files) in the documented order and dtype, empty documents included; two exports and
an export of the build served over HTTP are byte-identical; the blend string parses, with
Megatron's own parser, to the normalised weights; bad input exits 2 with one line and
publishes nothing; a build from the real Spark tokenize + build-shards path exports too."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardforge.engine.cli import main
from shardforge.shards.writer import WriterSettings, write_build


@pytest.fixture(scope="module")
def megatron():
    """megatron-core's indexed-dataset module (only this module: megatron.core's top-level
    imports want apex or transformer_engine for the model parts, which this reader does not)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset, utils
    return indexed_dataset, utils


def _docs(rng, n: int, high: int, empty_every: int = 5) -> list[list[int]]:
    return [[] if i % empty_every == 2 else rng.integers(0, high, int(rng.integers(1, 40))).tolist()
            for i in range(n)]


def _table(docs: list[list[int]], value_type: pa.DataType, start: int) -> pa.Table:
    return pa.table({"id": pa.array([f"doc-{start + i:05d}" for i in range(len(docs))]),
                     "text": pa.array([f"text {start + i}" for i in range(len(docs))]),
                     "tokens": pa.array(docs, pa.list_(value_type)),
                     "num_tokens": pa.array([len(d) for d in docs], pa.int32())})


def _build(root, value_type: pa.DataType, high: int, sizes=(23, 0, 17, 9), seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    tables, start = [], 0
    for n in sizes:
        tables.append(_table(_docs(rng, n, high), value_type, start))
        start += n
    write_build(str(root), tables, settings=WriterSettings(row_group_rows=4))
    return str(root)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """4 shards (one empty), 4-row groups, uint16 ids (the tokenize stage's type), every fifth
    document empty."""
    return _build(tmp_path_factory.mktemp("meg") / "build", pa.uint16(), 65_536)


def expected_docs(build: str, column: str = "tokens") -> list[list[int]]:
    """Every row's token list, shard files in name order (part-00000, ...), rows in file
    order, read with pyarrow from the Parquet files on disk."""
    files = sorted(glob.glob(os.path.join(build, "*", "part-*.parquet")))
    assert len(files) == json.load(open(os.path.join(build, "manifest.json")))["num_shards"]
    return [d for f in files for d in pq.read_table(f, columns=[column]).column(0).to_pylist()]


def read_back(megatron, prefix: str):
    """(documents' tokens, dtype, document indices, number of documents) by megatron-core's reader."""
    ds = megatron[0].IndexedDataset(prefix)
    docs = [ds[i] for i in range(len(ds))]
    dtypes = {d.dtype for d in docs}
    assert len(dtypes) == 1
    return [d.tolist() for d in docs], dtypes.pop(), ds.document_indices.tolist(), ds.index.sequence_count


def sha(path: str) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def export(*argv: str) -> None:
    assert main(["export-megatron", *argv]) == 0


def test_megatron_reads_back_every_document_in_order(build, megatron, tmp_path):
    prefix = str(tmp_path / "corpus")
    export(build, prefix)
    want = expected_docs(build)
    got, dtype, doc_index, count = read_back(megatron, prefix)
    assert got == want and count == len(want) == 49
    assert dtype == np.uint16
    assert doc_index == list(range(len(want) + 1))          # one sequence per document
    assert sum(1 for d in want if not d) >= 9                  # empty documents: sequences of length 0
    side = json.load(open(prefix + ".json"))
    assert (side["rows"], side["tokens"], side["dtype"], side["empty_documents"]) == \
        (len(want), sum(map(len, want)), "uint16", sum(1 for d in want if not d))
    assert side["build_id"] == json.load(open(os.path.join(build, "manifest.json")))["build_id"]
    for ext in ("bin", "idx"):
        f = side["files"][ext]
        assert (f["sha256"], f["bytes"]) == (sha(f"{prefix}.{ext}"), os.path.getsize(f"{prefix}.{ext}"))
    assert [s["first_document"] for s in side["shards"]] == [0, 23, 23, 40]
    assert sorted(os.listdir(tmp_path)) == ["corpus.bin", "corpus.idx", "corpus.json"]


def test_wide_ids_are_int32_and_eos_is_appended(tmp_path, megatron):
    """int32 ids beyond uint16 stay int32; an int64 column with ids that fit goes to int32;
    --append-eos puts the id after every document, empty ones too, and an EOS beyond uint16
    makes a uint16 build int32."""
    for value_type, high in ((pa.int32(), 200_000), (pa.int64(), 100_000)):
        b = _build(tmp_path / f"b-{value_type}", value_type, high, sizes=(11, 6), seed=1)
        export(b, str(tmp_path / f"p-{value_type}"))
        got, dtype, _, _ = read_back(megatron, str(tmp_path / f"p-{value_type}"))
        assert got == expected_docs(b) and dtype == np.int32
    b16 = _build(tmp_path / "b16", pa.uint16(), 50_000, sizes=(8, 7), seed=2)
    for eos, want_dtype in ((50_000, np.uint16), (70_000, np.int32)):
        export(b16, str(tmp_path / f"eos{eos}"), "--append-eos", str(eos))
        got, dtype, _, _ = read_back(megatron, str(tmp_path / f"eos{eos}"))
        assert got == [d + [eos] for d in expected_docs(b16)] and dtype == want_dtype
        assert [] in expected_docs(b16)


def test_two_exports_and_one_over_http_are_byte_identical(build, tmp_path):
    """The second export runs in another process, in another time zone and umask; the third
    reads the build from a real HTTP server on 127.0.0.1: all three give the same sha256."""
    from fileserver import FileServer

    export(build, str(tmp_path / "a"))
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    subprocess.run(["sh", "-c", f'umask 077 && exec "{sys.executable}" -m shardforge.engine.cli export-megatron '
                    f'"{build}" "{tmp_path / "b"}"'], env=env, check=True, capture_output=True)
    with FileServer(os.path.dirname(build)) as srv:
        export(f"{srv.url}/{os.path.basename(build)}", str(tmp_path / "c"))
        assert srv.requests(".parquet")
    for ext in ("bin", "idx"):
        digests = [sha(str(tmp_path / f"{p}.{ext}")) for p in "abc"]
        assert digests[0] == digests[1] == digests[2], ext
        assert [json.load(open(tmp_path / f"{p}.json"))["files"][ext]["sha256"] for p in "abc"] == digests


def test_weights_print_the_blend_megatron_parses(build, megatron, tmp_path, capsys):
    other = _build(tmp_path / "other", pa.uint16(), 1000, sizes=(5,), seed=3)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    export(build, a, other, b, "--weights", "3", "1.5")
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("--data-path ")
    prefixes, weights = megatron[1].get_blend_from_list(line.split()[1:])
    assert prefixes == [a, b]
    assert weights == pytest.approx(megatron[1].normalize([3, 1.5]), rel=1e-15, abs=0)
    assert megatron[1].normalize(weights) == pytest.approx([2 / 3, 1 / 3], rel=1e-15, abs=0)
    for p in (a, b):
        assert json.load(open(p + ".json"))["data_path"] == line[len("--data-path "):]
    assert read_back(megatron, b)[0] == expected_docs(other)


def _run(argv, capsys):
    code = main(["export-megatron", *argv])
    return code, capsys.readouterr().err


def test_bad_input_exits_2_with_one_line_and_publishes_nothing(build, tmp_path, capsys):
    prefix = str(tmp_path / "x")

    def one_line(argv, text):
        code, err = _run(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and text in err, err
        assert err.startswith("shardforge export-megatron: error:")

    no_tokens = tmp_path / "no_tokens"
    write_build(str(no_tokens), [pa.table({"id": pa.array(["a"]), "text": pa.array(["t"])})])
    one_line([str(no_tokens), prefix], "no token column 'tokens' in the build")
    one_line([build, prefix, "--column", "text"], "column 'text' is string, not a list of integers (the build at")
    floats = tmp_path / "floats"
    write_build(str(floats), [pa.table({"id": pa.array(["a"]), "tokens": pa.array([[1.5]], pa.list_(pa.float32()))})])
    one_line([str(floats), prefix], "is list<element: float>, not a list of integers")
    negative = tmp_path / "negative"
    write_build(str(negative), [pa.table({"id": pa.array(["a", "b"]),
                                          "tokens": pa.array([[5, 6], [7, -3, 8]], pa.list_(pa.int32()))})])
    one_line([str(negative), prefix], "shard 0 rows 0..1: token ids -3..8; ids must be in 0..2147483647 (int32)")
    one_line([build, str(tmp_path / "missing" / "x")], "the folder of OUT_PREFIX")
    one_line([build, prefix, build], "has no OUT_PREFIX")
    one_line([build, prefix, "--weights", "1", "2"], "--weights gives 2 weights for 1 builds")
    one_line([build, prefix, "--weights", "0"], "--weights must be finite numbers > 0")

    # a null list in the last shard: the export fails after writing the first shards, and a
    # previous export under the prefix is left as it was (no temporary file either)
    export(build, prefix)
    before = {n: sha(str(tmp_path / n)) for n in ("x.bin", "x.idx", "x.json")}
    nulls = tmp_path / "nulls"
    write_build(str(nulls), [_table([[1, 2]] * 6, pa.uint16(), 0),
                             pa.table({"id": pa.array(["n0", "n1"]), "text": pa.array(["", ""]),
                                       "tokens": pa.array([[3], None], pa.list_(pa.uint16())),
                                       "num_tokens": pa.array([1, 0], pa.int32())})])
    one_line([str(nulls), prefix], "shard 1 row 1: the token list is null")
    assert {n: sha(str(tmp_path / n)) for n in before} == before
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_shard_that_differs_from_its_manifest_exits_3(build, tmp_path, capsys):
    import shutil

    broken = str(tmp_path / "broken")
    shutil.copytree(build, broken)
    victim = sorted(glob.glob(os.path.join(broken, "*", "part-*.parquet")))[2]
    with open(victim, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\x00\x01\x02")
    code, err = _run([broken, str(tmp_path / "x")], capsys)
    assert code == 3 and err.count("\n") == 1 and "checksum mismatch for shard 2" in err
    assert os.listdir(tmp_path) == ["broken"]


def test_a_build_from_spark_tokenize_and_build_shards(spark, megatron, tmp_path):
    """The real path: the tokenize stage (a BPE tokenizer.json, EOS 1) and build-shards on
    Spark, then the export: Megatron reads the tokenizers library's ids, uint16."""
    from tokenizers import Tokenizer

    from shardforge.config import ShardsSection, TokenizeSection
    from shardforge.shards.build import build_shards
    from shardforge.tokenize.stage import load_tokenizer, tokenize, train_bpe

    texts = [" ".join(f"word{(i * 7 + j) % 23} tok{j % 5}" for j in range(i % 17)) for i in range(60)]
    tok_path = train_bpe(texts, str(tmp_path / "tok.json"), vocab_size=300)
    df = spark.createDataFrame([(f"d{i:03d}", t) for i, t in enumerate(texts)], "id string, text string")
    out = str(tmp_path / "shards")
    build_shards(tokenize(df, TokenizeSection(eos_id=1), load_tokenizer(tok_path)), out,
                 ShardsSection(num_shards=3, row_group_rows=8), config={}, source={})
    prefix = str(tmp_path / "spark")
    export(out, prefix)
    got, dtype, doc_index, count = read_back(megatron, prefix)
    want = expected_docs(out)
    assert got == want and count == 60 and dtype == np.uint16 and doc_index == list(range(61))
    reference = Tokenizer.from_file(tok_path)
    ids = [i for f in sorted(glob.glob(os.path.join(out, "*", "part-*.parquet")))
           for i in pq.read_table(f, columns=["id"]).column(0).to_pylist()]
    by_id = {f"d{i:03d}": reference.encode(t, add_special_tokens=False).ids + [1] for i, t in enumerate(texts)}
    assert got == [by_id[i] for i in ids]
    assert [1] in got                                        # the empty text: EOS alone


def test_megatrons_gpt_dataset_packs_the_export_with_its_empty_documents(build, megatron, tmp_path):
    """Megatron-Core's GPTDataset (the sample index of helpers.build_sample_idx and its
    shuffles) over the export: every document is in its document index, and every sample is
    the L + 1 tokens at j * L of the documents concatenated in that index's order; the
    empty documents add nothing and break nothing."""
    from types import SimpleNamespace

    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    prefix = str(tmp_path / "corpus")
    export(build, prefix)
    docs = expected_docs(build)
    assert sum(1 for d in docs if not d) >= 9
    length = 16
    tokenizer = SimpleNamespace(vocab_size=65_536, eod=0, pad=0, unique_identifiers={"class": "test"})
    cfg = GPTDatasetConfig(random_seed=7, sequence_length=length, blend=([prefix], None), split="1,0,0",
                           tokenizer=tokenizer, reset_position_ids=False, reset_attention_mask=False,
                           eod_mask_loss=False, create_attention_mask=False, path_to_cache=str(tmp_path / "cache"))
    samples = (sum(map(len, docs)) - 1) // length
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [samples, None, None], lambda: True, cfg).build()
    assert sorted(set(train.document_index.tolist())) == list(range(len(docs)))
    stream = [t for d in train.document_index.tolist() for t in docs[d]]
    assert len(train) == samples
    got = [train[i]["tokens"].tolist() + train[i]["labels"].tolist()[-1:] for i in range(len(train))]
    want = [stream[j * length: j * length + length + 1] for j in train.shuffle_index.tolist()]
    assert got == want
