"""Scores `shardforge.redact.pii.detect` on the labeled set: per-kind precision, recall, F1.

    python tests/data/pii/score.py [--errors]    # prints the table (and each miss)

A detection counts as correct only when (start, end, kind) equals a gold span.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "KEY")


def load(path: Path = HERE / "labeled.jsonl") -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score(rows: list[dict], detect=None) -> tuple[dict[str, dict], list[tuple]]:
    """({kind: {tp, fp, fn, precision, recall, f1, support}}, errors)."""
    if detect is None:
        from shardforge.redact.pii import detect
    stats = {k: {"tp": 0, "fp": 0, "fn": 0} for k in KINDS}
    errors = []
    for row in rows:
        gold = {tuple(s) for s in row["spans"]}
        pred = {tuple(s) for s in detect(row["text"])}
        for s in pred & gold:
            stats[s[2]]["tp"] += 1
        for s in pred - gold:
            stats[s[2]]["fp"] += 1
            errors.append(("FP", row["id"], s[2], row["text"][s[0]:s[1]], row["text"]))
        for s in gold - pred:
            stats[s[2]]["fn"] += 1
            errors.append(("FN", row["id"], s[2], row["text"][s[0]:s[1]], row["text"]))
    for st in stats.values():
        tp, fp, fn = st["tp"], st["fp"], st["fn"]
        st["precision"] = tp / (tp + fp) if tp + fp else 1.0
        st["recall"] = tp / (tp + fn) if tp + fn else 1.0
        p, r = st["precision"], st["recall"]
        st["f1"] = 2 * p * r / (p + r) if p + r else 0.0
        st["support"] = tp + fn
    return stats, errors


def table(stats: dict[str, dict]) -> str:
    """The per-kind table as markdown."""
    lines = ["| kind | support | TP | FP | FN | precision | recall | F1 |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in KINDS:
        s = stats[k]
        lines.append(f"| {k} | {s['support']} | {s['tp']} | {s['fp']} | {s['fn']} | "
                     f"{s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    rows = load()
    stats, errors = score(rows)
    negatives = sum(1 for r in rows if r["group"].startswith("neg:"))
    print(f"{len(rows)} snippets ({negatives} hard negatives)\n")
    print(table(stats))
    if "--errors" in argv:
        for e in errors:
            print(e[0], e[1], e[2], repr(e[3]), "|", repr(e[4][:160]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
