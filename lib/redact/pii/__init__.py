"""PII detection and redaction kernels, usable without Spark.

`detect(text)` returns `(start, end, kind)` spans sorted by start, non-overlapping;
`redact(text)` returns `(redacted_text, counts_by_kind)`. Kinds: EMAIL, IP_ADDRESS,
PHONE, CREDIT_CARD, US_SSN, IBAN, KEY. Detector policies are in README.md here.
Every function is pure and deterministic; cost is linear in the text length.
"""
from __future__ import annotations

from shardforge.redact.pii.redaction import Redactor, detect, redact
from shardforge.redact.pii.spans import Span

KINDS = ("EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "KEY")

__all__ = ["KINDS", "Redactor", "Span", "detect", "redact"]
