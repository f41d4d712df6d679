"""Scores `shardforge.redact.pii.detect` on the independent set: per kind precision, recall
and F1 (a detection counts only when (start, end, kind) equals a gold span), and how
many hard negatives are flagged (any detection overlapping one).

    python tests/data/pii_independent/score_independent.py [--errors]
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _dev_score():
    """The development set's scorer (tests/data/pii/score.py): the same per-kind counts."""
    spec = importlib.util.spec_from_file_location("pii_dev_score", HERE.parent / "pii" / "score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(path: Path = HERE / "independent.jsonl") -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def negatives(rows: list[dict], detect=None) -> tuple[dict[str, dict], list[tuple]]:
    """({neg type: {n, flagged}}, flagged items as (row id, type, value, detections))."""
    if detect is None:
        from shardforge.redact.pii import detect
    stats: dict[str, dict] = {}
    flagged = []
    for row in rows:
        if not row["negatives"]:
            continue
        found = detect(row["text"])
        for s, e, typ in row["negatives"]:
            st = stats.setdefault(typ, {"n": 0, "flagged": 0})
            st["n"] += 1
            hits = [d for d in found if d[0] < e and d[1] > s]
            if hits:
                st["flagged"] += 1
                flagged.append((row["id"], typ, row["text"][s:e], hits))
    return stats, flagged


def score(rows: list[dict], detect=None) -> tuple[dict, list, dict, list]:
    """(per-kind stats, span errors, negative stats, flagged negatives)."""
    stats, errors = _dev_score().score(rows, detect)
    neg, flagged = negatives(rows, detect)
    return stats, errors, neg, flagged


def table(stats: dict, neg: dict) -> str:
    lines = [_dev_score().table(stats), "", "| hard negatives | n | flagged | share |", "|---|---:|---:|---:|"]
    for typ in sorted(neg):
        n, f = neg[typ]["n"], neg[typ]["flagged"]
        lines.append(f"| {typ[4:]} | {n} | {f} | {f / n:.1%} |")
    n, f = sum(v["n"] for v in neg.values()), sum(v["flagged"] for v in neg.values())
    lines.append(f"| all | {n} | {f} | {f / max(n, 1):.1%} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    rows = load()
    stats, errors, neg, flagged = score(rows)
    print(f"{len(rows)} rows, {sum(len(r['spans']) for r in rows)} spans, "
          f"{sum(len(r['negatives']) for r in rows)} hard negatives\n")
    print(table(stats, neg))
    if "--errors" in argv:
        for e in errors:
            print(e[0], e[1], e[2], repr(e[3]), "|", repr(e[4][:160]))
        for f in flagged:
            print("NEG", f[0], f[1], repr(f[2]), f[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
