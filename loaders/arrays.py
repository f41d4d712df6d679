"""Arrow arrays as numpy, without pyarrow's pandas shim.

`pa.Array.to_numpy` loads pyarrow's pandas compatibility layer, which imports pandas when
it is installed: about a second of CPU (more on a loaded machine) in every process that
converts a column. DataLoader workers forked from a training process that never converted
one each paid it again, every epoch. `numpy_of` reads a numeric array's data buffer
directly instead (zero-copy, read-only, as `to_numpy` gives) and leaves other types to
pyarrow.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa


def numpy_of(arr: pa.Array) -> np.ndarray:
    """A numeric Arrow array as numpy: a read-only view of its data buffer for integers and
    floats without nulls, `to_numpy(zero_copy_only=False)` for anything else."""
    t = arr.type
    if arr.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t)):
        dtype = _dtype(t)
        if len(arr) == 0:
            return np.empty(0, dtype=dtype)
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
    return arr.to_numpy(zero_copy_only=False)


def array_of(values: np.ndarray, t: pa.DataType | None = None) -> pa.Array:
    """A 1-D numpy array as an Arrow array (of type `t`, default the array's own), without
    pandas for integers and floats of the same width (`pa.array` on numpy loads the shim
    too); other types go through `pa.array`."""
    if t is None:
        t = pa.from_numpy_dtype(values.dtype)
    if values.ndim == 1 and (pa.types.is_integer(t) or pa.types.is_floating(t)) \
            and values.dtype == _dtype(t):
        values = np.ascontiguousarray(values)
        return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(values)])
    return pa.array(values, type=t)


def _dtype(t: pa.DataType) -> np.dtype:
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    return np.dtype(f"{kind}{t.bit_width // 8}")
