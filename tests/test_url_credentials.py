"""URL credentials in the JVM (`sanitize_urls`, used on the rejects table's records and on every
output's URL columns) replace exactly what the patterns they are written from replace:
USERINFO_RE and PARAM_RE applied everywhere by Spark's own regexp_replace, on generated text
built to sit on the patterns' edges (schemes at word boundaries and not, long schemes, user
info with the characters that end it, credential parameters in any case, JSON-escaped text)."""
from __future__ import annotations

import random

from shardforge.redact.privacy import CREDENTIAL_PARAMS, PARAM_RE, REDACTED, USERINFO_RE, sanitize_url, sanitize_urls

PIECES = ["http", "HTTPS", "s3a", "git+ssh", "x.y-z", "9abc", "_http", "a" * 40, "é", "ü", "://", "://",
          "user", "user:pa55", "@", "@", "host.example", "/", "?", "&", ";", "=", "=", "#", " ", "\n",
          "\\n", "\"", "'", "<", ">", ".", "-", "+", "value", "x=1", "\\u00e9", "mailto:a@b.c",
          *CREDENTIAL_PARAMS, *[p.upper() for p in CREDENTIAL_PARAMS[:8]]]

EDGES = ["http://user:pass@host/x", "see https://a@b and ftp://c:d@e.", "xhttp://u@h", "_http://u@h",
         "9http://u@h", "a.b://u@h", "-http://u@h", "http://@h", "http:// u@h", "http://u/p@h",
         "?token=abc&x=1", "&KEY=v#frag", ";Api-Key=1 2", "?tokenx=1", "a?x-amz-signature=ff&b",
         "http://u@h?sig=1&password=p", "{\"url\": \"https://me:pw@x.org/?token=t\"}", "é://u@h",
         "a" * 300 + ".http://u@h", "h" * 200 + "://u@h", "http://u@h://v@w", "==?pwd==x"]


def _generated(n: int, seed: int) -> list[str]:
    """Strings of random pieces and of URL-shaped fragments with a piece swapped in or left out."""
    rng = random.Random(seed)

    def fragment() -> str:
        if rng.random() < 0.4:
            return rng.choice(PIECES)
        parts = [rng.choice(PIECES[:8]), "://", rng.choice(["user", "user:pa55", "a b", "u/v", ""]), "@",
                 "host.example", rng.choice(["?", "&", ";", "#"]), rng.choice(CREDENTIAL_PARAMS).title(), "=",
                 rng.choice(["v", "v&x=1", "", "a b", "\"q\""])]
        if rng.random() < 0.5:
            parts[rng.randrange(len(parts))] = rng.choice(PIECES)
        return "".join(parts)

    return [rng.choice(["", "text "]) + "".join(fragment() for _ in range(rng.randint(1, 6))) for _ in range(n)]


def test_jvm_url_credentials_match_the_patterns(spark):
    from pyspark.sql import functions as F

    texts = EDGES + _generated(4000, 20261203)
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, t string")
    reference = F.regexp_replace(F.regexp_replace("t", USERINFO_RE, f"$1{REDACTED}@"), PARAM_RE, f"$1{REDACTED}")
    rows = df.select("i", sanitize_urls(F.col("t")).alias("got"), reference.alias("want")).orderBy("i").collect()
    wrong = [(texts[r["i"]], r["got"], r["want"]) for r in rows if r["got"] != r["want"]]
    assert not wrong, wrong[:5]
    changed = sum(r["want"] != texts[r["i"]] for r in rows)
    assert changed > 1000                          # the set exercises the patterns, not only their absence
    # the edge cases, as the patterns define them (and as the Python twin computes them)
    got = {texts[r["i"]]: r["got"] for r in rows[:len(EDGES)]}
    assert got["http://user:pass@host/x"] == "http://REDACTED@host/x"
    assert got["xhttp://u@h"] == "xhttp://REDACTED@h" and got["_http://u@h"] == "_http://u@h"
    assert got["9http://u@h"] == "9http://u@h" and got["http://u/p@h"] == "http://u/p@h"
    assert got["&KEY=v#frag"] == "&KEY=REDACTED#frag" and got["?tokenx=1"] == "?tokenx=1"
    assert got["http://u@h?sig=1&password=p"] == "http://REDACTED@h?sig=REDACTED&password=REDACTED"
    ascii_edges = [t for t in EDGES if t.isascii()]
    assert [got[t] for t in ascii_edges] == [sanitize_url(t) for t in ascii_edges]


# Around a scheme's first letter: Unicode letters, digits and marks (Java 17's word characters
# include them; a non-spacing mark counts as its base character), other symbols, and whitespace
# Java's `\s` does not cover (inside a value and inside user info).
UNICODE_EDGES = ["ébhttp://u@h", "²http://u@h", "Ⅻhttp://u@h", "٣http://u@h", "e\u0301http://u@h",
                 "_\u0301http://u@h", " \u0301http://u@h", "\u0301\u0301http://u@h", "中http://u@h",
                 "\u00a0http://u@h", "http://u\u00a0v@h", "?token=a\u2003b&c", "?\u212aey=1", "?KEY=é&x",
                 "😀http://u@h", "😀://u@h", "http://😀@h", "&sig=😀 x", "x\u0903http://u@h"]


def _real_records() -> list[str]:
    """JSON lines of real documents: the sample data and the ten-language manual pages."""
    import gzip
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    lines = (root / "data" / "sample" / "docs.jsonl").read_text(encoding="utf-8").splitlines()
    with gzip.open(root / "tests" / "data" / "quality" / "multilang.jsonl.gz", "rt", encoding="utf-8") as f:
        return lines + f.read().splitlines()


def test_the_python_pass_replaces_what_the_jvm_replaces(spark):
    """The rejects table's records lose their URL credentials in the Python pass that redacts
    them (`strip_credentials`: the compiled kernel, or its Python twin from the zip): both give
    exactly what `sanitize_urls` gives in the JVM, on the generated set, the Unicode edges and
    real documents as JSON records."""
    from pyspark.sql import functions as F

    from shardforge.redact.privacy import _strip_reference, strip_credentials

    texts = EDGES + UNICODE_EDGES + _generated(4000, 20261204) + _real_records() + [None, ""]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, t string")
    jvm = [r["got"] for r in df.select("i", sanitize_urls(F.col("t")).alias("got")).orderBy("i").collect()]
    kernel = strip_credentials(texts)
    wrong = [(t, k, j) for t, k, j in zip(texts, kernel, jvm) if k != j]
    assert not wrong, wrong[:5]
    assert [None if t is None else _strip_reference(t) for t in texts] == kernel
    assert sum(a != b for a, b in zip(texts, jvm)) > 1000
    got = dict(zip(UNICODE_EDGES, kernel[len(EDGES):len(EDGES) + len(UNICODE_EDGES)]))
    assert got["²http://u@h"] == "²http://REDACTED@h" and got["ébhttp://u@h"] == "ébhttp://u@h"
    assert got["e\u0301http://u@h"] == "e\u0301http://u@h" and got["_\u0301http://u@h"] == "_\u0301http://REDACTED@h"
    assert got["?\u212aey=1"] == "?\u212aey=1" and got["?token=a\u2003b&c"] == "?token=REDACTED&c"


def test_the_kernels_unicode_tables_are_unicodedatas():
    """native/src/urls_tables.rs holds the letters and digits (Lu Ll Lt Lm Lo Nd) and the
    non-spacing marks (Mn) of this Python's unicodedata, as sorted inclusive ranges."""
    import re
    import sys
    import unicodedata
    from pathlib import Path

    import numpy as np

    src = (Path(__file__).resolve().parent.parent / "native" / "src" / "urls_tables.rs").read_text()
    assert f"Unicode {unicodedata.unidata_version}" in src
    cats = np.array([unicodedata.category(chr(c)) for c in range(sys.maxunicode + 1)])

    def runs(mask):
        cps = np.flatnonzero(mask)
        cut = np.flatnonzero(np.diff(cps) != 1)
        return list(zip(np.r_[cps[0], cps[cut + 1]].tolist(), np.r_[cps[cut], cps[-1]].tolist()))

    def table(name):
        body = re.search(rf"{name}: &\[\(u32, u32\)\] = &\[(.*?)\];", src, re.S).group(1)
        return [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\(0x([0-9A-F]+), 0x([0-9A-F]+)\)", body)]

    assert table("LETTER_OR_DIGIT") == runs(np.isin(cats, ["Lu", "Ll", "Lt", "Lm", "Lo", "Nd"]))
    assert table("NON_SPACING_MARK") == runs(cats == "Mn")


def test_rejects_records_are_redacted_and_cleared_in_one_pass(spark):
    """`rejects_for_output` (rejects.record = "redacted") gives the rows the two passes gave
    before: the records and details redacted in Python, then record, detail and source cleared
    of URL credentials by the JVM's `sanitize_urls`."""
    from shardforge.config import Config
    from shardforge.redact.privacy import without_url_credentials
    from shardforge.redact.stage import redact_columns, rejects_for_output
    from shardforge.schemas import REJECT

    texts = EDGES + UNICODE_EDGES + _generated(600, 7) + _real_records()[:200]
    emails = [f"write to me{i}@example-mail.org or call from 8.8.{i % 250}.4 {t}" for i, t in enumerate(texts[:300])]
    rows = [(f"d{i}", "clean", "filter:x", t if i % 3 else None, texts[-1 - i] if i % 2 else "src/" + t[:40], r)
            for i, (t, r) in enumerate(zip(texts, emails + texts[300:]))]
    df = spark.createDataFrame(rows, REJECT).repartition(3)
    cfg = Config()
    assert cfg.rejects.record == "redacted"
    before = without_url_credentials(redact_columns(df, ("record", "detail"), cfg.redact), ("record", "detail", "source"))
    now = rejects_for_output(df, cfg)
    key = lambda r: r["id"]   # noqa: E731
    want, got = sorted(before.collect(), key=key), sorted(now.collect(), key=key)
    assert got == want and len(got) == len(rows)
    assert sum(r["record"] != row[5] for r, row in zip(got, sorted(rows))) > 300   # both steps changed records
    assert not any("me1@example-mail.org" in (r["record"] or "") for r in got)
    assert now.schema == df.schema
