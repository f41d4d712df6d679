"""One rank of the Lightning tests (started by test_trainer_lightning.py with the environment
Lightning's own DDP launcher gives the processes it starts: LOCAL_RANK, WORLD_SIZE, MASTER_*).
Trains a tiny model with Trainer(strategy="ddp", accelerator="cpu", devices=2) over a
ShardedDataset for `epochs` epochs and writes the ids it trained on in each epoch (by Lightning's
epoch counter) and its step count. Modes: `save` (every epoch, with a checkpoint every `stop` steps
into the folder `ckpt`), `resume` (fit(ckpt_path=ckpt) to the end of the last epoch)."""
import json
import sys
import warnings

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
import torch
from torch.utils.data import DataLoader

from shardforge.loaders import ShardedDataset, no_collate
from shardforge.loaders.lightning import LoaderStateCallback

B = 4


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.epochs, self.steps = {}, 0

    def training_step(self, batch, batch_idx):
        self.epochs.setdefault(self.current_epoch, []).extend(int(i) for i in batch["id"])
        self.steps += 1
        return self.layer(batch["score"].float().unsqueeze(1) / 1e5).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(build: str, out: str, mode: str, ckpt: str, stop: str, workers: str, policy: str, epochs: str) -> None:
    warnings.filterwarnings("ignore")
    ds = ShardedDataset(build, seed=5, window=2, batch_size=B, batched=True, lanes=2,
                        columns=["id", "score"], policy=policy)
    loader = DataLoader(ds, batch_size=None, collate_fn=no_collate, num_workers=int(workers))
    callbacks = [LoaderStateCallback(ds)]
    if mode == "save":
        callbacks.append(ModelCheckpoint(dirpath=ckpt, filename="at-{step}", every_n_train_steps=int(stop),
                                         save_top_k=-1))
    trainer = L.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_epochs=int(epochs), callbacks=callbacks,
                        logger=False, enable_checkpointing=mode == "save", enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    model = Tiny()
    torch.manual_seed(0)
    trainer.fit(model, loader, ckpt_path=ckpt if mode == "resume" else None)
    with open(out.format(r=trainer.global_rank), "w") as fh:
        json.dump({"rank": trainer.global_rank, "world": trainer.world_size, "steps": model.steps,
                   "epochs": {str(e): ids for e, ids in sorted(model.epochs.items())}}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:9])
