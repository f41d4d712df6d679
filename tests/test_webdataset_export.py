"""`shardforge export-webdataset`: the tars read back with the `webdataset` package equal the
build's rows (read independently with pyarrow from the shard files), two exports are
byte-identical, the headers carry no clock or user, and bad input exits 2 (3 for a shard
whose bytes differ from the manifest) with one line."""
from __future__ import annotations

import base64
import glob
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from shardforge.engine.cli import main
from shardforge.shards.writer import WriterSettings, write_build


def _image(fmt: str, seed: int) -> bytes:
    img = Image.new("RGB", (6, 4), (seed * 40 % 256, 80, 200 - seed))
    out = io.BytesIO()
    img.save(out, fmt)
    return out.getvalue()


def _table(shard: int, n: int) -> pa.Table:
    ids = [f"doc-{shard}-{i}" for i in range(n)]
    images = [None if i % 3 == 0 else _image("PNG" if i % 2 else "JPEG", i) for i in range(n)]
    return pa.table({
        "id": pa.array(ids, pa.string()),
        "text": pa.array([None if i == 1 else f"text {shard}/{i} ünïcode ✓" for i in range(n)], pa.string()),
        "kind": pa.array(["image" if im else "document" for im in images], pa.string()),
        "image": pa.array(images, pa.binary()),
        "image_width": pa.array([6 if im else None for im in images], pa.int32()),
        "score": pa.array([i / 3.0 for i in range(n)], pa.float64()),
        "ok": pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
        "tokens": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        "pii_counts": pa.array([[("email", i)] if i % 2 else [] for i in range(n)],
                               pa.map_(pa.string(), pa.int32())),
    })


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("wds") / "build"
    write_build(str(root), [_table(0, 7), _table(1, 0), _table(2, 5)], settings=WriterSettings(row_group_rows=3))
    return str(root)


def expected_rows(build: str) -> list[list[dict]]:
    """Each shard's rows in file order, read with pyarrow from the Parquet files on disk."""
    files = sorted(glob.glob(os.path.join(build, "*", "part-*.parquet")))
    return [pq.read_table(f).to_pylist() for f in files]


def as_json(row: dict) -> dict:
    """The json member the docs promise for a row: every column but text and image, maps as
    objects (their keys here are strings), everything else as it is."""
    out = {k: v for k, v in row.items() if k not in ("text", "image")}
    out["pii_counts"] = dict(row["pii_counts"]) if row["pii_counts"] is not None else None
    return out


def export(build: str, out: str) -> None:
    assert main(["export-webdataset", build, out]) == 0


def test_webdataset_reads_back_the_build_rows(build, tmp_path):
    import webdataset as wds

    out = str(tmp_path / "out")
    export(build, out)
    shards = expected_rows(build)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert [t["rows"] for t in manifest["tars"]] == [len(s) for s in shards]
    for t in manifest["tars"]:
        data = open(os.path.join(out, t["file"]), "rb").read()
        assert (t["sha256"], t["bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))

    urls = [os.path.join(out, t["file"]) for t in manifest["tars"]]
    samples = list(wds.WebDataset(urls, shardshuffle=False, empty_check=False))
    rows = [r for s in shards for r in s]
    assert len(samples) == len(rows) == manifest["total_rows"]
    for sample, row in zip(samples, rows):
        assert json.loads(sample["json"]) == as_json(row)
        assert sample.get("txt") == (None if row["text"] is None else row["text"].encode())
        images = {k: v for k, v in sample.items() if k in ("jpg", "png", "webp", "gif")}
        if row["image"] is None:
            assert images == {}
        else:
            ext = "png" if row["image"].startswith(b"\x89PNG") else "jpg"
            assert images == {ext: row["image"]}
    # keys: shard and row position, in order
    assert [s["__key__"] for s in samples] == [f"{i:05d}-{r:09d}" for i, s in enumerate(shards)
                                               for r in range(len(s))]


def test_two_exports_are_byte_identical(build, tmp_path):
    """The second export runs in another process, with another time zone and umask, at least
    one second later: every file is the same, and no header carries a clock or a user."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    export(build, a)
    start = int(time.time())
    while int(time.time()) == start:          # let the clock's second change
        time.sleep(0.05)
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    subprocess.run(["sh", "-c", f'umask 077 && exec "{sys.executable}" -m shardforge.engine.cli export-webdataset '
                    f'"{build}" "{b}"'], env=env, check=True, capture_output=True)
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b)) and len(names) == 4
    for n in names:
        assert open(os.path.join(a, n), "rb").read() == open(os.path.join(b, n), "rb").read(), n
    for tar_path in glob.glob(os.path.join(a, "*.tar")):
        with tarfile.open(tar_path) as tar:
            members = tar.getmembers()
        assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} <= {(0, 0, 0, "", "", 0o644)}
        names = [m.name for m in members]
        assert names == sorted(names, key=lambda n: tuple(n.split(".", 1)))


def _run(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def test_bad_input_exits_2_with_one_line(build, tmp_path, capsys):
    code, err = _run(["export-webdataset", str(tmp_path / "nope"), str(tmp_path / "o1")], capsys)
    assert code == 2 and err.count("\n") == 1 and "manifest.json not found" in err
    assert err.startswith("shardforge export-webdataset: error:")

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    code, err = _run(["export-webdataset", str(bad), str(tmp_path / "o2")], capsys)
    assert code == 2 and err.count("\n") == 1 and "not valid JSON" in err

    (bad / "manifest.json").write_text(json.dumps({"format": "something else"}))
    code, err = _run(["export-webdataset", str(bad), str(tmp_path / "o3")], capsys)
    assert code == 2 and err.count("\n") == 1 and "not a shardforge shard manifest" in err

    import shutil

    broken = str(tmp_path / "broken")
    shutil.copytree(build, broken)
    victim = sorted(glob.glob(os.path.join(broken, "*", "part-*.parquet")))[2]
    os.unlink(victim)
    code, err = _run(["export-webdataset", broken, str(tmp_path / "o4")], capsys)
    assert code == 2 and err.count("\n") == 1 and "shard 2 is missing" in err
    assert not os.path.exists(tmp_path / "o4" / "manifest.json")

    shutil.copy(sorted(glob.glob(os.path.join(build, "*", "part-*.parquet")))[2], victim)
    with open(victim, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\x00\x01\x02")
    code, err = _run(["export-webdataset", broken, str(tmp_path / "o5")], capsys)
    assert code == 3 and err.count("\n") == 1 and "checksum mismatch for shard 2" in err


def test_json_values_are_typed():
    """The json member's conversions for the types the test build lacks (checked by value)."""
    import datetime as dt

    from shardforge.shards.webdataset import to_jsonable

    assert to_jsonable(b"\x00\xff", pa.binary()) == base64.b64encode(b"\x00\xff").decode()
    assert to_jsonable(dt.date(2024, 2, 29), pa.date32()) == "2024-02-29"
    assert to_jsonable(float("nan"), pa.float64()) == "NaN"
    assert to_jsonable(float("-inf"), pa.float64()) == "-Infinity"
    assert to_jsonable([(1, "a")], pa.map_(pa.int64(), pa.string())) == [[1, "a"]]
    assert to_jsonable({"x": 1, "y": None}, pa.struct([("x", pa.int8()), ("y", pa.string())])) == {"x": 1, "y": None}


def test_open_clip_style_pipeline(build, tmp_path):
    """The pipeline open_clip builds (tar samples, PIL decode, rename to image/text, drop samples
    without both) yields each image-and-text row's decoded image and caption."""
    import webdataset as wds

    out = str(tmp_path / "out")
    export(build, out)
    urls = sorted(glob.glob(os.path.join(out, "*.tar")))
    pipe = wds.DataPipeline(wds.SimpleShardList(urls), wds.tarfile_to_samples(),
                            wds.select(lambda s: "txt" in s and any(k in s for k in ("jpg", "png", "jpeg", "webp"))),
                            wds.decode("pilrgb"), wds.rename(image="jpg;png;jpeg;webp", text="txt"),
                            wds.to_tuple("image", "text"))
    got = [(img.size, img.tobytes(), text) for img, text in pipe]
    want = []
    for row in (r for s in expected_rows(build) for r in s):
        if row["image"] is not None and row["text"] is not None:
            img = Image.open(io.BytesIO(row["image"])).convert("RGB")
            want.append((img.size, img.tobytes(), row["text"]))
    assert got == want and len(want) >= 4


def test_image_bytes_that_are_no_image_exit_2(tmp_path, capsys):
    bad = pa.table({"id": pa.array(["a", "b"]), "text": pa.array(["x", "y"]),
                    "image": pa.array([_image("PNG", 1), b"plain bytes, not an image"], pa.binary())})
    write_build(str(tmp_path / "b"), [bad])
    code, err = _run(["export-webdataset", str(tmp_path / "b"), str(tmp_path / "o")], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "shard 0 row 1: the image column holds bytes that are not JPEG, PNG, WebP or GIF" in err
    assert not os.path.exists(tmp_path / "o" / "manifest.json")


def test_export_of_a_build_served_over_http_is_the_same(build, tmp_path):
    """BUILD may be an fsspec URL: the export of the build served on 127.0.0.1 equals the local one."""
    from fileserver import FileServer

    local, remote = str(tmp_path / "local"), str(tmp_path / "remote")
    export(build, local)
    folder = os.path.dirname(build)
    with FileServer(folder) as srv:
        export(f"{srv.url}/{os.path.basename(build)}", remote)
        assert srv.requests(".parquet")
    for n in sorted(os.listdir(local)):
        assert open(os.path.join(local, n), "rb").read() == open(os.path.join(remote, n), "rb").read(), n
