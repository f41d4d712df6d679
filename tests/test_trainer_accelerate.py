"""ShardedDataset under Hugging Face Accelerate, for real: 2 CPU processes on gloo started with the
environment `accelerate launch` sets, `accelerator.prepare(DataLoader(ShardedDataset(...)))`.
Every id of the build (read with pyarrow) is seen exactly once per epoch, the ranks take equal
steps, `save_state` mid-epoch then `load_state` in a new process pair continues with exactly the
rest (with and without use_stateful_dataloader), and Accelerate's default dispatching is refused."""
from __future__ import annotations

import pytest

pytest.importorskip("accelerate")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, launch, results  # noqa: E402

SIZES = [30, 0, 12, 22]        # 64 rows: 8 steps of 4 per rank on 2 ranks
B, W = 4, 2


def run(build, out, mode, *, stateful=False, ckpt="-", stop=0, workers=0):
    launch("accelerate_worker.py", [str(build), str(out) + "{r}.json", mode, "1" if stateful else "0",
                                    str(ckpt), str(stop), str(workers)], world=W, timeout=150)
    return results([f"{out}{r}.json" for r in range(W)])


@pytest.fixture(scope="module")
def epoch(tmp_path_factory):
    """One uninterrupted epoch: (build, per-rank results)."""
    root = tmp_path_factory.mktemp("accelerate")
    make_build(root / "build", SIZES, row_group_rows=4)
    return root / "build", run(root / "build", root / "epoch", "epoch")


@pytest.mark.slow
def test_prepared_loader_sees_every_sample_once(epoch):
    build, ranks = epoch
    seen = [i for r in ranks for i in r["ids"]]
    assert sorted(seen) == sorted(build_ids(build))       # every sample once: none lost, none twice
    steps = sum(SIZES) // (B * W)
    assert [r["steps"] for r in ranks] == [steps] * W      # equal steps
    assert [r["len"] for r in ranks] == [steps] * W        # len(prepared loader) agrees


@pytest.mark.slow
@pytest.mark.parametrize("stateful", [False, True], ids=["register_for_checkpointing", "stateful_dataloader"])
def test_save_state_mid_epoch_then_load_state_continues_exactly(epoch, tmp_path, stateful):
    build, full = epoch
    ckpt = tmp_path / "ckpt"
    before = run(build, tmp_path / "before", "save", stateful=stateful, ckpt=ckpt, stop=3)
    after = run(build, tmp_path / "after", "resume", stateful=stateful, ckpt=ckpt)
    for r in range(W):
        assert before[r]["steps"] == 3
        assert before[r]["ids"] + after[r]["ids"] == full[r]["ids"]   # the uninterrupted rank's sequence
    assert {a["steps"] for a in after} == {full[0]["steps"] - 3}


@pytest.mark.slow
def test_default_dispatching_is_refused(tmp_path):
    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    out = tmp_path / "dispatch"
    codes = launch("accelerate_worker.py", [str(tmp_path / "build"), str(out) + "{r}.json", "dispatch", "0", "-",
                                            "0", "0"], world=W, timeout=150, wait_for=0)
    assert codes[0] == 3
    error = results([f"{out}0.json"])[0]["error"]
    assert "dispatch_batches=False" in error
