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
