"""One rank of the loader's torch.distributed test (started by test_loader_distributed.py):
reads its part of a shard build through a DataLoader (or reader processes), trains a tiny DDP model on it,
and writes the ids it saw, its step count and its state_dict to a JSON file."""
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from shardforge.loaders import ShardedDataset


def main(build: str, policy: str, out: str, workers: str) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    readers = int(workers[1:]) if workers.startswith("r") else 0      # "r2": 2 reader processes
    ds = ShardedDataset(build, seed=7, window=2, policy=policy, batch_size=4, batched=True,
                        columns=["id", "score"], reader_processes=readers, lanes=max(1, readers))
    # rank and world size from torch.distributed
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ids, steps, consumed = [], 0, 0
    for batch in DataLoader(ds, batch_size=None, num_workers=0 if readers else int(workers)):
        loss = model(batch["score"].float().unsqueeze(1) / 1e5).pow(2).mean()
        opt.zero_grad()
        loss.backward()                                   # all-reduce: hangs if ranks' step counts differ
        opt.step()
        ids += [int(i) for i in batch["id"]]
        consumed += len(batch["id"])
        steps += 1
    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, ds.state_dict(consumed=consumed))
    dist.barrier()
    with open(out, "w") as fh:
        json.dump({"rank": rank, "ids": ids, "steps": steps, "states": states,
                   "weight": model.module.weight.item()}, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:5])
