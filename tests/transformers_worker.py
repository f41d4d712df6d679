"""One rank of the Transformers Trainer test (started by test_trainer_transformers.py with the
environment torchrun sets): a tiny GPT-2 built from a config in code (no download) trained for one
epoch with `train_dataset=ShardedDataset(...)`; the data collator records the ids this rank trained
on. Writes them and the step count to a JSON file. With `dispatch` = 1 the Trainer keeps
Accelerate's default dispatching, which the dataset refuses."""
import json
import os
import sys
import warnings

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from shardforge.loaders import LoaderError, ShardedDataset

B, L = 4, 5


class Collator:
    """Pads each row's token list to L and records the ids of every batch it makes."""

    def __init__(self):
        self.ids = []

    def __call__(self, samples):
        self.ids += [int(s["id"]) for s in samples]
        x = torch.zeros(len(samples), L, dtype=torch.long)
        labels = torch.full((len(samples), L), -100, dtype=torch.long)
        for row, s in enumerate(samples):
            t = torch.as_tensor(s["tokens"], dtype=torch.long)[:L]
            x[row, :len(t)], labels[row, :len(t)] = t, t
        return {"input_ids": x, "labels": labels}


def main(build: str, out: str, outdir: str, dispatch: str) -> None:
    warnings.filterwarnings("ignore")
    args = TrainingArguments(output_dir=outdir, use_cpu=True, ddp_backend="gloo", per_device_train_batch_size=B,
                             num_train_epochs=1, report_to="none", save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=0,
                             accelerator_config={} if dispatch == "1" else {"dispatch_batches": False})
    ds = ShardedDataset(build, seed=9, window=2, batch_size=B, columns=["id", "tokens"])
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=8, n_embd=8, n_layer=1, n_head=1))
    collator = Collator()
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=collator)
    try:
        result = trainer.train()
    except LoaderError as e:
        with open(out.format(r=args.process_index), "w") as fh:
            json.dump({"rank": args.process_index, "error": str(e)}, fh)
        os._exit(3)                        # the other rank waits for a broadcast that will not come
    with open(out.format(r=args.process_index), "w") as fh:
        json.dump({"rank": args.process_index, "world": args.world_size, "ids": collator.ids,
                   "steps": result.global_step}, fh)


if __name__ == "__main__":
    main(*sys.argv[1:5])
