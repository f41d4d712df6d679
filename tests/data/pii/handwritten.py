"""Parses handwritten.txt (held-out snippets with [[KIND|value]] marks) into rows
shaped like labeled.jsonl, so `score.py` can score them too."""
from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
_MARK = re.compile(r"\[\[([A-Z_]+)\|(.*?)\]\]", re.S)


def parse_line(line: str) -> tuple[str, list[list]]:
    line = line.replace("\\n", "\n")
    out, spans, pos = [], [], 0
    n = 0
    for m in _MARK.finditer(line):
        out.append(line[pos:m.start()])
        n += m.start() - pos
        spans.append([n, n + len(m.group(2)), m.group(1)])
        out.append(m.group(2))
        n += len(m.group(2))
        pos = m.end()
    out.append(line[pos:])
    return "".join(out), spans


def load(path: Path = HERE / "handwritten.txt") -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip() or line.startswith("#"):
            continue
        text, spans = parse_line(line)
        rows.append({"id": f"hand-{i:03d}", "group": "handwritten" if spans else "neg:handwritten",
                     "text": text, "spans": spans})
    return rows
