"""ShardedDataset as the Transformers Trainer's train_dataset, for real: 2 CPU processes on gloo
(the environment torchrun sets), a tiny GPT-2 built from a config in code. With
`accelerator_config={"dispatch_batches": False}` every id of the build (read with pyarrow) is
trained on exactly once per epoch with equal steps (no double sharding), and resuming from a
mid-epoch Trainer checkpoint trains on exactly the rest; with the Trainer's defaults (Accelerate
dispatching from rank 0) the dataset refuses with an error naming the setting."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, launch, results  # noqa: E402

SIZES = [30, 0, 12, 22]        # 64 rows: 8 steps of 4 per rank on 2 ranks
B, W = 4, 2


def run(build, out, outdir, mode, **kw):
    return launch("transformers_worker.py", [str(build), str(out) + "{r}.json", str(outdir), mode],
                  world=W, timeout=150, **kw)


@pytest.mark.slow
def test_trainer_sees_every_sample_once_and_resumes_mid_epoch(tmp_path):
    build = tmp_path / "build"
    make_build(build, SIZES, row_group_rows=4)
    run(build, tmp_path / "full", tmp_path / "out", "save")       # one epoch, checkpoints every 3 steps
    full = results([f"{tmp_path}/full{r}.json" for r in range(W)])
    assert [r["world"] for r in full] == [W] * W
    assert sorted(i for r in full for i in r["ids"]) == sorted(build_ids(build))   # every sample once
    steps = sum(SIZES) // (B * W)
    assert [r["steps"] for r in full] == [steps] * W                              # equal steps
    run(build, tmp_path / "rest", tmp_path / "out", "resume")     # a new pair, from checkpoint-3
    rest = results([f"{tmp_path}/rest{r}.json" for r in range(W)])
    for r in range(W):
        assert rest[r]["ids"] == full[r]["ids"][3 * B:]                            # exactly the rest
    assert [r["steps"] for r in rest] == [steps] * W                              # global steps 3 + 5


@pytest.mark.slow
def test_trainer_defaults_dispatching_is_refused(tmp_path):
    build = tmp_path / "build"
    make_build(build, SIZES, row_group_rows=4)
    codes = run(build, tmp_path / "rank", tmp_path / "out", "dispatch", wait_for=0)
    assert codes[0] == 3
    assert "dispatch_batches=False" in results([f"{tmp_path}/rank0.json"])[0]["error"]
