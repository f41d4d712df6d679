"""The text `bench/redact.py` measures on: deterministic documents of prose, code and
log lines with the labeled PII snippets planted at a steady density, and the
adversarial inputs (long runs that make naive regexes backtrack)."""
from __future__ import annotations

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the of and to in is was for on that with as by at from his her an which their were this are "
         "have been has had river model data system network results study time year people city water "
         "energy local market health early growth policy report school music between during against "
         "training language research public small large number first second often however although "
         "measured observed increased reduced function value return import class config server request").split()
CODE = ["def load(path):\n    with open(path) as f:\n        return json.load(f)\n",
        "for (int i = 0; i < n; ++i) { total += values[i] * 0.5; }\n",
        "if response.status_code != 200:\n    raise RuntimeError(f'bad status {response.status_code}')\n",
        "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id LIMIT 100;\n",
        "const config = { retries: 3, timeout: 2500, version: '4.2.1' };\n"]
LOGS = ["2024-05-02T10:11:12.345Z INFO worker-3 processed batch 1842 in 231 ms\n",
        "May  2 10:11:12 host kernel: [123456.789] eth0: link up, 1000 Mbps, full duplex\n",
        "GET /api/v1/items?page=2 200 0.042s rid=6f1c2a9e-4d3b-4b8a-9e2f-1a2b3c4d5e6f\n"]
ADVERSARIAL = {
    "at_run": "@",
    "dot_run": ".",
    "digit_run": "7",
    "base64_like": "QWxhZGRpbjpvcGVuIHNlc2FtZQ+/9Zq3",
    "email_like": "a.b@c.",
    "ip_like": "1.22.",
    "phone_like": "+1 (55) ",
    "key_like": "password=",
}


def labeled_snippets() -> list[str]:
    path = ROOT / "tests" / "data" / "pii" / "labeled.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def documents(total_bytes: int, seed: int = 7, pii_every: int = 2000,
              doc_bytes: tuple[int, int] = (4_000, 40_000)) -> list[str]:
    """Documents of `doc_bytes` (default ~4-40 KB) each, about `total_bytes` in all, with one
    labeled snippet (PII or hard negative) per ~`pii_every` characters."""
    rng = random.Random(seed)
    snippets = labeled_snippets()
    docs, size = [], 0
    while size < total_bytes:
        target = rng.randint(*doc_bytes)
        parts, n, since = [], 0, 0
        while n < target:
            r = rng.random()
            if r < 0.75:
                words = [rng.choice(WORDS) for _ in range(rng.randint(40, 120))]
                piece = " ".join(words).capitalize() + ".\n\n"
            elif r < 0.9:
                piece = rng.choice(CODE)
            else:
                piece = "".join(rng.choice(LOGS) for _ in range(rng.randint(2, 6)))
            parts.append(piece)
            n += len(piece)
            since += len(piece)
            if since >= pii_every:
                parts.append(rng.choice(snippets) + "\n")
                since = 0
        doc = "".join(parts)
        docs.append(doc)
        size += len(doc)
    return docs


def adversarial(name: str, size: int) -> str:
    unit = ADVERSARIAL[name]
    return (unit * (size // len(unit) + 1))[:size]
