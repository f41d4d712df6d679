"""The score stage: a fastText classifier trained here, on two kinds of local text (the bundled
sample's English prose, and Python source from this interpreter's standard library), scores
held-out documents into `signals.<name>`. Which kind a document is comes from the set it was
taken from; the expected scores come from fastText's own `predict` called outside Spark.
Model files are checked before Spark starts (a missing, foreign or cut-short file exits 2
naming it), their content is part of the stage fingerprint, and scores do not depend on the
partitioning."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import pytest

from shardforge.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
LABEL = "__label__hq"


def _prose() -> list[str]:
    """The sample corpus's distinct English documents (plain prose), in file order."""
    out, seen = [], set()
    for line in (ROOT / "data" / "sample" / "docs.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            text = json.loads(line).get("text")
        except ValueError:
            continue
        if isinstance(text, str) and len(text) >= 200 and text not in seen:
            seen.add(text)
            out.append(text)
    return out


def _code() -> list[str]:
    """The first 3,000 characters (to a line end) of each standard-library module over 4 KB."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for p in sorted(root.glob("*.py")):
        text = p.read_text(encoding="utf-8", errors="replace")
        if len(text) > 4000:
            out.append(text[:text.index("\n", 3000) + 1])
    return out


def _jsonl(path: Path, texts: list[str], prefix: str) -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i:03d}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Training files (even positions of each kind) and held-out documents (odd positions), by id."""
    prose, code = _prose(), _code()
    assert len(prose) >= 100 and len(code) >= 60
    d = tmp_path_factory.mktemp("score_corpus")
    pos = _jsonl(d / "prose_train.jsonl", prose[0::2], "p")
    neg = _jsonl(d / "code_train.jsonl", code[0::2], "c")
    held = {**{f"p{i:03d}": t for i, t in enumerate(prose[1::2])}, **{f"c{i:03d}": t for i, t in enumerate(code[1::2])}}
    return {"dir": d, "positive": pos, "negative": neg, "held": held}


def _train(corpus, out: Path, *extra: str) -> Path:
    from shardforge.score.train import main

    assert main(["--positive", str(corpus["positive"]), "--negative", str(corpus["negative"]), "--output", str(out),
                 "--bucket", "20000", "--dim", "16", "--epoch", "25", "--lr", "0.5", *extra]) == 0
    return out


@pytest.fixture(scope="module")
def model(corpus):
    return _train(corpus, corpus["dir"] / "edu.bin")


def _direct(path: Path, texts: dict[str, str], label: str = LABEL) -> dict[str, float]:
    """fastText's own probability of `label`, one text at a time, no Spark."""
    import fasttext

    m = fasttext.load_model(str(path))
    out = {}
    for k, t in texts.items():
        labels, probs = m.predict(t.replace("\n", " "), k=-1)
        out[k] = float(probs[list(labels).index(label)]) if label in labels else 0.0
    return out


def _models(*entries) -> str:
    """A `score.models` override: (name, path, label) entries."""
    return "score.models=[" + ", ".join(f'{{name = "{n}", path = {json.dumps(str(p))}, label = "{lab}"}}'
                                        for n, p, lab in entries) + "]"


# -- config ----------------------------------------------------------------------------------

def test_score_config_reads_a_list_of_model_tables(tmp_path):
    cfg = load_config(None, [_models(("edu", "m.bin", LABEL), ("code", "c.bin", "__label__cc")), "score.batch_size=64"])
    assert [(m.name, m.path, m.label) for m in cfg.score.models] == [("edu", "m.bin", LABEL),
                                                                   ("code", "c.bin", "__label__cc")]
    assert cfg.score.batch_size == 64
    assert cfg.to_dict()["score"]["models"][1] == {"name": "code", "path": "c.bin", "label": "__label__cc"}
    assert "score" not in load_config().pipeline.stages          # needs files the user gives


@pytest.mark.parametrize("override, message", [
    ('score.models=[{name = "edu", path = "m.bin", label = "x", colour = "red"}]',
     "score.models[0].colour: unknown key"),
    ('score.models=[{name = "1edu", path = "m.bin", label = "x"}]', "score.models[0].name: '1edu' must be letters"),
    ('score.models=[{name = "a", path = "m.bin", label = "x"}, {name = "a", path = "n.bin", label = "x"}]',
     "score.models[1].name: 'a' is used by an earlier model"),
    ('score.models=[{name = "edu", label = "x"}]', "score.models[0].path: missing"),
    ('score.models=[{name = "edu", path = 3, label = "x"}]', "score.models[0].path: expected a string"),
    ('score.models=["m.bin"]', "score.models[0]: expected a table"),
    ("score.batch_size=0", "score.batch_size: must be >= 1"),
])
def test_bad_score_config_names_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert message in str(err.value)


# -- model files -----------------------------------------------------------------------------

def test_a_trained_model_passes_the_check_with_its_labels(model, corpus, tmp_path):
    import fasttext

    from shardforge.score.model import check_models, read_structure

    info = read_structure(str(model))
    assert sorted(info["labels"]) == ["__label__cc", "__label__hq"] and info["dim"] == 16
    assert info["size"] == model.stat().st_size and not info["quantized"]
    small = fasttext.load_model(str(model))
    small.quantize(input=str(corpus["positive"]), cutoff=500, qnorm=True, retrain=False)   # the .ftz form passes too
    small.save_model(str(tmp_path / "edu.ftz"))
    assert read_structure(str(tmp_path / "edu.ftz"))["quantized"]
    cfg = load_config(None, [_models(("edu", model, LABEL))])
    (got,) = check_models(cfg.score)
    assert got.name == "edu" and got.label == LABEL and len(got.sha256) == 64


def test_a_model_cut_short_would_load_in_fasttext_and_is_refused_here(model, tmp_path):
    """Why the check reads the structure: fastText loads a file missing its last bytes and
    scores with whatever the missing weights became."""
    import fasttext

    from shardforge.score.model import ModelError, read_structure

    data = model.read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[:-64])
    fasttext.load_model(str(cut))                                  # no error from fastText itself
    for name, content, message in (("cut.bin", data[:-64], "truncated"), ("cut1.bin", data[:-1], "truncated"),
                                   ("head.bin", data[:3000], "truncated"),
                                   ("tiny.bin", data[:6], "not a fastText model"),
                                   ("random.bin", os.urandom(4096), "wrong magic number"),
                                   ("longer.bin", data + b"\0", "1 bytes past the end"),
                                   ("empty.bin", b"", "not a fastText model")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ModelError) as err:
            read_structure(str(tmp_path / name))
        assert message in str(err.value), name


def test_word_vectors_and_unknown_labels_are_refused(model, corpus, tmp_path):
    import fasttext

    from shardforge.score.model import ModelError, check_models

    vectors = fasttext.train_unsupervised(str(corpus["positive"]), dim=8, epoch=1, minCount=1, bucket=1000, thread=1,
                                          verbose=0)
    vectors.save_model(str(tmp_path / "vectors.bin"))
    with pytest.raises(ModelError, match=r"score.models\[0\].path: .*vectors.bin: a fastText word-vector model"):
        check_models(load_config(None, [_models(("v", tmp_path / "vectors.bin", LABEL))]).score)
    with pytest.raises(ModelError) as err:
        check_models(load_config(None, [_models(("edu", model, "hq"))]).score)
    assert "score.models[0].label: 'hq' is not a label" in str(err.value)
    assert "did you mean '__label__hq'" in str(err.value)
    with pytest.raises(ModelError, match=r"score.models: no model given"):
        check_models(load_config().score)


def test_the_fingerprint_covers_model_content_not_its_path(model, tmp_path):
    from shardforge.engine.runner import config_part
    from shardforge.stages import REGISTRY

    def part(path, label=LABEL):
        return config_part(load_config(None, [_models(("edu", path, label))]), REGISTRY["score"])

    here = part(model)
    assert "path" not in json.dumps(here["score"]["models"]) and here["score"]["models"][0]["name"] == "edu"
    copy = tmp_path / "elsewhere.bin"
    shutil.copyfile(model, copy)
    assert part(copy) == here                                      # same bytes elsewhere: same fingerprint
    changed = tmp_path / "changed.bin"
    data = bytearray(model.read_bytes())
    data[-5] ^= 0xFF                                               # one weight's byte
    changed.write_bytes(bytes(data))
    assert part(changed) != here
    assert part(model, "__label__cc") != here


# -- training --------------------------------------------------------------------------------

def test_training_is_deterministic_and_counts_what_it_skips(corpus, tmp_path, capsys):
    from shardforge.score.train import main

    broken = tmp_path / "with_bad.jsonl"
    broken.write_text(corpus["positive"].read_text() + '{"id": "x", "text": \n{"id": "y"}\n')
    a = _train({**corpus, "positive": broken}, tmp_path / "a.bin", "--seed", "7")
    out = capsys.readouterr()
    b = _train({**corpus, "positive": broken}, tmp_path / "b.bin", "--seed", "7")
    assert a.read_bytes() == b.read_bytes()
    n_pos = len(corpus["positive"].read_text().splitlines())
    assert f"train: {n_pos} positive (__label__hq)" in out.out
    assert "skipped 1 records" in out.err and "malformed JSON" in out.err and "no string `text`" in out.err
    assert main(["--positive", str(tmp_path / "nothing"), "--negative", str(corpus["negative"]),
                 "--output", str(tmp_path / "c.bin")]) == 2
    assert "nothing: no such file or folder" in capsys.readouterr().err


def test_the_kernel_scores_slices_alike_and_marks_what_it_cannot_score(model, corpus):
    """Per text, whatever the slice size: fastText's own probability; None for no text; 0.0
    for a label fastText does not predict."""
    import fasttext

    from shardforge.score.stage import label_scores

    m = fasttext.load_model(str(model))
    texts = [corpus["held"]["p000"], None, corpus["held"]["c000"], "", "one line\nand another"]
    want = _direct(model, {i: t for i, t in enumerate(texts) if t is not None})
    for size in (1, 2, 100):
        got = label_scores(m, texts, LABEL, size)
        assert got == [want[0], None, want[2], want[3], want[4]]
    assert label_scores(m, texts, "__label__absent", 3) == [0.0, None, 0.0, 0.0, 0.0]


# -- the stage on Spark ----------------------------------------------------------------------

def test_scores_separate_the_kinds_and_equal_fasttexts_own(spark, model, corpus):
    from shardforge.score.model import check_models
    from shardforge.score.stage import score

    held = corpus["held"]
    cfg = load_config(None, [_models(("edu", model, LABEL), ("code", model, "__label__cc")), "score.batch_size=7"])
    infos = check_models(cfg.score)
    rows = [(k, t, (1.5,)) for k, t in sorted(held.items())] + [("nil", None, None)]
    df = spark.createDataFrame(rows, "id string, text string, signals struct<x: double>")
    got = {r.id: r for r in score(df.repartition(3), cfg.score, infos).collect()}
    assert len(got) == len(rows) and set(got) == set(held) | {"nil"}
    edu = {k: got[k].signals.edu for k in held}
    pos = [v for k, v in edu.items() if k.startswith("p")]
    neg = [v for k, v in edu.items() if k.startswith("c")]
    assert len(pos) >= 50 and len(neg) >= 30 and min(pos) > max(neg)          # AUC = 1 on held-out documents
    assert edu == _direct(model, held)
    assert {k: got[k].signals.code for k in held} == _direct(model, held, "__label__cc")
    for k in held:                                  # two labels: fastText's p + 1e-5 each, summing to 1 + 2e-5
        assert abs(got[k].signals.edu + got[k].signals.code - 1.00002) < 1e-5
        assert got[k].signals.x == 1.5 and got[k].text == held[k]
    assert got["nil"].signals.edu is None and got["nil"].signals.x is None        # no text: no score, row kept


def test_scores_do_not_depend_on_partitioning_or_reruns(spark, model, corpus):
    from shardforge.score.model import check_models
    from shardforge.score.stage import score

    cfg = load_config(None, [_models(("edu", model, LABEL))])
    infos = check_models(cfg.score)
    df = spark.createDataFrame(sorted(corpus["held"].items()), "id string, text string")
    runs = []
    for parts, batch in ((1, 1024), (7, 5), (7, 5)):
        s = score(df.repartition(parts), replace(cfg.score, batch_size=batch), infos)
        runs.append(sorted((r.id, r.signals.edu) for r in s.collect()))
    assert runs[0] == runs[1] == runs[2] and len(runs[0]) == len(corpus["held"])


# -- the command line ------------------------------------------------------------------------

def _cli(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess:
    inp = tmp_path / "d.jsonl"
    inp.write_text('{"id": "a", "text": "some words"}\n')
    env = {**os.environ, "SHARDFORGE_JARS": str(tmp_path / "no-jars")}       # Spark could not start at all
    args = [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--input", str(inp), "--output",
            str(tmp_path / "o"), "--set", 'pipeline.stages=["ingest","clean","score"]', "--set",
            'spark.jars_dir="/nonexistent"']
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_a_missing_or_corrupt_model_exits_2_naming_it_before_spark(model, tmp_path):
    data = model.read_bytes()
    (tmp_path / "random.bin").write_bytes(os.urandom(len(data)))
    (tmp_path / "cut.bin").write_bytes(data[:len(data) // 2])
    cases = ((tmp_path / "missing.bin", LABEL, "score.models[0].path", "no such model file"),
             (tmp_path / "random.bin", LABEL, "score.models[0].path", "not a fastText model"),
             (tmp_path / "cut.bin", LABEL, "score.models[0].path", "truncated"),
             (model, "__label__nope", "score.models[0].label", "is not a label"))
    for path, label, key, message in cases:
        proc = _cli(tmp_path, _models(("edu", path, label)))
        assert proc.returncode == 2, proc.stderr
        assert key in proc.stderr and str(path) in proc.stderr and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "Spark" not in proc.stderr and not (tmp_path / "o").exists()
    proc = _cli(tmp_path)                                                # listed, but no model given
    assert proc.returncode == 2 and "score.models: no model given" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_pipeline_with_the_score_stage_puts_the_scores_in_the_curated_table(spark, model, corpus, tmp_path):
    from shardforge.engine.cli import main

    held = corpus["held"]
    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in sorted(held.items())))
    out = tmp_path / "out"
    assert main(["pipeline", "--input", str(inp), "--output", str(out), "--set", "spark.shuffle_partitions=2",
                 "--set", 'pipeline.stages=["ingest","clean","score","curate"]',
                 "--set", "clean.normalize_unicode=false",
                 "--set", _models(("edu", model, LABEL))]) == 0
    table = spark.read.format("delta").load(str(out / "curated"))
    assert dict(table.select("signals.edu").dtypes)["edu"] == "double"
    got = {r.id: r.edu for r in table.select("id", "signals.edu").collect()}
    assert got == _direct(model, held)                                   # every document, fastText's own score
    report = json.loads((out / "report.json").read_text())
    stage = next(s for s in report["stages"] if s["name"] == "score")
    assert (stage["rows_in"], stage["kept"], stage["rejected"]) == (len(held), len(held), 0)
    scores = report["scores"]["edu"]
    assert scores["documents"] == len(held) and sum(scores["histogram"].values()) == len(held)
    pos = sum(1 for k in held if k.startswith("p"))                      # all above 0.9, the code all below 0.1
    assert scores["histogram"]["0.9-1.0"] == pos and scores["histogram"]["0.0-0.1"] == len(held) - pos
    assert "Model scores" in (out / "report.html").read_text()


def test_the_html_report_shows_model_scores_only_when_a_run_scored():
    from shardforge.report import render_html

    entry = {"label": LABEL, "model_sha256": "ab" * 32, "documents": 3, "mean": 0.5, "min": 0.1, "max": 0.9,
             "histogram": {"0.0-0.1": 1, "0.4-0.5": 1, "0.8-0.9": 1}}
    page = render_html({"scores": {"edu": entry}})
    assert "Model scores" in page and "signals.edu" in page and LABEL in page and "abababab" in page
    assert "Model scores" not in render_html({})
