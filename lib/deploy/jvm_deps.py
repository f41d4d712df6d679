"""Resolves the JVM jars shardforge uses beyond pyspark's own, with Maven, into local folders.

`python -m shardforge.deploy.jvm_deps --dest .jars` runs `mvn dependency:copy-dependencies`
on the project's pom with the Spark minor version and delta-spark version read from
the installed Python packages, then removes every jar pyspark already ships (two
copies of one library on Spark's class path is a bug waiting to happen). A stamp
file records the versions, so a second run is a no-op.

`--hadoop-dest DIR` also resolves, at the Hadoop version pyspark ships (read from its
`hadoop-client-api-*.jar`): `DIR/minicluster/` (hadoop-client-minicluster and what it
needs at run time, with `jvm/minicluster/ShardforgeMiniHadoop.java` compiled into
`DIR/minicluster/classes/` by `javac`: the tests' YARN + HDFS launcher) and `DIR/aws/`
(hadoop-aws and the AWS SDK bundle, for `s3a://`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

STAMP = ".shardforge-jars.json"
_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def wanted_versions() -> dict[str, str]:
    """Spark minor (e.g. "4.2") and delta-spark version of the installed packages."""
    try:
        spark = metadata.version("pyspark")
        delta = metadata.version("delta-spark")
    except metadata.PackageNotFoundError as exc:
        raise SystemExit(f"jvm_deps: {exc.name} is not installed; run `pip install -e '.[spark]'` first")
    return {"spark.minor": ".".join(spark.split(".")[:2]), "delta.version": delta, "pyspark": spark}


def _artifact(jar: str) -> str:
    m = _VERSIONED.match(jar)
    return m.group("name") if m else jar


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def hadoop_version() -> str:
    """The Hadoop version of the client jars pyspark ships (e.g. "3.5.0")."""
    for jar in sorted(_pyspark_jars().glob("hadoop-client-api-*.jar")):
        return jar.name[len("hadoop-client-api-"):-len(".jar")]
    raise SystemExit(f"jvm_deps: no hadoop-client-api-*.jar in {_pyspark_jars()}; is pyspark installed?")


def _mvn_copy(pom: Path, dest: Path, stamp_data: dict, props: dict[str, str], what: str, *,
              quiet: bool = True, keep_shipped: bool = False) -> Path | None:
    """`mvn dependency:copy-dependencies` of `pom` into a temp folder that replaces `dest` when
    done (without the jars pyspark ships, unless `keep_shipped`); None when `dest`'s stamp
    already equals `stamp_data` (nothing to do). Returns the filled folder."""
    stamp = dest / STAMP
    if stamp.exists() and json.loads(stamp.read_text()) == stamp_data:
        return None
    if shutil.which("mvn") is None:
        raise SystemExit("jvm_deps: `mvn` is not on PATH; install Maven, or run Spark with "
                         "spark.jars.packages (set [spark] packages = true in the config)")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = ["mvn", "-B", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={tmp.resolve()}", "-DincludeScope=runtime",
           *(f"-D{k}={v}" for k, v in props.items())]
    if quiet:
        cmd.insert(1, "-q")
    print(f"jvm_deps: resolving {what} with Maven into {dest}", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"jvm_deps: mvn failed ({proc.returncode}):\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    if not keep_shipped:
        shipped = {_artifact(p.name) for p in _pyspark_jars().glob("*.jar")}
        for jar in tmp.glob("*.jar"):
            if _artifact(jar.name) in shipped:
                jar.unlink()
    (tmp / STAMP).write_text(json.dumps(stamp_data, sort_keys=True))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def resolve(pom: Path, dest: Path, *, quiet: bool = True) -> list[Path]:
    """Fill `dest` with the jars Delta needs beyond pyspark's own; returns them (sorted)."""
    versions = wanted_versions()
    _mvn_copy(pom, dest, versions, {"spark.minor": versions["spark.minor"], "delta.version": versions["delta.version"]},
              f"io.delta:delta-spark_{versions['spark.minor']}_2.13:{versions['delta.version']}", quiet=quiet)
    return sorted(dest.glob("*.jar"))


LAUNCHER = "ShardforgeMiniHadoop"


def resolve_hadoop(jvm_dir: Path, dest: Path, *, quiet: bool = True) -> dict[str, Path]:
    """`dest/minicluster` (jars, and the launcher compiled into `classes/`) and `dest/aws`, at
    pyspark's Hadoop version. The minicluster runs in a JVM of its own, so it keeps its own
    copies of the Hadoop client jars; the aws folder holds only what pyspark lacks."""
    version = hadoop_version()
    source = jvm_dir / "minicluster" / f"{LAUNCHER}.java"
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in (jvm_dir / "minicluster.xml", source))).hexdigest()
    mini = dest / "minicluster"
    if _mvn_copy(jvm_dir / "minicluster.xml", mini, {"hadoop": version, "sources": digest},
                 {"hadoop.version": version}, f"org.apache.hadoop:hadoop-client-minicluster:{version}",
                 quiet=quiet, keep_shipped=True) is not None:
        if shutil.which("javac") is None:
            raise SystemExit("jvm_deps: `javac` is not on PATH; install a JDK 17 (Debian: openjdk-17-jdk-headless)")
        proc = subprocess.run(["javac", "-nowarn", "-cp", str(mini / "*"), "-d", str(mini / "classes"), str(source)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(mini, ignore_errors=True)
            raise SystemExit(f"jvm_deps: javac {source} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    aws_pom = jvm_dir / "hadoop-aws.xml"
    _mvn_copy(aws_pom, dest / "aws", {"hadoop": version, "sources": hashlib.sha256(aws_pom.read_bytes()).hexdigest()},
              {"hadoop.version": version}, f"org.apache.hadoop:hadoop-aws:{version} and its AWS SDK bundle",
              quiet=quiet)
    return {"minicluster": mini, "aws": dest / "aws"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pom", type=Path, default=Path(__file__).resolve().parents[2] / "jvm" / "pom.xml")
    ap.add_argument("--dest", type=Path, default=Path(".jars"))
    ap.add_argument("--hadoop-dest", type=Path, metavar="DIR",
                    help="also resolve Hadoop's minicluster (tests) and hadoop-aws (s3a://) into DIR")
    args = ap.parse_args(argv)
    jars = resolve(args.pom, args.dest)
    print(f"jvm_deps: {len(jars)} jars in {args.dest}", file=sys.stderr)
    if args.hadoop_dest:
        for name, folder in resolve_hadoop(args.pom.parent, args.hadoop_dest).items():
            print(f"jvm_deps: {name}: {len(list(folder.glob('*.jar')))} jars in {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
