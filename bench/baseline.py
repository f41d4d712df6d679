"""An earlier commit of shardforge, importable beside this one, for same-run comparisons.

    from baseline import baseline_python
    py = baseline_python("1c2bd4e")      # .bench/base-1c2bd4e/.venv/bin/python

Makes (once) a git worktree of the commit under `.bench/` and a venv that sees this
checkout's installed packages (pyspark, torch...) through a .pth file but imports
shardforge from the worktree. Nothing is downloaded.
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def baseline_python(commit: str) -> str:
    tree = ROOT / ".bench" / f"base-{commit}"
    py = tree / ".venv" / "bin" / "python"
    if py.exists():
        return str(py)
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv")], check=True)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "current-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--use-pep517", "--no-build-isolation",
                    "-e", str(tree)], check=True)
    jars = ROOT / ".jars"
    if jars.exists() and not (tree / ".jars").exists():
        (tree / ".jars").symlink_to(jars)
    return str(py)
