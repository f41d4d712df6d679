"""Runs the detectors, resolves overlaps and replaces spans by placeholders or keyed
pseudonyms. Redaction is idempotent: placeholders and pseudonyms are never detected
again, so redacting redacted text changes nothing."""
from __future__ import annotations

import hashlib
import hmac
import re
from typing import Callable, Iterable, Mapping

from shardforge.redact.pii import card, email, iban, ip, phone, secrets, ssn
from shardforge.redact.pii.scan import COMPILED, Scanned, scan
from shardforge.redact.pii.spans import Span, drop_overlapping, number_starts, resolve

DETECTORS: dict[str, Callable[[str, bool], list[Span]]] = {
    "EMAIL": email.find,
    "IP_ADDRESS": ip.find,
    "PHONE": phone.find,
    "CREDIT_CARD": card.find,
    "US_SSN": ssn.find,
    "IBAN": iban.find,
    "KEY": secrets.find,
}
ALL_KINDS = tuple(DETECTORS)
NUMERIC = frozenset({"PHONE", "CREDIT_CARD", "US_SSN"})    # share one scan for number starts
PSEUDONYM_HEX = 12
MAX_PASSES = 4
GLUE_WINDOW = 320
REDETECT_REACH = 320     # a re-detection window reaches this far on each side of a replacement
REDETECT_EDGE = 160      # spans this close to a window's cut are decided on the whole text
REDETECT_SLACK = 64      # how far a cut may move to reach whitespace
_PSEUDONYM = re.compile(r"<(?:" + "|".join(ALL_KINDS) + r")_[0-9a-f]{%d}>" % PSEUDONYM_HEX)


class Redactor:
    """Configured detection and redaction. Thread-safe and cheap to build; build one
    per Arrow batch or per process.

    mode "placeholder": each span becomes `placeholders.get(kind, "<KIND>")`.
    mode "pseudonym": each span becomes `<KIND_h>` with h the first 12 hex digits of
    HMAC-SHA256(key, kind + NUL + value): the same value gives the same pseudonym on
    every machine, and different values almost surely differ.
    """

    def __init__(self, kinds: Iterable[str] = ALL_KINDS, *, mode: str = "placeholder",
                 placeholders: Mapping[str, str] | None = None, pseudonym_key: str | bytes = b"",
                 include_reserved: bool = False):
        self.kinds = tuple(k for k in ALL_KINDS if k in set(kinds))
        unknown = set(kinds) - set(ALL_KINDS)
        if unknown:
            raise ValueError(f"unknown PII kind {sorted(unknown)[0]!r} (known: {', '.join(ALL_KINDS)})")
        if mode not in ("placeholder", "pseudonym"):
            raise ValueError(f"mode must be 'placeholder' or 'pseudonym', got {mode!r}")
        if mode == "pseudonym" and not pseudonym_key:
            raise ValueError("pseudonym mode needs a non-empty pseudonym_key")
        self.mode = mode
        self.placeholders = {k: (placeholders or {}).get(k, f"<{k}>") for k in ALL_KINDS}
        self.key = pseudonym_key.encode("utf-8") if isinstance(pseudonym_key, str) else bytes(pseudonym_key)
        self.include_reserved = include_reserved
        self._kindset = frozenset(self.kinds)
        self._numeric = bool(self._kindset & NUMERIC)
        texts = sorted({p for p in self.placeholders.values() if p}, key=len, reverse=True)
        self._default_placeholders = all(self.placeholders[k] == f"<{k}>" for k in ALL_KINDS)
        self._protect = re.compile("|".join([_PSEUDONYM.pattern] + [re.escape(t) for t in texts]))
        for kind, text in self.placeholders.items():
            if self._raw_detect(text):
                raise ValueError(f"placeholder for {kind} ({text!r}) would itself be detected as PII")

    def _raw_detect(self, text: str) -> list[Span]:
        """The configured detectors' spans on `text`, resolved; what they look for in
        common found once, by the compiled scan (scan.py) where there is one."""
        return self._detect_scanned(text, scan(text) if COMPILED else None)

    def _detect_scanned(self, text: str, sc: Scanned | None) -> list[Span]:
        """`_raw_detect` given the shared scan `sc`, or with None, the detectors' own scans
        (the lower-cased copy and the number starts shared). Either way the same spans as
        `_raw_detect_reference` (each detector on its own), which the tests hold it to."""
        kinds, ir = self._kindset, self.include_reserved
        found: list[Span] = []
        if sc is None:
            starts = number_starts(text) if self._numeric else []
            low = text.lower() if "KEY" in kinds or "US_SSN" in kinds else None
        else:
            starts = sc.starts
            low = text.lower() if sc.keyword_ends is None and ("KEY" in kinds or "US_SSN" in kinds) else None
        if starts:                          # PHONE and CREDIT_CARD only look at number starts
            if "PHONE" in kinds:
                found += phone.find(text, ir, starts)
            if "CREDIT_CARD" in kinds:
                found += card.find(text, ir, starts)
        if "US_SSN" in kinds:
            found += ssn.find(text, ir, starts, low, None if sc is None else sc.ssn_keywords)
        if "EMAIL" in kinds and "@" in text:
            found += email.find(text, ir)
        if "IP_ADDRESS" in kinds:
            found += ip.find(text, ir, v6_run=sc is None or sc.v6_run)
        if "IBAN" in kinds and (sc is None or sc.iban_heads):
            found += iban.find(text, ir, None if sc is None else sc.iban_heads)
        if "KEY" in kinds:
            found += (secrets.find(text, ir, low) if sc is None else
                      secrets.find(text, ir, low, first=sc.first, keyword_ends=sc.keyword_ends, b64_run=sc.b64_run))
        return resolve(found) if found else found

    def _raw_detect_reference(self, text: str) -> list[Span]:
        """`_raw_detect` the plain way: every configured detector on its own, with no
        shared or skipped work."""
        found: list[Span] = []
        for kind in self.kinds:
            if kind == "IP_ADDRESS":
                found += ip.find(text, self.include_reserved, quick=False)
            else:
                found += DETECTORS[kind](text, self.include_reserved)
        return resolve(found)

    def detect(self, text: str | None) -> list[Span]:
        """Non-overlapping spans sorted by start; never inside a placeholder or
        pseudonym. None or "" gives [].

        A value glued to a detected one ("a@b.io(415) 555-2671") is only visible
        once its neighbour is replaced, so next to every span that is not set apart
        by whitespace the detectors also run on a short window starting (or ending)
        at the span's edge, as if the neighbour were already a placeholder. Chains
        of glued values are followed; each step costs O(GLUE_WINDOW)."""
        if not text:
            return []
        spans = self._raw_detect(text)
        if spans:
            spans = self._glued(text, spans)
            protected = [m.span() for m in self._protect.finditer(text)]
            spans = drop_overlapping(spans, protected)
        return spans

    def _glued(self, text: str, spans: list[Span]) -> list[Span]:
        """Spans that start right after (or end right before) a span, directly or
        past one separator character: boundary rules read up to two characters
        outside a value, so those neighbours change once the span is replaced."""
        n = len(text)
        extra: list[Span] = []
        for sp in spans:
            e = sp.end
            while e < n and not _right_isolated(text, e):          # followers, left to right
                window = text[e:e + GLUE_WINDOW]
                nxt = [x for x in self._raw_detect(window)
                       if x.start <= 1 and (x.end < len(window) - 2 or e + len(window) == n)]
                if not nxt:
                    break
                x = nxt[0]
                extra.append(Span(e + x.start, e + x.end, x.kind))
                e += x.end
            b = sp.start
            while b > 0 and not _left_isolated(text, b):            # leaders, right to left
                lo = max(0, b - GLUE_WINDOW)
                window = text[lo:b]
                prev = [x for x in self._raw_detect(window)
                        if x.end >= len(window) - 1 and (x.start > 2 or lo == 0)]
                if not prev:
                    break
                x = prev[-1]
                extra.append(Span(lo + x.start, lo + x.end, x.kind))
                b = lo + x.start
        return resolve(spans + extra) if extra else spans

    def replacement(self, kind: str, value: str) -> str:
        if self.mode == "placeholder":
            return self.placeholders[kind]
        digest = hmac.new(self.key, f"{kind}\0{value}".encode("utf-8", "surrogatepass"), hashlib.sha256)
        return f"<{kind}_{digest.hexdigest()[:PSEUDONYM_HEX]}>"

    def redact(self, text: str | None) -> tuple[str | None, dict[str, int]]:
        """(redacted text, counts by kind). None stays None; counts only name kinds found.

        Runs to a fixpoint: a replacement can change a neighbour's boundary (in
        "a@b.io(415) 555-2671" the phone only stands alone once the address is a
        placeholder), so detection repeats on the result until nothing is found (at
        most MAX_PASSES). That is what makes redaction idempotent. After the first
        pass only the neighbourhood of values that were not isolated is looked at
        again (`_redetect`): the same spans a whole pass would find, at the cost of a
        window per such value. Text without PII costs one pass."""
        counts: dict[str, int] = {}
        spans = self.detect(text)
        passes = 1
        while spans:
            text, dirty = self._replace(text, spans, counts)
            if not dirty or passes == MAX_PASSES:
                break
            spans = self._redetect(text, dirty)
            passes += 1
        return text, counts

    def _replace(self, text: str, spans: list[Span], counts: dict[str, int]) -> tuple[str, list[tuple[int, int]]]:
        """The text with `spans` replaced (counted into `counts`), and where in it the
        replacements stand that a neighbour could see (not isolated, or not context
        free, or any replacement when the placeholders are not the default ones)."""
        parts, pos, out_pos = [], 0, 0
        dirty: list[tuple[int, int]] = []
        for s in spans:
            parts.append(text[pos:s.start])
            out_pos += s.start - pos
            value = text[s.start:s.end]
            rep = self.replacement(s.kind, value)
            parts.append(rep)
            counts[s.kind] = counts.get(s.kind, 0) + 1
            if not (self._default_placeholders and _isolated(text, s.start, s.end) and _context_free(value)):
                dirty.append((out_pos, out_pos + len(rep)))
            out_pos += len(rep)
            pos = s.end
        parts.append(text[pos:])
        return "".join(parts), dirty

    def _redetect(self, text: str, dirty: list[tuple[int, int]]) -> list[Span]:
        """`self.detect(text)` after a pass whose replacements at `dirty` (sorted) a
        neighbour could see, computed on windows around them.

        Every other replacement is isolated, and everything else is as the previous
        pass saw it, so new spans can only appear within reach of a dirty replacement:
        the detectors read at most ~130 characters around a value (key names before a
        secret, version clauses before a number). Each window reaches REDETECT_REACH
        characters on both sides and is cut at whitespace, so no token is split and
        the rules that read further (the URL check before an e-mail address) stop at
        the cut as they would at that whitespace; a span found within REDETECT_EDGE
        of a cut might still depend on text beyond it, and then the whole text is
        detected again. So the result equals a whole pass, at O(window) per dirty
        replacement (`tests/test_pii_fixpoint.py` checks it against the whole-text
        fixpoint)."""
        n = len(text)
        windows: list[list[int]] = []
        for p, q in dirty:
            a = _cut_before(text, max(0, p - REDETECT_REACH))
            b = _cut_after(text, min(n, q + REDETECT_REACH))
            if a is None or b is None:
                return self.detect(text)             # no whitespace to cut at: one long token
            if windows and a <= windows[-1][1]:
                windows[-1][1] = max(windows[-1][1], b)
            else:
                windows.append([a, b])
        found: list[Span] = []
        for a, b in windows:
            for sp in self.detect(text[a:b]):
                if (a > 0 and sp.start < REDETECT_EDGE) or (b < n and sp.end > b - a - REDETECT_EDGE):
                    return self.detect(text)         # near a cut: the window cannot decide it
                found.append(Span(sp.start + a, sp.end + a, sp.kind))
        return found


def _cut_before(text: str, a: int) -> int | None:
    """The start of a window at or before `a`: just after a whitespace character at
    most REDETECT_SLACK characters back (None if there is none), or 0."""
    if a == 0:
        return 0
    lo = max(0, a - REDETECT_SLACK)
    ws = max(text.rfind(" ", lo, a), text.rfind("\n", lo, a), text.rfind("\t", lo, a))
    if ws == -1:
        return 0 if lo == 0 else None
    return ws + 1


def _cut_after(text: str, b: int) -> int | None:
    """The end of a window at or after `b`: at a whitespace character at most
    REDETECT_SLACK characters on (None if there is none), or the end of the text."""
    n = len(text)
    if b >= n:
        return n
    hi = min(n, b + REDETECT_SLACK)
    cands = [i for i in (text.find(" ", b, hi), text.find("\n", b, hi), text.find("\t", b, hi)) if i != -1]
    if not cands:
        return n if hi == n else None
    return min(cands)


# Characters that belong to no PII token and that no detector's boundary rule reads
# beyond one position: a neighbour behind them sees the same thing whether the
# value next to them is the original or its placeholder.
_NEUTRAL_LEFT = frozenset("=([{\"'`<|;")
_SOFT_LEFT = frozenset(",:")        # read by end rules ("4111...1111,9", "host:path"): neutral after a space
_NEUTRAL_RIGHT = frozenset(",;\"'`)]}>|!?&")
_CLOSE = frozenset(".:")            # neutral on the right only when whitespace follows


def _left_isolated(text: str, start: int) -> bool:
    if start == 0:
        return True
    if text[start - 1] in _NEUTRAL_LEFT:
        # except a number's "(": phone grammars run on into "0958(415)" and "0958 (415)", so a
        # number before it reads what follows the bracket ("0958(8.8.8.8" hides the phone,
        # "0958(<IP_ADDRESS>" does not)
        if text[start - 1] != "(":
            return True
        j = start - 2 - (start > 2 and text[start - 2] == " ")
        return not (j >= 0 and text[j].isdigit())
    if text[start - 1].isspace():
        # number grammars (phone groups, card groups) run on across one space
        return start == 1 or not (text[start - 2].isdigit() or text[start - 2] == ")")
    before = text[start - 1]
    if before in _SOFT_LEFT:  # a value ending just before it reads it and our first character
        return start == 1 or text[start - 2].isspace() or text[start - 2] in _NEUTRAL_LEFT
    return before == "/" and start > 1 and text[start - 2] == "/"     # "http://8.8.8.8": no token ends in '/'


def _right_isolated(text: str, end: int) -> bool:
    n = len(text)
    if end == n or text[end].isspace() or text[end] in _NEUTRAL_RIGHT:
        return True
    after = text[end]
    if after in _CLOSE and (end + 1 == n or text[end + 1].isspace()):
        return True
    if after == "@":         # "user:<pw>@host": a placeholder leaves no local part, so nothing new
        return True
    if after == ":":         # "8.8.8.8:443": no second colon close enough to start an IPv6 address,
        # and no value right behind the colon: one there reads the character before the colon
        # (a digit of "8.8.8.8:536-22-8127" hides the SSN; the '>' of a placeholder does not)
        return ":" not in text[end + 1:end + 7] and not (end + 1 < n and text[end + 1].isalnum())
    return after == "/" and (end + 1 == n or not text[end + 1].isdigit())   # "8.8.8.8/health"


_CONTEXT_WORDS = ip._VERSION_WORDS + ("ssn", "social")
_TAIL_RULES = (phone._ID_BEFORE, ssn._ID_BEFORE, ip._VERSION_BEFORE)       # from `right_anchored`: "(?i)..."
_TAIL_ANY = re.compile("|".join("(?i:%s)" % r.pattern.removeprefix("(?i)") for r in _TAIL_RULES))  # any of them
_CONTEXT_RE = re.compile("|".join(map(re.escape, _CONTEXT_WORDS)))
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"


def _context_free(value: str) -> bool:
    """True if no detector's context rule can see `value`: it ends in a letter or
    digit, its tail matches no "id/no./#/version ..." rule and names no version key,
    and it holds no word that enables or suppresses a neighbour (version words,
    "ssn"). Then its placeholder looks the same to them."""
    if not value[-1].isalnum():
        return False
    low = value.lower()
    if _CONTEXT_RE.search(low):
        return False
    # The tail rules end in a word, `#`, `.`, `:`, `=` or `§` (plus spaces); only
    # "ISBN-10"/"ISBN-13" end in a digit, so most values skip the regexes.
    if not value[-1].isdigit() or low.endswith(("isbn-10", "isbn-13")):
        tail = value[-24:] + " "
        if _TAIL_ANY.search(tail):
            return False
    i = max(len(value.rstrip(_NAME_CHARS)), len(value) - 48)          # the name it ends in
    return not ip.is_version_name(value[i:])


def _isolated(text: str, start: int, end: int) -> bool:
    """True if text[start:end] is set apart by whitespace (optionally behind one
    opening bracket/quote, or before one closing punctuation mark). Replacing such a
    span by `<KIND>` or `<KIND_hex>` cannot change what the detectors see around it:
    their boundary checks look at most two characters outside a value, and the
    default placeholders contain no keyword any detector looks for."""
    return _left_isolated(text, start) and _right_isolated(text, end)


_DEFAULT: Redactor | None = None


def _default() -> Redactor:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


def detect(text: str | None, kinds: Iterable[str] | None = None, *, include_reserved: bool = False) -> list[tuple[int, int, str]]:
    """Spans `(start, end, kind)` sorted by start, with the default policies."""
    if kinds is None and not include_reserved:
        return [tuple(s) for s in _default().detect(text)]
    r = Redactor(kinds if kinds is not None else ALL_KINDS, include_reserved=include_reserved)
    return [tuple(s) for s in r.detect(text)]


def redact(text: str | None, kinds: Iterable[str] | None = None, *, mode: str = "placeholder",
           placeholders: Mapping[str, str] | None = None, pseudonym_key: str | bytes = b"",
           include_reserved: bool = False) -> tuple[str | None, dict[str, int]]:
    """Redacted text and counts by kind. Idempotent: redact(redact(t)[0])[0] == redact(t)[0]."""
    if kinds is None and mode == "placeholder" and not placeholders and not include_reserved:
        return _default().redact(text)
    r = Redactor(kinds if kinds is not None else ALL_KINDS, mode=mode, placeholders=placeholders,
                 pseudonym_key=pseudonym_key, include_reserved=include_reserved)
    return r.redact(text)
