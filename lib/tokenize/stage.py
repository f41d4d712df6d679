"""The tokenize stage: token ids of each document's text, by a `tokenizers` tokenizer.json.

`tokenize(df, cfg, tokenizer_json)` adds two columns: `cfg.column` (array<int> of token
ids, BOS/EOS added when configured) and `num_tokens` (int). Encoding runs per Arrow batch
in `mapInArrow`, with the tokenizer loaded once per Python worker from the JSON the driver
broadcast (executors need no copy of the file): shardforge's compiled byte-level BPE when
`shardforge.tokenize.native.choose` finds it gives this file's ids (GPT-2-style files, such as
`train_bpe` writes), else `tokenizers`' `Tokenizer.encode_batch_fast`; the report names it. Each task
encodes on one core (Spark runs one task per core): the Rust thread pool is switched off.
Deterministic: ids depend on the text and the tokenizer file only. A document without
text gets 0 tokens and is kept (the loader accounts for it); no row is rejected here.

The token column's Spark field carries metadata `{"shardforge.dtype": "uint16" | "int32"}`,
the narrowest type holding the vocabulary; it travels with the column into the curated
table, and the shard writer stores the list in that type.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
from shardforge.schemas import DTYPE_KEY  # noqa: F401  (re-exported: the key names the narrow type)

_CACHE: dict[str, object] = {}


class TokenizerError(ValueError):
    """A tokenizer file that is missing or cannot be loaded."""


@dataclass(frozen=True)
class TokenizerInfo:
    json: str
    sha256: str
    vocab_size: int
    dtype: str          # uint16 | int32
    encoder: str = "tokenizers"   # "shardforge" (the compiled BPE, shardforge.tokenize.native) | "tokenizers"
    encoder_note: str = ""        # why not the compiled one


def load_tokenizer(path: str) -> TokenizerInfo:
    """Read and check a tokenizer.json (on the driver, before any Spark job)."""
    if not path:
        raise TokenizerError("tokenize.tokenizer: no tokenizer file given (a tokenizer.json from the `tokenizers` library)")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise TokenizerError(f"tokenize.tokenizer: cannot read {path}: {exc.strerror or exc}") from None
    sha = hashlib.sha256(text.encode()).hexdigest()
    if sha in _INFO:                  # checked before the run (runner.validate), then used by the stage
        return _INFO[sha]
    try:
        tok = _cached(text, sha)          # the one Tokenizer this process keeps for the file
    except Exception as exc:
        raise TokenizerError(f"tokenize.tokenizer: {path} is not a tokenizer.json the `tokenizers` library "
                             f"can load: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    size = tok.get_vocab_size(with_added_tokens=True)
    from shardforge.tokenize.native import choose

    encoder, note = choose(text, tok)
    _INFO[sha] = TokenizerInfo(text, sha, size, "uint16" if size <= np.iinfo(np.uint16).max + 1 else "int32",
                               encoder, note)
    return _INFO[sha]


_INFO: dict[str, TokenizerInfo] = {}    # by the file's sha256: loading and the encoder's probes, once per process


def _from_str(text: str):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    return Tokenizer.from_str(text)


def _cached(text: str, sha: str):
    tok = _CACHE.get(sha)
    if tok is None:
        tok = _CACHE[sha] = _from_str(text)
    return tok


def encode_batch(tok, texts: list, bos: int, eos: int) -> tuple[pa.Array, pa.Array]:
    """(list<int32> token ids, int32 counts) of `texts`; None texts give empty lists."""
    present = [t if t is not None else "" for t in texts]
    encodings = tok.encode_batch_fast(present, add_special_tokens=False)
    extra = (bos >= 0) + (eos >= 0)
    lengths = np.fromiter((len(e.ids) + extra for e in encodings), dtype=np.int32, count=len(encodings))
    offsets = np.zeros(len(encodings) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=np.int32)
    for i, e in enumerate(encodings):
        start = offsets[i] + (bos >= 0)
        ids = e.ids
        values[start:start + len(ids)] = ids
        if bos >= 0:
            values[offsets[i]] = bos
        if eos >= 0:
            values[offsets[i + 1] - 1] = eos
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)), pa.array(lengths)


def tokenize(df, cfg, info: TokenizerInfo):
    """`df` with the token column and `num_tokens` added (see the module docstring)."""
    from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

    column, bos, eos = cfg.column, cfg.bos_id, cfg.eos_id
    base = df.drop(column, "num_tokens")
    meta = {DTYPE_KEY: info.dtype, "shardforge.tokenizer_sha256": info.sha256, "shardforge.vocab_size": info.vocab_size}
    schema = StructType(base.schema.fields + [StructField(column, ArrayType(IntegerType(), False), True, meta),
                                              StructField("num_tokens", IntegerType(), True)])
    shared = df.sparkSession.sparkContext.broadcast(info.json)
    sha, native = info.sha256, info.encoder == "shardforge"

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if native:
            from shardforge.tokenize.native import encode_column
        else:
            tok = _cached(shared.value, sha)
        for batch in batches:
            if native:
                ids, counts = encode_column(shared.value, batch.column("text"), bos, eos)
            else:
                ids, counts = encode_batch(tok, batch.column("text").to_pylist(), bos, eos)
            yield pa.RecordBatch.from_arrays([*batch.columns, ids, counts], names=[*batch.schema.names, column,
                                                                                   "num_tokens"])

    return base.mapInArrow(run, schema)


def _token_bin(n):
    """A document's histogram bin: 0 for no tokens, else the power of two at or above its count."""
    from pyspark.sql import functions as F

    return F.when(n <= 0, F.lit(0)).otherwise(F.pow(F.lit(2), F.ceil(F.log2(n))).cast("long"))


# the bins a token count (an int column) can fall in: 0, then 1, 2, 4 .. 2^31
TOKEN_BINS = (0, *(1 << k for k in range(32)))


def token_stats(df, column: str = "num_tokens") -> dict:
    """Total tokens, documents and a histogram of tokens per document (power-of-two bins),
    computed in Spark; only the bins reach the driver."""
    from pyspark.sql import functions as F

    n = F.col(column)
    rows = df.groupBy(_token_bin(n).alias("bin")).agg(F.count(F.lit(1)).alias("docs"),
                                                      F.sum(n).alias("tokens")).collect()
    hist = {str(int(r["bin"])): int(r["docs"]) for r in sorted(rows, key=lambda r: r["bin"])}
    return {"documents": sum(int(r["docs"]) for r in rows), "total": sum(int(r["tokens"] or 0) for r in rows),
            "per_document_histogram": hist, "empty_documents": hist.get("0", 0)}


def token_stats_aggregates(column: str = "num_tokens") -> dict:
    """`token_stats` as aggregates (name -> Column) that an Observation computes while the rows
    are written (`StageOutput.observe`); `token_stats_of` turns their values into the same dict."""
    from pyspark.sql import functions as F

    n = F.col(column)
    b = _token_bin(n)
    return {"tok_docs": F.count(F.lit(1)), "tok_total": F.sum(n),
            **{f"tok_bin_{v}": F.count_if(b == F.lit(v).cast("long")) for v in TOKEN_BINS}}


def token_stats_of(values: dict) -> dict:
    hist = {str(v): int(values[f"tok_bin_{v}"]) for v in TOKEN_BINS if values[f"tok_bin_{v}"]}
    return {"documents": int(values["tok_docs"]), "total": int(values["tok_total"] or 0),
            "per_document_histogram": hist, "empty_documents": hist.get("0", 0)}


def train_bpe(texts, path: str, *, vocab_size: int = 2000) -> str:
    """Train a byte-level BPE tokenizer on `texts` and save it as tokenizer.json at `path`
    (deterministic for the same texts). Special tokens: [UNK] 0, <eos> 1, <bos> 2."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "<eos>", "<bos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tok.save(path)
    return path
