"""The pipeline configuration: frozen, typed dataclasses loaded from TOML by one function.

`load_config(path, overrides)` reads `conf/*.toml` with `tomllib`, applies
`section.key=value` overrides (values parsed as TOML literals, falling back to a
plain string), and builds the dataclasses below. Unknown sections or keys and
values of the wrong type are `ConfigError`s that name the offending key, e.g.
`shards.num_shard: unknown key (known: ...)`. Each stage reads only its section.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from shardforge.stages import DEFAULT_STAGES, check_stages


# The quality rule groups, in the order they run (shardforge.clean.quality runs them)
QUALITY_GROUPS = ("gopher_repetition", "gopher_quality", "c4", "fineweb")


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key."""


@dataclass(frozen=True)
class PipelineSection:
    name: str = "shardforge"
    input: tuple[str, ...] = ()  # document files or tables (default --input)
    urls: tuple[str, ...] = ()   # URL lists to download (default --urls)
    output: str = ""           # default --output
    input_format: str = "auto"  # auto (per file, by extension) | jsonl | parquet | text | warc | webdataset | delta
    stages: tuple[str, ...] = DEFAULT_STAGES   # exactly the stages that run, in shardforge.stages.ORDER
    write_raw: bool = True      # keep the ingested rows as the `raw` Delta table
    # run ingest and clean in one pass over local JSONL when the plan allows it (shardforge.ingest.fused)
    fuse: bool = True
    lock_timeout: float = 120.0  # seconds without a heartbeat after which another host's run lock is stale


@dataclass(frozen=True)
class SparkSection:
    master: str = "local[*]"
    app_name: str = "shardforge"
    shuffle_partitions: int = 8
    jars_dir: str = ".jars"     # jars from `make jars` (handed over with spark.jars)
    packages: bool = False      # use spark.jars.packages instead (clusters with internet)
    properties: dict[str, str] = field(default_factory=dict)  # extra spark.* settings
    # the embedded session's JIT: auto | quick (the JVM's first compiler only) | full (the JVM's
    # default); auto is quick for local input up to 2 GiB (shardforge.engine.session.jit_options)
    jit: str = "auto"
    # a stage of fewer input rows than this, or one reading local files of fewer bytes, runs on
    # Spark's interpreted expressions: no code is generated and compiled for each of its queries
    # (shardforge.engine.session.interpreted); 0 = code always generated, as Spark does
    codegen_min_rows: int = 5_000
    codegen_min_input_bytes: int = 128 << 20


@dataclass(frozen=True)
class IngestSection:
    id_column: str = "id"       # taken as the document id when present
    text_column: str = "text"
    source_column: str = "source"
    # JSONL fields kept as typed columns instead of JSON in `meta`: name -> Spark SQL type,
    # e.g. { tokens = "array<int>", score = "double" }
    columns: dict[str, str] = field(default_factory=dict)
    max_page_bytes: int = 10_000_000   # WARC pages with a larger body: invalid:page_too_large (never read)
    extract_timeout: float = 20.0      # CPU seconds of HTML extraction per page: invalid:extract_timeout
    max_member_bytes: int = 20_000_000  # WebDataset tar members larger than this: invalid:member_too_large
    image_max_pixels: int = 89_478_485  # WebDataset images above this width x height: invalid:too_many_pixels
    # A JSONL line, a text file or a Parquet/Delta row's text larger than this: one reject
    # invalid:record_too_large naming its file (local JSONL and text files are never held whole)
    max_record_bytes: int = 32 << 20


@dataclass(frozen=True)
class DownloadSection:
    url_column: str = "url"
    caption_column: str = "caption"
    threads_per_task: int = 16
    connect_timeout: float = 5.0
    read_timeout: float = 20.0
    max_bytes: int = 20_000_000
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    per_host_connections: int = 4
    max_requests_per_second: float = 0.0   # 0 = no global limit
    user_agent: str = "shardforge/0.1 (+https://example.invalid/shardforge)"
    respect_robots: bool = False
    respect_x_robots_tag: bool = True
    allow_private_addresses: bool = False
    allowed_networks: tuple[str, ...] = ()   # e.g. ("127.0.0.1/32",) for tests and the demo
    max_redirects: int = 5
    image_max_pixels: int = 89_478_485
    image_resize_mode: str = "keep_ratio"    # none | keep_ratio | center_crop | border
    image_size: int = 256
    image_format: str = "jpeg"               # jpeg | png | webp
    image_quality: int = 90
    partitions: int = 0                       # 0 = spark default parallelism
    retry_transient_failures: bool = False    # on resume, refetch timeout/5xx/connection rows
    kind_column: str = "kind"                 # optional per-row expected kind: image | page | auto
    expect: str = "auto"                      # expected kind when the row gives none: auto | image | page
    total_timeout: float = 60.0               # whole response (headers + body) deadline, 0 = none
    per_host_requests_per_second: float = 0.0  # 0 = no per-host pacing
    spool_dir: str = ""                       # executors append each finished row here (resume after a kill)


@dataclass(frozen=True)
class CleanSection:
    """[clean]: normalisation and quality rules (shardforge.clean.text). A 0 turns a
    max_/min_ rule off. Quality rules apply to every kind but "image" (captions)."""
    normalize_unicode: bool = True
    unicode_form: str = "NFC"    # NFC | NFKC
    min_chars: int = 1
    max_chars: int = 10_000_000
    min_words: int = 0
    max_words: int = 0           # 0 = no limit
    min_mean_word_length: float = 0.0
    max_mean_word_length: float = 0.0   # 0 = no limit
    max_symbol_ratio: float = 0.0       # '#' and ellipses per word; 0 = off
    max_non_alnum_ratio: float = 0.0    # of non-space chars; 0 = off
    min_alpha_word_fraction: float = 0.0
    max_duplicate_line_fraction: float = 0.0   # 0 = off
    max_duplicate_paragraph_fraction: float = 0.0
    max_ellipsis_line_fraction: float = 0.0
    max_bullet_line_fraction: float = 0.0
    max_boilerplate_line_fraction: float = 0.0
    boilerplate_phrases: tuple[str, ...] = (
        "lorem ipsum", "javascript is disabled", "enable javascript", "this site uses cookies",
        "we use cookies", "accept cookies", "cookie policy", "privacy policy", "terms of use",
        "terms and conditions", "all rights reserved", "sign up for our newsletter",
        "subscribe to our newsletter", "click here to", "log in to reply", "powered by wordpress")
    fix_mojibake: bool = False   # ftfy.fix_text before normalisation (mojibake, HTML entities left in text)
    detect_language: bool = True  # language + language_score columns (shardforge.clean.langid)
    languages: tuple[str, ...] = ()   # ISO 639-1 codes to keep ("en", "de", ...); () = every language
    min_language_score: float = 0.0   # below it: filter:language; 0 = off


@dataclass(frozen=True)
class QualitySection:
    """[quality]: Gopher, C4 and FineWeb rules with their published defaults (shardforge.clean.quality).
    `filters` picks the groups that run, always in FineWeb's order; a 0 (false) turns one rule
    off. Defaults: datatrove 0.10's GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter
    and FineWebQualityFilter (FineWeb itself runs C4 with c4_terminal_punct = false)."""
    filters: tuple[str, ...] = ()    # gopher_repetition, gopher_quality, c4, fineweb
    # filter: a document failing a rule is rejected (filter:<rule>); annotate: nothing is dropped
    # for quality, the rules' quantities go into the `signals` struct column and the first
    # failed rule into `quality_fail` (select later with [select] where at build-shards)
    mode: str = "filter"
    # Gopher repetition (Rae et al. 2021, Table A1); fractions of the document's characters
    gopher_max_dup_para_frac: float = 0.3
    gopher_max_dup_para_char_frac: float = 0.2
    gopher_max_dup_line_frac: float = 0.3
    gopher_max_dup_line_char_frac: float = 0.2
    gopher_max_top_ngram_char_frac: tuple[float, ...] = (0.2, 0.18, 0.16)                     # n = 2, 3, 4
    gopher_max_dup_ngram_char_frac: tuple[float, ...] = (0.15, 0.14, 0.13, 0.12, 0.11, 0.10)  # n = 5 ... 10
    # Gopher quality
    gopher_min_words: int = 50               # words with a letter or digit
    gopher_max_words: int = 100_000
    gopher_min_avg_word_length: float = 3.0
    gopher_max_avg_word_length: float = 10.0
    gopher_max_symbol_word_ratio: float = 0.1     # '#' per word, and ellipses per word
    gopher_max_bullet_lines_ratio: float = 0.9
    gopher_max_ellipsis_lines_ratio: float = 0.3
    gopher_min_alpha_words_ratio: float = 0.8
    gopher_min_stop_words: int = 2
    gopher_stop_words: tuple[str, ...] = ("the", "be", "to", "of", "and", "that", "have", "with")
    # C4 (Raffel et al. 2020): line rules remove lines, document rules drop the document
    c4_max_word_length: int = 1000           # lines with a longer word
    c4_remove_citations: bool = True         # [1], [edit], [citation needed]
    c4_terminal_punct: bool = True           # lines not ending in . ? ! " ' (or ending in ...)
    c4_min_words_per_line: int = 3
    c4_lorem_ipsum: bool = True              # document
    c4_javascript: bool = True               # lines
    c4_curly_bracket: bool = True            # document
    c4_policy: bool = True                   # lines with "terms of use", "privacy policy", cookies
    c4_min_sentences: int = 5
    # FineWeb (Penedo et al. 2024)
    fineweb_min_line_punct_ratio: float = 0.12
    fineweb_max_short_line_ratio: float = 0.67
    fineweb_short_line_length: int = 30
    fineweb_max_dup_line_char_ratio: float = 0.01
    fineweb_max_newline_word_ratio: float = 0.3
    # Per-language overrides of any key above but `filters` and `mode` ([quality.languages.de]
    # gopher_min_stop_words = 3, gopher_stop_words = [...]), applied by the document's detected
    # language (needs clean.detect_language); languages not listed use the keys above.
    languages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_language(self, lang: str | None) -> "QualitySection":
        """The section a document of language `lang` is judged by."""
        over = self.languages.get(lang) if lang else None
        return dataclasses.replace(self, languages={}, **over) if over else self


LANGUAGE_FIXED = ("filters", "mode", "languages")   # [quality] keys a language cannot override


@dataclass(frozen=True)
class UrlFilterSection:
    """[url_filter]: block lists and banned words checked against each document's `url` in the
    clean stage, before its text rules (shardforge.clean.urls). All empty (default): off."""
    # UT1-layout folders: a category folder (holding `domains` and/or `urls`), or a folder of
    # category folders; a blocked document's reason is filter:url_blocklist:<folder name>
    blocklists: tuple[str, ...] = ()
    banned_words: tuple[str, ...] = ()       # equal to a URL token: filter:url_banned_word
    soft_banned_words: tuple[str, ...] = ()  # soft_word_threshold of them: filter:url_soft_banned_words
    soft_word_threshold: int = 2


@dataclass(frozen=True)
class RedactSection:
    """[redact]: PII kinds and how spans are replaced (shardforge.redact.pii)."""
    kinds: tuple[str, ...] = ("EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "KEY")
    mode: str = "placeholder"    # placeholder | pseudonym
    placeholders: dict[str, str] = field(default_factory=dict)   # kind -> text, default <KIND>
    # the pseudonymisation key, for mode = "pseudonym": from an environment variable (name it
    # here), a file, or, with a warning, a literal; it is never written anywhere (only its key id)
    pseudonym_key_env: str = ""
    pseudonym_key_file: str = ""
    pseudonym_key: str = field(default="", metadata={"secret": True})
    include_reserved: bool = False   # also redact non-public IPs, template e-mails, test cards, example keys
    max_chars: int = 64_000_000  # larger documents are rejected (invalid:too_large)

    def __post_init__(self):
        if self.mode == "pseudonym" and not (self.pseudonym_key or self.pseudonym_key_env or self.pseudonym_key_file):
            raise ConfigError("redact.pseudonym_key_env: pseudonym mode needs a key: set redact.pseudonym_key_env "
                              "(an environment variable) or redact.pseudonym_key_file")
        if self.max_chars < 1:
            raise ConfigError(f"redact.max_chars: must be >= 1, got {self.max_chars!r}")


@dataclass(frozen=True)
class RejectsSection:
    """[rejects]: what the rejects table keeps of each rejected row (shardforge.redact.privacy)."""
    record: str = "redacted"     # redacted | none | original (original warns: unredacted PII)


@dataclass(frozen=True)
class DedupSection:
    exact: bool = True
    normalization: str = "lower_alnum"   # none | whitespace | lower | lower_alnum
    near: bool = True
    shingle_size: int = 5
    num_perm: int = 128
    threshold: float = 0.8
    bands: int = 0               # 0 = derive bands x rows from threshold
    rows: int = 0
    exact_jaccard_check: bool = True
    rank_by: str = "length"      # keep per cluster: length | quality | none, then smallest id
    seed: int = 1
    max_component_iterations: int = 64
    checkpoint_dir: str = ""     # default: <output>/_checkpoints
    # a first batch's near-duplicate graph of at most this many documents (with signatures) is
    # solved in one task instead of the distributed phases (same result); 0 = always distributed.
    # Only without the exact check (which needs the candidates' texts)
    local_graph_max_nodes: int = 50_000

    def __post_init__(self):
        if (self.bands == 0) != (self.rows == 0):
            raise ConfigError("dedup.bands / dedup.rows: set both (or neither, to derive them from dedup.threshold)")
        if self.bands * self.rows > self.num_perm:
            raise ConfigError(f"dedup.bands x dedup.rows = {self.bands * self.rows} exceeds dedup.num_perm = {self.num_perm}")
        if self.local_graph_max_nodes < 0:
            raise ConfigError(f"dedup.local_graph_max_nodes: must be >= 0 (0: always distributed), "
                              f"got {self.local_graph_max_nodes!r}")


@dataclass(frozen=True)
class TokenizeSection:
    """[tokenize]: token ids by a `tokenizers` tokenizer.json (shardforge.tokenize.stage)."""
    tokenizer: str = ""          # path to tokenizer.json (read on the driver; executors get it broadcast)
    column: str = "tokens"       # the token list column (num_tokens is added beside it)
    bos_id: int = -1             # prepended to every document; -1 = none
    eos_id: int = -1             # appended to every document; -1 = none


@dataclass(frozen=True)
class ScoreModel:
    """One classifier of [score] models: its score lands in `signals.<name>`."""
    name: str = ""               # the signals field: letters, digits and _, not starting with a digit
    path: str = ""               # a fastText supervised model (.bin or quantized .ftz), read on the driver
    label: str = ""              # the label whose probability is the score, as the model names it ("__label__hq")


@dataclass(frozen=True)
class ScoreSection:
    """[score]: fastText classifier scores per document (shardforge.score). Annotates only:
    select on `signals.<name>` later (`[select] where` at build-shards)."""
    models: tuple[ScoreModel, ...] = ()
    batch_size: int = 1024       # texts per predict call (an Arrow batch is cut into such slices)


@dataclass(frozen=True)
class Benchmark:
    """One table of `[decontaminate] benchmarks`: a benchmark's items, read on the driver."""
    name: str = ""               # the reject reason is contaminated:<name>; letters, digits, _ . -
    path: str = ""               # a local JSONL file (.jsonl, .json, .ndjson, optionally .gz), Parquet file or folder
    text_field: str = "text"     # the field (JSONL) or column (Parquet) holding an item's text


@dataclass(frozen=True)
class DecontaminateSection:
    """[decontaminate]: benchmark decontamination by word n-gram overlap
    (shardforge.decontaminate). A document holding any n-gram of a benchmark item is
    contaminated."""
    benchmarks: tuple[Benchmark, ...] = ()   # in priority order: a reason names the first that matches
    ngram: int = 13              # words per n-gram
    # items of at least min_ngram but fewer than ngram words are looked for whole (one n-gram of
    # their length); shorter items are not looked for (counted in the report)
    min_ngram: int = 8


@dataclass(frozen=True)
class ShardsSection:
    key: str = "id"
    num_shards: int = 0          # 0 = derive from target_rows / target_bytes
    target_rows: int = 0
    target_bytes: int = 256_000_000
    row_group_rows: int = 1024
    compression: str = "zstd"
    compression_level: int = 3
    columns: tuple[str, ...] = ()   # () = every column of the curated table
    keep_builds: int = 2


@dataclass(frozen=True)
class SelectSection:
    """[select]: which rows of the curated table a shard build takes (shardforge.shards.build)."""
    # a Spark SQL boolean expression over the table's columns, e.g.
    # "quality_fail is null and signals.gopher_stop_words >= 3"; "" = every row
    where: str = ""


@dataclass(frozen=True)
class Config:
    pipeline: PipelineSection = field(default_factory=PipelineSection)
    spark: SparkSection = field(default_factory=SparkSection)
    ingest: IngestSection = field(default_factory=IngestSection)
    download: DownloadSection = field(default_factory=DownloadSection)
    clean: CleanSection = field(default_factory=CleanSection)
    quality: QualitySection = field(default_factory=QualitySection)
    url_filter: UrlFilterSection = field(default_factory=UrlFilterSection)
    redact: RedactSection = field(default_factory=RedactSection)
    rejects: RejectsSection = field(default_factory=RejectsSection)
    dedup: DedupSection = field(default_factory=DedupSection)
    tokenize: TokenizeSection = field(default_factory=TokenizeSection)
    score: ScoreSection = field(default_factory=ScoreSection)
    decontaminate: DecontaminateSection = field(default_factory=DecontaminateSection)
    shards: ShardsSection = field(default_factory=ShardsSection)
    select: SelectSection = field(default_factory=SelectSection)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-ready dict (tuples become lists); key order is stable."""
        return _plain(dataclasses.asdict(self))

    def replace(self, **sections: Any) -> "Config":
        return dataclasses.replace(self, **sections)


CHOICES: dict[str, tuple[str, ...]] = {
    "spark.jit": ("auto", "quick", "full"),
    "pipeline.input_format": ("auto", "jsonl", "parquet", "text", "warc", "webdataset", "delta"),
    "download.image_resize_mode": ("none", "keep_ratio", "center_crop", "border"),
    "download.image_format": ("jpeg", "png", "webp"),
    "download.expect": ("auto", "image", "page"),
    "clean.unicode_form": ("NFC", "NFKC"),
    "redact.mode": ("placeholder", "pseudonym"),
    "rejects.record": ("redacted", "none", "original"),
    "quality.mode": ("filter", "annotate"),
    "dedup.normalization": ("none", "whitespace", "lower", "lower_alnum"),
    "dedup.rank_by": ("length", "quality", "none"),
    "shards.compression": ("zstd", "snappy", "gzip", "none"),
}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _coerce(key: str, tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(f"{key}[{i}]", typing.get_args(tp)[0], v) for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return _table(key, tp, value)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return {str(k): str(v) if not isinstance(v, bool) else str(v).lower() for k, v in value.items()}
    raise ConfigError(f"{key}: unsupported type {tp}")  # pragma: no cover - a bug in this module


def _table(name: str, cls: type, raw: Mapping[str, Any]) -> Any:
    """A dataclass from a TOML table; `name` prefixes the keys in errors (`score.models[0].path`)."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(f"{name}.{key}: unknown key (known: {', '.join(sorted(known))})")
        full = f"{name}.{key}"
        if full == "quality.languages":
            values[key] = _language_overrides(value)
            continue
        values[key] = _coerce(full, hints[key], value)
        if full in CHOICES and values[key] not in CHOICES[full]:
            raise ConfigError(f"{full}: {value!r} is not one of {', '.join(CHOICES[full])}")
    return cls(**values)


def _section(name: str, cls: type, raw: Mapping[str, Any]) -> Any:
    obj = _table(name, cls, raw)
    _check_ranges(name, obj)
    return obj


def _language_overrides(raw: Any) -> dict[str, dict[str, Any]]:
    """[quality.languages.<lang>] tables: each checked as a [quality] section of its own (same
    keys, types and ranges), keeping only the keys it sets."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"quality.languages: expected a table of languages, got {raw!r}")
    out = {}
    for lang, table in sorted(raw.items()):
        where = f"quality.languages.{lang}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: expected a table of [quality] keys, got {table!r}")
        for key in table:
            if key in LANGUAGE_FIXED:
                raise ConfigError(f"{where}.{key}: cannot be set per language (only the rules' thresholds "
                                  "and word lists)")
        checked = _section(where, QualitySection, table)
        out[str(lang)] = {k: getattr(checked, k) for k in table}
    return out


def _check_ranges(name: str, obj: Any) -> None:
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0 and not (
                name == "tokenize" and f.name in ("bos_id", "eos_id") and v == -1):
            raise ConfigError(f"{name}.{f.name}: must be >= 0, got {v!r}")
    if name == "pipeline":
        try:
            check_stages(obj.stages)
        except ValueError as exc:
            raise ConfigError(f"pipeline.stages: {exc}") from None
        if obj.lock_timeout <= 0:
            raise ConfigError(f"pipeline.lock_timeout: must be > 0, got {obj.lock_timeout!r}")
    if name == "download":
        rules = [("threads_per_task", obj.threads_per_task >= 1, ">= 1"),
                 ("image_size", obj.image_size >= 1, ">= 1"),
                 ("image_quality", 1 <= obj.image_quality <= 100, "between 1 and 100"),
                 ("max_bytes", obj.max_bytes >= 1, ">= 1"),
                 ("connect_timeout", obj.connect_timeout > 0, "> 0"),
                 ("read_timeout", obj.read_timeout > 0, "> 0"),
                 ("expect", obj.expect in ("auto", "image", "page"), "auto, image or page")]
        for key, ok, want in rules:
            if not ok:
                raise ConfigError(f"download.{key}: must be {want}, got {getattr(obj, key)!r}")
        for net in obj.allowed_networks:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as exc:
                raise ConfigError(f"download.allowed_networks: {exc}") from None
    if name == "dedup" and not 0.0 < obj.threshold <= 1.0:
        raise ConfigError(f"dedup.threshold: must be in (0, 1], got {obj.threshold!r}")
    if name == "dedup" and obj.shingle_size < 1:
        raise ConfigError(f"dedup.shingle_size: must be >= 1, got {obj.shingle_size!r}")
    if name == "quality" or name.startswith("quality.languages."):
        for i, g in enumerate(obj.filters):
            if g not in QUALITY_GROUPS:
                raise ConfigError(f"quality.filters[{i}]: {g!r} is not one of {', '.join(QUALITY_GROUPS)}")
        for key, size in (("gopher_max_top_ngram_char_frac", 3), ("gopher_max_dup_ngram_char_frac", 6)):
            if len(getattr(obj, key)) != size:
                raise ConfigError(f"quality.{key}: expected {size} fractions (one per n), got {len(getattr(obj, key))}")
    if name == "url_filter":
        for key in ("banned_words", "soft_banned_words"):
            for i, w in enumerate(getattr(obj, key)):
                if not re.fullmatch(r"[A-Za-z0-9]+", w):   # URL tokens are runs of letters and digits
                    raise ConfigError(f"url_filter.{key}[{i}]: {w!r} can never equal a URL token "
                                      "(a run of ASCII letters and digits)")
        if obj.soft_word_threshold < 1:
            raise ConfigError(f"url_filter.soft_word_threshold: must be >= 1, got {obj.soft_word_threshold!r}")
    if name == "clean" and obj.languages and not obj.detect_language:
        raise ConfigError("clean.languages: needs clean.detect_language = true")
    if name == "ingest" and obj.extract_timeout <= 0:
        raise ConfigError(f"ingest.extract_timeout: must be > 0, got {obj.extract_timeout!r}")
    if name == "ingest" and obj.max_record_bytes < 1:
        raise ConfigError(f"ingest.max_record_bytes: must be >= 1, got {obj.max_record_bytes!r}")
    if name == "ingest" and obj.max_member_bytes < 1:
        raise ConfigError(f"ingest.max_member_bytes: must be >= 1, got {obj.max_member_bytes!r}")
    if name == "ingest" and obj.image_max_pixels < 1:
        raise ConfigError(f"ingest.image_max_pixels: must be >= 1, got {obj.image_max_pixels!r}")
    if name == "score":
        _check_score(obj)
    if name == "shards" and obj.row_group_rows < 1:
        raise ConfigError(f"shards.row_group_rows: must be >= 1, got {obj.row_group_rows!r}")
    if name == "decontaminate":
        _check_decontaminate(obj)
    if name == "redact":
        from_kinds = set(obj.kinds) | set(obj.placeholders)
        unknown = sorted(from_kinds - set(RedactSection().kinds))
        if unknown:
            raise ConfigError(f"redact.kinds: unknown kind {unknown[0]!r} (known: {', '.join(RedactSection().kinds)})")


def _check_score(obj: ScoreSection) -> None:
    """Each model named once, as a struct field can be, with a path and a label (whether the
    files exist and hold that label is checked before a run: shardforge.score.model)."""
    if obj.batch_size < 1:
        raise ConfigError(f"score.batch_size: must be >= 1, got {obj.batch_size!r}")
    seen = set()
    for i, m in enumerate(obj.models):
        key = f"score.models[{i}]"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", m.name):
            raise ConfigError(f"{key}.name: {m.name!r} must be letters, digits and _ (not starting with a digit): "
                              "it names the field signals.<name>")
        if m.name in seen:
            raise ConfigError(f"{key}.name: {m.name!r} is used by an earlier model")
        seen.add(m.name)
        for field_name in ("path", "label"):
            if not getattr(m, field_name):
                raise ConfigError(f"{key}.{field_name}: missing (each model needs name, path and label)")


MAX_BENCHMARKS = 64      # a document's matches are a 64-bit set of benchmarks


def _check_decontaminate(obj: DecontaminateSection) -> None:
    """n-gram lengths in range; each benchmark named once, as a reject reason can be, with a
    path (whether the files can be read is checked before a run: shardforge.decontaminate)."""
    if obj.ngram < 1:
        raise ConfigError(f"decontaminate.ngram: must be >= 1, got {obj.ngram!r}")
    if not 1 <= obj.min_ngram <= obj.ngram:
        raise ConfigError(f"decontaminate.min_ngram: must be between 1 and decontaminate.ngram ({obj.ngram}), "
                          f"got {obj.min_ngram!r}")
    if len(obj.benchmarks) > MAX_BENCHMARKS:
        raise ConfigError(f"decontaminate.benchmarks: at most {MAX_BENCHMARKS} benchmarks, got {len(obj.benchmarks)}")
    seen: set[str] = set()
    for i, b in enumerate(obj.benchmarks):
        where = f"decontaminate.benchmarks[{i}]"
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", b.name):
            raise ConfigError(f"{where}.name: a name of letters, digits, '_', '.' or '-' is needed "
                              f"(it becomes the reject reason contaminated:<name>), got {b.name!r}")
        if b.name in seen:
            raise ConfigError(f"{where}.name: {b.name!r} is given twice")
        seen.add(b.name)
        if not b.path:
            raise ConfigError(f"{where}.path: no file given (JSONL or Parquet of benchmark items)")
        if not b.text_field:
            raise ConfigError(f"{where}.text_field: must not be empty")


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    path, raw = text.split("=", 1)
    parts = path.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return parts, value


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a TOML config (or defaults when `path` is None) and apply overrides."""
    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    for text in overrides:
        (section, key), value = _parse_override(text)
        raw.setdefault(section, {})
        if not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: expected a table")
        raw[section][key] = value
    sections = {f.name: f.type for f in dataclasses.fields(Config)}
    hints = typing.get_type_hints(Config)
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(f"{name}: unknown section (known: {', '.join(sections)})")
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a table, got {value!r}")
        built[name] = _section(name, hints[name], value)
    cfg = Config(**built)
    if cfg.quality.languages and not cfg.clean.detect_language:
        raise ConfigError("quality.languages: per-language thresholds need clean.detect_language = true")
    return cfg
