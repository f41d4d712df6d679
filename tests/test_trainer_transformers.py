"""ShardedDataset as the Transformers Trainer's train_dataset, for real: 2 CPU processes on gloo
(the environment torchrun sets), a tiny GPT-2 built from a config in code, 2 DataLoader workers,
two epochs of a build whose 61 rows are not a multiple of ranks x batch (policy "drop": 30 samples
per rank, so each rank's last batch is short and Accelerate completes it). With
`accelerator_config={"dispatch_batches": False}` each epoch is checked against the build's ids read
with pyarrow and the documented rank split and drop policy, with equal steps. Resuming with
LoaderStateCallback and ignore_data_skip=True from a checkpoint in the first epoch, or in the
second, goes through the dataset's own state: the callback hands the saved state to
load_state_dict, the rest is exactly the uninterrupted run's, and the row groups that only held
samples trained before the checkpoint are not decoded again (the Trainer's default replay, also
run here, decodes them). With the Trainer's defaults (Accelerate dispatching from rank 0) the
dataset refuses with an error naming the setting; the callback refuses ignore_data_skip=False."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.register_assert_rewrite("trainer_helpers")

from loader_helpers import make_build  # noqa: E402
from trainer_helpers import build_ids, check_epoch, group_ids, launch, results  # noqa: E402

SIZES = [30, 0, 12, 19]        # 61 rows: 30 per rank under "drop" (one row unread), 7 full batches + 2
B, W, EPOCHS, WORKERS = 4, 2, 2, 2
Q = 30                         # samples per rank and epoch
STEPS = -(-Q // B)             # 8 steps per rank and epoch, the last batch completed to B samples


def run(tmp, name, mode, *, step=0, log=False, **kw):
    codes = launch("transformers_worker.py",
                   [str(tmp / "build"), f"{tmp}/{name}" + "{r}.json", str(tmp / "out"), mode, str(WORKERS),
                    str(step), str(EPOCHS), f"{tmp}/{name}" + "{r}.log" if log else "-"], world=W, timeout=300, **kw)
    if kw.get("wait_for") is not None:
        return codes
    return results([f"{tmp}/{name}{r}.json" for r in range(W)])


def decoded_per_epoch(path) -> list[set[tuple[int, int]]]:
    """The row groups a rank's processes decoded in each epoch (from the worker's log)."""
    epochs: list[set] = []
    for line in Path(path).read_text().splitlines():
        if line == "epoch":
            epochs.append(set())
        else:
            shard, group = line.split()
            epochs[-1].add((int(shard), int(group)))
    return epochs


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Two uninterrupted epochs, checkpoints every 4 steps (one at the first epoch's end, where the
    callback's count meets the completed last batch): (folder, per-rank results)."""
    tmp = tmp_path_factory.mktemp("transformers")
    make_build(tmp / "build", SIZES, row_group_rows=4)
    return tmp, run(tmp, "full", "run")


@pytest.mark.slow
def test_trainer_reads_each_epoch_by_the_rank_split_and_drop_policy(full):
    tmp, ranks = full
    ids = build_ids(tmp / "build")
    assert len(ids) == sum(SIZES) and len(ids) % (W * B)                  # the remainder reaches the trainer
    assert [r["world"] for r in ranks] == [W] * W
    parts = [check_epoch([r["epochs"][e] for r in ranks], ids, policy="drop", batch=B, completed=True,
                         ordered=True, workers=WORKERS) for e in range(EPOCHS)]
    assert [r["steps"] for r in ranks] == [EPOCHS * STEPS] * W            # equal steps
    assert [parts[0][r] != parts[1][r] for r in range(W)] == [True] * W   # set_epoch reached the dataset


@pytest.mark.slow
@pytest.mark.parametrize("step", [4, STEPS + 4], ids=["in-epoch0", "in-epoch1"])
def test_resume_goes_through_the_dataset_state_across_the_epoch_boundary(full, step):
    tmp, ranks = full
    after = run(tmp, f"own{step}", "resume", step=step, log=True)
    epoch, k = divmod(step, STEPS)
    joined = [ranks[r]["epochs"][epoch][:k * B] + after[r]["epochs"][0] for r in range(W)]
    for r in range(W):
        restored = after[r]["restored"]                                      # what load_state_dict was given
        assert (restored["epoch"], restored["consumed"], restored["world_size"]) == (epoch, k * B, W)
        assert joined[r][:Q] == ranks[r]["epochs"][epoch][:Q]                # the rank's part, as uninterrupted
        assert after[r]["epochs"][1:] == ranks[r]["epochs"][epoch + 1:]      # and the epochs after it
        assert after[r]["steps"] == EPOCHS * STEPS
    check_epoch(joined, build_ids(tmp / "build"), policy="drop", batch=B, completed=True, ordered=True,
                workers=WORKERS, resumed_at=k * B)
    # no row group whose samples were all trained before the checkpoint is decoded again in its epoch
    groups = group_ids(tmp / "build")
    for r in range(W):
        done = {g for g, held in groups.items() if held and set(held) <= set(ranks[r]["epochs"][epoch][:k * B])}
        assert done                                                          # (there are such row groups)
        assert decoded_per_epoch(f"{tmp}/own{step}{r}.log")[0] & done == set()


@pytest.mark.slow
def test_default_resume_replays_the_skipped_batches(full):
    """What the Trainer does alone (ignore_data_skip=False, no callback): the same rest, read again."""
    tmp, ranks = full
    after = run(tmp, "replay4", "replay", step=4, log=True)
    groups = group_ids(tmp / "build")
    for r in range(W):
        assert after[r]["epochs"] == [ranks[r]["epochs"][0][4 * B:], ranks[r]["epochs"][1]]
        assert after[r]["restored"] is None
        done = {g for g, held in groups.items() if held and set(held) <= set(ranks[r]["epochs"][0][:4 * B])}
        assert done and done <= decoded_per_epoch(f"{tmp}/replay4{r}.log")[0]


@pytest.mark.slow
def test_trainer_defaults_dispatching_is_refused(tmp_path):
    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    codes = run(tmp_path, "rank", "dispatch", wait_for=0)
    assert codes[0] == 3
    assert "dispatch_batches=False" in results([f"{tmp_path}/rank0.json"])[0]["error"]


def test_callback_refuses_the_trainers_own_data_skip_and_a_checkpoint_without_its_state(tmp_path):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from shardforge.loaders import LoaderError, ShardedDataset
    from shardforge.loaders.hf_trainer import LoaderStateCallback

    make_build(tmp_path / "build", SIZES, row_group_rows=4)
    callback = LoaderStateCallback(ShardedDataset(tmp_path / "build", batch_size=B, rank=0, world_size=1))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    with pytest.raises(LoaderError, match="ignore_data_skip=True"):
        callback.on_train_begin(args, TrainerState(), TrainerControl())
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", ignore_data_skip=True)
    with pytest.raises(LoaderError, match="without a LoaderStateCallback state"):
        callback.on_train_begin(args, TrainerState(global_step=5), TrainerControl())
    with pytest.raises(LoaderError, match="restore_callback_states_from_checkpoint"):
        LoaderStateCallback()
