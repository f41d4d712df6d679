"""The window gather equals Arrow's take on every column kind it special-cases."""
import numpy as np
import pyarrow as pa

from shardforge.loaders.gather import take


def test_take_matches_arrow():
    t = pa.table({
        "ragged": pa.array([[1, 2], [3], [], [4, 5, 6], [7]], pa.list_(pa.int32())),
        "fixed": pa.array([[1.5, 2], [3, 4], [5, 6], [7, 8], [9, 0]], pa.large_list(pa.float64())),
        "nulls": pa.array([[1], None, [2], [3], None], pa.list_(pa.int64())),
        "text": ["a", "b", None, "d", "e"],
        "n": pa.array([1, 2, 3, None, 5], pa.int16()),
    })
    rng = np.random.default_rng(0)
    for table in (t, t.slice(1, 4).combine_chunks()):
        for _ in range(5):
            idx = rng.permutation(table.num_rows)
            got = take(table, idx)
            assert got.equals(table.take(idx)) and got.schema == table.schema
