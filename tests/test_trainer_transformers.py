"""ShardedDataset as the Transformers Trainer's train_dataset, for real: 2 CPU processes on gloo
(the environment torchrun sets), a tiny GPT-2 built from a config in code. With
`accelerator_config={"dispatch_batches": False}` every id of the build (read with pyarrow) is
trained on exactly once per epoch with equal steps (no double sharding); with the Trainer's
defaults (Accelerate dispatching from rank 0) the dataset refuses with an error naming the setting."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, launch, results  # noqa: E402

SIZES = [30, 0, 12, 22]        # 64 rows: 8 steps of 4 per rank on 2 ranks
B, W = 4, 2


@pytest.mark.slow
def test_trainer_sees_every_sample_once(tmp_path):
    build = tmp_path / "build"
    make_build(build, SIZES, row_group_rows=4)
    out = tmp_path / "rank"
    launch("transformers_worker.py", [str(build), str(out) + "{r}.json", str(tmp_path / "out"), "0"],
           world=W, timeout=150)
    ranks = results([f"{out}{r}.json" for r in range(W)])
    assert [r["world"] for r in ranks] == [W] * W
    assert sorted(i for r in ranks for i in r["ids"]) == sorted(build_ids(build))   # every sample once
    assert [r["steps"] for r in ranks] == [sum(SIZES) // (B * W)] * W


@pytest.mark.slow
def test_trainer_defaults_dispatching_is_refused(tmp_path):
    build = tmp_path / "build"
    make_build(build, SIZES, row_group_rows=4)
    out = tmp_path / "rank"
    codes = launch("transformers_worker.py", [str(build), str(out) + "{r}.json", str(tmp_path / "out"), "1"],
                   world=W, timeout=150, wait_for=0)
    assert codes[0] == 3
    assert "dispatch_batches=False" in results([f"{out}0.json"])[0]["error"]
