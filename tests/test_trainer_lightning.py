"""ShardedDataset under PyTorch Lightning, for real: Trainer(strategy="ddp", accelerator="cpu",
devices=2) in 2 processes on gloo, started with the environment Lightning's DDP launcher gives the
processes it starts (LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT on 127.0.0.1). Every id of the build
(read with pyarrow) is seen exactly once per epoch with equal steps, and LoaderStateCallback resumes
a mid-epoch checkpoint with exactly the rest of the epoch."""
from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, launch, results  # noqa: E402

SIZES = [30, 0, 12, 22]        # 64 rows: 8 steps of 4 per rank on 2 ranks
B, W = 4, 2


def run(build, out, mode, *, ckpt="-", stop=0, workers=0):
    launch("lightning_worker.py", [str(build), str(out) + "{r}.json", mode, str(ckpt), str(stop), str(workers)],
           world=W, timeout=150)
    return results([f"{out}{r}.json" for r in range(W)])


@pytest.mark.slow
def test_ddp_trainer_sees_every_sample_once_and_resumes_mid_epoch(tmp_path):
    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    build = tmp_path / "build"
    # one epoch (2 DataLoader workers), checkpointing every 3 steps: the uninterrupted reference
    full = run(build, tmp_path / "full", "save", ckpt=tmp_path / "ckpt", stop=3, workers=2)
    assert [r["world"] for r in full] == [W] * W
    assert sorted(i for r in full for i in r["ids"]) == sorted(build_ids(build))   # every sample once
    steps = sum(SIZES) // (B * W)
    assert [r["steps"] for r in full] == [steps] * W                              # equal steps
    # a new process pair resumes from the checkpoint taken after step 3 (no DataLoader workers)
    rest = run(build, tmp_path / "rest", "resume", ckpt=tmp_path / "ckpt" / "at-step=3.ckpt")
    for r in range(W):
        assert full[r]["ids"][:3 * B] + rest[r]["ids"] == full[r]["ids"]           # exactly the rest
    assert [r["steps"] for r in rest] == [steps - 3] * W
