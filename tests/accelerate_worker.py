"""One rank of the Accelerate tests (started by test_trainer_accelerate.py with the environment
`accelerate launch` sets): prepare()s a DataLoader over a ShardedDataset, trains a tiny model, and
writes the ids it saw and its step count to a JSON file. Modes: `epoch` (one whole epoch), `save`
(save_state after `stop` steps and stop), `resume` (load_state, then the rest of the epoch),
`dispatch` (Accelerate's default dispatching, which the dataset refuses)."""
import json
import os
import sys

import torch
from accelerate import Accelerator, DataLoaderConfiguration
from torch.utils.data import DataLoader

from shardforge.loaders import LoaderError, ShardedDataset, collate

B = 4


class DataPosition:
    """The dataset's position as an Accelerate checkpoint object (register_for_checkpointing)."""

    def __init__(self, ds):
        self.ds, self.consumed = ds, 0

    def state_dict(self):
        return self.ds.state_dict(consumed=self.consumed)

    def load_state_dict(self, state):
        self.ds.load_state_dict(state)
        self.consumed = 0


def main(build: str, out: str, mode: str, stateful: str, ckpt: str, stop: str, workers: str) -> None:
    stateful = stateful == "1"
    config = (DataLoaderConfiguration() if mode == "dispatch" else
              DataLoaderConfiguration(dispatch_batches=False, use_stateful_dataloader=stateful))
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    ds = ShardedDataset(build, seed=3, window=2, batch_size=B, columns=["id", "score"])
    loader = DataLoader(ds, batch_size=B, collate_fn=collate, num_workers=int(workers))
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    position = DataPosition(ds)
    if not stateful:
        accelerator.register_for_checkpointing(position)
    if mode == "resume":
        accelerator.load_state(ckpt)
    ids, steps = [], 0
    result = {"rank": accelerator.process_index, "len": len(loader)}
    try:
        for batch in loader:
            loss = model(batch["score"].float().unsqueeze(1) / 1e5).pow(2).mean()
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
            ids += [int(i) for i in batch["id"]]
            position.consumed += len(batch["id"])
            steps += 1
            if mode == "save" and steps == int(stop):
                accelerator.save_state(ckpt)
                break
    except LoaderError as e:
        result["error"] = str(e)
        with open(out.format(r=accelerator.process_index), "w") as fh:
            json.dump(result, fh)
        os._exit(3)                        # the other rank waits for a broadcast that will not come
    result.update(ids=ids, steps=steps)
    accelerator.wait_for_everyone()
    with open(out.format(r=accelerator.process_index), "w") as fh:
        json.dump(result, fh)
    accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:8])
