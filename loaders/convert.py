"""Arrow to torch: collated batches straight from Arrow columns, and per-sample dicts.

Numeric and boolean columns become tensors (zero-copy where Arrow allows);
list columns of numbers (token ids) become a 2-D tensor when every row has the
same length, else a list of 1-D tensors (views into one buffer); strings and any
other type pass through as Python objects. Numeric columns with nulls pass
through as Python lists (None kept), since a tensor cannot hold a null.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import torch

from .arrays import numpy_of


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _list_of_numbers(t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
        and _numeric(t.value_type)


def _as_array(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _tensor(values: np.ndarray) -> torch.Tensor:
    if not values.flags.writeable:  # Arrow buffers are read-only; torch wants to own writable memory
        values = values.copy()
    return torch.from_numpy(values)


def _list_values(arr: pa.Array) -> tuple[torch.Tensor, np.ndarray]:
    """(flat values tensor, lengths) of a list array of numbers without nulls."""
    if pa.types.is_fixed_size_list(arr.type):
        size = arr.type.list_size
        flat = arr.flatten()
        return _tensor(numpy_of(flat)), np.full(len(arr), size, dtype=np.int64)
    offsets = numpy_of(arr.offsets)
    flat = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
    return _tensor(numpy_of(flat)), np.diff(offsets).astype(np.int64)


def column_to_batch(col) -> Any:
    """One column of a batch as a tensor, a list of tensors, or a list of Python values."""
    arr = _as_array(col)
    t = arr.type
    if _numeric(t) and arr.null_count == 0:
        return _tensor(numpy_of(arr))
    if _list_of_numbers(t) and arr.null_count == 0 and arr.values.null_count == 0:
        values, lengths = _list_values(arr)
        if len(lengths) and (lengths == lengths[0]).all():
            return values.reshape(len(lengths), int(lengths[0]))
        return list(torch.split(values, lengths.tolist()))
    return arr.to_pylist()


def table_to_batch(table: pa.Table) -> dict[str, Any]:
    """A collated batch: {column: tensor | list}, straight from Arrow."""
    return {name: column_to_batch(table.column(name)) for name in table.column_names}


def column_to_samples(col) -> list:
    """One column as a list of per-sample values: Python numbers, 1-D tensors for lists
    of numbers, Python objects otherwise."""
    arr = _as_array(col)
    t = arr.type
    if _list_of_numbers(t) and arr.null_count == 0 and arr.values.null_count == 0:
        values, lengths = _list_values(arr)
        return list(torch.split(values, lengths.tolist()))
    if _numeric(t) and arr.null_count == 0:
        return numpy_of(arr).tolist()
    return arr.to_pylist()


def table_to_samples(table: pa.Table) -> Iterator[dict[str, Any]]:
    names = table.column_names
    cols = [column_to_samples(table.column(n)) for n in names]
    for values in zip(*cols):
        yield dict(zip(names, values))



def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """A DataLoader `collate_fn` for per-sample mode: numbers become a tensor,
    equal-length tensors are stacked, ragged ones stay a list of tensors (pad them in
    your own collate_fn if the model wants a rectangle), other values stay a list."""
    out: dict[str, Any] = {}
    for name in samples[0]:
        values = [s[name] for s in samples]
        first = values[0]
        if isinstance(first, torch.Tensor):
            same = all(v.shape == first.shape for v in values)
            out[name] = torch.stack(values) if same else values
        elif isinstance(first, (bool, int, float)) and all(isinstance(v, type(first)) for v in values):
            out[name] = torch.tensor(values)
        else:
            out[name] = values
    return out


def no_collate(batch):
    """`collate_fn` for batch mode (`DataLoader(ds, batch_size=None, collate_fn=no_collate)`):
    hands the dataset's batch over as it is. torch's default for batch_size=None walks
    every element of list columns (one call per string), which costs more than reading."""
    return batch
