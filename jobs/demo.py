"""The demo: the whole pipeline on the bundled sample, then the torch loader on two ranks.

    make demo            (or: python -m shardforge.jobs.demo --conf conf/demo.toml --output out/demo)

Starts a web server on 127.0.0.1 for the sample pages and images, writes their URL
list and a gzip WARC crawled from it (the sample pages and a 404), runs the pipeline
(download, read, clean, redact, dedup, curate, shards),
verifies the build, then starts two `torch.distributed` (gloo) processes that each
read their rank's rows with `ShardedDataset` and their packed token sequences with
`TokenDataset`, and print what they got.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the download stage reports every URL's status
        pass


DEMO_PORT = 8765
SEQUENCE_LENGTH = 64   # tokens per packed training sequence the demo's loader reads (plus one for the targets)  # fixed, so the URLs (and the ids derived from them) are the same every run


def serve(folder: Path, port: int = 0):
    """A threaded static server on 127.0.0.1; returns (server, base URL). `port` 0 picks a
    free one; a busy fixed port falls back to a free one (the URLs then differ)."""
    handler = functools.partial(_Quiet, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:
        print(f"demo: port {port} is busy, using a free one (page and image ids will differ from other runs)",
              file=sys.stderr)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def write_url_list(base: str, out: Path) -> Path:
    """The sample's URL list for a server at `base`, as CSV. An unchanged list is not rewritten,
    so a rerun after a crash sees the same input (same size and modification time) and resumes."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "urls.csv"
    lines = ["url,caption\n"]
    with open(SAMPLE / "web" / "urls.txt", encoding="utf-8") as src:
        for line in src:
            rel, caption = line.rstrip("\n").split("\t")
            lines.append(f"{base}/{rel},\"{caption}\"\n")
    text = "".join(lines)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


CRAWL_DATE = "2026-01-15T00:00:00Z"


def write_crawl(base: str, out: Path) -> Path:
    """A gzip WARC of the sample's HTML pages fetched from the demo server (plus one missing
    page, a 404), as a crawler would write it: the demo's WARC input. Written once, so a rerun
    sees the same input and resumes. Its records carry a fixed WARC-Date (a crawler stamps
    the fetch time, which rows keep as `meta.warc_date`): two demo runs on two machines
    give the same shards and the same build id."""
    from shardforge.ingest.readers.warcfile import crawl

    path = out / "crawl.warc.gz"
    if not path.exists():
        pages = sorted(p.name for p in (SAMPLE / "web" / "pages").glob("*.html"))
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "_crawl.warc.gz.tmp"
        crawl([f"{base}/pages/{name}" for name in pages] + [f"{base}/pages/missing.html"], str(tmp), date=CRAWL_DATE)
        tmp.replace(path)
    return path


def train_tokenizer(path: Path) -> Path:
    """A small byte-level BPE tokenizer trained on the sample's texts (nothing downloaded;
    the same sample gives the same tokenizer.json)."""
    from shardforge.tokenize.stage import train_bpe

    texts = []
    with open(SAMPLE / "docs.jsonl", encoding="utf-8") as fh:
        for line in fh:
            try:
                texts.append(json.loads(line).get("text") or "")
            except (ValueError, AttributeError):
                continue        # the sample's deliberately broken lines
    train_bpe(texts, str(path), vocab_size=2000)
    return path


def read_rank(rank: int, world: int, shards: str, port: int, batch_size: int, queue) -> None:
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from shardforge.loaders import ShardedDataset

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        ds = ShardedDataset(shards, seed=0, shuffle=True, columns=["id", "text"], batch_size=batch_size)
        loader = DataLoader(ds, batch_size=batch_size, num_workers=1)
        ids = []
        first = None
        for batch in loader:
            first = first or batch
            ids += list(batch["id"])
        packed = {}
        if "tokens" in ds.source.manifest.column_names:     # the demo's build is tokenized
            from shardforge.loaders import TokenDataset

            seqs = TokenDataset(shards, sequence_length=SEQUENCE_LENGTH, seed=0, batch_size=batch_size,
                                batched=True)
            shapes = [tuple(b.shape) for b in DataLoader(seqs, batch_size=None, num_workers=1)]
            packed = {"sequence_batches": len(shapes), "first_shape": shapes[0] if shapes else None,
                      "dtype": str(seqs.dtype), "sequences": seqs.num_samples()}
        dist.barrier()
        queue.put({"rank": rank, "samples": len(ids), "first_ids": list(first["id"][:3]) if first else [],
                   "ids": ids, "packed": packed})
    finally:
        dist.destroy_process_group()


def run_loader(shards: str, world: int = 2, batch_size: int = 8) -> list[dict]:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=read_rank, args=(r, world, shards, port, batch_size, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        if p.exitcode != 0:
            raise RuntimeError(f"loader rank process exited with {p.exitcode}")
    return sorted(results, key=lambda r: r["rank"])


def main(argv=None) -> int:
    from shardforge.config import load_config
    from shardforge.engine.jobargs import setup_logging

    ap = argparse.ArgumentParser(prog="shardforge-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--conf", default=str(ROOT / "conf" / "demo.toml"))
    ap.add_argument("--output", default=None)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--port", type=int, default=DEMO_PORT, help="port of the sample web server on 127.0.0.1")
    args = ap.parse_args(argv)
    setup_logging()
    cfg = load_config(args.conf, args.overrides)
    out = Path(args.output or cfg.pipeline.output).resolve()
    from shardforge.jobs.pipeline import run_pipeline
    from shardforge.engine.session import get_spark

    server, base = serve(SAMPLE / "web", args.port)
    try:
        urls = write_url_list(base, out / "_input")
        inputs = tuple(str(p if Path(p).is_absolute() else ROOT / p) for p in cfg.pipeline.input)
        inputs += (str(write_crawl(base, out / "_input")),)      # the WARC input
        tokenizer = train_tokenizer(out / "_input" / "tokenizer.json")
        stages = cfg.pipeline.stages
        if "tokenize" not in stages and "curate" in stages:
            stages = (*stages[:stages.index("curate")], "tokenize", *stages[stages.index("curate"):])
        cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=inputs, urls=(str(urls),), output=str(out),
                                           stages=stages),
                          tokenize=replace(cfg.tokenize, tokenizer=str(tokenizer), eos_id=1))
        spark = get_spark(cfg.spark)
        report = run_pipeline(spark, cfg)
        spark.stop()
    finally:
        server.shutdown()
    from shardforge.engine.cli import main as cli

    shards = str(out / "shards")
    print("\n== stages")
    for s in report["stages"]:
        print(f"  {s['name']:<9} {s['rows_in']:>5} in  {s['kept']:>5} kept  {s['rejected']:>4} rejected  "
              + ", ".join(f"{k}={v}" for k, v in s["rejects_by_reason"].items()))
    print("\n== shardforge verify")
    if cli(["verify", shards]) != 0:
        return 1
    print("\n== shardforge inspect")
    cli(["inspect", shards])
    print("\n== torch loader, 2 ranks (gloo)")
    ranks = run_loader(shards)
    for r in ranks:
        print(f"  rank {r['rank']}: {r['samples']} samples, first ids {r['first_ids']}")
    for r in ranks:
        p = r["packed"]
        if p:
            print(f"  rank {r['rank']}: {p['sequences']} packed sequences of {SEQUENCE_LENGTH}+1 tokens in "
                  f"{p['sequence_batches']} batches of shape {p['first_shape']} ({p['dtype']})")
    seen = [i for r in ranks for i in r["ids"]]
    print(f"  ranks disjoint: {len(seen) == len(set(seen))}; report: {out / 'report.html'}")
    json.dump({"ranks": [{k: v for k, v in r.items() if k != 'ids'} for r in ranks]},
              open(out / "demo-loader.json", "w"), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
