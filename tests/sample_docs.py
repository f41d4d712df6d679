"""The bundled sample documents (data/sample/docs.jsonl) as rows, for tests that build their own
input folders from them."""
from __future__ import annotations

import json
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "docs.jsonl"


def sample_rows() -> list[dict]:
    """The sample's lines that decode to an object with a string text, every key kept; a row
    without an id gets s<NNN>, NNN its position among the rows returned. The sample's deliberately
    broken lines are left out."""
    rows = []
    for line in SAMPLE.read_text().splitlines():
        try:
            row = json.loads(line, strict=False)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("text"), str):
            rows.append({**row, "id": row.get("id") or f"s{len(rows):03d}"})
    return rows
