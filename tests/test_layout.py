"""The import structure read from the code: no circle anywhere, and every import goes down.

Layers (README, "Architecture"), lowest first:
0. the shared bottom: `shardforge` (the version), `config`, `fs`, `keys`, `schemas`, `stage`
   (the stage kernels' contract) and `stages` (the registry's data);
1. the stage families (`ingest`, `clean`, `score`, `decontaminate`, `redact`, `dedup`, `tokenize`,
   `curated`, `shards`, `report`), which may use each other only without a circle between packages;
2. the engine (`engine`) and the loaders (`loaders`, which need no Spark);
3. deployment helpers (`deploy`); 4. the jobs (`jobs`); 5. the benchmarks (`bench/`).
The graph is read with `ast` from the source files, lazy imports inside functions included.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"lib": "shardforge", "jobs": "shardforge.jobs", "loaders": "shardforge.loaders",
           "schemas": "shardforge.schemas"}
BOTTOM = {"shardforge", "shardforge.config", "shardforge.fs", "shardforge.keys", "shardforge.schemas",
          "shardforge.native", "shardforge.stage", "shardforge.stages"}
FAMILIES = ("ingest", "clean", "score", "decontaminate", "redact", "dedup", "tokenize", "curated", "shards", "report")
LAYER = {**{f: 1 for f in FAMILIES}, "engine": 2, "loaders": 2, "deploy": 3, "jobs": 4}


def modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package), for the product and bench/."""
    out = {}
    for folder, pkg in FOLDERS.items():
        for p in (root / folder).rglob("*.py"):
            parts = list(p.relative_to(root / folder).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            parts = parts[:-1] if is_pkg else parts
            out[".".join([pkg] + parts)] = (p, is_pkg)
    for p in (root / "bench").glob("*.py"):
        out["bench." + p.stem] = (p, False)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name imported from a package resolves to
    its submodule when it is one)."""
    mods = modules(root)
    bench = {m.split(".", 1)[1] for m in mods if m.startswith("bench.")}

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    if top == "shardforge":
                        deps.add(a.name)
                    elif name.startswith("bench.") and top in bench:
                        deps.add("bench." + top)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                    if name.startswith("bench.") and mod.split(".")[0] in bench:
                        mod = "bench." + mod
                if mod.split(".")[0] in ("shardforge", "bench"):
                    for a in node.names:
                        deps.add(mod + "." + a.name if mod + "." + a.name in mods else mod)
        graph[name] = {r for d in deps if (r := resolve(d)) and r != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> int:
    if module.startswith("bench."):
        return 5
    if module in BOTTOM:
        return 0
    return LAYER[module.split(".")[1]]


def package(module: str) -> str:
    """The unit a circle between packages is read at: `shardforge.<top>`, or the module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "shardforge" and len(parts) > 1 else module


def test_the_reader_sees_real_imports():
    """The graph is not vacuous: known edges of each kind are found (a relative import, a
    lazy import inside a function, a bench module's sibling import)."""
    g = import_graph()
    assert "shardforge.engine.steps" in g["shardforge.engine.runner"]            # lazy, in a method
    assert "shardforge.clean.quality.batch" in g["shardforge.clean.quality.words"]
    assert "bench.loader_plan" in g["bench.loader_report"]
    assert "shardforge.shards.manifest" in g["shardforge.loaders.source"]


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_no_circle_between_packages():
    g = import_graph()
    pg: dict[str, set[str]] = {}
    for m, deps in g.items():
        pg.setdefault(package(m), set()).update(package(d) for d in deps if package(d) != package(m))
    assert cycles(pg) == []


def test_every_import_goes_down():
    g = import_graph()
    upward = sorted(f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
                    for m, deps in g.items() for d in deps if layer(d) > layer(m))
    assert upward == []


def test_lib_shows_the_architecture():
    """At most a dozen modules directly in lib/; the engine and each stage family are packages."""
    direct = sorted(p.name for p in (ROOT / "lib").glob("*.py"))
    assert len(direct) <= 12, direct
    for pkg in ("engine", "deploy", *FAMILIES):
        assert (ROOT / "lib" / pkg / "__init__.py").is_file(), pkg


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_cycle_finder(edges, expected):
    assert cycles(edges) == expected
