"""Resolves Delta Lake's JVM jars for the installed pyspark into a local folder.

`python -m shardforge.jvm_deps --dest .jars` runs `mvn dependency:copy-dependencies`
on the project's pom with the Spark minor version and delta-spark version read from
the installed Python packages, then removes every jar pyspark already ships (two
copies of one library on Spark's class path is a bug waiting to happen). A stamp
file records the versions, so a second run is a no-op.
"""
from __future__ import annotations

import argparse
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


def resolve(pom: Path, dest: Path, *, quiet: bool = True) -> list[Path]:
    """Fill `dest` with the jars Delta needs beyond pyspark's own; returns them (sorted)."""
    versions = wanted_versions()
    stamp = dest / STAMP
    if stamp.exists() and json.loads(stamp.read_text()) == versions:
        return sorted(dest.glob("*.jar"))
    if shutil.which("mvn") is None:
        raise SystemExit("jvm_deps: `mvn` is not on PATH; install Maven, or run Spark with "
                         "spark.jars.packages (set [spark] packages = true in the config)")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = ["mvn", "-B", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={tmp.resolve()}", "-DincludeScope=runtime",
           f"-Dspark.minor={versions['spark.minor']}", f"-Ddelta.version={versions['delta.version']}"]
    if quiet:
        cmd.insert(1, "-q")
    print(f"jvm_deps: resolving io.delta:delta-spark_{versions['spark.minor']}_2.13:"
          f"{versions['delta.version']} with Maven into {dest}", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"jvm_deps: mvn failed ({proc.returncode}):\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    import pyspark

    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in tmp.glob("*.jar"):
        if _artifact(jar.name) in shipped:
            jar.unlink()
    (tmp / STAMP).write_text(json.dumps(versions, sort_keys=True))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return sorted(dest.glob("*.jar"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pom", type=Path, default=Path(__file__).resolve().parent.parent / "jvm" / "pom.xml")
    ap.add_argument("--dest", type=Path, default=Path(".jars"))
    args = ap.parse_args(argv)
    jars = resolve(args.pom, args.dest)
    print(f"jvm_deps: {len(jars)} jars in {args.dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
