"""Every conf/spark-*.conf the docs hand to users is loaded by a real `spark-submit
--properties-file` in a `local` run: the keys that only make sense on a cluster are
overridden, every other key must reach the session as written, and the session must
read and write a Delta table with the file's extension and catalog settings."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shardforge.deploy import cluster

ROOT = Path(__file__).resolve().parent.parent
CONFS = sorted((ROOT / "conf").glob("spark-*.conf"))

# Keys that point at a cluster, an archive or a filesystem this machine does not have.
# Their values are replaced for the local run; everything else in the file is checked.
CLUSTER_ONLY = {
    "spark.master": "local[1]",
    "spark.submit.deployMode": "client",
    "spark.archives": "",
    "spark.submit.pyFiles": "",
    "spark.jars.packages": "",               # Ivy may not reach Maven Central here; jars below
    "spark.eventLog.enabled": "false",
    "spark.eventLog.dir": "file:///tmp/spark-events",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.sql.shuffle.partitions": "2",     # 2000 on a cluster; value checked separately
}
PYTHON_KEYS = ("spark.pyspark.python", "spark.pyspark.driver.python", "spark.yarn.appMasterEnv.PYSPARK_PYTHON",
               "spark.executorEnv.PYSPARK_PYTHON")

CHECK = r'''
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("conf-check").getOrCreate()
out, table = sys.argv[1], sys.argv[2]
spark.range(5).selectExpr("id", "cast(id * 2 as string) as text").write.format("delta").save(table)
n = spark.read.format("delta").load(table).count()
history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").count()
json.dump({"conf": dict(spark.sparkContext.getConf().getAll()), "rows": n, "history": history}, open(out, "w"))
spark.stop()
'''


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as spark-submit reads it: `key value` or `key=value`, # comments."""
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)$", line)
        assert m, f"{path.name}: cannot read line {line!r}"
        props[m.group(1)] = m.group(2).strip()
    return props


def test_the_docs_name_every_conf_file():
    assert {p.name for p in CONFS} >= {"spark-local.conf", "spark-standalone.conf", "spark-yarn.conf",
                                       "spark-k8s.conf"}


@pytest.mark.slow
@pytest.mark.parametrize("conf", CONFS, ids=[p.stem for p in CONFS])
def test_spark_submit_loads_the_properties_file(conf, tmp_path):
    jars = Path(os.environ.get("SHARDFORGE_JARS") or ROOT / ".jars")
    jar_list = ",".join(str(p) for p in sorted(jars.glob("*.jar")))
    assert jar_list, f"no jars in {jars}: run `make jars`"
    props = read_properties(conf)
    overrides = {**CLUSTER_ONLY, "spark.jars": jar_list,
                 **{k: sys.executable for k in PYTHON_KEYS if k in props}}
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    args = [cluster.spark_submit(), "--properties-file", str(conf)]
    for k, v in overrides.items():
        args += ["--conf", f"{k}={v}"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_CONF_DIR", None)
    proc = subprocess.run(args + [str(script), str(tmp_path / "out.json"), str(tmp_path / "table")],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["rows"] == 5 and got["history"] == 1
    conf_seen = got["conf"]
    checked = {k: v for k, v in props.items() if k not in overrides}
    assert checked, f"{conf.name}: nothing left to check"
    wrong = {k: (v, conf_seen.get(k)) for k, v in checked.items() if conf_seen.get(k) != v}
    assert not wrong, f"{conf.name}: keys that did not reach the session as written: {wrong}"
    # the overridden values are well-formed for the cluster they are meant for
    if "spark.sql.shuffle.partitions" in props:
        assert int(props["spark.sql.shuffle.partitions"]) >= 1
    if "spark.master" in props:
        assert props["spark.master"].split("://")[0] in ("yarn", "k8s", "spark", "local[*]", "local")
