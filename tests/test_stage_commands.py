"""The success path of every stage subcommand, chained as a scheduler would run them:
`ingest`, `clean`, `redact`, `dedup`, `build-shards`, then `inspect` and `verify` on the
build. Expected counts and the texts each stage keeps come from how the input below is made,
not from the stages."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shardforge.engine.cli import main

N_GOOD = 24          # distinct documents, one e-mail address in every third
N_SHORT = 3          # shorter than clean.min_chars=40
N_EXACT = 4          # exact copies of good documents (another id)
N_BAD = 2            # malformed JSONL lines


def _good(i: int, email: str | None = None) -> str:
    """Good document i; its e-mail address (every third) is `email` when given (a redacted
    text has the default placeholder there)."""
    extra = f" Write to {email or f'person{i}@example.org'} for details." if i % 3 == 0 else ""
    return f"Document {i} talks about river {i * 7} and the harbour of town number {i * 13}, built in year {1800 + i}.{extra}"


def _corpus(path: Path) -> None:
    lines = [json.dumps({"id": f"g{i}", "text": _good(i)}) for i in range(N_GOOD)]
    lines += [json.dumps({"id": f"s{i}", "text": f"tiny {i}"}) for i in range(N_SHORT)]
    lines += [json.dumps({"id": f"x{i}", "text": _good(i)}) for i in range(N_EXACT)]
    lines += ['{"id": "bad1", "text": ', "not json at all"]
    path.write_text("\n".join(lines) + "\n")


# the texts each stage keeps, by id, from how the corpus is made
INGESTED = {**{f"g{i}": _good(i) for i in range(N_GOOD)}, **{f"s{i}": f"tiny {i}" for i in range(N_SHORT)},
            **{f"x{i}": _good(i) for i in range(N_EXACT)}}
CLEANED = {k: v for k, v in INGESTED.items() if not k.startswith("s")}
REDACTED = {k: _good(int(k[1:]), "<EMAIL>") for k in CLEANED}


def _texts(spark, path: Path) -> dict[str, str]:
    rows = spark.read.format("delta").load(str(path)).select("id", "text").collect()
    assert len({r.id for r in rows}) == len(rows)
    return {r.id: r.text for r in rows}


def _count(spark, path: Path) -> int:
    return spark.read.format("delta").load(str(path)).count()


@pytest.mark.slow
def test_each_stage_command_runs_and_hands_its_table_to_the_next(spark, tmp_path, capsys):
    src = tmp_path / "corpus.jsonl"
    _corpus(src)
    out = tmp_path / "out"
    common = ["--output", str(out), "--set", "spark.shuffle_partitions=2", "--set", "clean.min_chars=40",
              "--set", "dedup.near=false"]

    assert main(["ingest", "--input", str(src), *common]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"ingest: {N_GOOD + N_SHORT + N_EXACT + N_BAD} rows in, "
                           f"{N_GOOD + N_SHORT + N_EXACT} kept, {N_BAD} rejected"), line
    raw = Path(line.rsplit("output ", 1)[1])
    assert _count(spark, raw) == N_GOOD + N_SHORT + N_EXACT
    assert _texts(spark, raw) == INGESTED

    assert main(["clean", "--input", str(raw), *common]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"clean: {N_GOOD + N_SHORT + N_EXACT} rows in, {N_GOOD + N_EXACT} kept, "
                           f"{N_SHORT} rejected"), line
    cleaned = Path(line.rsplit("output ", 1)[1])
    assert _count(spark, cleaned) == N_GOOD + N_EXACT
    assert _texts(spark, cleaned) == CLEANED

    assert main(["redact", "--input", str(cleaned), *common]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"redact: {N_GOOD + N_EXACT} rows in, {N_GOOD + N_EXACT} kept, 0 rejected"), line
    redacted = Path(line.rsplit("output ", 1)[1])
    texts = _texts(spark, redacted)
    assert texts == REDACTED
    assert not [t for t in texts.values() if "@example.org" in t]
    assert sum("<EMAIL>" in t for t in texts.values()) == len(range(0, N_GOOD, 3)) + len(range(0, N_EXACT, 3))

    assert main(["dedup", "--input", str(redacted), *common]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"dedup: {N_GOOD + N_EXACT} rows in, {N_GOOD} kept, {N_EXACT} rejected"), line
    deduped = Path(line.rsplit("output ", 1)[1])
    kept = _texts(spark, deduped)
    # of each exact pair the kept one is one of the two; every good text survives once
    assert len(kept) == N_GOOD
    assert sorted(kept.values()) == sorted(_good(i, "<EMAIL>") for i in range(N_GOOD))
    assert {k: REDACTED.get(k) for k in kept} == kept          # each kept id with its own redacted text

    shards = tmp_path / "shards"
    assert main(["build-shards", "--input", str(deduped), "--output", str(shards),
                 "--set", "shards.num_shards=3", "--set", "spark.shuffle_partitions=2"]) == 0
    capsys.readouterr()
    manifest = json.loads((shards / "manifest.json").read_text())
    assert manifest["total_rows"] == N_GOOD and manifest["num_shards"] == 3
    rows = sum(pq.ParquetFile(shards / s["file"]).metadata.num_rows for s in manifest["shards"])
    assert rows == N_GOOD
    shard_texts = [t for s in manifest["shards"]
                   for t in pq.read_table(shards / s["file"], columns=["text"])["text"].to_pylist()]
    assert sorted(shard_texts) == sorted(_good(i, "<EMAIL>") for i in range(N_GOOD))

    assert main(["inspect", str(shards), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["total_rows"] == N_GOOD and summary["build_id"] == manifest["build_id"]
    assert main(["verify", str(shards)]) == 0
    assert capsys.readouterr().out.startswith(f"verify: OK, 3 shards, {N_GOOD} rows")
