"""The embedded session's defaults carry a real-size run: the heap follows the machine, and a
tokenized pipeline over documents of ~6 KB with 1,000+ tokens each finishes with no memory
setting passed (Spark's own 1 GiB heap did not: the curate stage ran out of it reading the
tokenize stage's output)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shardforge.engine.session import DEFAULTS, _local_conf, driver_memory, local_cores

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30


@pytest.mark.parametrize("total, expected", [
    (24 * GIB, "6144m"),        # a quarter
    (2 * GIB, "1024m"),         # at least 1 GiB
    (512 * GIB, "32768m"),      # at most 32 GiB
    (6 * GIB + 123, "1536m"),   # whole MiB, rounded down
])
def test_the_heap_is_a_quarter_of_the_machine_between_1_and_32_gib(total, expected):
    assert driver_memory(total) == expected


def test_only_an_embedded_local_session_sizes_its_heap():
    assert _local_conf("local[2]")["spark.driver.memory"] == driver_memory()
    assert "spark.driver.memory" not in _local_conf("spark://127.0.0.1:7077")
    assert DEFAULTS["spark.sql.execution.arrow.maxBytesPerBatch"] == str(64 << 20)


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[2]", 2), ("local[3,4]", 3),
                                           ("local[*]", os.cpu_count()), ("local[*, 2]", os.cpu_count())])
def test_a_local_session_sizes_delta_log_replay_and_file_splits_from_its_cores(master, cores):
    assert local_cores(master) == cores
    conf = _local_conf(master)
    assert conf["spark.databricks.delta.snapshotPartitions"] == str(cores)
    assert conf["spark.sql.files.minPartitionNum"] == str(3 * cores)
    assert "spark.databricks.delta.snapshotPartitions" not in _local_conf("yarn")


def _documents(n: int, seed: int = 5) -> list[dict]:
    """n documents of 5-7 KB: sentences of words drawn from a fixed vocabulary."""
    rng = random.Random(seed)
    vocab = [w for w in ("river harbour town market bridge winter summer north south merchant ship "
                         "grain salt wool council charter mill road stone church school bell field "
                         "forest lake valley hill castle tower gate wall street square fair").split()]
    out = []
    for i in range(n):
        words, size = [], rng.randint(5000, 7000)
        while sum(len(w) + 1 for w in words) < size:
            words += [rng.choice(vocab) for _ in range(rng.randint(6, 14))]
            words[-1] += f" {rng.randint(1000, 99999)}."
        out.append({"id": f"d{i:05d}", "text": " ".join(words)})
    return out


def test_the_embedded_jvm_compiles_with_its_first_tier_only_for_local_input_up_to_2_gib(tmp_path, monkeypatch):
    from shardforge.config import ConfigError, SparkSection, load_config
    from shardforge.engine.session import QUICK_JIT, driver_java_options, input_size, jit_options

    quick = "-XX:TieredStopAtLevel=1"
    assert QUICK_JIT == quick
    auto = SparkSection()
    assert auto.jit == "auto"
    assert jit_options(auto, 0) == jit_options(auto, 2 * GIB) == quick
    assert jit_options(auto, 2 * GIB + 1) == "" and jit_options(auto, None) == ""   # large, or not known
    assert jit_options(SparkSection(jit="quick"), None) == quick
    assert jit_options(SparkSection(jit="full"), 1) == ""
    with pytest.raises(ConfigError, match="spark.jit"):
        load_config(None, ['spark.jit="fast"'])

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.jsonl").write_bytes(b"1" * 1000)
    (tmp_path / "a" / "y.jsonl").write_bytes(b"2" * 234)
    (tmp_path / "z.txt").write_bytes(b"3" * 5)
    assert input_size([tmp_path / "a", tmp_path / "z.txt"]) == 1239
    assert input_size([f"file://{tmp_path}/z.txt"]) == 5
    assert input_size([tmp_path / "a", "s3a://bucket/web"]) is None      # an object store: not known
    assert input_size([tmp_path / "missing"]) is None
    assert input_size([f"file://{tmp_path}/missing"]) is None
    (tmp_path / "b" / "c").mkdir(parents=True)
    (tmp_path / "b" / "c" / "w.jsonl").write_bytes(b"4" * 100)
    assert input_size([tmp_path / "a", tmp_path / "b"]) == 1334
    assert 1000 < input_size([tmp_path / "a", tmp_path / "b"], limit=1000) < 1334   # stops past the limit

    monkeypatch.setenv("SHARDFORGE_CDS", "0")                            # the archive's option aside
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    assert driver_java_options({}, auto, 1000) == quick
    assert driver_java_options({}, auto, None) is None
    assert driver_java_options({"spark.driver.extraJavaOptions": "-Dx=1"}, auto, 1000) is None   # the user's win
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:-TieredCompilation")
    assert driver_java_options({}, auto, 1000) is None


@pytest.mark.slow
def test_a_run_on_small_local_input_starts_its_jvm_with_the_first_tier_only(tmp_path):
    """The JVM a run starts says so itself: its input arguments (RuntimeMXBean)."""
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "a document of a few words"}) + "\n")
    code = ("import sys\n"
            "from shardforge.engine.session import get_spark, input_size\n"
            "from shardforge.config import SparkSection\n"
            "s = get_spark(SparkSection(master='local[1]', jit=sys.argv[2], properties={'spark.ui.enabled': 'false'}),"
            " input_bytes=input_size([sys.argv[1]]))\n"
            "args = s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()\n"
            "print('JIT', [str(a) for a in args if 'Tiered' in str(a)])\n")
    # without the tests' own JVM options (tests/submit.py: the first tier only, for every test JVM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS",
                                                            "SPARK_SUBMIT_OPTS")}
    for jit, expected in (("auto", "['-XX:TieredStopAtLevel=1']"), ("full", "[]")):
        proc = subprocess.run([sys.executable, "-c", code, str(src), jit], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"JIT {expected}" in proc.stdout, (jit, proc.stdout[-2000:])


@pytest.mark.slow
def test_a_tokenized_pipeline_of_real_size_rows_runs_with_the_default_session(tmp_path):
    from shardforge.tokenize.stage import train_bpe

    docs = _documents(3000)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    tok = train_bpe([d["text"] for d in docs[:200]], str(tmp_path / "tok.json"), vocab_size=400)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS")}
    proc = subprocess.run(
        [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--input", str(src), "--output",
         str(tmp_path / "out"), "--set", 'pipeline.stages=["ingest","tokenize","curate","build-shards"]',
         "--set", f"tokenize.tokenizer={json.dumps(tok)}", "--set", "shards.num_shards=4"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    manifest = json.loads((tmp_path / "out" / "shards" / "manifest.json").read_text())
    assert manifest["total_rows"] == len(docs)
    shards = tmp_path / "out" / "shards"
    ids, tokens = [], []
    for s in manifest["shards"]:
        t = pq.read_table(shards / s["file"], columns=["id", "num_tokens"])
        ids += t.column("id").to_pylist()
        tokens += t.column("num_tokens").to_pylist()
    assert sorted(ids) == [d["id"] for d in docs]
    assert min(tokens) >= 1000, min(tokens)


def test_the_fineweb_recipe_loads_with_fineweb_settings():
    """conf/recipes/fineweb.toml as docs/web.md describes it (values from the FineWeb paper's
    datatrove pipeline: 14 x 8 MinHash bands on 5-grams, English at 0.65, e-mail and IP PII)."""
    from shardforge.config import load_config

    cfg = load_config(ROOT / "conf" / "recipes" / "fineweb.toml")
    assert cfg.pipeline.stages == ("ingest", "clean", "redact", "dedup", "tokenize", "curate", "build-shards")
    assert cfg.quality.filters == ("gopher_repetition", "gopher_quality", "c4", "fineweb")
    assert (cfg.clean.languages, cfg.clean.min_language_score) == (("en",), 0.65)
    assert cfg.quality.c4_terminal_punct is False
    assert (cfg.dedup.shingle_size, cfg.dedup.bands, cfg.dedup.rows, cfg.dedup.num_perm) == (5, 14, 8, 112)
    assert (cfg.dedup.exact, cfg.dedup.near) == (False, True)
    assert cfg.redact.kinds == ("EMAIL", "IP_ADDRESS")
    assert cfg.pipeline.write_raw is False          # the input files are the raw copy (docs/web.md)
    assert cfg.rejects.record == "none"             # for the same reason (docs/web.md)


def test_the_class_data_archive_is_used_only_when_it_exists_and_nothing_else_is_set(tmp_path, monkeypatch):
    from shardforge.engine import cds
    from shardforge.engine.session import spark_conf
    from shardforge.config import SparkSection

    monkeypatch.setenv("SHARDFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)       # the tests' own archive option (conftest)
    conf = spark_conf(SparkSection())
    stem = cds.archive_path(cds._jars(conf))
    assert stem is not None and stem.parent == tmp_path / "cds"
    assert cds.java_options(conf) is None                         # no archive yet
    stem.parent.mkdir(parents=True)
    cut = stem.with_name(stem.name + ".2000.jsa")
    cut.write_bytes(b"x" * 1000)                                  # shorter than its name says
    assert cds.java_options(conf) is None
    path = stem.with_name(stem.name + ".1000.jsa")
    path.write_bytes(b"x" * 1000)
    assert cds.java_options(conf) == f"-XX:SharedArchiveFile={path} {cds.QUIET}"
    assert cds.java_options({**conf, "spark.driver.extraJavaOptions": "-Dx=1"}) is None
    monkeypatch.setenv("SHARDFORGE_CDS", "0")
    assert cds.java_options(conf) is None
    monkeypatch.delenv("SHARDFORGE_CDS")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")
    assert cds.java_options(conf) is None                         # one archive per JVM: the one set wins
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    other = {**conf, "spark.jars": conf.get("spark.jars", "") + f",{path}"}   # another class path: another key
    assert cds.archive_path(cds._jars(other)) != stem


def test_one_archive_serves_every_route_to_the_same_spark(tmp_path, monkeypatch):
    """pyspark runs the JVM from its folder with symlinks resolved, so the archive's key is
    taken from that path too: a venv reached through a symlink finds the archive built
    through its real path (the two had different keys, and one route started without it)."""
    import pyspark

    from shardforge.engine import cds

    monkeypatch.delenv("SPARK_HOME", raising=False)
    real = cds.archive_path([])
    link = tmp_path / "venv-link"
    link.symlink_to(Path(pyspark.__file__).resolve().parent, target_is_directory=True)
    monkeypatch.setattr(pyspark, "__file__", str(link / "__init__.py"))
    assert cds.spark_home() == Path(pyspark.__file__).resolve().parent != link
    assert cds.archive_path([]) == real


@pytest.mark.slow
def test_a_session_maps_the_archive_that_setup_builds():
    """-Xshare:on makes the JVM refuse to start unless it maps the archive: the session starts
    and runs a Delta write with it."""
    from shardforge.engine.session import build_class_archive

    path = build_class_archive()
    assert path is not None and path.is_file()
    code = ("import sys, tempfile\n"
            "from shardforge.config import SparkSection\n"
            "from shardforge.engine.session import get_spark\n"
            "from shardforge.engine.cds import java_options, _jars\n"
            "from shardforge.engine.session import spark_conf\n"
            "opts = java_options(spark_conf(SparkSection()))\n"
            "assert opts and 'SharedArchiveFile' in opts, opts\n"
            "s = get_spark(SparkSection(master='local[1]', properties={'spark.ui.enabled': 'false',"
            " 'spark.driver.extraJavaOptions': opts + ' -Xshare:on'}))\n"
            "s.range(10).write.format('delta').save(tempfile.mkdtemp() + '/t')\n"
            "print('rows', s.range(10).count())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0 and "rows 10" in proc.stdout, proc.stderr[-3000:]


def test_the_warm_up_job_runs_one_python_task_per_core_and_can_be_turned_off(spark, monkeypatch):
    from shardforge.engine.session import WARM_UP_GROUP, warm_up

    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(WARM_UP_GROUP))      # the shared session may have had others
    monkeypatch.setenv("SHARDFORGE_WARM_UP", "0")
    assert warm_up(spark, 2) is None
    monkeypatch.delenv("SHARDFORGE_WARM_UP")
    thread = warm_up(spark, 2)
    thread.join()
    jobs = [tracker.getJobInfo(j) for j in set(tracker.getJobIdsForGroup(WARM_UP_GROUP)) - before]
    # a failure would only be logged (it never fails a run): the job must have succeeded here
    assert jobs and all(j.status == "SUCCEEDED" for j in jobs)
    stages = [tracker.getStageInfo(s) for j in jobs for s in j.stageIds]
    assert sum(s.numTasks for s in stages if s is not None) == 2



def test_side_by_side_calls_see_the_session_as_their_threads_active_one(spark):
    """Delta's helpers (`is_delta` on an s3a:// path) look the session up per thread."""
    from pyspark.sql import SparkSession

    from shardforge.engine.runner import side_by_side

    seen = []
    side_by_side(spark, [lambda: seen.append(SparkSession.getActiveSession()) for _ in range(3)])
    assert len(seen) == 3 and all(s is not None and s._jsparkSession.equals(spark._jsparkSession) for s in seen)
