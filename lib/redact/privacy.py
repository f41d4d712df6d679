"""What each output may hold, and the steps that keep PII and secrets out of the others.

Outputs and what they hold (the threat model is in README's privacy section):
- `raw` holds the input as it came (`pipeline.write_raw`, default on): PII included.
- `<output>/_run`, `_download_spool`, `_checkpoints`: a running stage's work, removed when
  the run succeeds (`--keep-intermediate` keeps `_run`); stages before `redact` hold
  unredacted text there.
- Everything else (curated, shards, rejects, downloads, dedup audit and side table,
  reports, manifests, logs) holds no unredacted PII from the redact stage's kinds and no
  secrets: text reaches curated through `redact`; rejects store their record redacted by
  the same redactor (`rejects.record = "redacted"`, the default; `"none"` stores no record;
  `"original"` stores it as it was, and warns); URL userinfo and credential query
  parameters are replaced in every output but raw (the fetch itself uses the real URL);
  the downloads table records what happened to a URL, not what it returned.
- Secrets (config fields marked `secret`, e.g. `redact.pseudonym_key`) are never
  written: the recorded config has them empty and names each key by its key id, a keyed
  hash of a constant, which tells two keys apart and nothing else.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import unicodedata
import zipimport
from functools import lru_cache
from typing import Any

log = logging.getLogger("shardforge.redact.privacy")

KEY_ID_MESSAGE = b"shardforge key id v1"
# query parameters that carry credentials (compared case-insensitively)
CREDENTIAL_PARAMS = ("token", "access_token", "refresh_token", "id_token", "auth", "sig", "signature",
                     "x-amz-signature", "x-amz-credential", "x-amz-security-token", "awsaccesskeyid",
                     "x-goog-signature", "x-goog-credential", "key", "api_key", "apikey", "api-key", "password",
                     "passwd", "pwd", "secret", "client_secret", "sessionid", "session_id", "jwt")
REDACTED = "REDACTED"
_PARAMS = "|".join(re.escape(p) for p in sorted(CREDENTIAL_PARAMS, key=len, reverse=True))
# scheme://userinfo@ -> scheme://REDACTED@ ; ?token=value -> ?token=REDACTED (also inside JSON text)
USERINFO_RE = r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'<>?#]+@"
PARAM_RE = rf"(?i)([?&;](?:{_PARAMS})=)[^&#\s\"'<>]*"
# USERINFO_RE for Java's regex engine, the same replacements 3.6x faster on documents: it starts at
# the literal `://` (a cheap test at each position) and looks behind for the scheme, instead of
# trying a scheme at every word; a scheme's last 256 characters are looked at (tests/test_url_credentials.py).
# (Python's `re` has no variable-width look-behind: the Python twin, `sanitize_url`, keeps USERINFO_RE.)
USERINFO_JVM_RE = r"://(?<=(?i:\b[a-z][a-z0-9+.\-]{0,255})://)[^/\s@\"'<>?#]+@"


def key_id(key: str | bytes) -> str:
    """16 hex chars naming a key: HMAC-SHA256(key, a constant). Tells keys apart; reveals
    nothing a guessed value could be checked against."""
    k = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return hmac.new(k, KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def resolve_pseudonym_key(cfg) -> str:
    """The pseudonymisation key of a [redact] section: from the environment variable
    `pseudonym_key_env`, else the file `pseudonym_key_file`, else the literal
    `pseudonym_key` (which warns: a literal sits in a config file). "" when none is set."""
    from shardforge.config import ConfigError

    if cfg.pseudonym_key_env:
        value = os.environ.get(cfg.pseudonym_key_env, "")
        if not value:
            raise ConfigError(f"redact.pseudonym_key_env: the environment variable {cfg.pseudonym_key_env} "
                              "is not set or empty")
        return value
    if cfg.pseudonym_key_file:
        try:
            with open(cfg.pseudonym_key_file, encoding="utf-8") as fh:
                value = fh.read().strip()
        except OSError as exc:
            raise ConfigError(f"redact.pseudonym_key_file: cannot read {cfg.pseudonym_key_file}: "
                              f"{exc.strerror or exc}") from None
        if not value:
            raise ConfigError(f"redact.pseudonym_key_file: {cfg.pseudonym_key_file} is empty")
        return value
    if cfg.pseudonym_key and key_id(cfg.pseudonym_key) not in _WARNED:
        _WARNED.add(key_id(cfg.pseudonym_key))
        log.warning("redact.pseudonym_key is a literal in the config: prefer redact.pseudonym_key_env or "
                    "redact.pseudonym_key_file (the recorded config names the key by its id only)")
    return cfg.pseudonym_key


_WARNED: set[str] = set()


def sanitize_url(text: str | None) -> str | None:
    """`text` with URL userinfo and credential query parameters replaced (the Python twin
    of `sanitize_urls`)."""
    if text is None:
        return None
    text = re.sub(USERINFO_RE, lambda m: m.group(1) + REDACTED + "@", text)
    return re.sub(PARAM_RE, lambda m: m.group(1) + REDACTED, text)


def sanitize_urls(col):
    """A Spark column expression: `sanitize_url` of a string column, in the JVM."""
    from pyspark.sql import functions as F

    # Each pattern runs only where its literal is (`://`, `=`): a substring test is a byte scan, the
    # patterns try a match at every position of a whole document (the rejects table's records).
    col = F.when(col.contains("://"), F.regexp_replace(col, USERINFO_JVM_RE, f"://{REDACTED}@")).otherwise(col)
    return F.when(col.contains("="), F.regexp_replace(col, PARAM_RE, f"$1{REDACTED}")).otherwise(col)


URL_COLUMNS = ("url", "source", "meta", "final_url")


# The same replacements in a Python worker (the rejects table's records, in the pass that redacts
# them): the compiled kernel (native/src/urls.rs) follows the JVM's patterns as Java 17 runs them,
# and where shardforge runs from the `--py-files` zip (no compiled module), `_strip_reference` does
# the kernel's steps in Python. Decided by how shardforge was loaded, never by a failed import.
COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)


@lru_cache(maxsize=1)
def _credentials_kernel():
    from shardforge.native import compiled

    UrlCredentials = compiled("UrlCredentials")
    return UrlCredentials(list(CREDENTIAL_PARAMS), REDACTED)


def strip_credentials(texts: list) -> list:
    """Each of `texts` (str or None) as the JVM's `sanitize_urls` leaves it, computed here."""
    if COMPILED:
        return _credentials_kernel().strip_many(texts)
    return [None if t is None else _strip_reference(t) for t in texts]


_JAVA_SPACE = " \t\n\x0b\f\r"
_SCHEME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_USERINFO_STOP = frozenset("/@\"'<>?#" + _JAVA_SPACE)
_VALUE_STOP = frozenset("&#\"'<>" + _JAVA_SPACE)
_NAMES = tuple(p.lower() for p in CREDENTIAL_PARAMS)


def _letter_or_digit(c: str) -> bool:
    return unicodedata.category(c) in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nd")


def _word_before(s: str, q: int) -> bool:
    """Java 17's `\\b` test before position `q`: is the character before it a word character
    (`_`, a letter or digit, or a non-spacing mark whose run follows a letter or digit)?"""
    if q == 0:
        return False
    c = s[q - 1]
    if c == "_" or _letter_or_digit(c):
        return True
    if unicodedata.category(c) != "Mn":
        return False
    for d in reversed(s[:q - 1]):
        if _letter_or_digit(d):
            return True
        if unicodedata.category(d) != "Mn":
            return False
    return False


def _strip_reference(s: str) -> str:
    """The compiled kernel's steps (native/src/urls.rs) in Python, character for character."""
    if "://" in s:
        out, last, at = [], 0, 0
        while (p := s.find("://", at)) >= 0:
            q = p
            while q > max(p - 256, 0) and s[q - 1] in _SCHEME:
                q -= 1
            if any(s[r].isascii() and s[r].isalpha() and not _word_before(s, r) for r in range(q, p)):
                j = p + 3
                while j < len(s) and s[j] not in _USERINFO_STOP:
                    j += 1
                if j > p + 3 and j < len(s) and s[j] == "@":
                    out += [s[last:p], "://", REDACTED, "@"]
                    last = at = j + 1
                    continue
            at = p + 1
        s = "".join(out) + s[last:] if last else s
    if "=" in s:
        out, last, i = [], 0, 0
        while i < len(s):
            if s[i] in "?&;":
                name = next((n for n in _NAMES if s[i + 1:i + 1 + len(n)].lower() == n and s[i + 1 + len(n):i + 2 + len(n)] == "="
                             and s[i + 1:i + 1 + len(n)].isascii()), None)
                if name is not None:
                    v = j = i + len(name) + 2
                    while j < len(s) and s[j] not in _VALUE_STOP:
                        j += 1
                    out += [s[last:v], REDACTED]
                    last = i = j
                    continue
            i += 1
        s = "".join(out) + s[last:] if last else s
    return s


def without_url_credentials(df, columns=URL_COLUMNS):
    """`df` with `sanitize_urls` applied to those of `columns` it has (string columns)."""
    from pyspark.sql import functions as F

    have = {f.name: f.dataType.typeName() for f in df.schema.fields}
    todo = [c for c in columns if have.get(c) == "string"]
    if not todo:
        return df
    return df.select(*[sanitize_urls(F.col(f"`{c}`")).alias(c) if c in todo else F.col(f"`{c}`")
                       for c in df.columns])


def privacy_report(cfg) -> dict[str, Any]:
    """What the run's outputs hold, for the report."""
    out = {"raw_kept": bool(cfg.pipeline.write_raw), "rejects_record": cfg.rejects.record,
           "url_credentials": "redacted outside raw", "redact_kinds": list(cfg.redact.kinds)}
    if cfg.redact.mode == "pseudonym":
        out["pseudonym_key_id"] = key_id(resolve_pseudonym_key(cfg.redact))
    return out
