"""The clean stage: Unicode/whitespace normalisation, language identification and quality
filters over a DataFrame, run per Arrow batch with `mapInArrow` (kernels in
`shardforge.clean.text`, `shardforge.clean.langid` and `shardforge.clean.quality`).

`clean(df, cfg, quality)` keeps every input column (extra ones pass through) with `text`
normalised (optionally ftfy-fixed first; C4's line rules remove lines), and adds `language`
and `language_score` (`[clean] detect_language`; null for images and for rows an earlier rule
rejected). Rules run in this order, and a row gets the first one it fails: the URL rule
(`[url_filter]`, `shardforge.clean.urls`: `filter:url_blocklist:<category>`,
`filter:url_banned_word`, `filter:url_soft_banned_words`; rows with a null `url` pass it), textclean's rules,
`filter:language` (`[clean] languages`, `min_language_score`), then the `[quality] filters`
groups (`filter:gopher_*`, `filter:c4_*`, `filter:fineweb_*`), each document judged by its
language's thresholds (`[quality.languages.<lang>]`). Rejected rows carry the reason and their
original text; rows of kind "image" are normalised but never filtered (captions).

With `[quality] mode = "annotate"` the groups drop nothing: every quantity they compare with a
threshold goes into the struct column `signals` (one float64 field per quantity, fields named
after the rules, see README.md) and the first rule a document fails into `quality_fail` (null:
passes; the same decision filter mode makes), both null for images and for rows an earlier rule
rejected. In annotate mode the URL rule drops nothing either: kept rows get
`signals.url_blocklist` (the label, or null). rows in = kept + rejected; the result does not
depend on partitioning.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

import numpy as np

from shardforge.config import CleanSection, QualitySection
from shardforge.stage import StageResult, rejects, with_signals
from shardforge.clean.urls import UrlFilter, reason as url_reason
from shardforge.clean.text import Rules, from_pylist, judge, normalize_many, to_pylist_safe

REASON_COL = "_clean_reason"
URL_SIGNAL_COL = "_url_blocklist"   # annotate mode: the URL rule's label, moved into signals.url_blocklist


def rules_from_config(cfg: CleanSection) -> Rules:
    """The kernel's `Rules` from the [clean] section."""
    return Rules(
        min_chars=cfg.min_chars, max_chars=cfg.max_chars, min_words=cfg.min_words, max_words=cfg.max_words,
        min_mean_word_length=cfg.min_mean_word_length, max_mean_word_length=cfg.max_mean_word_length,
        max_symbol_ratio=cfg.max_symbol_ratio, max_non_alnum_ratio=cfg.max_non_alnum_ratio,
        min_alpha_word_fraction=cfg.min_alpha_word_fraction,
        max_duplicate_line_fraction=cfg.max_duplicate_line_fraction,
        max_duplicate_paragraph_fraction=cfg.max_duplicate_paragraph_fraction,
        max_ellipsis_line_fraction=cfg.max_ellipsis_line_fraction,
        max_bullet_line_fraction=cfg.max_bullet_line_fraction,
        max_boilerplate_line_fraction=cfg.max_boilerplate_line_fraction,
        boilerplate_phrases=tuple(cfg.boilerplate_phrases))


LANGUAGE_FIELDS = [StructField("language", StringType(), True), StructField("language_score", DoubleType(), True)]


def annotates(q: QualitySection) -> bool:
    return q.mode == "annotate" and bool(q.filters)


def signal_type(q: QualitySection) -> StructType:
    from shardforge.clean.quality import signal_fields

    return StructType([StructField(n, DoubleType(), True) for n in signal_fields(q.filters)])


def clean_batch(batch: pa.RecordBatch, rules: Rules, form: str, cfg: CleanSection,
                q: QualitySection, urls: UrlFilter | None = None, rejected_text: bool = True) -> pa.RecordBatch:
    """One Arrow batch in, the same columns out (text normalised for kept rows, original for
    rejected ones, or empty without `rejected_text`), then language and language_score (when
    detected), then signals and quality_fail (annotate mode), then the reject reason (null =
    kept), then (with `urls`, in annotate mode) URL_SIGNAL_COL."""
    from shardforge.clean.langid import identify_many

    blocked = _url_labels(batch, urls)

    texts = to_pylist_safe(batch.column("text"))
    kinds = batch.column("kind").to_pylist() if "kind" in batch.schema.names else [None] * len(texts)
    fix = _fixer() if cfg.fix_mojibake else None
    normalised = normalize_many([fix(t) if fix and t else t for t in texts], form)
    out_text, reasons = [], []
    for text, kind in zip(normalised, kinds):
        new, reason = judge(text, kind, rules)
        out_text.append(new)
        reasons.append(reason)
    langs: list = [None] * len(texts)
    scores: list = [None] * len(texts)
    if cfg.detect_language:
        todo = [i for i, (reason, kind) in enumerate(zip(reasons, kinds)) if reason is None and kind != "image"]
        found = identify_many(out_text[i] for i in todo)
        for i, lang, score in zip(todo, *found):
            langs[i], scores[i] = lang, score
            if (cfg.languages and lang not in cfg.languages) or (
                    cfg.min_language_score and (score or 0.0) < cfg.min_language_score):
                reasons[i] = "filter:language"
    _url_rule(blocked, reasons, langs, scores, q)
    extra = _quality(out_text, kinds, reasons, langs, q) if q.filters else None
    out_text = [new if reason is None else old if rejected_text else ""
                for new, old, reason in zip(out_text, texts, reasons)]
    cols = [from_pylist(out_text, batch.schema.field("text").type) if name == "text" else batch.column(i)
            for i, name in enumerate(batch.schema.names)]
    names = list(batch.schema.names)
    if cfg.detect_language:
        cols += [pa.array(langs, pa.string()), pa.array(scores, pa.float64())]
        names += ["language", "language_score"]
    if extra is not None:
        cols += list(extra)
        names += ["signals", "quality_fail"]
    out = pa.RecordBatch.from_arrays(cols + [pa.array(reasons, pa.string())], names=names + [REASON_COL])
    return out if blocked is None or q.mode != "annotate" else out.append_column(URL_SIGNAL_COL, pa.array(blocked, pa.string()))


# -- the URL rule ([url_filter]) --------------------------------------------------------------
def _url_labels(batch: pa.RecordBatch, urls: UrlFilter | None) -> list | None:
    """Each row's URL label (shardforge.clean.urls), or None when the filter is off. A batch
    without a `url` column has no URLs: nothing is blocked."""
    if urls is None:
        return None
    if "url" not in batch.schema.names:
        return [None] * batch.num_rows
    return urls.labels(batch.column("url"))


def _url_rule(blocked: list | None, reasons: list, langs: list, scores: list, q: QualitySection) -> None:
    """Filter mode: the URL rule is the first rule, so a blocked row's reason is its URL's
    even where a textclean rule also failed (those ran on it all the same: it is cheaper to
    overwrite the few blocked rows than to thread a skip through them), its language is null
    like any early reject's, and the [quality] groups skip it."""
    if blocked is None or q.mode == "annotate":
        return
    for i, label in enumerate(blocked):
        if label is not None:
            reasons[i], langs[i], scores[i] = url_reason(label), None, None


def _with_url_signal(kept: DataFrame) -> DataFrame:
    """signals.url_blocklist from URL_SIGNAL_COL (a row whose `signals` is null, an image,
    gets a struct of null quality fields beside it: with_signals loses no label)."""
    label = F.col(URL_SIGNAL_COL)
    return with_signals(kept, {"url_blocklist": label}).drop(URL_SIGNAL_COL)


def _quality(texts: list, kinds: list, reasons: list, langs: list, q: QualitySection):
    """The [quality] groups on the rows still kept (not images), vectorised over them, each
    language's documents with that language's thresholds. Filter mode: their reasons and (C4)
    texts are written back in place; returns None. Annotate mode: the C4 texts are written back,
    nothing is rejected; returns the `signals` StructArray and the `quality_fail` array."""
    from shardforge.clean.quality import annotate, apply, signal_fields

    n = len(texts)
    idx = [i for i, (r, k) in enumerate(zip(reasons, kinds)) if r is None and k != "image"]
    on = annotates(q)
    fields = signal_fields(q.filters) if on else []
    matrix = np.zeros((n, len(fields)))
    fails: list[str | None] = [None] * n
    by_lang: dict[str | None, list[int]] = {}
    for i in idx:
        by_lang.setdefault(langs[i] if langs[i] in q.languages else None, []).append(i)
    for lang, rows in by_lang.items():
        sub = from_pylist([texts[i] for i in rows])
        if on:
            got, new, sig = annotate(sub, q.for_language(lang))
            matrix[rows] = sig
        else:
            got, new = apply(sub, q.for_language(lang))
        for i, r, t in zip(rows, got, new.to_pylist()):
            if on or r is None:
                texts[i] = t
            if r is not None:
                if on:
                    fails[i] = r
                else:
                    reasons[i] = f"filter:{r}"
    if not on:
        return None
    present = np.zeros(n, dtype=bool)
    present[idx] = True
    struct = pa.StructArray.from_arrays([pa.array(matrix[:, j]) for j in range(len(fields))], names=fields,
                                        mask=pa.array(~present))
    return struct, pa.array(fails, pa.string())


def _fixer():
    import ftfy

    return ftfy.fix_text


def clean(df: DataFrame, cfg: CleanSection, quality: QualitySection = QualitySection(),
          urls: UrlFilter | None = None, rejected_text: bool = True) -> StageResult:
    """Normalise, identify the language and filter documents (and URLs, with `urls`). Kept:
    the columns of `df`, then language and language_score (and in annotate mode, with `urls`,
    `signals.url_blocklist`); rejected: REJECT rows, whose record holds an empty text without
    `rejected_text` (for a rejects table that keeps no record: on web data most of the input is
    rejected, and its text need not come back from the Python workers)."""
    if "text" not in df.columns:
        raise ValueError("clean: input has no `text` column")
    rules = rules_from_config(cfg)
    form = cfg.unicode_form if cfg.normalize_unicode else ""
    owned = [f for f in df.schema.fields if not (cfg.detect_language and f.name in ("language", "language_score"))]
    owned = [f for f in owned if not (annotates(quality) and f.name in ("signals", "quality_fail"))]
    src = df.select(*[F.col(f"`{f.name}`") for f in owned]) if len(owned) < len(df.schema.fields) else df
    annotated = [StructField("signals", signal_type(quality), True),
                 StructField("quality_fail", StringType(), True)] if annotates(quality) else []
    annotate_urls = urls is not None and quality.mode == "annotate"
    out_schema = StructType(owned + (LANGUAGE_FIELDS if cfg.detect_language else []) + annotated
                            + [StructField(REASON_COL, StringType(), True)]
                            + ([StructField(URL_SIGNAL_COL, StringType(), True)] if annotate_urls else []))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield clean_batch(batch, rules, form, cfg, quality, urls, rejected_text)

    marked = src.mapInArrow(run, out_schema)
    kept, rejected = split_marked(marked, annotate_urls)
    return StageResult(kept, rejected, shared=marked)


def split_marked(marked: DataFrame, annotate_urls: bool) -> tuple[DataFrame, DataFrame]:
    """Clean's kept rows and REJECT rows from its marked frame (REASON_COL null: kept)."""
    kept = marked.filter(F.col(REASON_COL).isNull()).drop(REASON_COL)
    if annotate_urls:
        kept = _with_url_signal(kept)
    return kept, rejects(marked.filter(F.col(REASON_COL).isNotNull()), "clean", F.col(REASON_COL))


def drops_by_rule(rejected: DataFrame) -> dict[str, int]:
    """Rejected rows counted by reason (`filter:<rule>` / `invalid:<why>`), computed
    by a Spark aggregation; only the small per-reason table reaches the driver."""
    rows = rejected.groupBy("reason").count().collect()
    return {r["reason"]: int(r["count"]) for r in sorted(rows, key=lambda r: r["reason"])}
