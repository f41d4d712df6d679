"""Loads the scripts kept beside the labeled PII sets (tests/data/pii, tests/data/pii_independent)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def data_module(folder: str, name: str):
    """tests/data/<folder>/<name>.py as a module (registered, so dataclasses and pickling work)."""
    spec = importlib.util.spec_from_file_location(f"{folder}_{name}", DATA / folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
