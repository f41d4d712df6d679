"""Privacy canaries: distinct PII values and secrets are planted where a pipeline could leak
them (a kept document, a document clean drops, a malformed JSONL line, an exact duplicate,
a URL with credentials, a pseudonym key from the environment); after a real run, download
included, no file under the output but raw/ holds any of them: Parquet decoded (values and
footer statistics), Delta logs, JSON, HTML, and the run's log; each canary is searched
verbatim and encoded (percent-encoded, base64, Basic auth's `user:password`, a card number's
digits with separators). With rejects.record = "original" they appear only in rejects/ and
raw/, and the run warns."""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "SHARDFORGE_TEST_PSEUDONYM_KEY"
KEY = "canary-pseudonym-key-7Qx2"


def luhn(prefix: str) -> str:
    """`prefix` + its Luhn check digit (a card number the card detector must accept)."""
    digits = [int(d) for d in prefix]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d *= 2
            d = d - 9 if d > 9 else d
        total += d
    return prefix + str((10 - total % 10) % 10)


PLACES = ("kept", "dropped", "malformed", "duplicate")
CANARIES = {p: {"email": f"{p}.canary.{i}@fabrikam-mail.net",
                "key": f"wJ{i}xUtnF7MkQ{p[:3].upper()}9bPxRfiCYz{i}Lm3Qr8Tv2Hn6Kd",
                "card": luhn(f"4556739{i:02d}{i * 7 % 10}{i * 3 % 10}1{i % 10}33")}
            for i, p in enumerate(PLACES)}
URL_SECRETS = ("secretpass77", "tok3nCanaryValue9")
URL_USER = "canary"


def _text(place: str, pad: bool) -> str:
    c = CANARIES[place]
    body = (f"Order notes for {place}. Write to {c['email']} about the invoice.\n"
            f"aws_secret_access_key = {c['key']}\n"
            f"Card on file: {c['card']}\n")
    if pad:
        body += " ".join(f"The garden path number {i} winds past the old stone wall and the pond." for i in range(12))
    return body


def _canaries() -> list[str]:
    out = [KEY, *URL_SECRETS]
    for c in CANARIES.values():
        out += [c["email"], c["key"], c["card"]]
    return out


def _inputs(tmp: Path, base: str) -> tuple[Path, Path]:
    docs = tmp / "docs.jsonl"
    lines = [json.dumps({"id": "kept-1", "text": _text("kept", True)}),
             json.dumps({"id": "short-1", "text": _text("dropped", False)}),          # clean drops it (min_chars)
             '{"id": "broken-1", "text": "' + _text("malformed", False).replace("\n", " ") + '"',  # no closing brace
             json.dumps({"id": "dup-a", "text": _text("duplicate", True)}),
             json.dumps({"id": "dup-b", "text": _text("duplicate", True)})]           # an exact duplicate
    docs.write_text("\n".join(lines) + "\n")
    urls = tmp / "urls.csv"
    urls.write_text("url,caption\n"
                    f"http://{URL_USER}:{URL_SECRETS[0]}@{base.split('://')[1]}/pages/bread.html?token={URL_SECRETS[1]}&x=1,"
                    "a page\n")
    return docs, urls


def _args(docs: Path, urls: Path, out: Path) -> list[str]:
    return ["--conf", str(ROOT / "conf" / "demo.toml"), "--input", str(docs), "--urls", str(urls),
            "--output", str(out), "--set", "redact.mode=\"pseudonym\"", "--set",
            f"redact.pseudonym_key_env=\"{KEY_ENV}\"", "--set", "clean.min_chars=200", "--set",
            "spark.shuffle_partitions=2"]


def _run(tmp: Path, out: Path, docs: Path, urls: Path) -> tuple[int, str]:
    """`shardforge pipeline` in a process of its own, its log (stdout and stderr) to a file."""
    log = out.parent / f"{out.name}.log"
    env = {**os.environ, KEY_ENV: KEY, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    with open(log, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "pipeline", *_args(docs, urls, out)],
                              cwd=tmp, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    return proc.returncode, log.read_text()


def _texts_of(path: Path) -> list[str]:
    """What a file says, decoded: Parquet values and footer statistics, gzip, else the bytes."""
    data = path.read_bytes()
    if path.suffix == ".parquet":
        out = [json.dumps(pq.read_table(path).to_pylist(), default=repr)]
        md = pq.read_metadata(path)
        for g in range(md.num_row_groups):
            for c in range(md.num_columns):
                st = md.row_group(g).column(c).statistics
                if st is not None and st.has_min_max:
                    out += [repr(st.min), repr(st.max)]
        return out
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [data.decode("utf-8", "replace")]


def _forms(canary: str) -> re.Pattern:
    """One pattern for a canary as it could be written: verbatim, percent-encoded (upper or
    lower hex, quote and quote_plus), base64 (standard and URL-safe, of the value alone and,
    for the URL's password, of the `user:password` pair Basic auth sends), and a card
    number's digits with separators (spaces, dashes, dots) between them."""
    forms = {canary, quote(canary, safe=""), quote_plus(canary, safe="")}
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), f) for f in list(forms)}
    plain = [canary.encode()]
    if canary == URL_SECRETS[0]:
        plain.append(f"{URL_USER}:{canary}".encode())
    for raw in plain:
        for enc in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            forms |= {enc.decode(), enc.decode().rstrip("=")}
    alternatives = [re.escape(f) for f in sorted(forms)]
    if canary.isdigit():
        alternatives.append(r"[ \-.]?".join(canary))
    return re.compile("|".join(alternatives))


def test_encoded_forms_are_searched():
    """The search itself: each encoded form of a canary is found, an unrelated text is not."""
    card = CANARIES["kept"]["card"]
    spaced = " ".join(card[i:i + 4] for i in range(0, len(card), 4))
    email = CANARIES["kept"]["email"]
    basic = base64.b64encode(f"{URL_USER}:{URL_SECRETS[0]}".encode()).decode()
    for canary, text in ((card, f"card {spaced} on file"), (card, "-".join(card)),
                         (email, "to=" + email.replace("@", "%40")), (email, "to=" + email.replace("@", "%40").lower()),
                         (URL_SECRETS[0], f"Authorization: Basic {basic}"),
                         (CANARIES["kept"]["key"], base64.b64encode(CANARIES["kept"]["key"].encode()).decode())):
        assert _forms(canary).search(text), (canary, text)
    assert not _forms(card).search("4556 7390 0000 0000") and not _forms(email).search("someone%40example.org")


def _leaks(out: Path, log: str, skip: tuple[str, ...]) -> dict[str, list[str]]:
    """{canary: [files holding it, in any form `_forms` knows]} over every file under `out`
    (but `skip` folders) and the log."""
    found: dict[str, list[str]] = {}
    canaries = {c: _forms(c) for c in _canaries()}
    files = [p for p in out.rglob("*") if p.is_file() and p.relative_to(out).parts[0] not in skip]
    assert any(p.suffix == ".parquet" for p in files) and any("_delta_log" in p.parts for p in files)
    for p in files:
        text = "\n".join(_texts_of(p))
        for c, pattern in canaries.items():
            if pattern.search(text):
                found.setdefault(c, []).append(str(p.relative_to(out)))
    for c, pattern in canaries.items():
        if pattern.search(log):
            found.setdefault(c, []).append("<run log>")
    return found


@pytest.fixture(scope="module")
def web():
    from shardforge.jobs.demo import SAMPLE, serve

    server, base = serve(SAMPLE / "web")
    yield base
    server.shutdown()


def test_no_canary_leaves_raw(web, tmp_path):
    docs, urls = _inputs(tmp_path, web)
    out = tmp_path / "out"
    code, log = _run(tmp_path, out, docs, urls)
    assert code == 0, log[-3000:]
    report = json.loads((out / "report.json").read_text())
    reasons = {r for s in report["stages"] for r in s["rejects_by_reason"]}
    assert {"filter:min_chars", "invalid:malformed_json", "duplicate_of"} <= reasons    # every place was used
    assert report["downloads"].get("ok") == 1                                           # the URL was fetched
    assert report["privacy"]["raw_kept"] is True
    assert report["redactions"]["EMAIL"] >= 2 and report["redactions"]["CREDIT_CARD"] >= 2
    assert report["redactions"]["KEY"] >= 2
    assert _leaks(out, log, skip=("raw",)) == {}
    raw = _leaks(out, "", skip=tuple(p.name for p in out.iterdir() if p.name != "raw"))
    for place in ("kept", "duplicate"):                  # raw holds the input as it came
        assert CANARIES[place]["email"] in raw
    key_id = report["privacy"]["pseudonym_key_id"]
    assert report["run"]["config"]["redact"]["pseudonym_key_id"] == key_id
    assert json.loads((out / "shards" / "manifest.json").read_text())["config"]["redact"]["pseudonym_key_id"] == key_id


def test_original_rejects_hold_the_canaries_and_warn(web, spark, tmp_path, monkeypatch, caplog):
    """The same command in this process (its session is the tests' one), rejects kept as they came."""
    import logging

    from shardforge.engine.cli import main

    docs, urls = _inputs(tmp_path, web)
    out = tmp_path / "out"
    monkeypatch.setenv(KEY_ENV, KEY)
    with caplog.at_level(logging.INFO):
        code = main(["pipeline", *_args(docs, urls, out), "--set", 'rejects.record="original"'])
    log = caplog.text
    assert code == 0, log[-3000:]
    assert any(r.levelno == logging.WARNING and 'rejects.record = "original"' in r.getMessage()
               for r in caplog.records)
    leaks = _leaks(out, log, skip=("raw",))
    assert leaks, "the original rejects should hold the rejected rows' canaries"
    assert {f.split("/")[0] for files in leaks.values() for f in files} == {"rejects"}
    for place in ("dropped", "malformed"):
        assert CANARIES[place]["email"] in leaks
    assert KEY not in leaks and not set(URL_SECRETS) & set(leaks)      # secrets: never, in any mode


def test_pseudonyms_follow_the_key_and_manifests_repeat(spark, tmp_path, monkeypatch):
    from dataclasses import replace

    from shardforge.config import load_config
    from shardforge.engine.layout import Layout
    from shardforge.redact.stage import redact
    from shardforge.engine.runner import RunOptions, run_job

    df = spark.createDataFrame([("a", "mail ann.lee@fabrikam-mail.net today", "document")], "id string, text string, kind string")
    cfg = load_config(None, ['redact.mode="pseudonym"', f'redact.pseudonym_key_env="{KEY_ENV}"',
                             "shards.num_shards=2"])
    monkeypatch.setenv(KEY_ENV, "key-one")
    first = redact(df, cfg.redact).kept.first().text
    again = redact(df, cfg.redact).kept.first().text
    monkeypatch.setenv(KEY_ENV, "key-two")
    other = redact(df, cfg.redact).kept.first().text
    assert first == again and first != other and "ann.lee" not in first + other

    table = str(tmp_path / "docs")
    df.write.format("delta").save(table)
    manifests = []
    for n, key in enumerate(("key-one", "key-one", "key-two")):
        monkeypatch.setenv(KEY_ENV, key)
        run = cfg.replace(pipeline=replace(cfg.pipeline, input=(table,), output=str(tmp_path / f"b{n}")))
        run_job(run, ("build-shards",), layout=Layout.for_build(str(tmp_path / f"b{n}")), options=RunOptions(),
                spark=spark)
        manifests.append((tmp_path / f"b{n}" / "manifest.json").read_bytes())
    assert manifests[0] == manifests[1] != manifests[2]
    assert b"key-one" not in manifests[0] and b"key-two" not in manifests[2]
