"""`LoaderStateCallback` for the Transformers `Trainer`: a ShardedDataset's position in the
Trainer's checkpoints, restored through the dataset's own `load_state_dict` (importable without
transformers; it subclasses TrainerCallback only when transformers is installed).

What the Trainer does by itself (read from transformers 5.24's trainer.py): on
`train(resume_from_checkpoint=...)` it restores the model, optimizer, scheduler, RNG and its
`TrainerState`, then, with `ignore_data_skip=False` (the default), replays the resumed epoch's
first batches through Accelerate's `skip_first_batches`: exact, but the dataset reads and
decodes them again. It never calls the dataset's `state_dict` / `load_state_dict`. With
`ignore_data_skip=True` it skips nothing, and an IterableDataset starts the resumed epoch from
its beginning.

This callback, with `ignore_data_skip=True`, makes the resume go through the dataset's state:
the Trainer stores the callback's `state()` (an `ExportableState`) in `trainer_state.json` of
every checkpoint, and every rank reads that file back on resume before `on_train_begin`, where
the callback calls `dataset.load_state_dict` with it. The dataset then reads only the rest of the
epoch (one window decode per lane to get there).
"""
from __future__ import annotations

from .source import LoaderError

try:
    from transformers.trainer_callback import ExportableState, TrainerCallback
    _BASES: tuple = (TrainerCallback, ExportableState)
except ImportError:  # pragma: no cover - depends on what is installed
    _BASES = (object,)


class LoaderStateCallback(*_BASES):
    """Saves `dataset.state_dict(consumed=...)` in every Trainer checkpoint (inside
    `trainer_state.json`) and restores it with `dataset.load_state_dict` when
    `trainer.train(resume_from_checkpoint=...)` resumes, mid-epoch included. Needs
    `TrainingArguments(ignore_data_skip=True)` (otherwise the Trainer would also skip the
    epoch's first batches again) and leaves `restore_callback_states_from_checkpoint` at its
    default, False (the Trainer would re-create the callback without its dataset).

        ds = ShardedDataset(path, seed=0, batch_size=32)       # = per_device_train_batch_size
        args = TrainingArguments(..., ignore_data_skip=True, accelerator_config={"dispatch_batches": False})
        trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[LoaderStateCallback(ds)])

    It counts the micro-batches the Trainer trains on in the current pass (each of
    `per_device_train_batch_size` samples; the pass's last batch, which Accelerate completes
    with the rank's first samples, counts only what was left), so the state is exact at every
    optimizer step, where the Trainer checkpoints. Rank 0's state, which the Trainer saves,
    describes the whole job; restoring it with another world size is elastic.
    """

    def __init__(self, dataset=None):
        if _BASES == (object,):
            raise ImportError("LoaderStateCallback needs transformers (pip install transformers)")
        if dataset is None:
            raise LoaderError("LoaderStateCallback(dataset) needs the dataset; with "
                              "restore_callback_states_from_checkpoint=True the Trainer re-creates callbacks from "
                              "their saved arguments, which cannot hold a dataset: leave that setting False (this "
                              "callback restores the dataset's position itself)")
        super().__init__()
        self.dataset = dataset
        self.batches = 0             # micro-batches this rank trained on in the current pass
        self.batch_size = None       # per_device_train_batch_size, known from on_train_begin
        self.restored: dict | None = None   # the state given to load_state_dict on resume, if any

    def consumed(self) -> int:
        """Samples of the current pass this rank has trained on."""
        if not self.batches:
            return 0
        return min(self.batches * self.batch_size, self.dataset.num_samples())

    def state(self) -> dict:
        """What the Trainer writes into the checkpoint's trainer_state.json (ExportableState)."""
        return {"args": {}, "attributes": {"loader": self.dataset.state_dict(consumed=self.consumed())}}

    def on_train_begin(self, args, state, control, **kwargs):
        if not args.ignore_data_skip:
            raise LoaderError("LoaderStateCallback restores the dataset's position itself: set "
                              "TrainingArguments(ignore_data_skip=True), or the Trainer would also skip the resumed "
                              "epoch's first batches (see loaders/README.md, 'Transformers Trainer')")
        self.batch_size = int(args.per_device_train_batch_size)
        self.batches = 0
        if state.global_step == 0:
            return                   # a new run (the Trainer restores global_step from the checkpoint)
        key = type(self).__name__    # the Trainer files an ExportableState's state under its class name
        saved = (state.stateful_callbacks or {}).get(key)
        if not isinstance(saved, dict) or "loader" not in saved.get("attributes", {}):
            raise LoaderError(f"resuming at global step {state.global_step} from a checkpoint without a "
                              f"LoaderStateCallback state (trainer_state.json has no 'stateful_callbacks' entry "
                              f"{key!r}): it was saved without the callback")
        self.restored = saved["attributes"]["loader"]
        self.dataset.load_state_dict(self.restored)

    def on_epoch_begin(self, args, state, control, **kwargs):
        # a new pass starts: the Trainer's set_epoch right after starts a new epoch, or keeps the
        # position just restored (the epoch the dataset is already in)
        self.batches = 0

    def on_substep_end(self, args, state, control, **kwargs):   # a micro-batch without an optimizer step
        self.batches += 1

    def on_step_end(self, args, state, control, **kwargs):      # a micro-batch with an optimizer step
        self.batches += 1
