"""Builds what `spark-submit` needs to run shardforge on a cluster whose nodes do not have it.

`python -m shardforge.deploy.packaging --dist dist` writes, from the source tree:

- `shardforge-<version>.zip`: the importable packages (`shardforge`, `shardforge.jobs`,
  `shardforge.loaders`, `shardforge.schemas`) for `--py-files`. Spark puts it on the
  driver's and every executor's `sys.path`; the nodes need only the runtime libraries
  (numpy, pyarrow, requests, pillow, xxhash). Reproducible: same sources, same bytes.
  It holds no compiled module (Python cannot import one from a zip): jobs that run the
  `[quality]` filters need the compiled kernel `shardforge._native`, so the wheel below.
- `shardforge-<version>-<python>-<platform>.whl` (`--wheel`): for images or venvs that `pip
  install` it; it carries the compiled quality kernel (built here by cargo, for this Python
  and platform).
- `shardforge_submit.py`: the main file to hand `spark-submit`; `shardforge_submit.py pipeline ARGS`
  runs the job module `shardforge.jobs.pipeline` with ARGS (any job under jobs/ works).
- `requirements-executor.txt`: the runtime libraries pinned to the versions installed here
  (for an executor image, a worker venv, or a YARN node's Python).
- `jars/`: Delta Lake's jars as resolved by `make jars` (copied when present; `--jars` insists),
  for `--jars dist/jars/*.jar` or an image's `$SPARK_HOME/jars` (docker/Dockerfile). The
  delta-spark jar also carries Delta's Python package, so it goes to `--py-files` too
  (`py_files(dist)` lists both).
- `shardforge-venv-<version>.tar.gz` (`--venv-archive`): a venv holding shardforge and its
  runtime libraries, for `spark.archives` (`--archives ...tar.gz#environment` and
  `spark.pyspark.python=./environment/bin/python`). The venv links to the base interpreter
  it was built with, so nodes need that Python at the same path (same OS image); for fully
  relocatable environments use conda-pack instead (see docs/cluster.md).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# Python package -> source folder, the layout setup.py installs.
LAYOUT = {"shardforge": "lib", "shardforge.jobs": "jobs", "shardforge.loaders": "loaders",
          "shardforge.schemas": "schemas"}
# fsspec: shard writers reach hdfs:// through WebHDFS (shardforge.fs)
# what executors import: the stages' kernels (web inputs, extraction, language ID and text
# repair and the score stage's fastText included), pinned to the versions here because several
# decide output bytes
RUNTIME = ("numpy", "pyarrow", "pandas", "requests", "pillow", "xxhash", "tokenizers", "fsspec",
           "charset-normalizer", "ftfy", "py3langid", "resiliparse", "fastwarc", "zstandard", "spacy",
           "fasttext-community")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis"}

SUBMIT_MAIN = '''"""spark-submit main file: `shardforge_submit.py JOB [ARGS...]` runs shardforge.jobs.JOB as __main__.

Ship the packages with `--py-files shardforge-<version>.zip` (or an environment holding them).
"""
import runpy
import sys

if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit("usage: spark-submit [options] shardforge_submit.py JOB [job options]  (e.g. JOB = pipeline)")
job = sys.argv.pop(1).replace("-", "_")
sys.argv[0] = "shardforge.jobs." + job
runpy.run_module("shardforge.jobs." + job, run_name="__main__", alter_sys=True)
'''


def source_root() -> Path:
    """The repository holding lib/, jobs/, loaders/, schemas/ and setup.py."""
    root = Path(__file__).resolve().parents[2]
    if not all((root / folder).is_dir() for folder in LAYOUT.values()):
        raise SystemExit(f"packaging: {root} is not a shardforge source tree (need {', '.join(LAYOUT.values())})")
    return root


def version() -> str:
    from shardforge import __version__

    return __version__


def package_files(root: Path) -> list[tuple[str, Path]]:
    """(archive name, source path) for every file of the packages, sorted by archive name.

    Compiled files (bytecode, the in-place built kernel) and caches are left out; data files
    inside the packages are kept.
    """
    out = []
    for pkg, folder in LAYOUT.items():
        base = root / folder
        prefix = pkg.replace(".", "/")
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
            for name in filenames:
                if name.endswith((".pyc", ".pyo", ".so", ".pyd")):
                    continue
                path = Path(dirpath) / name
                out.append((f"{prefix}/{path.relative_to(base).as_posix()}", path))
    return sorted(out)


def build_zip(dist: Path, root: Path | None = None) -> Path:
    """Write the `--py-files` zip; byte-identical for identical sources (fixed times, sorted)."""
    root = root or source_root()
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / f"shardforge-{version()}.zip"
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, path in package_files(root):
            info = zipfile.ZipInfo(arcname, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    os.replace(tmp, target)
    return target


def build_requirements(dist: Path) -> Path:
    """Write `requirements-executor.txt`: what executors import, pinned to the versions here."""
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / "requirements-executor.txt"
    target.write_text("# what shardforge's executors import (pyspark comes from the cluster's Spark)\n"
                      + "".join(f"{pin}\n" for pin in pinned(RUNTIME)))
    return target


def copy_jars(dist: Path, jars_dir: str | None = None) -> Path:
    """Copy Delta's jars (from `make jars`, or SHARDFORGE_JARS) into `dist/jars/`."""
    import shutil

    from shardforge.engine.session import find_jars

    jars = find_jars(jars_dir or ".jars")
    if not jars:
        raise SystemExit("packaging: no Delta jars found; run `make jars` first (or set SHARDFORGE_JARS)")
    target = dist / "jars"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for jar in jars:
        shutil.copyfile(jar, target / Path(jar).name)
    return target


def build_submit_main(dist: Path) -> Path:
    """Write `shardforge_submit.py`, the generic spark-submit main file."""
    dist.mkdir(parents=True, exist_ok=True)
    target = dist / "shardforge_submit.py"
    target.write_text(SUBMIT_MAIN)
    return target


def build_wheel(dist: Path, root: Path | None = None) -> Path:
    """Build the wheel with pip (no dependencies fetched, no build isolation)."""
    import shutil

    root = root or source_root()
    dist.mkdir(parents=True, exist_ok=True)
    had_build = (root / "build").exists()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                               "-w", tmp, str(root)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"packaging: pip wheel failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        (wheel,) = Path(tmp).glob("shardforge-*.whl")
        target = dist / wheel.name
        os.replace(wheel, target)
    if not had_build:  # setuptools leaves build/ in the source tree
        shutil.rmtree(root / "build", ignore_errors=True)
    return target


def pinned(packages: tuple[str, ...]) -> list[str]:
    """`name==version` for each package installed here (so executors match the driver)."""
    from importlib import metadata

    pins = []
    for name in packages:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def build_venv_archive(dist: Path, wheel: Path) -> Path:
    """A tar.gz of a fresh venv with the wheel and the runtime libraries (pinned to the ones here).

    pyspark is not included: executors use their Spark's own pyspark.zip. Entries are
    sorted and carry fixed times, owners and modes as in the venv.
    """
    target = dist / f"shardforge-venv-{version()}.tar.gz"
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "environment"
        base = getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", str(wheel), *pinned(RUNTIME)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"packaging: installing into the venv failed:\n{proc.stderr[-3000:]}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            paths = sorted(p for p in venv.rglob("*") if "__pycache__" not in p.parts)
            for p in paths:
                info = tar.gettarinfo(str(p), arcname=p.relative_to(venv).as_posix())
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isfile():
                    with open(p, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        target.write_bytes(buf.getvalue())
    return target


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def delta_python(jars: list[str] | list[Path]) -> list[str]:
    """The jar(s) among `jars` that carry Delta's Python package (`delta/`): delta-spark's.

    `--packages` puts them on the Python path by itself; with `--jars`/`spark.jars` they must
    also go to `--py-files`, or `from delta.tables import DeltaTable` fails on the driver.
    """
    out = []
    for jar in jars:
        with zipfile.ZipFile(jar) as zf:
            if "delta/__init__.py" in zf.namelist():
                out.append(str(jar))
    return out


def py_files(dist: str | Path) -> list[str]:
    """What `--py-files` needs from a built `dist`: the shardforge zip and delta-spark's jar."""
    dist = Path(dist)
    return [str(dist / f"shardforge-{version()}.zip"), *delta_python(sorted((dist / "jars").glob("*.jar")))]


def build(dist: str | Path, *, wheel: bool = False, venv_archive: bool = False,
          jars: bool | None = None, root: str | Path | None = None) -> dict[str, Path]:
    """Build the artifacts into `dist`; returns {"zip", "main", "requirements"[, "jars"][, "wheel"][, "venv"]}.

    `jars=None` copies Delta's jars when `make jars` has resolved them and skips them otherwise.
    `root` is the source tree (default: the one this module was imported from).
    """
    dist = Path(dist)
    root = Path(root) if root else None
    out = {"zip": build_zip(dist, root), "main": build_submit_main(dist), "requirements": build_requirements(dist)}
    if jars or jars is None:
        from shardforge.engine.session import find_jars

        if jars or find_jars(".jars"):
            out["jars"] = copy_jars(dist)
    if wheel or venv_archive:
        out["wheel"] = build_wheel(dist, root)
    if venv_archive:
        out["venv"] = build_venv_archive(dist, out["wheel"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shardforge.deploy.packaging", description=__doc__.splitlines()[0])
    ap.add_argument("--dist", default="dist", help="output folder (default dist/)")
    ap.add_argument("--wheel", action="store_true", help="also build the wheel")
    ap.add_argument("--venv-archive", action="store_true", help="also build a venv tar.gz for spark.archives")
    ap.add_argument("--jars", action="store_true", default=None,
                    help="copy Delta's jars into DIST/jars/ (default: when `make jars` has resolved them)")
    ap.add_argument("--all", action="store_true", help="everything: zip, wheel, jars and venv archive")
    args = ap.parse_args(argv)
    built = build(args.dist, wheel=args.wheel or args.all, venv_archive=args.venv_archive or args.all,
                  jars=True if args.all else args.jars)
    for kind, path in built.items():
        if path.is_dir():
            print(f"{kind:12s} {path}/  {len(list(path.iterdir()))} files")
        else:
            print(f"{kind:12s} {path}  sha256={sha256(path)[:16]}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
