"""What a ShardedDataset does under Hugging Face Accelerate's `prepare()` (read from accelerate 1.15's
data_loader.py; nothing here imports accelerate).

`prepare_data_loader` has no attribute or protocol by which a torch IterableDataset can say "I already
read only my rank's part" (it honours one only for `datasets.IterableDataset`, through `.shard()`).
With more than one process it either

* dispatches (its default for an IterableDataset): only rank 0 iterates the DataLoader and sends
  slices of each batch to the others (`DataLoaderDispatcher`), so a rank-sharded dataset loses every
  other rank's part; or, with `DataLoaderConfiguration(dispatch_batches=False)`,
* wraps the dataset in `IterableDatasetShard(batch_size=B, num_processes=W, process_index=r)`, which
  keeps items `[r*B, (r+1)*B)` of every `W*B` items the dataset yields: a second sharding that
  keeps 1/W of the rank's part.

So the dataset recognises the wrapper that calls it (both call `set_epoch` on it, and
IterableDatasetShard calls `len()` on it) and

* refuses the dispatcher (`dispatch_guard`) with an error naming the setting, and
* under IterableDatasetShard, lays its batches out so that the wrapper's slice is exactly the
  rank's own batches (`lay_out`): each batch of B samples is yielded W times (references, not
  copies), so the wrapper's slot r holds it. Each rank still decodes only its own part.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator

from .source import LoaderError

DISPATCH_HELP = ("Accelerate's default for an IterableDataset dispatches batches from rank 0, which would read "
                 "only rank 0's part of the build: prepare the DataLoader with "
                 "Accelerator(dataloader_config=DataLoaderConfiguration(dispatch_batches=False)) "
                 "(see loaders/README.md, 'Hugging Face Accelerate')")


def wrapper_of(obj: Any) -> dict | None:
    """Accelerate's view of the dataset when `obj` (the caller's `self`) is one of Accelerate's
    wrappers: {"kind": "shard", "slots", "slot", "batch_size", "split_batches"} for
    IterableDatasetShard, {"kind": "dispatch"} for DataLoaderDispatcher, else None."""
    mod = sys.modules.get("accelerate.data_loader")
    if mod is None or obj is None:
        return None
    if isinstance(obj, mod.IterableDatasetShard):
        return {"kind": "shard", "slots": int(obj.num_processes), "slot": int(obj.process_index),
                "batch_size": obj.batch_size, "split_batches": bool(obj.split_batches)}
    if type(obj).__name__ == "DataLoaderDispatcher" and isinstance(obj, mod.DataLoaderDispatcher):
        return {"kind": "dispatch"}
    return None


def caller_wrapper(depth: int = 2) -> dict | None:
    """`wrapper_of` the `self` of the frame `depth` levels up (the caller of the dataset method
    that calls this)."""
    frame = sys._getframe(depth)
    return wrapper_of(frame.f_locals.get("self"))


def check(wrap: dict | None, *, rank: int, world_size: int, batch_size: int | None, batched: bool) -> None:
    """Refuse the Accelerate set-ups in which the rank's part would not reach the rank exactly."""
    if wrap is None or world_size == 1:
        return
    if wrap["kind"] == "dispatch":
        raise LoaderError(DISPATCH_HELP)
    if wrap["split_batches"]:
        raise LoaderError("Accelerate's split_batches=True would split each of this rank's batches over the "
                          "ranks again; use split_batches=False (the default)")
    if (wrap["slots"], wrap["slot"]) != (world_size, rank):
        raise LoaderError(f"Accelerate shards over {wrap['slots']} processes (this is {wrap['slot']}), the dataset "
                          f"reads rank {rank} of {world_size}")
    if batched or wrap["batch_size"] != batch_size:
        raise LoaderError("under Accelerate's prepare(), use per-sample mode with the DataLoader's batch size: "
                          f"ShardedDataset(..., batch_size=B) and DataLoader(ds, batch_size=B, collate_fn=collate); "
                          f"got dataset batch_size={batch_size}, batched={batched}, DataLoader batch_size="
                          f"{wrap['batch_size']}")


def lay_out(samples: Iterable[Any], *, slot: int, slots: int, batch_size: int) -> Iterator[Any]:
    """The rank's samples laid out for IterableDatasetShard(batch_size, slots, slot): each full batch
    is yielded `slots` times, so the wrapper's slice [slot*B, (slot+1)*B) of every slots*B items is
    that batch. A last short batch (m < B samples) is preceded by slot*B fillers: the wrapper then
    drops it (DataLoader drop_last=True) or completes it with the rank's first B - m samples, as
    Accelerate completes any uneven last batch."""
    batch: list = []
    for sample in samples:
        batch.append(sample)
        if len(batch) == batch_size:
            for _ in range(slots):
                yield from batch
            batch = []
    if batch:
        for _ in range(slot * batch_size):
            yield batch[0]           # never reaches this rank: slots before its own
        yield from batch
