"""One rank of the Transformers Trainer test (started by test_trainer_transformers.py with the
environment torchrun sets): a tiny GPT-2 built from a config in code (no download) trained for
`epochs` epochs with `train_dataset=ShardedDataset(...)` and `workers` DataLoader workers; the
training step records the ids this rank trained on, a callback starts a new list at each epoch
begin. Writes them, the step count and the state LoaderStateCallback restored to a JSON file.
With a `log` path, every row group any process of the rank decodes is appended to it as
"shard group", and each epoch begin as "epoch". Modes: `run` (checkpoints every 4 steps, one at
the first epoch's end; LoaderStateCallback and ignore_data_skip=True); `resume` (from
checkpoint-`step` the same way); `replay` (from checkpoint-`step` with the Trainer's defaults and
no callback: it skips the resumed epoch's first batches by reading them); `dispatch` (the
Trainer's default Accelerate dispatching, which the dataset refuses)."""
import json
import os
import sys
import warnings

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from shardforge.loaders import LoaderError, ShardedDataset
from shardforge.loaders.hf_trainer import LoaderStateCallback
from shardforge.loaders.source import Source

B, L = 4, 5


def collate(samples):
    """Pads each row's token list to L; the ids go along as `sample_id`."""
    x = torch.zeros(len(samples), L, dtype=torch.long)
    labels = torch.full((len(samples), L), -100, dtype=torch.long)
    for row, s in enumerate(samples):
        t = torch.as_tensor(s["tokens"], dtype=torch.long)[:L]
        x[row, :len(t)], labels[row, :len(t)] = t, t
    return {"input_ids": x, "labels": labels, "sample_id": torch.tensor([int(s["id"]) for s in samples])}


class Recording(Trainer):
    """Records the ids of every batch it trains on (not of batches skipped or fetched ahead)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epochs = []

    def training_step(self, model, inputs, *args, **kwargs):
        self.epochs[-1] += [int(i) for i in inputs.pop("sample_id")]
        return super().training_step(model, inputs, *args, **kwargs)


class EpochMarks(TrainerCallback):
    def __init__(self, trainer_ref, log):
        self.trainer_ref, self.log = trainer_ref, log

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.trainer_ref[0].epochs.append([])
        if self.log:
            with open(self.log, "a") as fh:
                fh.write("epoch\n")


def log_decodes(path: str) -> None:
    """Append (shard, group) of every row group decoded, by this process and its DataLoader workers."""
    orig = Source.read

    def counted(self, block, **kw):
        with open(path, "a") as fh:
            fh.write(f"{block.shard} {block.group}\n")
        return orig(self, block, **kw)

    Source.read = counted


def main(build: str, out: str, outdir: str, mode: str, workers: str, step: str, epochs: str, log: str) -> None:
    warnings.filterwarnings("ignore")
    log = None if log == "-" else log.format(r=os.environ["RANK"])
    if log:
        log_decodes(log)
    own_state = mode in ("run", "resume")
    args = TrainingArguments(output_dir=outdir, use_cpu=True, ddp_backend="gloo", per_device_train_batch_size=B,
                             num_train_epochs=int(epochs), report_to="none", logging_strategy="no",
                             save_strategy="steps" if mode == "run" else "no", save_steps=4,
                             disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=int(workers),
                             ignore_data_skip=own_state,
                             accelerator_config={} if mode == "dispatch" else {"dispatch_batches": False})
    ds = ShardedDataset(build, seed=9, window=2, batch_size=B, columns=["id", "tokens"])
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=8, n_embd=8, n_layer=1, n_head=1))
    ref = []
    data_state = LoaderStateCallback(ds)
    callbacks = [EpochMarks(ref, log)] + ([data_state] if own_state else [])
    trainer = Recording(model=model, args=args, train_dataset=ds, data_collator=collate, callbacks=callbacks)
    ref.append(trainer)
    try:
        resume = f"{outdir}/checkpoint-{step}" if mode in ("resume", "replay") else None
        result = trainer.train(resume_from_checkpoint=resume)
    except LoaderError as e:
        with open(out.format(r=args.process_index), "w") as fh:
            json.dump({"rank": args.process_index, "error": str(e)}, fh)
        os._exit(3)                        # the other rank waits for a broadcast that will not come
    with open(out.format(r=args.process_index), "w") as fh:
        json.dump({"rank": args.process_index, "world": args.world_size, "epochs": trainer.epochs,
                   "steps": result.global_step, "restored": data_state.restored}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:9])
