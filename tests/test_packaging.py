"""Packaging for spark-submit: the --py-files zip is complete, importable on its own and reproducible."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from shardforge.deploy import packaging

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    return packaging.build(tmp_path_factory.mktemp("dist"), jars=False, root=ROOT)


def test_zip_holds_every_package_and_no_caches(dist):
    names = zipfile.ZipFile(dist["zip"]).namelist()
    for pkg in ("shardforge", "shardforge/jobs", "shardforge/loaders", "shardforge/schemas", "shardforge/report"):
        assert f"{pkg}/__init__.py" in names
    assert "shardforge/jobs/pipeline.py" in names and "shardforge/report/style.css" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # no compiled module (the in-place built quality kernel): none imports from a zip
    assert list((ROOT / "lib").glob("_native*.so")) and not [n for n in names if n.endswith(".so")]
    assert names == sorted(names)
    # every source file of the tree is in it
    expected = {arc for arc, _ in packaging.package_files(ROOT)}
    assert expected == set(names)


def test_zip_is_reproducible(dist, tmp_path):
    again = packaging.build_zip(tmp_path, ROOT)
    assert again.read_bytes() == dist["zip"].read_bytes()


def test_zip_works_without_an_installed_shardforge(dist, tmp_path):
    """A bare interpreter (no site-packages, so no editable install) imports the code from the
    zip alone and renders a report, whose CSS is read from inside the zip."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import shardforge, shardforge.config, shardforge.jobs, shardforge.report as r;"
        "assert shardforge.__file__.startswith(sys.argv[1]), shardforge.__file__;"
        "j, h = r.write_report({'stages': [{'name': 'x', 'rows_in': 1, 'kept': 1, 'rejected': 0}]}, sys.argv[2]);"
        "t = h.read_text(); assert 'font-family' in t and '<svg' in t; print('ok')"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(dist["zip"]), str(tmp_path / "rep")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_pii_redaction_from_the_zip_scans_in_python_with_the_same_result(dist, tmp_path):
    """The zip holds no compiled module: imported from it, the PII detectors scan for
    themselves (scan.COMPILED is False) and redact exactly as the installed package does."""
    from shardforge.redact.pii import redact

    texts = ["mail ann.lee@fabrikam.io or (415) 555-2671, card 4539 1488 0343 6467, ssn 536-22-8127",
             "DE44 5001 0517 5407 3249 31 from 8.8.8.8 and 2001:4860:4860::8888; password = 'Tr0ub4dor&3xK'",
             "é AKIAZ3MJKL7QW2RT9XYV,wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEX9 \u212aey: Xk9mQ2pL7vRz8Tw"]
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from shardforge.redact.pii import redact, scan;"
        "assert scan.__file__.startswith(sys.argv[1]) and not scan.COMPILED;"
        "print(json.dumps([redact(t) for t in json.loads(sys.argv[2])]))"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(dist["zip"]), json.dumps(texts)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [list(redact(t)) for t in texts]


def test_submit_main_runs_a_job_module_and_explains_its_usage(dist, tmp_path):
    proc = subprocess.run([sys.executable, str(dist["main"])], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0 and "usage:" in proc.stderr
    env = {"PYTHONPATH": str(dist["zip"]), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, str(dist["main"]), "pipeline", "--help"], capture_output=True,
                          text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "--output" in proc.stdout, proc.stderr


def test_requirements_are_pinned_to_the_installed_versions(dist):
    from importlib import metadata

    lines = [l for l in dist["requirements"].read_text().splitlines() if l and not l.startswith("#")]
    assert lines == [f"{n}=={metadata.version(n)}" for n in packaging.RUNTIME]


def test_delta_python_lives_in_the_delta_spark_jar():
    from shardforge.engine.session import find_jars

    jars = find_jars(".jars")
    if not jars:
        pytest.skip("Delta jars not resolved (make jars)")
    found = packaging.delta_python(jars)
    assert len(found) == 1 and "delta-spark" in Path(found[0]).name
