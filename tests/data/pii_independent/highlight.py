"""A broad highlighter for labelling natural text by hand: everything that could be
PII under lib/redact/pii/README.md, far more than is (no shardforge code is used). Each
candidate is decided by a person and written to natural.tsv.

    python tests/data/pii_independent/highlight.py [windows.jsonl]   # prints candidates
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATTERNS = {
    "email": r"[^\s@<>()\[\]\"',;:]+@[^\s@<>()\[\]\"',;]+\.[A-Za-z]{2,}",
    "ipv4": r"(?<![0-9.])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![0-9])",
    "ipv6": r"(?<![0-9A-Za-z:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:[0-9.]+)?(?![0-9A-Za-z:])",
    "digits": r"(?<![0-9A-Za-z])\+?\(?[0-9][0-9 ().\-]{6,24}[0-9](?![0-9])",
    "iban": r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}[A-Z0-9 ]{10,34}",
    "token": r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}",
    "secret_word": r"(?i)(?:pass(?:word|wd)?|pwd|secret|token|credential|api[_-]?key|private[_-]?key|auth)",
    "userinfo": r"://[^\s/@]+:[^\s/@]+@",
    "pem": r"BEGIN [A-Z ]*PRIVATE KEY",
}
_RX = {k: re.compile(v) for k, v in PATTERNS.items()}


def candidates(text: str) -> list[tuple[int, int, str, str]]:
    out = []
    for name, rx in _RX.items():
        for m in rx.finditer(text):
            value = m.group()
            if name == "ipv6" and (value.count(":") < 2 or not re.search(r"[0-9A-Fa-f]", value)):
                continue
            if name == "digits" and sum(c.isdigit() for c in value) < 7:
                continue
            if name == "token" and not (re.search(r"[0-9]", value) and re.search(r"[A-Za-z]", value)):
                continue
            out.append((m.start(), m.end(), name, value))
    return sorted(out)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else HERE / "windows.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        w = json.loads(line)
        for s, e, name, value in candidates(w["text"]):
            ctx = w["text"][max(0, s - 40):e + 30].replace("\n", "\\n")
            print(f"{w['wid']}\t{s}\t{value}\t{name}\t{ctx}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
