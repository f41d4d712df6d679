"""One rank of the Accelerate tests (started by test_trainer_accelerate.py with the environment
`accelerate launch` sets): prepare()s a DataLoader over a ShardedDataset, trains a tiny model for
`epochs` epochs with the loop loaders/README.md shows, and writes the ids it trained on per epoch
and its step counts to a JSON file. Modes: `run` (every epoch), `save` (save_state after `stop`
steps in all and stop), `resume` (load_state, then on to the end of the last epoch), `dispatch`
(Accelerate's default dispatching, which the dataset refuses)."""
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
        # Accelerate completes a rank's last short batch with other samples: count only the part's
        return self.ds.state_dict(consumed=min(self.consumed, self.ds.num_samples()))

    def load_state_dict(self, state):
        self.ds.load_state_dict(state)
        self.consumed = 0


def main(build: str, out: str, mode: str, stateful: str, ckpt: str, stop: str, workers: str, policy: str,
         epochs: str) -> None:
    stateful = stateful == "1"
    config = (DataLoaderConfiguration() if mode == "dispatch" else
              DataLoaderConfiguration(dispatch_batches=False, use_stateful_dataloader=stateful))
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    ds = ShardedDataset(build, seed=3, window=2, batch_size=B, columns=["id", "score"], policy=policy)
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
    result = {"rank": accelerator.process_index, "len": len(loader), "first_epoch": ds.epoch,
              "epochs": [], "steps": []}
    total = 0
    try:
        for epoch in range(ds.epoch, int(epochs)):      # the epoch a restored position is in, then on
            loader.set_epoch(epoch)
            position.consumed = 0
            ids, steps = [], 0
            result["epochs"].append(ids)
            for batch in loader:
                loss = model(batch["score"].float().unsqueeze(1) / 1e5).pow(2).mean()
                opt.zero_grad()
                accelerator.backward(loss)
                opt.step()
                ids += [int(i) for i in batch["id"]]
                position.consumed += len(batch["id"])
                steps += 1
                total += 1
                if mode == "save" and total == int(stop):
                    break
            result["steps"].append(steps)
            if mode == "save" and total == int(stop):
                accelerator.save_state(ckpt)
                break
    except LoaderError as e:
        result["error"] = str(e)
        with open(out.format(r=accelerator.process_index), "w") as fh:
            json.dump(result, fh)
        os._exit(3)                        # the other rank waits for a broadcast that will not come
    accelerator.wait_for_everyone()
    with open(out.format(r=accelerator.process_index), "w") as fh:
        json.dump(result, fh)
    accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:10])
