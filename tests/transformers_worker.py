"""One rank of the Transformers Trainer test (started by test_trainer_transformers.py with the
environment torchrun sets): a tiny GPT-2 built from a config in code (no download) trained for one
epoch with `train_dataset=ShardedDataset(...)`; the training step records the ids this rank trained
on. Writes them and the step count to a JSON file. Modes: `epoch`; `save` (an epoch with a
checkpoint every 3 steps); `resume` (from checkpoint-3 to the epoch's end); `dispatch` (the
Trainer's default Accelerate dispatching, which the dataset refuses)."""
import json
import os
import sys
import warnings

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from shardforge.loaders import LoaderError, ShardedDataset

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
        self.ids = []

    def training_step(self, model, inputs, *args, **kwargs):
        self.ids += [int(i) for i in inputs.pop("sample_id")]
        return super().training_step(model, inputs, *args, **kwargs)


def main(build: str, out: str, outdir: str, mode: str) -> None:
    warnings.filterwarnings("ignore")
    args = TrainingArguments(output_dir=outdir, use_cpu=True, ddp_backend="gloo", per_device_train_batch_size=B,
                             num_train_epochs=1, report_to="none", logging_strategy="no",
                             save_strategy="steps" if mode == "save" else "no", save_steps=3,
                             disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=0,
                             accelerator_config={} if mode == "dispatch" else {"dispatch_batches": False})
    ds = ShardedDataset(build, seed=9, window=2, batch_size=B, columns=["id", "tokens"])
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=8, n_embd=8, n_layer=1, n_head=1))
    trainer = Recording(model=model, args=args, train_dataset=ds, data_collator=collate)
    try:
        result = trainer.train(resume_from_checkpoint=f"{outdir}/checkpoint-3" if mode == "resume" else None)
    except LoaderError as e:
        with open(out.format(r=args.process_index), "w") as fh:
            json.dump({"rank": args.process_index, "error": str(e)}, fh)
        os._exit(3)                        # the other rank waits for a broadcast that will not come
    with open(out.format(r=args.process_index), "w") as fh:
        json.dump({"rank": args.process_index, "world": args.world_size, "ids": trainer.ids,
                   "steps": result.global_step}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:5])
