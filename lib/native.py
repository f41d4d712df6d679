"""The compiled kernels (`shardforge._native`: native/, Rust through PyO3) as the package reaches
them. `compiled(name)` gives one of the module's classes or functions; when the module is not
installed it raises an ImportError that says how to build it (never a silent fallback: where a
Python twin runs instead, the caller decides that by how shardforge was loaded, not by this error)."""
from __future__ import annotations

MISSING = ("shardforge's compiled kernel (shardforge._native) is not installed: install shardforge from "
           "source with `pip install -e .` (needs cargo and rustc; README.md), or the wheel `make package` builds")


def compiled(name: str):
    """`shardforge._native.<name>`, or an ImportError naming how to build the kernel."""
    try:
        from shardforge import _native
    except ImportError as e:
        raise ImportError(MISSING) from e
    return getattr(_native, name)
