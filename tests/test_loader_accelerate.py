"""ShardedDataset inside Accelerate's IterableDatasetShard, in one process (no torch.distributed):
the wrapper that prepare() puts around an IterableDataset keeps items [r*B, (r+1)*B) of every W*B,
and the dataset's layout makes that exactly the rank's own samples, for every rank, batch size and
part length, with and without DataLoader workers; mismatched settings are refused."""
from __future__ import annotations

import pytest

pytest.importorskip("accelerate")

from accelerate.data_loader import IterableDatasetShard  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

from loader_helpers import build_fixture  # noqa: E402
from shardforge.loaders import LoaderError, ShardedDataset, collate  # noqa: E402
from shardforge.loaders.hf_accelerate import lay_out  # noqa: E402

build = build_fixture([30, 0, 13, 22], row_group_rows=4)     # 65 rows


class Listed(IterableDataset):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


@pytest.mark.parametrize("slots", [2, 3])
@pytest.mark.parametrize("batch_size", [1, 3, 4])
@pytest.mark.parametrize("n", [0, 1, 5, 12])
def test_lay_out_gives_each_slot_its_own_samples(slots, batch_size, n):
    for slot in range(slots):
        own = [f"r{slot}-{i}" for i in range(n)]
        for drop_last in (True, False):
            shard = IterableDatasetShard(Listed(list(lay_out(own, slot=slot, slots=slots, batch_size=batch_size))),
                                         batch_size=batch_size, drop_last=drop_last, num_processes=slots,
                                         process_index=slot)
            got = list(shard)
            whole = n - n % batch_size
            assert got[:whole] == own[:whole]
            if drop_last or n % batch_size == 0:
                assert len(got) == whole
            else:                      # the short last batch, completed with the rank's first samples
                tail = own[whole:]
                assert got[whole:] == tail + (own * batch_size)[:batch_size - len(tail)]


def ids(items):
    return [int(s["id"]) for s in items]


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("workers", [0, 2])
def test_wrapped_dataset_yields_its_rank_part_exactly(build, world, workers):
    B = 4
    for rank in range(world):
        plain = ShardedDataset(build, rank=rank, world_size=world, seed=1, batch_size=B)
        expected = ids(plain)
        ds = ShardedDataset(build, rank=rank, world_size=world, seed=1, batch_size=B)
        shard = IterableDatasetShard(ds, batch_size=B, drop_last=True, num_processes=world, process_index=rank)
        loader = DataLoader(shard, batch_size=B, collate_fn=collate, num_workers=workers)
        got = [int(i) for batch in loader for i in batch["id"]]
        assert got == expected[:len(expected) - len(expected) % B]
        assert len(loader) == len(expected) // B


def test_mismatched_settings_are_refused(build):
    ds = ShardedDataset(build, rank=1, world_size=2, batch_size=4)
    with pytest.raises(LoaderError, match="shards over 2 processes"):
        list(IterableDatasetShard(ds, batch_size=4, num_processes=2, process_index=0))
    ds = ShardedDataset(build, rank=0, world_size=2, batch_size=4)
    with pytest.raises(LoaderError, match="per-sample mode"):
        list(IterableDatasetShard(ds, batch_size=2, num_processes=2, process_index=0))
    ds = ShardedDataset(build, rank=0, world_size=2, batch_size=4)
    with pytest.raises(LoaderError, match="split_batches"):
        list(IterableDatasetShard(ds, batch_size=4, num_processes=2, process_index=0, split_batches=True))
