"""ShardedDataset and ShardReader on real shard builds: order, modes, tensors, errors, URLs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from loader_helpers import damage, make_build
from shardforge.loaders import LoaderError, ShardedDataset, ShardReader, StateError, collate
from shardforge.shards.manifest import ManifestError

SIZES = [37, 0, 21, 5, 60, 1]
TOTAL = sum(SIZES)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("build")
    make_build(root, SIZES, row_group_rows=8)
    return root


def ids_of(ds, **dl):
    if ds.batched:
        loader = DataLoader(ds, batch_size=None, **dl)
    else:
        loader = DataLoader(ds, batch_size=ds.batch_size or 4, collate_fn=collate, **dl)
    return [int(i) for b in loader for i in b["id"]]


def test_global_order_is_independent_of_world_size_and_workers(build):
    whole = ids_of(ShardedDataset(build, rank=0, world_size=1, seed=5, batch_size=4))
    assert sorted(whole) == sorted(i for s, n in enumerate(SIZES) for i in range(s * 100_000, s * 100_000 + n))
    for world in (2, 3, 5):
        for workers in (0, 2):
            parts = [ids_of(ShardedDataset(build, rank=r, world_size=world, seed=5, batch_size=4,
                                           batched=True), num_workers=workers) for r in range(world)]
            assert len({len(p) for p in parts}) == 1                     # equal per-rank counts
            assert [i for p in parts for i in p] == whole[:world * (TOTAL // world)]


def test_no_shuffle_is_manifest_order_and_epochs_differ(build):
    plain = ids_of(ShardedDataset(build, rank=0, world_size=1, shuffle=False, batch_size=8))
    assert plain == [i for s, n in enumerate(SIZES) for i in range(s * 100_000, s * 100_000 + n)]
    ds = ShardedDataset(build, rank=0, world_size=1, seed=1, batch_size=8, batched=True)
    e0 = ids_of(ds)
    assert ids_of(ds) == e0                 # same epoch, same order
    ds.set_epoch(1)
    e1 = ids_of(ds)
    assert e1 != e0 and sorted(e1) == sorted(e0)


def test_batch_mode_tensors_projection_and_transform(build):
    ds = ShardedDataset(build, rank=0, world_size=1, batch_size=5, batched=True,
                        columns=["id", "score", "tokens", "text"],
                        transform=lambda b: {**b, "n": len(b["text"])})
    batch = next(iter(DataLoader(ds, batch_size=None)))
    assert batch["id"].dtype == torch.int64 and batch["id"].shape == (5,)
    assert batch["score"].dtype == torch.float32
    assert all(isinstance(t, str) for t in batch["text"]) and batch["n"] == 5
    toks = batch["tokens"]
    lens = [1 + int(i) % 5 for i in batch["id"]]
    if len(set(lens)) == 1:
        assert toks.shape == (5, lens[0])
    else:
        assert [len(t) for t in toks] == lens and toks[0].dtype == torch.int32
    for i, t in zip(batch["id"], toks):
        assert t.tolist() == [int(i) % 97] * (1 + int(i) % 5)

    only = ShardedDataset(build, rank=0, world_size=1, columns="id", batch_size=3,
                          transform=lambda s: {"id2": s["id"] * 2})
    samples = list(only)
    assert set(samples[0]) == {"id2"} and len(samples) == TOTAL
    with pytest.raises(LoaderError, match=r"unknown column\(s\) \['nope'\]"):
        ShardedDataset(build, columns=["id", "nope"])


def test_equal_length_lists_become_a_2d_tensor(tmp_path):
    import pyarrow as pa
    from shardforge.shards.writer import write_build

    t = pa.table({"id": pa.array(range(10), pa.int64()),
                  "tokens": pa.array([[i, i + 1, i + 2] for i in range(10)], pa.list_(pa.int64()))})
    write_build(str(tmp_path), [t])
    b = next(iter(ShardedDataset(tmp_path, rank=0, world_size=1, batch_size=4, batched=True, shuffle=False)))
    assert b["tokens"].shape == (4, 3) and b["tokens"][1].tolist() == [1, 2, 3]


def test_rank_defaults_from_env(build, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    ds = ShardedDataset(build)
    assert (ds.rank, ds.world_size, len(ds)) == (2, 3, TOTAL // 3)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert (ShardedDataset(build).rank, ShardedDataset(build).world_size) == (0, 1)


def test_arrow_iterator(build):
    r = ShardReader(build, rank=1, world_size=2, seed=5, columns=["id"])
    batches = list(r.iter_batches(10))
    assert [b.num_rows for b in batches] == [10] * (TOTAL // 2 // 10) + ([TOTAL // 2 % 10] if TOTAL // 2 % 10 else [])
    whole = ids_of(ShardedDataset(build, rank=0, world_size=1, seed=5, batch_size=4))
    assert [i for b in batches for i in b.column("id").to_pylist()] == whole[TOTAL // 2:2 * (TOTAL // 2)]
    assert r.state_dict()["consumed"] == TOTAL // 2


def test_file_and_memory_urls(build):
    whole = ids_of(ShardedDataset(build, rank=0, world_size=1, seed=2, batch_size=4))
    assert ids_of(ShardedDataset(f"file://{build}", rank=0, world_size=1, seed=2, batch_size=4)) == whole
    assert ids_of(ShardedDataset(f"file://{build}/manifest.json", rank=0, world_size=1, seed=2,
                                 batch_size=4)) == whole
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    for path in Path(build).rglob("*"):
        if path.is_file():
            mem.pipe(f"/sf-test/{path.relative_to(build)}", path.read_bytes())
    ds = ShardedDataset("memory://sf-test", rank=0, world_size=1, seed=2, batch_size=4, verify=True)
    assert ids_of(ds) == whole


# -- clear errors --------------------------------------------------------------

def test_unknown_format_version(tmp_path):
    make_build(tmp_path, [5])
    m = json.loads((tmp_path / "manifest.json").read_text())
    m["format_version"] = 99
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ManifestError, match="unknown manifest format_version 99"):
        ShardedDataset(tmp_path)


def test_missing_shard(tmp_path):
    m = make_build(tmp_path, [5, 6])
    os.remove(m.path_of(m.shards[1]))
    with pytest.raises(ManifestError, match="shard 1 is missing"):
        ShardedDataset(tmp_path)


def test_checksum_mismatch_with_verification(tmp_path):
    m = make_build(tmp_path, [40, 6], row_group_rows=8)
    damage(m.path_of(m.shards[0]))
    ds = ShardedDataset(tmp_path, rank=0, world_size=1, shuffle=False, verify=True, batch_size=4)
    with pytest.raises(ManifestError, match="checksum mismatch for shard 0"):
        list(ds)


def test_a_damaged_shard_met_by_the_read_ahead_stops_the_reader_with_its_error(tmp_path):
    """Windows of one row group, in manifest order: shard 1's first window is set decoding in the
    background while shard 0's last one is read. Whichever thread decodes it (the background or
    the reader helping), its error must reach the reader, after every row of shard 0: not a gap,
    not a different error."""
    m = make_build(tmp_path, [40, 40], row_group_rows=8)
    damage(m.path_of(m.shards[1]))
    ds = ShardedDataset(tmp_path, rank=0, world_size=1, shuffle=False, verify=True, window=1, batch_size=4,
                        batched=True)
    got = []
    with pytest.raises(ManifestError, match="checksum mismatch for shard 1"):
        for batch in ds:
            got += batch["id"].tolist()
    assert sorted(got) == list(range(40))


def test_state_from_another_build_or_order(tmp_path, build):
    make_build(tmp_path, [5, 6])
    other = ShardedDataset(tmp_path, rank=0, world_size=1)
    state = ShardedDataset(build, rank=0, world_size=1).state_dict()
    with pytest.raises(StateError, match="another shard build"):
        other.load_state_dict(state)
    with pytest.raises(StateError, match="seed=0 but this dataset has seed=9"):
        ShardedDataset(build, seed=9).load_state_dict(state)
    with pytest.raises(StateError, match="not a shardforge loader state"):
        other.load_state_dict({"epoch": 1})
    bad = dict(state, consumed=10 ** 6)
    with pytest.raises(StateError, match="consumed=1000000 is outside"):
        ShardedDataset(build).load_state_dict(bad)
    with pytest.raises(LoaderError, match="consumed=999 is outside"):
        ShardedDataset(build).state_dict(consumed=999)
    json.dumps(state)  # JSON-serialisable


def test_workers_need_batch_size_in_sample_mode(build):
    with pytest.raises(Exception, match="pass batch_size="):
        list(DataLoader(ShardedDataset(build), batch_size=4, num_workers=2))


# -- no Spark (and for the Arrow iterator, no torch) --------------------------

BLOCKER = """
import sys
class Block:
    def __init__(self, names): self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in self.names:
            raise ImportError(f'{name} is not installed here')
        return None
sys.meta_path.insert(0, Block(NAMES))
"""


@pytest.mark.slow
@pytest.mark.parametrize("names,code", [
    (["pyspark", "py4j"], """
from shardforge.loaders import ShardedDataset
from torch.utils.data import DataLoader
n = sum(len(b['id']) for b in DataLoader(ShardedDataset(PATH, rank=0, world_size=1, batch_size=4,
                                                         batched=True), batch_size=None, num_workers=1))
assert n == TOTAL, n
"""),
    (["pyspark", "py4j", "torch"], """
from shardforge.loaders import ShardReader
n = sum(b.num_rows for b in ShardReader(PATH, rank=0, world_size=1).iter_batches(16))
assert n == TOTAL, n
"""),
])
def test_loader_imports_and_reads_without_spark(build, names, code):
    script = BLOCKER.replace("NAMES", repr(names)) + f"PATH, TOTAL = {str(build)!r}, {TOTAL}\n" + textwrap.dedent(code) + \
        f"bad = [m for m in sys.modules if m.split('.')[0] in {names!r}]\nassert not bad, bad\nprint('ok')\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_len_counts_items_and_is_equal_across_ranks(build):
    for policy in ("drop", "pad"):
        lens = set()
        for r in range(3):
            ds = ShardedDataset(build, rank=r, world_size=3, batch_size=4, batched=True, policy=policy)
            loader = DataLoader(ds, batch_size=None)
            got = list(loader)
            assert len(loader) == len(got) == -(-ds.num_samples() // 4)
            assert sum(len(b["id"]) for b in got) == ds.num_samples()
            lens.add(len(got))
        assert len(lens) == 1
