"""Arrow to numpy and back without pandas (`shardforge.loaders.arrays`): the same values as
pyarrow's own conversions, and a loader process that reads every mode never imports pandas
(pyarrow's `to_numpy` and `pa.array` on numpy would: about a second of CPU in each
DataLoader worker, each epoch)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from loader_helpers import make_build
from shardforge.loaders.arrays import array_of, numpy_of

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
         pa.float16(), pa.float32(), pa.float64()]


def _values(t: pa.DataType) -> list:
    if pa.types.is_floating(t):
        return [0.5, -1.25, 3.0, 7.5, -0.0, 2.25, 1e3]
    if pa.types.is_signed_integer(t):
        return [1, -2, 3, -(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1, 0, 5]
    return [1, 2, 3, 0, 2 ** t.bit_width - 1, 7, 9]


@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("offset,length", [(0, 7), (2, 4), (6, 1), (3, 0)])
def test_numpy_of_equals_pyarrows_conversion(t, offset, length):
    values = _values(t)
    if t == pa.float16():
        arr = pa.array(np.array(values, dtype=np.float16)).slice(offset, length)
    else:
        arr = pa.array(values, t).slice(offset, length)
    expected = arr.to_numpy(zero_copy_only=False)
    got = numpy_of(arr)
    assert got.dtype == expected.dtype and got.tolist() == expected.tolist()


def test_numpy_of_sliced_list_offsets_and_values():
    lists = pa.array([[1, 2], [], [3, 4, 5], [6]], pa.list_(pa.uint16())).slice(1, 3)
    assert numpy_of(lists.offsets).tolist() == lists.offsets.to_numpy().tolist() == [2, 2, 5, 6]
    assert numpy_of(lists.values).tolist() == [1, 2, 3, 4, 5, 6]


def test_numpy_of_leaves_nulls_and_booleans_to_pyarrow():
    with_null = pa.array([1, None, 3], pa.int32())
    assert numpy_of(with_null).tolist()[::2] == [1.0, 3.0] and np.isnan(numpy_of(with_null)[1])
    assert numpy_of(pa.array([True, False, True])).tolist() == [True, False, True]


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_array_of_equals_pa_array(t):
    values = pa.array(np.array(_values(t), dtype=np.float16)).to_numpy() if t == pa.float16() else \
        pa.array(_values(t), t).to_numpy(zero_copy_only=False)
    assert array_of(values[1:5], t).equals(pa.array(values[1:5], type=t))
    assert array_of(values[::2], t).equals(pa.array(values[::2], type=t))   # not contiguous
    assert array_of(values).equals(pa.array(values))


READ_ALL = """
import json, sys
from torch.utils.data import DataLoader
from shardforge.loaders import MixedDataset, ShardedDataset, TokenDataset
from shardforge.loaders.tokens import SequenceReader
path = sys.argv[1]
n = 0
for batch in DataLoader(ShardedDataset(path, rank=0, world_size=1, batch_size=4, batched=True), batch_size=None):
    n += 1
for sample in ShardedDataset(path, rank=0, world_size=1):
    n += 1
for chunk in SequenceReader(path, sequence_length=4, rank=0, world_size=1, seed=0).iter_sequences(2):
    n += 1
for batch in DataLoader(TokenDataset(path, sequence_length=4, rank=0, world_size=1, batch_size=2, batched=True),
                        batch_size=None):
    n += 1
for sample in MixedDataset([(path, 0.5), (path, 0.5)], rank=0, world_size=1):
    n += 1
print(json.dumps({"items": n, "pandas": "pandas" in sys.modules}))
"""


def test_reading_every_mode_imports_no_pandas(tmp_path):
    pytest.importorskip("pandas")      # installed with pyspark's extras; the promise is about not loading it
    make_build(tmp_path / "b", [30, 0, 21], row_group_rows=8)
    proc = subprocess.run([sys.executable, "-c", READ_ALL, str(tmp_path / "b")], capture_output=True, text=True,
                          cwd=str(Path(__file__).parent), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["items"] > 51
    assert out["pandas"] is False
