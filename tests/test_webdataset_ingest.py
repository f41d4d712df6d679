"""WebDataset tars in: img2dataset-style shards (`key.jpg`, `key.txt`, `key.json`), written here
with tarfile and pillow, go through the whole pipeline into shards, back out with
`export-webdataset`, and read by the `webdataset` package equal what was written; the same
tars served over HTTP give the same rows; the rows do not depend on the listing order; broken
tars and members are rejects with reasons, every member is counted once, and a member named
`../x` or `/abs/x` never reaches the filesystem.

Expected values are computed here from what the test wrote (ids by the documented formula:
32 hex chars of sha256("webdataset" 0x1f source 0x1f key))."""
from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tarfile
from collections import Counter
from dataclasses import replace

import pytest
from PIL import Image

from shardforge.config import Config, IngestSection

CAPTIONS = ["a red kite over the hill", "two boats in a quiet harbour", "a bowl of green apples",
            "snow on the mountain road", "a cat asleep on a chair", "the old bridge at dusk",
            "a field of yellow flowers", "rain on the station roof", "a lamp in the window",
            "a dog running on the beach", "bread on a wooden table", "a train leaving the city"]


def _image(fmt: str, seed: int) -> tuple[bytes, int, int]:
    rnd = random.Random(seed)
    w, h = 8 + seed % 7, 6 + seed % 5
    img = Image.frombytes("RGB", (w, h), rnd.randbytes(w * h * 3))
    out = io.BytesIO()
    img.save(out, fmt)
    return out.getvalue(), w, h


def _info(name: str, size: int = 0, kind=tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname, info.mtime = size, kind, link, 0
    return info


def _write_tar(members: list, gz: bool = False) -> bytes:
    """members: (name, bytes) for regular files, or a TarInfo (directories, links, FIFOs)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                tar.addfile(_info(m[0], len(m[1])), io.BytesIO(m[1]))
    return buf.getvalue()


def expected_id(source: str, key: str) -> str:
    return hashlib.sha256(f"webdataset\x1f{source}\x1f{key}".encode()).hexdigest()[:32]


def _samples(shard: int, n: int, fmt: str) -> list[dict]:
    """img2dataset's layout: key = 5-digit shard + 4-digit index; json as img2dataset writes it."""
    out = []
    for i in range(n):
        key = f"{shard:05d}{i:04d}"
        seed = shard * 10 + i
        data, w, h = _image(fmt, seed)
        caption = CAPTIONS[seed % len(CAPTIONS)] + f" number {seed}"
        meta = {"url": f"https://images.example.com/{key}.{fmt.lower()}", "caption": caption, "key": key,
                "status": "success", "error_message": None, "width": w, "height": h,
                "original_width": w * 2, "original_height": h * 2, "exif": "{}",
                "sha256": hashlib.sha256(data).hexdigest()}
        out.append({"key": key, "ext": "jpg" if fmt == "JPEG" else "png", "image": data, "w": w, "h": h,
                    "caption": caption, "json": meta, "format": fmt.lower()})
    return out


def _members(samples: list[dict]) -> list[tuple[str, bytes]]:
    out = []
    for s in samples:
        out += [(f"{s['key']}.{s['ext']}", s["image"]), (f"{s['key']}.txt", s["caption"].encode()),
                (f"{s['key']}.json", json.dumps(s["json"]).encode())]
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder of four tars: two whole (one gzip), one cut inside its third sample's image,
    one with broken members. Returns (folder, {id: expected row}, {(source, reason): n},
    members present in the files)."""
    folder = tmp_path_factory.mktemp("wds_in") / "tars"
    folder.mkdir()
    expected: dict[str, dict] = {}

    def keep(source, samples):
        for s in samples:
            meta = {k: v for k, v in s["json"].items() if k != "url"}
            meta.update(wds_key=s["key"], image_format=s["format"])
            expected[expected_id(source, s["key"])] = {
                "source": source, "url": s["json"]["url"], "text": s["caption"], "image": s["image"],
                "ext": s["ext"], "image_width": s["w"], "image_height": s["h"], "meta": meta}

    a = _samples(0, 4, "JPEG")
    (folder / "00000.tar").write_bytes(_write_tar(_members(a)))
    keep("00000.tar", a)
    b = _samples(1, 3, "PNG")
    (folder / "00001.tar.gz").write_bytes(_write_tar(_members(b), gz=True))
    keep("00001.tar.gz", b)
    c = _samples(2, 3, "JPEG")
    whole = _write_tar(_members(c))
    # cut in the middle of the third sample's image: its header (at 6 members in) is read, its data is not
    with tarfile.open(fileobj=io.BytesIO(whole)) as t:
        third = t.getmembers()[6]
    (folder / "00002.tar").write_bytes(whole[:third.offset_data + third.size // 2])
    keep("00002.tar", c[:2])
    d = _samples(3, 4, "JPEG")
    broken = (_members(d[:1])
              + [(f"{d[1]['key']}.jpg", b"\xff\xd8\xff\xe0 this is not a JPEG at all"),
                 (f"{d[1]['key']}.txt", d[1]["caption"].encode()),
                 (f"{d[1]['key']}.json", json.dumps(d[1]["json"]).encode()),
                 ("README", b"no extension"), (f"{d[0]['key']}.txt", b"a late second caption"),
                 _info("sub", kind=tarfile.DIRTYPE), (f"{d[2]['key']}.json", b"{}")]
              + _members(d[3:]))
    (folder / "00003.tar").write_bytes(_write_tar(broken))
    keep("00003.tar", [d[0], d[3]])
    rejected = {("00002.tar", "invalid:truncated_tar"): 1, ("00003.tar", "invalid:undecodable_image"): 1,
                ("00003.tar", "invalid:no_key_group"): 2, ("00003.tar", "invalid:empty_sample"): 1}
    # members in the files: 12 + 9 + (6 whole + the cut one) + (3 + 3 + 2 + 1 dir + 1 + 3)
    members = 12 + 9 + 7 + 13
    return folder, expected, rejected, members


def _rows(df) -> dict[str, dict]:
    cols = ["id", "text", "source", "url", "kind", "meta", "image", "image_width", "image_height"]
    out = {}
    for r in df.select(*cols).collect():
        d = r.asDict()
        d["image"] = bytes(d["image"]) if d["image"] is not None else None
        out[d["id"]] = d
    return out


def _check_rows(rows: dict[str, dict], expected: dict[str, dict]) -> None:
    assert set(rows) == set(expected)
    for i, e in expected.items():
        r = rows[i]
        assert (r["source"], r["url"], r["text"], r["kind"]) == (e["source"], e["url"], e["text"], "image"), i
        assert r["image"] == e["image"] and (r["image_width"], r["image_height"]) == (e["image_width"],
                                                                                     e["image_height"])
        assert json.loads(r["meta"]) == e["meta"]


@pytest.mark.slow
def test_round_trip_through_the_pipeline_and_export(spark, corpus, tmp_path):
    import webdataset as wds

    from shardforge.engine.cli import main
    from shardforge.jobs.pipeline import run_pipeline

    folder, expected, rejected, members = corpus
    out = tmp_path / "out"
    cfg = Config()
    cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(str(folder),), output=str(out)),
                      shards=replace(cfg.shards, num_shards=2))
    report = run_pipeline(spark, cfg)
    for s in report["stages"]:
        assert s["rows_in"] == s["kept"] + s["rejected"], s
    stages = {s["name"]: s for s in report["stages"]}
    ingest = stages["ingest"]
    assert ingest["kept"] == len(expected) and ingest["rejected"] == sum(rejected.values())
    assert stages["curate"]["kept"] == len(expected)          # every sample reached the build
    tars = _find(report, "webdataset")
    assert tars["files"] == 4 and tars["members"] == members and tars["directories_skipped"] == 1
    assert tars["members_in_kept_samples"] == 3 * len(expected)
    assert tars["members_rejected"] == members - 3 * len(expected) - 1

    rej = spark.read.format("delta").load(str(out / "rejects")).where("stage = 'ingest'").collect()
    assert Counter((r["source"], r["reason"]) for r in rej) == Counter(rejected)
    details = {r["reason"]: r["detail"] for r in rej}
    assert "000020002.jpg" in details["invalid:truncated_tar"] and "after 2 complete samples" in \
        details["invalid:truncated_tar"]
    assert "000030001.jpg" in details["invalid:undecodable_image"]
    assert sorted(r["detail"].split(":")[0] for r in rej if r["reason"] == "invalid:no_key_group") == \
        ["000030000.txt", "README"]

    exported = tmp_path / "exported"
    assert main(["export-webdataset", str(out / "shards"), str(exported)]) == 0
    urls = sorted(str(p) for p in exported.glob("part-*.tar"))
    samples = list(wds.WebDataset(urls, shardshuffle=False, empty_check=False))
    assert len(samples) == len(expected)
    seen = set()
    for s in samples:
        j = json.loads(s["json"])
        e = expected[j["id"]]
        seen.add(j["id"])
        assert s["txt"].decode() == e["text"]
        assert s[e["ext"]] == e["image"] and not ({"jpg", "png"} - {e["ext"]}) & set(s)
        assert (j["source"], j["url"], j["kind"]) == (e["source"], e["url"], "image")
        assert (j["image_width"], j["image_height"]) == (e["image_width"], e["image_height"])
        assert json.loads(j["meta"]) == e["meta"]
    assert seen == set(expected)


def _find(report: dict, key: str):
    if isinstance(report, dict):
        if key in report:
            return report[key]
        vals = report.values()
    elif isinstance(report, list):
        vals = report
    else:
        return None
    for v in vals:
        got = _find(v, key)
        if got is not None:
            return got
    return None


def test_remote_tars_over_http_give_the_same_rows(spark, corpus):
    from fileserver import FileServer

    from shardforge.ingest.stage import read_documents

    folder, expected, rejected, _ = corpus
    names = sorted(os.listdir(folder))
    local = read_documents(spark, [str(folder / n) for n in names], IngestSection())
    with FileServer(str(folder)) as srv:
        remote = read_documents(spark, [f"{srv.url}/{n}" for n in names], IngestSection())
        remote_rows = _rows(remote.kept)
        remote_rej = Counter((r["source"], r["reason"]) for r in remote.rejected.collect())
        assert sorted(set(srv.requests())) == [f"/{n}" for n in names]
    _check_rows(remote_rows, expected)
    assert remote_rows == _rows(local.kept)
    assert remote_rej == Counter(rejected)


def test_rows_do_not_depend_on_listing_order_or_tasks(spark, corpus):
    """The folder read in one job (a task per file) and the files given one by one, in reverse
    order (a job each), give the same rows and ids."""
    from shardforge.ingest.stage import read_documents

    folder, expected, rejected, _ = corpus
    whole = read_documents(spark, str(folder), IngestSection())
    one_by_one = read_documents(spark, [str(folder / n) for n in sorted(os.listdir(folder), reverse=True)],
                                IngestSection())
    rows = _rows(whole.kept)
    assert rows == _rows(one_by_one.kept)
    _check_rows(rows, expected)
    assert Counter((r["source"], r["reason"]) for r in whole.rejected.collect()) == Counter(rejected)


def _bad_tar(outside: str) -> tuple[bytes, dict[str, str]]:
    """A tar of one good sample and members that must never be written or kept; the reason
    each bad member must get."""
    img, _, _ = _image("JPEG", 1)
    members = [("000000000.jpg", img), ("000000000.txt", b"a good caption"),
               ("../x.txt", b"escape by parent"), ("a/../../y.txt", b"escape inside a path"),
               ("/abs/x.txt", b"escape by absolute name"), (outside, b"absolute, into the test's folder"),
               _info("ln.jpg", kind=tarfile.SYMTYPE, link="../../etc/passwd"),
               _info("hl.txt", kind=tarfile.LNKTYPE, link="000000000.txt"),
               _info("fifo.txt", kind=tarfile.FIFOTYPE), _info("d", kind=tarfile.DIRTYPE),
               ("000000001.png", _image("PNG", 2)[0])]
    reasons = {"../x.txt": "invalid:unsafe_member_name", "a/../../y.txt": "invalid:unsafe_member_name",
               "/abs/x.txt": "invalid:unsafe_member_name", outside: "invalid:unsafe_member_name",
               "ln.jpg": "invalid:link_member", "hl.txt": "invalid:link_member",
               "fifo.txt": "invalid:special_member"}
    return _write_tar(members), reasons


def _snapshot(root) -> dict[str, bytes]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[p] = open(p, "rb").read()
    return out


def test_unsafe_and_special_members_are_rejected_and_never_written(spark, tmp_path, monkeypatch):
    from shardforge.ingest.stage import read_documents
    from shardforge.ingest.readers.wds import TarLimits, tar_rows

    outside = str(tmp_path / "outside.txt")
    data, reasons = _bad_tar(outside)
    work = tmp_path / "scratch" / "work"
    work.mkdir(parents=True)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.tar").write_bytes(data)
    monkeypatch.chdir(work)            # where a naive extraction would write ../x.txt
    before = _snapshot(tmp_path)

    rows = list(tar_rows(io.BytesIO(data), "bad.tar", TarLimits()))
    got = {r["_key"]: r["_reason"] for r in rows if r["_unit"] == "member"}
    assert got == reasons
    kept = [r for r in rows if r["_unit"] == "sample"]
    assert [(r["_key"], r.get("_reason"), r["text"]) for r in kept] == [("000000000", None, "a good caption"),
                                                                       ("000000001", None, "")]
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        written = len(t.getmembers())
    assert sum(r["_members"] for r in rows) == written          # every member counted once
    assert [r["_key"] for r in rows if r["_unit"] == "skipped"] == ["d"]

    res = read_documents(spark, str(tmp_path / "in"), IngestSection())
    rej = {r["detail"].split(": ")[0]: r["reason"] for r in res.rejected.collect()}
    assert rej == reasons
    assert sorted(r["id"] for r in res.kept.collect()) == sorted(expected_id("bad.tar", k)
                                                                  for k in ("000000000", "000000001"))

    assert _snapshot(tmp_path) == before                         # nothing written anywhere under the test
    for p in (tmp_path / "scratch" / "x.txt", tmp_path / "y.txt", "/abs/x.txt"):
        assert not os.path.exists(p), p


def test_damaged_tars_keep_what_came_before_and_say_why():
    """No Spark: a tar cut at a member boundary (no end-of-archive block), inside a header,
    inside a member; garbage after the archive; and a file that is not a tar."""
    from shardforge.ingest.readers.wds import TarLimits, tar_rows

    s = _samples(7, 3, "JPEG")
    whole = _write_tar(_members(s))
    with tarfile.open(fileobj=io.BytesIO(whole)) as t:
        ms = t.getmembers()

    def run(data):
        rows = list(tar_rows(io.BytesIO(data), "t.tar", TarLimits()))
        return [r["_key"] for r in rows if r["_unit"] == "sample" and not r.get("_reason")], \
            [(r["_reason"], r["_members"]) for r in rows if r["_unit"] == "damage"]

    assert run(whole) == ([x["key"] for x in s], [])
    end_of_6 = ms[5].offset_data + (ms[5].size + 511) // 512 * 512
    # cut after two whole samples: the second one may have had more members, so it goes with the damage
    assert run(whole[:end_of_6]) == ([s[0]["key"]], [("invalid:truncated_tar", 3)])
    assert run(whole[:end_of_6 + 100]) == ([s[0]["key"]], [("invalid:truncated_tar", 3)])
    assert run(whole[:ms[7].offset_data + 10]) == ([s[0]["key"], s[1]["key"]], [("invalid:truncated_tar", 2)])
    assert run(whole + b"tail garbage" * 100) == ([x["key"] for x in s], [("invalid:corrupt_tar", 0)])
    assert run(b"this is not a tar file" * 100)[1] == [("invalid:corrupt_tar", 0)]
    assert run(b"")[1] == [("invalid:truncated_tar", 0)]


def test_declared_json_fields_become_typed_columns(spark, tmp_path):
    """`[ingest] columns` works for the json member as for JSONL: a declared field becomes a
    column of its type (and leaves `meta`); a value that does not fit is invalid:column_type;
    an `id` in the json is the sample's id."""
    from shardforge.ingest.stage import read_documents

    img, _, _ = _image("PNG", 3)
    members = [("a.png", img), ("a.json", json.dumps({"score": 0.25, "lang": "en"}).encode()),
               ("b.txt", b"a text sample"), ("b.json", json.dumps({"score": "high", "id": "doc-b"}).encode()),
               ("c.txt", b"another"), ("c.json", json.dumps({"id": "doc-c", "score": 2}).encode())]
    (tmp_path / "t.tar").write_bytes(_write_tar(members))
    res = read_documents(spark, str(tmp_path / "t.tar"), IngestSection(columns={"score": "double"}))
    kept = {r["id"]: r for r in res.kept.collect()}
    assert dict(res.kept.dtypes)["score"] == "double"
    assert set(kept) == {expected_id("t.tar", "a"), "doc-c"}
    a = kept[expected_id("t.tar", "a")]
    assert (a["score"], a["kind"], json.loads(a["meta"])) == (0.25, "image", {"lang": "en", "wds_key": "a",
                                                                             "image_format": "png"})
    c = kept["doc-c"]
    assert (c["score"], c["kind"], c["text"], json.loads(c["meta"])) == (2.0, "document", "another", {"wds_key": "c"})
    assert [(r["id"], r["reason"]) for r in res.rejected.collect()] == [("doc-b", "invalid:column_type")]
