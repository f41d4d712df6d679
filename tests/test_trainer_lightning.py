"""ShardedDataset under PyTorch Lightning, for real: Trainer(strategy="ddp", accelerator="cpu",
devices=2) in 2 processes on gloo, started with the environment Lightning's DDP launcher gives the
processes it starts (LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT on 127.0.0.1). Two epochs of a build
whose 61 rows are not a multiple of ranks x batch (policy "pad": 31 samples per rank, so each rank's
last batch is short), read by 2 DataLoader workers over 2 lanes: each epoch is checked against the
build's ids read with pyarrow and the documented rank split and pad policy, with equal steps; and
LoaderStateCallback resumes a checkpoint taken in the first epoch, or in the second, in a new
process pair (no workers) with exactly the rest, through the epoch boundary."""
from __future__ import annotations

import pytest

pytest.importorskip("lightning")
pytest.register_assert_rewrite("trainer_helpers")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, check_epoch, launch, results  # noqa: E402

SIZES = [30, 0, 12, 19]        # 61 rows: 31 per rank under "pad" (one pad slot), 7 full batches + 3
B, W, EPOCHS, POLICY = 4, 2, 2, "pad"
Q = 31                         # samples per rank and epoch
STEPS = -(-Q // B)            # 8 steps per rank and epoch, the last one of 3 samples


def run(build, out, mode, *, ckpt="-", stop=0, workers=0):
    launch("lightning_worker.py", [str(build), str(out) + "{r}.json", mode, str(ckpt), str(stop), str(workers),
                                   POLICY, str(EPOCHS)], world=W, timeout=240)
    return results([f"{out}{r}.json" for r in range(W)])


def sequence(result) -> list[int]:
    return [i for e in sorted(result["epochs"], key=int) for i in result["epochs"][e]]


@pytest.mark.slow
def test_ddp_trainer_reads_each_epoch_by_the_policy_and_resumes_across_the_epoch_boundary(tmp_path):
    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    build, ids = tmp_path / "build", build_ids(tmp_path / "build")
    assert len(ids) == sum(SIZES) and len(ids) % (W * B)                  # the remainder reaches the trainer
    # two epochs with 2 DataLoader workers, checkpointing every 3 steps: the uninterrupted reference
    full = run(build, tmp_path / "full", "save", ckpt=tmp_path / "ckpt", stop=3, workers=2)
    assert [r["world"] for r in full] == [W] * W
    assert [sorted(r["epochs"]) for r in full] == [["0", "1"]] * W
    parts = [check_epoch([r["epochs"][str(e)] for r in full], ids, policy=POLICY, batch=B, completed=False,
                         ordered=False) for e in range(EPOCHS)]
    assert [r["steps"] for r in full] == [EPOCHS * STEPS] * W                 # equal steps
    assert [parts[0][r] != parts[1][r] for r in range(W)] == [True] * W       # a new order in epoch 1
    # new process pairs (no DataLoader workers) resume from the checkpoints after steps 3 and 9
    for step in (3, STEPS + 1):
        rest = run(build, tmp_path / f"rest{step}", "resume", ckpt=tmp_path / "ckpt" / f"at-step={step}.ckpt")
        epoch, k = divmod(step, STEPS)
        for r in range(W):
            assert sequence(full[r])[epoch * Q + k * B:] == sequence(rest[r])          # exactly the rest
            assert rest[r]["epochs"][str(epoch)] == full[r]["epochs"][str(epoch)][k * B:]
        assert [r["steps"] for r in rest] == [EPOCHS * STEPS - step] * W
