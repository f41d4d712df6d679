"""The window gather equals Arrow's take on every column kind it special-cases."""
import numpy as np
import pyarrow as pa

from shardforge.loaders.gather import Window, take


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


def _kinds(n: int, seed: int) -> pa.Table:
    """One table with every column kind the gather special-cases, and some it does not."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 6, n)
    return pa.table({
        "i64": pa.array(rng.integers(-9, 9, n), pa.int64()),
        "u8": pa.array(rng.integers(0, 255, n), pa.uint8()),
        "f32": pa.array(rng.random(n), pa.float32()),
        "text": pa.array(["é" * int(k) + f"-{i}" for i, k in enumerate(lens)]),
        "large_text": pa.array([f"{i}" * int(k) for i, k in enumerate(lens)], pa.large_string()),
        "blob": pa.array([bytes([i % 251]) * int(k) for i, k in enumerate(lens)], pa.binary()),
        "ragged": pa.array([list(range(int(k))) for k in lens], pa.list_(pa.int32())),
        "equal": pa.array([[i, i + 1, i + 2] for i in range(n)], pa.large_list(pa.float64())),
        "fixed": pa.array([[i, -i] for i in range(n)], pa.list_(pa.int16(), 2)),
        "nulls": pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int32()),
        "null_text": pa.array([None if i % 4 == 0 else "x" for i in range(n)], pa.string()),
        "flag": pa.array([i % 2 == 0 for i in range(n)]),
        "nested": pa.array([[["a"]] * int(k) for k in lens], pa.list_(pa.list_(pa.string()))),
        "struct": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
    })


def test_window_take_matches_arrow_on_several_row_groups():
    rng = np.random.default_rng(7)
    for sizes in ([5], [7, 1, 12], [3, 9, 4, 6]):
        tables = [_kinds(n, seed) for seed, n in enumerate(sizes)]
        sliced = [t.slice(1, t.num_rows - 1) if t.num_rows > 2 else t for t in tables]   # arrays with an offset
        for group in (tables, sliced):
            whole = pa.concat_tables(group)
            window = Window(group)
            for idx in (rng.permutation(whole.num_rows), rng.permutation(whole.num_rows)[:4],
                        rng.integers(0, whole.num_rows, 9), np.arange(0), np.arange(1, 3)):
                got = window.take(idx)
                assert got.schema == whole.schema
                assert got.equals(whole.take(pa.array(idx, pa.int64()))), idx


def test_window_take_of_a_run_in_one_row_group_is_a_slice():
    t = _kinds(10, 0)
    got = Window([t, _kinds(4, 1)]).take(np.arange(2, 6))
    assert got.equals(t.slice(2, 4))


def test_window_take_across_row_groups_whose_local_rows_line_up():
    """Rows from two row groups whose local indices happen to be consecutive (11, 12, 13 of
    groups 1, 0, 1) are not one run of a row group: each comes from its own group."""
    a, b = _kinds(16, 0), _kinds(16, 1)
    whole = pa.concat_tables([a, b])
    for idx in ([27, 12, 29], [16, 1], [12, 29, 30, 31]):
        got = Window([a, b]).take(np.array(idx))
        assert got.equals(whole.take(pa.array(idx, pa.int64()))), idx
