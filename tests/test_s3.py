"""The pipeline against an S3 API emulator: moto's server (`moto[server]`, a local
implementation of the S3 REST API, not AWS itself) on 127.0.0.1, the session's `s3_server`,
reached through Hadoop's S3A connector (hadoop-aws and its AWS SDK bundle from Maven Central)
and s3fs. What AWS does and moto may not (its consistency and throttling, multipart limits,
IAM, real network faults) is not covered here.

Checked: the curated Delta table, the rejects table, the report and the shard build land in
`s3a://`; the shards' sha256 equal a local[2] run's; no shard was renamed or copied on the
way (the server's own request log); `shardforge verify` and `inspect` work on `s3a://` and
`s3://`; the loader reads `s3://` through s3fs in the same order as the local build; a build
killed before its manifest PUT leaves the previous build readable, and the next build removes
the dead one's files; unreachable endpoints and missing credentials are one-line errors.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3server import BUCKET, KEYS, restore_env, s3fs_client, set_env
from submit import ROOT, clean_env, conf_args, local_shards, run, shard_sums

pytestmark = pytest.mark.slow

SAMPLE = ROOT / "data" / "sample" / "docs.jsonl"
HERE = Path(__file__).resolve().parent


def _jars() -> list[str]:
    from minihadoop import hadoop_jars
    from shardforge.engine.session import find_jars

    aws = sorted(str(p) for p in (hadoop_jars() / "aws").glob("*.jar"))
    assert aws, "hadoop-aws not found: run `make jars`"
    return [*find_jars(".jars"), *aws]


@pytest.fixture(scope="module")
def s3(s3_server, tmp_path_factory):
    """The server's variables in this process too (the loader and s3fs read them), restored after."""
    old = set_env(s3_server.env)
    yield s3_server
    restore_env(old)


def _s3_toml(server, path: Path, extra: dict[str, str] | None = None) -> Path:
    """conf/demo.toml with the s3a settings as [spark] properties (what `shardforge` itself runs with)."""
    props = {"spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.jars": ",".join(_jars()),
             "spark.databricks.delta.snapshotPartitions": "2", **_conf_file(), **server.spark_conf(), **(extra or {})}
    body = ", ".join(f'"{k}" = "{v}"' for k, v in props.items())
    text = (ROOT / "conf" / "demo.toml").read_text()
    text = text.replace('properties = { "spark.ui.enabled" = "false", "spark.driver.memory" = "2g" }',
                        f"properties = {{ {body} }}")
    assert body in text
    path.write_text(text)
    return path


def _conf_file() -> dict[str, str]:
    """conf/spark-s3.conf as a dict."""
    out = {}
    for line in (ROOT / "conf" / "spark-s3.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split(None, 1)
            out[key] = value.strip()
    return out


@pytest.fixture(scope="module")
def pipeline_run(s3, tmp_path_factory):
    """spark-submit --master local[2] of the packaged pipeline with conf/spark-s3.conf, writing
    everything to s3a://BUCKET/run; the server records every request meanwhile."""
    from shardforge.deploy import packaging
    from shardforge.deploy.cluster import spark_submit

    work = tmp_path_factory.mktemp("s3run")
    dist = packaging.build(work / "dist", jars=True, root=ROOT)
    _recorder(s3, "start-recording")
    conf = {**s3.spark_conf(), "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
            "spark.driver.memory": "1g", "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
            "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
            "spark.databricks.delta.snapshotPartitions": "2"}
    cmd = [spark_submit(), "--master", "local[2]", "--properties-file", str(ROOT / "conf" / "spark-s3.conf"),
           "--jars", ",".join(_jars()), "--py-files", ",".join(packaging.py_files(dist["zip"].parent)),
           *conf_args(conf), str(dist["main"]), "pipeline", "--conf", str(ROOT / "conf" / "demo.toml"),
           "--input", str(SAMPLE), "--output", f"s3a://{BUCKET}/run"]
    run(cmd, work / "pipeline.log", cwd=work, env=clean_env(s3.env))
    _recorder(s3, "stop-recording")
    return f"{BUCKET}/run", _recorder(s3, "download-recording")


def _recorder(server, action: str) -> str:
    import urllib.request

    method = "GET" if action == "download-recording" else "POST"
    req = urllib.request.Request(f"{server.endpoint}/moto-api/recorder/{action}", method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode(errors="replace")


def test_pipeline_writes_curated_rejects_report_and_shards_to_s3a(pipeline_run, s3, reference_run):
    """Against moto's S3 emulator: the outputs land in s3a://, and its request log shows no copy."""
    root, recording = pipeline_run
    fs = s3fs_client(s3)
    manifest = json.loads(fs.cat_file(f"{root}/shards/manifest.json"))
    _, expected = local_shards(reference_run / "shards")
    assert shard_sums(manifest, lambda f: fs.cat_file(f"{root}/shards/{f}")) == expected
    assert manifest["source"]["table"] == f"s3a://{root}/curated"
    # the Delta tables: their logs name data files that exist, holding the local run's row counts
    for table, reference in (("curated", reference_run / "curated"), ("rejects", reference_run / "rejects")):
        assert _delta_rows(lambda p: fs.cat_file(f"{root}/{table}/{p}"), fs.ls(f"{root}/{table}/_delta_log")) == \
               _delta_rows(lambda p: (reference / p).read_bytes(), [str(p) for p in (reference / "_delta_log").iterdir()])
    report = json.loads(fs.cat_file(f"{root}/report.json"))
    local_report = json.loads((reference_run / "report.json").read_text())
    assert [(s["name"], s["kept"], s["rejected"]) for s in report["stages"]] == \
           [(s["name"], s["kept"], s["rejected"]) for s in local_report["stages"]]
    assert not fs.exists(f"{root}/_lock.json") and not fs.exists(f"{root}/_run")
    # every shard was written once under its final name: no copy ("rename") and no temp name
    shard_requests = _shard_requests(recording)
    puts = [r for r in shard_requests if r["method"] in ("PUT", "POST")]
    assert puts and not [r for r in puts if "x-amz-copy-source" in r["headers"]]
    assert not [r for r in shard_requests if "_staging-" in r["url"] or ".tmp" in r["url"]]


def _shard_requests(recording: str) -> list[dict]:
    """The recorded requests under /shards/, each with its headers (names lower-cased). The
    headers are required, not defaulted: a recorder that stopped recording them would make
    the no-copy check above pass on nothing. Every request S3A sends is signed and names its
    host, so each record must hold Authorization and Host headers."""
    out = []
    for record in _records(recording):
        if "/shards/" not in record["url"]:
            continue
        assert isinstance(record.get("headers"), dict), f"a request recorded without its headers: {record['url']}"
        headers = {k.lower(): v for k, v in record["headers"].items()}
        assert {"authorization", "host"} <= set(headers), (record["method"], record["url"], sorted(headers))
        out.append({**record, "headers": headers})
    return out


def _records(recording: str) -> list[dict]:
    """The JSON objects of moto's request recording, in order. The recorder writes an object,
    then a newline, from each of the server's threads, so two requests recorded at once can
    come out as `{...}{...}` on one line and an empty line: objects are read one after the
    other, whatever whitespace is between them."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    space = re.compile(r"\s*")
    while True:
        pos = space.match(recording, pos).end()
        if pos == len(recording):
            return out
        record, pos = decoder.raw_decode(recording, pos)
        out.append(record)


def _delta_rows(read, log_files) -> int:
    """Rows in a Delta table by its log alone: numRecords of the added files not removed, each
    file checked to exist (read)."""
    added, removed = {}, set()
    for name in sorted(str(f) for f in log_files if str(f).endswith(".json")):
        for line in read(f"_delta_log/{Path(name).name}").decode().splitlines():
            action = json.loads(line)
            if "add" in action:
                added[action["add"]["path"]] = json.loads(action["add"]["stats"])["numRecords"]
            elif "remove" in action:
                removed.add(action["remove"]["path"])
    live = {p: n for p, n in added.items() if p not in removed}
    for p in live:
        assert read(p)[:4] == b"PAR1"
    return sum(live.values())


def _cli(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shardforge.engine.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_verify_and_inspect_read_s3a_and_s3(pipeline_run, s3):
    """verify and inspect on the build in moto's S3 emulator, by s3a:// and s3://."""
    root, _ = pipeline_run
    env = clean_env(s3.env)
    for scheme in ("s3a", "s3"):
        ok = _cli(["verify", f"{scheme}://{root}/shards"], env)
        assert ok.returncode == 0 and "verify: OK, 4 shards" in ok.stdout, ok.stderr
        info = _cli(["inspect", f"{scheme}://{root}/shards", "--json"], env)
        assert info.returncode == 0, info.stderr
        assert json.loads(info.stdout)["path"] == f"{scheme}://{root}/shards"


def test_loader_reads_s3_in_the_order_of_the_local_build(pipeline_run, s3, reference_run):
    """The loader reads the build from moto's S3 emulator through s3fs."""
    from shardforge.loaders import ShardedDataset

    remote = ShardedDataset(f"s3://{pipeline_run[0]}/shards", rank=0, world_size=1, seed=11, verify=True)
    local = ShardedDataset(str(reference_run / "shards"), rank=0, world_size=1, seed=11)
    got = [r["id"] for r in remote]
    assert got == [r["id"] for r in local] and len(got) == remote.total > 0


def test_killed_before_the_manifest_put_readers_keep_the_previous_build(s3, tmp_path):
    """build-shards into s3a:// (moto's S3 emulator) is frozen at its manifest PUT (tests/crash_run.py) and SIGKILLed:
    its shards are all in b-<id>/, but no manifest names them. Readers, one opened before and
    one after, see the previous build. The next build removes the dead build's files."""
    from loader_helpers import make_build

    from shardforge.loaders import ShardedDataset
    from shardforge.shards.manifest import read_manifest

    url = f"s3://{BUCKET}/crash/shards"
    fs = s3fs_client(s3)
    previous = make_build(url, [40, 0, 25])
    reader = ShardedDataset(url, rank=0, world_size=1, shuffle=False)
    conf = _s3_toml(s3, tmp_path / "s3.toml")
    args = ["build-shards", "--conf", str(conf), "--input", str(SAMPLE), "--output", f"s3a://{BUCKET}/crash/shards"]
    flag = tmp_path / "frozen"
    env = {**clean_env(s3.env), "PYSPARK_PYTHON": sys.executable}
    with open(tmp_path / "crash.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(HERE / "crash_run.py"), "before-manifest", str(flag), "--", *args],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 900
            while not flag.exists():
                assert proc.poll() is None, (tmp_path / "crash.log").read_text()[-3000:]
                # a hang guard (15 min), not a speed check
                assert time.monotonic() < deadline, "the build never reached its manifest PUT"
                time.sleep(0.2)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
    folders = sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{BUCKET}/crash/shards", refresh=True)
                     if p.rsplit("/", 1)[1].startswith("b-"))
    (dead,) = [b for b in folders if b != previous.build_id]
    assert len(fs.ls(f"{BUCKET}/crash/shards/{dead}", refresh=True)) == 4       # its shards, whole
    assert read_manifest(url).build_id == previous.build_id
    expected = sorted(s * 100_000 + i for s, n in enumerate([40, 0, 25]) for i in range(n))
    assert sorted(int(r["id"]) for r in reader) == expected
    assert sorted(int(r["id"]) for r in ShardedDataset(url, rank=0, world_size=1, shuffle=False)) == expected

    nxt = _cli([*args, "--set", "shards.num_shards=3"], env)
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    current = read_manifest(url)
    folders = sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{BUCKET}/crash/shards", refresh=True)
                     if p.rsplit("/", 1)[1].startswith("b-"))
    assert current.num_shards == 3 and folders == sorted([previous.build_id, current.build_id])
    assert dead not in folders                                   # the dead build's files are gone
    assert sum(1 for _ in reader) == 65                          # the previous build stays for its readers
    assert _cli(["verify", url], env).returncode == 0


def test_unreachable_endpoints_and_missing_credentials_are_one_line_errors(s3, tmp_path):
    """A closed port instead of an endpoint, and moto's S3 emulator without keys: one-line errors."""
    from s3server import free_port

    closed = free_port()
    env = {**clean_env(s3.env), "PYSPARK_PYTHON": sys.executable}
    hdfs = _cli(["build-shards", "--conf", str(ROOT / "conf" / "demo.toml"), "--input",
                 f"hdfs://127.0.0.1:{closed}/data/docs.jsonl", "--output", str(tmp_path / "h")], env)
    assert hdfs.returncode == 1 and re.search(rf"cannot reach (127\.0\.0\.1|localhost):{closed}\b", hdfs.stderr), \
        hdfs.stderr[-3000:]
    assert "Traceback" not in hdfs.stderr

    down = _s3_toml(s3, tmp_path / "down.toml", {"spark.hadoop.fs.s3a.endpoint": f"http://127.0.0.1:{closed}"})
    s3a = _cli(["build-shards", "--conf", str(down), "--input", str(SAMPLE), "--output", f"s3a://{BUCKET}/down"], env)
    assert s3a.returncode == 1 and re.search(rf"cannot reach (127\.0\.0\.1|localhost):{closed}\b", s3a.stderr), \
        s3a.stderr[-3000:]
    assert "Traceback" not in s3a.stderr

    anonymous = {k: v for k, v in env.items() if k not in KEYS}
    nokeys = _cli(["build-shards", "--conf", str(_s3_toml(s3, tmp_path / "nokeys.toml")), "--input", str(SAMPLE),
                   "--output", f"s3a://{BUCKET}/nokeys"], anonymous)
    assert nokeys.returncode == 2 and "no usable credentials" in nokeys.stderr, nokeys.stderr[-3000:]
    assert "Traceback" not in nokeys.stderr
    verify = _cli(["verify", f"s3://{BUCKET}/crash/shards"], anonymous)
    assert verify.returncode == 2 and "no usable credentials" in verify.stderr, verify.stderr[-3000:]
