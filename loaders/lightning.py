"""`LoaderStateCallback`: a loader's position in PyTorch Lightning checkpoints (importable without
Lightning; it subclasses Lightning's Callback only when Lightning is installed).

Under `Trainer(strategy="ddp")` Lightning adds no DistributedSampler to a DataLoader over an
IterableDataset, so a ShardedDataset reads its own rank's part (rank and world size from
torch.distributed) and every rank takes the same number of steps. What Lightning does not do is save
where an IterableDataset stopped: this callback does, in the checkpoint's callback states, and puts
the dataset back there when `fit(..., ckpt_path=...)` resumes, mid-epoch included.
"""
from __future__ import annotations

from typing import Any

try:                                   # lightning 2.x, then the older package name
    from lightning.pytorch.callbacks import Callback as _Base
except ImportError:  # pragma: no cover - depends on what is installed
    try:
        from pytorch_lightning.callbacks import Callback as _Base
    except ImportError:
        _Base = object


def _batch_len(batch: Any) -> int:
    """Samples in a batch: a dict's first value, a tensor's first dimension, a sequence's length."""
    if isinstance(batch, dict):
        batch = next(iter(batch.values()))
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape is not None else len(batch)


class LoaderStateCallback(_Base):
    """Saves `dataset.state_dict(consumed=...)` in every Lightning checkpoint and restores it on
    resume, so the rest of the epoch is read exactly once; also calls `dataset.set_epoch` at each
    epoch start (Lightning calls it only on samplers).

        ds = ShardedDataset(path, seed=0, batch_size=32, batched=True)
        trainer = Trainer(..., callbacks=[LoaderStateCallback(ds)])
        trainer.fit(model, DataLoader(ds, batch_size=None, collate_fn=no_collate), ckpt_path=...)

    It counts the samples of each training batch (Lightning fetches one batch ahead, so the
    dataset's own count would be early); with a transform that changes the batch's length, pass
    `batch_len=` (a function of the batch). The state is rank 0's (Lightning saves rank 0's
    checkpoint), which describes the whole job; restoring it with another world size is elastic.
    """

    def __init__(self, dataset, *, batch_len=_batch_len):
        if _Base is object:
            raise ImportError("LoaderStateCallback needs lightning (pip install lightning)")
        super().__init__()
        self.dataset = dataset
        self.batch_len = batch_len
        self.consumed = 0            # samples this rank took in the current pass
        self._restore: dict | None = None

    @property
    def state_key(self) -> str:
        return "shardforge.LoaderStateCallback"

    def state_dict(self) -> dict:
        return {"loader": self.dataset.state_dict(consumed=self.consumed)}

    def load_state_dict(self, state_dict: dict) -> None:
        self._restore = state_dict["loader"]      # applied at on_train_start, before the loader is iterated

    def on_train_start(self, trainer, pl_module) -> None:
        if self._restore is not None:
            self.dataset.load_state_dict(self._restore)
            self._restore = None
            self.consumed = 0

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        # not called when Lightning resumes mid-epoch; a no-op in the epoch the dataset is in
        if trainer.current_epoch != self.dataset.epoch:
            self.dataset.set_epoch(trainer.current_epoch)
            self.consumed = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.consumed += self.batch_len(batch)
