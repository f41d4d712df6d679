"""fastText model files: checked on the driver before a run, loaded once per Python worker.

`check_models(cfg)` reads each `[score] models` file's structure in pure Python (no fastText
code runs): the magic number and version, a supervised model's arguments, the dictionary (so
the labels), and the sizes of both matrices, dense or quantized. The file must be exactly as
long as that structure says. fastText's own loader does not check this: a file cut short
inside its output matrix loads without complaint and scores with zeros where weights were,
and random bytes can abort the process. A missing, unreadable, foreign or truncated file, or
a label the model does not have, is a `ModelError` naming the config key and the path (the
CLI exits 2 before Spark starts).

`load(path, sha256)` is the executors' side: the fastText binding (imported here, lazily,
so the config and the loader import without it), one model per content hash per process.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from shardforge.fs import file_sha256

MAGIC = 793712314            # fastText's FASTTEXT_FILEFORMAT_MAGIC_INT32
VERSION = 12                 # FASTTEXT_VERSION: the loader refuses newer files
SUPERVISED = 3               # model_name::sup
BINDING = "fasttext-community"   # the PyPI distribution providing `import fasttext`

_MODELS: dict[str, object] = {}
_STRUCTURE: dict[tuple, dict] = {}


class ModelError(ValueError):
    """A [score] model file that is missing, unreadable, not a supervised fastText model,
    truncated, or without the configured label."""


@dataclass(frozen=True)
class ModelInfo:
    name: str                # the signals field
    path: str
    label: str
    sha256: str
    size: int
    labels: tuple[str, ...]  # as the model names them, in its dictionary's order
    dim: int
    quantized: bool


class _Reader:
    """Reads the file front to back; running past its end is a ModelError."""

    def __init__(self, fh, size: int):
        self.fh, self.size = fh, size

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) < n:
            raise ModelError(f"truncated: the file ends at byte {self.size}, inside the model's structure")
        return data

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def skip(self, n: int) -> None:
        if n < 0 or self.fh.tell() + n > self.size:
            raise ModelError(f"truncated: expected at least {self.fh.tell() + max(n, 0)} bytes, the file has "
                             f"{self.size}")
        self.fh.seek(n, os.SEEK_CUR)

    def dictionary(self, entries: int) -> list[str]:
        """The labels among `entries` dictionary entries (word, NUL, int64 count, int8 type),
        read in 1 MiB blocks (a model may hold millions of words); leaves the file just past
        the last entry."""
        labels, buf, pos, before = [], b"", 0, self.fh.tell()    # `before`: file offset of buf[0]
        for _ in range(entries):
            while True:
                end = buf.find(b"\0", pos)
                if end >= 0 and end + 10 <= len(buf):
                    break
                if end < 0 and len(buf) - pos > 1 << 20:
                    raise ModelError("not a fastText model: a dictionary entry longer than 1 MiB")
                more = self.fh.read(1 << 20)
                if not more:
                    raise ModelError("truncated: the file ends inside its dictionary")
                before, buf, pos = before + pos, buf[pos:] + more, 0
            kind = buf[end + 9]
            if kind == 1:
                labels.append(buf[pos:end].decode("utf-8", "replace"))
            elif kind != 0:
                raise ModelError(f"not a fastText model: dictionary entry type {kind}")
            pos = end + 10
        self.fh.seek(before + pos)
        return labels


def _matrix(r: _Reader, quantized: bool) -> tuple[int, int]:
    """Skip one matrix (DenseMatrix or QuantMatrix, as fastText saves them); its (rows, cols)."""
    if not quantized:
        m, n = r.unpack("qq")
        if m < 0 or n <= 0:
            raise ModelError(f"not a fastText model: a matrix of {m} x {n}")
        r.skip(4 * m * n)
        return m, n
    qnorm, m, n, codesize = r.unpack("?qqi")
    if m < 0 or n <= 0 or codesize < 0:
        raise ModelError(f"not a fastText model: a quantized matrix of {m} x {n}")
    r.skip(codesize)
    _product_quantizer(r)
    if qnorm:
        r.skip(m)
        _product_quantizer(r)
    return m, n


def _product_quantizer(r: _Reader) -> None:
    dim, _nsubq, _dsub, _lastdsub = r.unpack("iiii")
    if dim <= 0:
        raise ModelError(f"not a fastText model: a product quantizer of dimension {dim}")
    r.skip(4 * dim * 256)        # centroids: dim x ksub (2^8) floats


def read_structure(path: str) -> dict:
    """The structure of a fastText supervised model file: {dim, labels, quantized, size}.
    Raises ModelError (without the key: `check_models` adds it) when it is not one or is cut
    short or has bytes past its end. Remembered per (path, size, mtime)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _STRUCTURE:
        _STRUCTURE[key] = _read_structure(path, st.st_size)
    return _STRUCTURE[key]


def _read_structure(path: str, size: int) -> dict:
    with open(path, "rb") as fh:
        r = _Reader(fh, size)
        if size < 8:
            raise ModelError(f"not a fastText model: {size} bytes")
        magic, version = r.unpack("ii")
        if magic != MAGIC:
            raise ModelError("not a fastText model (wrong magic number)")
        if not 0 < version <= VERSION:
            raise ModelError(f"fastText file format version {version}; this fastText reads versions up to {VERSION}")
        dim, _ws, _epoch, _min_count, _neg, _word_ngrams, _loss, model, bucket, _minn, _maxn, _lr_rate, _t = \
            r.unpack("12id")
        if model != SUPERVISED:
            raise ModelError("a fastText word-vector model, not a classifier (trained with `supervised`)")
        if dim <= 0 or bucket < 0:
            raise ModelError(f"not a fastText model: dim {dim}, bucket {bucket}")
        entries, nwords, nlabels, _ntokens, pruned = r.unpack("iiiqq")
        if entries < 0 or nwords < 0 or nlabels < 0 or nwords + nlabels != entries or pruned < -1:
            raise ModelError(f"not a fastText model: a dictionary of {entries} entries "
                             f"({nwords} words, {nlabels} labels)")
        labels = r.dictionary(entries)
        if len(labels) != nlabels:
            raise ModelError(f"not a fastText model: {len(labels)} labels where the dictionary declares {nlabels}")
        r.skip(8 * max(pruned, 0))
        (quant_input,) = r.unpack("?")
        _matrix(r, quant_input)
        (quant_output,) = r.unpack("?")
        rows, cols = _matrix(r, quant_output)
        if rows != nlabels or cols != dim:
            raise ModelError(f"not a fastText classifier: an output matrix of {rows} x {cols} for {nlabels} "
                             f"labels of dimension {dim}")
        end = fh.tell()
    if end != size:
        raise ModelError(f"{size - end} bytes past the end of the model (a damaged or concatenated file)")
    return {"dim": dim, "labels": tuple(labels), "quantized": quant_input, "size": size}


def check_models(cfg) -> tuple[ModelInfo, ...]:
    """Every `[score] models` entry checked (see the module docstring), on the driver, before
    any Spark job; at least one model is needed."""
    if not cfg.models:
        raise ModelError("score.models: no model given (the score stage needs at least one "
                         '{ name = "...", path = "model.bin", label = "__label__..." })')
    out = []
    for i, m in enumerate(cfg.models):
        key = f"score.models[{i}].path"
        if not os.path.isfile(m.path):
            raise ModelError(f"{key}: {m.path}: no such model file")
        try:
            info = read_structure(m.path)
            sha = file_sha256(m.path)
        except OSError as exc:
            raise ModelError(f"{key}: cannot read {m.path}: {exc.strerror or exc}") from None
        except ModelError as exc:
            raise ModelError(f"{key}: {m.path}: {exc}") from None
        if m.label not in info["labels"]:
            hint = f" (did you mean '__label__{m.label}'?)" if f"__label__{m.label}" in info["labels"] else ""
            raise ModelError(f"score.models[{i}].label: {m.label!r} is not a label of {m.path}{hint}; its labels: "
                             + ", ".join(info["labels"][:20]) + (" ..." if len(info["labels"]) > 20 else ""))
        out.append(ModelInfo(m.name, m.path, m.label, sha, info["size"], info["labels"], info["dim"],
                             info["quantized"]))
    return tuple(out)


def binding():
    """The fastText module; a ModelError saying how to install it when it is missing."""
    try:
        import fasttext
    except ImportError:
        raise ModelError(f"score: the fastText binding is not installed (pip install 'shardforge[score]', "
                         f"which brings {BINDING})") from None
    return fasttext


def load(path: str, sha256: str):
    """The model at `path` (whose content hashes to `sha256`), loaded once per process."""
    model = _MODELS.get(sha256)
    if model is None:
        model = _MODELS[sha256] = binding().load_model(path)
    return model
