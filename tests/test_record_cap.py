"""`ingest.max_record_bytes`: a record larger than the cap is one `invalid:record_too_large`
reject naming its file, the reader never holds it whole, and the job goes on.

Expected rows come from how the files are made here (the lines written, the sizes chosen),
not from the readers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardforge.ingest.readers.spark import jsonl_splits
from shardforge.ingest.readers.files import InputFile
from shardforge.ingest.readers.streams import jsonl_lines

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20


def _gzip_bomb(path: Path, line_bytes: int, before: list[str], after: list[str]) -> None:
    """A small .jsonl.gz whose middle line expands to `line_bytes` bytes, written in pieces
    (the bytes are never held here either)."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        out.write(comp.compress("".join(x + "\n" for x in before).encode()))
        piece = b'{"id": "bomb", "text": "' + b"a" * (MB - 26)
        written = 0
        while written + len(piece) < line_bytes:
            out.write(comp.compress(piece))
            written += len(piece)
            piece = b"a" * MB
        out.write(comp.compress(b"a" * (line_bytes - written - 3) + b'"}\n'))
        out.write(comp.compress("".join(x + "\n" for x in after).encode()))
        out.write(comp.flush())


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """bomb.jsonl.gz: two documents, one 300 MB line, one document (made once per module)."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.jsonl.gz"
    _gzip_bomb(path, 300 * MB, _docs("zb", 2), _docs("za", 1))
    return path


def _docs(prefix: str, n: int) -> list[str]:
    return [json.dumps({"id": f"{prefix}{i}", "text": f"document {prefix}{i} says something about river {i}."})
            for i in range(n)]


def test_a_compressed_bomb_is_one_reject_between_the_lines_around_it(bomb):
    before, after = _docs("zb", 2), _docs("za", 1)
    assert bomb.stat().st_size < 2 * MB
    tracemalloc.start()
    rows = list(jsonl_lines(str(bomb), "bomb.jsonl.gz", "jsonl.gz", max_bytes=MB))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r.get("_line") for r in rows] == before + [None] + after
    bad = rows[len(before)]
    assert bad["_reason"] == "invalid:record_too_large"
    assert bad["_detail"] == (f"bomb.jsonl.gz: line at byte {sum(len(x) + 1 for x in before)}: "
                              f"{300 * MB} bytes > ingest.max_record_bytes {MB}")
    assert peak < 8 * MB, f"the reader held {peak / MB:.0f} MB"


@pytest.mark.parametrize("size", [MB - 1, MB, MB + 1])
def test_the_cap_is_inclusive_and_counts_the_line_without_its_end(tmp_path, size):
    path = tmp_path / "edge.jsonl"
    line = "x" * size
    path.write_text(f"first\n{line}\r\nlast")        # \r\n: the \r counts as the line's own byte
    rows = list(jsonl_lines(str(path), "edge.jsonl", "jsonl", max_bytes=MB + 1))
    kept = [r.get("_line") for r in rows]
    if size + 1 <= MB + 1:
        assert kept == ["first", line, "last"]
    else:
        assert kept == ["first", None, "last"] and rows[1]["_detail"].endswith(f"{size + 1} bytes > "
                                                                                 f"ingest.max_record_bytes {MB + 1}")


@pytest.mark.parametrize("split", [1, 2, 3, 7, 16, 64, 1000])
def test_splits_read_every_line_once(tmp_path, split):
    """Plain JSONL read in byte ranges: every line exactly once, whatever the split size (the
    lines are those of `bytes.split`, an independent statement of the file's lines)."""
    lines = ["", "a", "bb", "ccc" * 5, "", "d" * 9, "é€", "last-without-newline"]
    data = "\n".join(lines).encode()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    got = []
    for p, source, fmt, start, end in jsonl_splits([InputFile(str(path), "s.jsonl", "jsonl")], split_bytes=split):
        got += [r["_line"] for r in jsonl_lines(p, source, fmt, 1000, start, end)]
    assert got == [x.decode() for x in data.split(b"\n")]


def test_ingest_goes_on_past_every_kind_of_oversized_record(spark, tmp_path, capsys, bomb):
    """A folder with good files and, each over a 1 MB cap: a gzip bomb (300 MB in one line),
    a plain JSONL line, a text file, and a Parquet row. Exit 0, every good row kept, one
    `invalid:record_too_large` reject per oversized record naming its file."""
    from shardforge.engine.cli import main

    folder = tmp_path / "in"
    folder.mkdir()
    good = _docs("g", 5)
    (folder / "good.jsonl").write_text("\n".join(good) + "\n")
    (folder / "bomb.jsonl.gz").symlink_to(bomb)
    big = json.dumps({"id": "wide", "text": "w" * (2 * MB)})
    (folder / "plain.jsonl").write_text("\n".join(_docs("p", 2) + [big] + _docs("q", 1)) + "\n")
    (folder / "small.txt").write_text("a small text file about the harbour")
    (folder / "large.txt").write_text("t" * (MB + 10))
    pq.write_table(pa.table({"id": ["r0", "r1", "r2"], "text": ["fine", "y" * (MB + 5), "also fine"]}),
                   folder / "rows.parquet")
    out = tmp_path / "out"
    assert main(["ingest", "--input", str(folder), "--output", str(out), "--set", "spark.shuffle_partitions=2",
                 "--set", f"ingest.max_record_bytes={MB}"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    n_good = 5 + 3 + 3 + 1 + 2
    assert line.startswith(f"ingest: {n_good + 4} rows in, {n_good} kept, 4 rejected"), line
    raw = Path(line.rsplit("output ", 1)[1])
    kept = spark.read.format("delta").load(str(raw)).collect()
    ids = sorted(r.id for r in kept if r.source != "small.txt")
    want = sorted([f"g{i}" for i in range(5)] + ["zb0", "zb1", "za0", "p0", "p1", "q0", "r0", "r2"])
    assert ids == want
    assert [r.text for r in kept if r.source == "small.txt"] == ["a small text file about the harbour"]
    rejects = spark.read.format("delta").load(str(out / "rejects")).collect()
    too_large = sorted((r.source, r.reason) for r in rejects)
    assert too_large == [("bomb.jsonl.gz", "invalid:record_too_large"), ("large.txt", "invalid:record_too_large"),
                         ("plain.jsonl", "invalid:record_too_large"), ("rows.parquet", "invalid:record_too_large")]
    assert all(r.detail.startswith(r.source) and f"ingest.max_record_bytes {MB}" in r.detail for r in rejects)


@pytest.mark.slow
def test_a_bomb_in_a_small_heap_does_not_stop_the_job(tmp_path, bomb):
    """The same bomb through `shardforge ingest` in its own JVM with a 600 MB heap: a reader
    that held the 300 MB line (or handed it to the JVM) would fail the run."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.jsonl").write_text("\n".join(_docs("g", 4)) + "\n")
    (folder / "bomb.jsonl.gz").symlink_to(bomb)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "ingest", "--input", str(folder),
                           "--output", str(tmp_path / "out"), "--master", "local[1]",
                           "--set", "spark.shuffle_partitions=1",
                           "--set", 'spark.properties={"spark.driver.memory" = "600m"}'],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ingest: 8 rows in, 7 kept, 1 rejected" in proc.stdout, proc.stdout
