"""Reading and writing Arrow string columns for the text kernels, robust to bad bytes.

`to_pylist_safe` decodes a string (or large string) array to Python strings; if the
bytes are not valid UTF-8 (which a JVM or a file reader can hand over), each bad
value is decoded with U+FFFD replacement instead of failing the whole batch.
"""
from __future__ import annotations

import pyarrow as pa


def to_pylist_safe(arr: pa.Array) -> list[str | None]:
    """Python strings (None for nulls) of a string array, never raising on bad UTF-8."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    try:
        arr.validate(full=True)
        return arr.to_pylist()
    except (pa.ArrowInvalid, UnicodeDecodeError):
        binary = arr.view(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
        return [None if v is None else v.decode("utf-8", "replace") for v in binary.to_pylist()]


def from_pylist(values: list[str | None], type_: pa.DataType = pa.string()) -> pa.Array:
    """A string array; lone surrogates (which UTF-8 cannot hold) are replaced by U+FFFD."""
    try:
        return pa.array(values, type=type_)
    except (UnicodeEncodeError, pa.ArrowInvalid):
        fixed = [None if v is None else v.encode("utf-8", "replace").decode("utf-8") for v in values]
        return pa.array(fixed, type=type_)
