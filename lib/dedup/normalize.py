"""Text normalisation for dedup and the exact-duplicate key, on the Spark side and in Python.

Modes (`dedup.normalization`):
  none        the text as is
  whitespace  runs of whitespace become one space, trimmed
  lower       `whitespace`, then lower-cased
  lower_alnum lower-cased, every run of characters that are not letters or digits
              (Unicode \\p{L}, \\p{N}) becomes one space, trimmed
The exact key is sha256 of the normalised text (text rows) or of the image bytes
(rows with kind == 'image'), prefixed with its namespace so the two never meet.
"""
from __future__ import annotations

import re
import unicodedata

MODES = ("none", "whitespace", "lower", "lower_alnum")


def normalize_expr(col, mode: str):
    """Spark Column of the normalised text (null text gives '')."""
    from pyspark.sql import functions as F

    if mode not in MODES:
        raise ValueError(f"dedup.normalization: {mode!r} is not one of {', '.join(MODES)}")
    text = F.coalesce(col, F.lit(""))
    if mode == "none":
        return text
    if mode == "lower_alnum":
        return F.trim(F.regexp_replace(F.lower(text), r"[^\p{L}\p{N}]+", " "))
    ws = F.trim(F.regexp_replace(text, r"(?U)\s+", " "))
    return F.lower(ws) if mode == "lower" else ws


def normalize(text: str | None, mode: str) -> str:
    """The pure-Python twin of `normalize_expr` (for tests and audits; not on hot paths)."""
    if mode not in MODES:
        raise ValueError(f"dedup.normalization: {mode!r} is not one of {', '.join(MODES)}")
    text = text or ""
    if mode == "none":
        return text
    if mode == "lower_alnum":
        low = text.lower()
        keep = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in low)
        return re.sub(" +", " ", keep).strip(" ")
    ws = re.sub(r"\s+", " ", text).strip(" ")
    return ws.lower() if mode == "lower" else ws


def exact_key_expr(norm_col, image_col, is_image_col):
    """Spark Column of the exact-duplicate key: 'img:' + sha256(image) for image rows,
    'txt:' + sha256(normalised text) otherwise. `norm_col` is the normalised text
    (`normalize_expr`), made once by the caller, which also needs it for other things."""
    from pyspark.sql import functions as F

    return F.when(is_image_col, F.concat(F.lit("img:"), F.sha2(image_col, 256))).otherwise(
        F.concat(F.lit("txt:"), F.sha2(norm_col, 256)))
