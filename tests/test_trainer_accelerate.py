"""ShardedDataset under Hugging Face Accelerate, for real: 2 CPU processes on gloo started with the
environment `accelerate launch` sets, `accelerator.prepare(DataLoader(ShardedDataset(...)))`, two
epochs of a build whose 61 rows are not a multiple of ranks x batch (policy "pad": 31 samples per
rank, so each rank's last batch is short and Accelerate completes it). Each epoch is checked
against the build's ids read with pyarrow and the documented rank split and pad policy; the ranks
take equal steps; `save_state` mid-epoch, at an epoch's end, or in the second epoch, then
`load_state` in a new process pair, continues with exactly the rest through the epoch boundary
(with and without use_stateful_dataloader); Accelerate's default dispatching is refused."""
from __future__ import annotations

import pytest

pytest.importorskip("accelerate")
pytest.register_assert_rewrite("trainer_helpers")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, check_epoch, launch, results  # noqa: E402

SIZES = [30, 0, 12, 19]        # 61 rows: 31 per rank under "pad" (one pad slot), 7 full batches + 3
B, W, EPOCHS, POLICY = 4, 2, 2, "pad"
Q = 31                         # samples per rank and epoch
STEPS = -(-Q // B)            # 8 steps per rank and epoch, the last batch completed to B samples


def run(build, out, mode, *, stateful=False, ckpt="-", stop=0, workers=0):
    launch("accelerate_worker.py", [str(build), str(out) + "{r}.json", mode, "1" if stateful else "0",
                                    str(ckpt), str(stop), str(workers), POLICY, str(EPOCHS)], world=W, timeout=240)
    return results([f"{out}{r}.json" for r in range(W)])


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Two uninterrupted epochs: (build, per-rank results)."""
    root = tmp_path_factory.mktemp("accelerate")
    make_build(root / "build", SIZES, row_group_rows=4)
    return root / "build", run(root / "build", root / "full", "run")


@pytest.mark.slow
def test_prepared_loader_reads_each_epoch_by_the_rank_split_and_pad_policy(full):
    build, ranks = full
    ids = build_ids(build)
    assert len(ids) == sum(SIZES) and len(ids) % (W * B)                  # the remainder reaches the trainer
    parts = [check_epoch([r["epochs"][e] for r in ranks], ids, policy=POLICY, batch=B, completed=True,
                         ordered=True) for e in range(EPOCHS)]
    assert [r["steps"] for r in ranks] == [[STEPS] * EPOCHS] * W          # equal steps, every epoch
    assert [r["len"] for r in ranks] == [STEPS] * W                       # len(prepared loader) agrees
    assert [parts[0][r] != parts[1][r] for r in range(W)] == [True] * W   # set_epoch reached the dataset


@pytest.mark.slow
@pytest.mark.parametrize("stateful, stop", [(False, 3), (False, STEPS), (False, STEPS + 2), (True, 3)],
                         ids=["register-mid-epoch0", "register-end-of-epoch0", "register-mid-epoch1",
                              "stateful_dataloader-mid-epoch0"])
def test_save_state_then_load_state_continues_exactly_across_the_epoch_boundary(full, tmp_path, stateful, stop):
    build, ranks = full
    ckpt = tmp_path / "ckpt"
    before = run(build, tmp_path / "before", "save", stateful=stateful, ckpt=ckpt, stop=stop)
    after = run(build, tmp_path / "after", "resume", stateful=stateful, ckpt=ckpt)
    epoch, k = divmod(stop - 1, STEPS)      # the checkpoint's epoch, and the steps taken in it
    k += 1
    for r in range(W):
        assert sum(before[r]["steps"]) == stop
        assert after[r]["first_epoch"] == epoch
        assert before[r]["epochs"][:-1] == ranks[r]["epochs"][:epoch]
        joined = before[r]["epochs"][-1][:k * B] + after[r]["epochs"][0]
        assert joined[:Q] == ranks[r]["epochs"][epoch][:Q]               # the rank's part, as uninterrupted
        assert after[r]["epochs"][1:] == ranks[r]["epochs"][epoch + 1:]   # and every later epoch
    assert [a["steps"] for a in after] == [[STEPS - k] + [STEPS] * (EPOCHS - 1 - epoch)] * W
    # the interrupted epoch, put together, is a whole epoch; its last batch is completed from the
    # first batch read after the resume (torchdata's replay reads the epoch from its start again)
    resumed_at = k * B if k < STEPS and not stateful else 0
    check_epoch([before[r]["epochs"][-1][:k * B] + after[r]["epochs"][0] for r in range(W)], build_ids(build),
                policy=POLICY, batch=B, completed=True, ordered=True, resumed_at=resumed_at)


@pytest.mark.slow
def test_default_dispatching_is_refused(tmp_path):
    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    out = tmp_path / "dispatch"
    codes = launch("accelerate_worker.py", [str(tmp_path / "build"), str(out) + "{r}.json", "dispatch", "0", "-",
                                            "0", "0", POLICY, "1"], world=W, timeout=240, wait_for=0)
    assert codes[0] == 3
    error = results([f"{out}0.json"])[0]["error"]
    assert "dispatch_batches=False" in error
