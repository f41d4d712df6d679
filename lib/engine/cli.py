"""The `shardforge` command: one subcommand per job, plus `inspect` and `verify`.

Data subcommands (pipeline, ingest, clean, redact, dedup, build-shards) run the
job of the same name in `jobs/` (each also runs alone under spark-submit).
`inspect`, `verify`, `export-webdataset` and `export-megatron` read a build and need neither
Spark nor Java.
Exit codes: 0 success, 2 bad usage, input or config, 3 a build that fails verification (a
data-contract violation), 1 anything else.
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from typing import Sequence

JOBS = {
    "pipeline": ("shardforge.jobs.pipeline", "run every stage: ingest, clean, redact, dedup, curate, build shards"),
    "ingest": ("shardforge.jobs.ingest", "read documents and download URL lists into the raw table"),
    "clean": ("shardforge.jobs.clean", "normalise text and apply quality filters"),
    "redact": ("shardforge.jobs.redact", "replace PII and count it by kind"),
    "dedup": ("shardforge.jobs.dedup", "remove exact and near duplicates"),
    "build-shards": ("shardforge.jobs.build_shards", "write hash-partitioned Parquet shards and a manifest"),
}


def summarize(m) -> dict:
    rows = [s.rows for s in m.shards]
    sizes = [s.bytes for s in m.shards]
    mean = statistics.fmean(rows) if rows else 0.0
    return {
        "path": m.root, "build_id": m.build_id, "fingerprint": m.fingerprint, "key": m.key,
        "hash": m.hash, "num_shards": m.num_shards, "total_rows": m.total_rows,
        "total_bytes": sum(sizes), "rows_min": min(rows, default=0), "rows_max": max(rows, default=0),
        "rows_mean": round(mean, 2), "max_over_mean": round(max(rows) / mean, 4) if mean else None,
        "empty_shards": sum(1 for r in rows if r == 0), "source": m.source,
        "shardforge_version": m.shardforge_version,
        "columns": [f"{f['name']}: {f['type']}" for f in m.schema],
        "shards": [{"index": s.index, "file": s.file, "rows": s.rows, "bytes": s.bytes,
                    "row_groups": len(s.row_groups)} for s in m.shards],
    }


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)  # pragma: no cover


def cmd_inspect(args) -> int:
    from shardforge.shards.manifest import read_manifest

    s = summarize(read_manifest(args.path))
    if args.json:
        print(json.dumps(s, indent=2, sort_keys=True))
        return 0
    print(f"build      {s['build_id']}  ({s['path']})")
    print(f"rows       {s['total_rows']} in {s['num_shards']} shards ({s['empty_shards']} empty), "
          f"{_human(s['total_bytes'])}")
    print(f"per shard  min {s['rows_min']}  mean {s['rows_mean']}  max {s['rows_max']}  "
          f"(max/mean {s['max_over_mean']})")
    print(f"key        {s['key']}  shard = {s['hash']}")
    if s["source"]:
        print("source     " + ", ".join(f"{k}={v}" for k, v in sorted(s["source"].items())))
    print("columns    " + "; ".join(s["columns"]))
    if args.shards:
        for sh in s["shards"]:
            print(f"  {sh['index']:5d}  {sh['rows']:>10d} rows  {_human(sh['bytes']):>10}  "
                  f"{sh['row_groups']:>4d} row groups  {sh['file']}")
    return 0


def cmd_verify(args) -> int:
    from shardforge.shards.manifest import read_manifest, verify

    m = read_manifest(args.path)
    problems = verify(m)
    for p in problems:
        print(f"FAIL shard {p.index} ({p.file}): {p.problem}", file=sys.stderr)
    if problems:
        print(f"verify: {len(problems)} of {m.num_shards} shards failed in build {m.build_id}", file=sys.stderr)
        return 3
    print(f"verify: OK, {m.num_shards} shards, {m.total_rows} rows, build {m.build_id}")
    return 0


def cmd_export_webdataset(args) -> int:
    from shardforge.shards.webdataset import export_webdataset

    m = export_webdataset(args.build, args.out)
    print(f"export-webdataset: {len(m['tars'])} tars, {m['total_rows']} rows, build {m['build_id']} -> "
          f"{args.out}/manifest.json")
    return 0


def cmd_export_megatron(args) -> int:
    from shardforge.shards.megatron import ExportError, data_path, export_megatron, normalise

    pairs = [args.build, args.out_prefix, *args.more]
    if len(pairs) % 2:
        raise ExportError(f"give BUILD OUT_PREFIX pairs; {pairs[-1]} has no OUT_PREFIX")
    builds, prefixes = pairs[0::2], pairs[1::2]
    blend = None
    if args.weights is not None:     # checked before any export starts
        line = data_path(prefixes, args.weights)
        blend = {"data_path": line, "weights": normalise(args.weights), "prefixes": line.split()[1::2]}
    elif len(builds) > 1:
        blend = {"data_path": data_path(prefixes), "weights": None, "prefixes": data_path(prefixes).split()}
    for build, prefix in zip(builds, prefixes):
        s = export_megatron(build, prefix, column=args.column, append_eos=args.append_eos, blend=blend)
        print(f"export-megatron: {s['rows']} documents, {s['tokens']} tokens ({s['dtype']}), build "
              f"{s['build_id']} -> {prefix}.bin, {prefix}.idx, {prefix}.json")
    print(f"--data-path {data_path(prefixes) if blend is None else blend['data_path']}")
    return 0


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="shardforge", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in JOBS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    ins = sub.add_parser("inspect", help="summary of a shard build from its manifest")
    ins.add_argument("path", help="build folder or its manifest.json (local path or fsspec URL)")
    ins.add_argument("--json", action="store_true", help="machine-readable output")
    ins.add_argument("--shards", action="store_true", help="list every shard")
    ins.add_argument("--conf", help=argparse.SUPPRESS)
    ver = sub.add_parser("verify", help="re-check every shard's size and sha256 (exit 3 on mismatch)")
    ver.add_argument("path", help="build folder or its manifest.json")
    ver.add_argument("--conf", help=argparse.SUPPRESS)
    exp = sub.add_parser("export-webdataset", help="write the build as WebDataset tars, one per shard, and a manifest")
    exp.add_argument("build", help="build folder or its manifest.json (local path or fsspec URL)")
    exp.add_argument("out", help="local folder for the tars and their manifest.json")
    meg = sub.add_parser("export-megatron", help="write a build's token column as a Megatron indexed dataset "
                         "(OUT_PREFIX.bin, .idx and a .json sidecar)")
    meg.add_argument("build", help="build folder or its manifest.json (local path or fsspec URL)")
    meg.add_argument("out_prefix", help="local path prefix of the .bin/.idx pair; its folder must exist")
    meg.add_argument("more", nargs="*", metavar="BUILD OUT_PREFIX", help="more builds to export, for a blend")
    meg.add_argument("--column", default="tokens", help="the token-id column (default: tokens)")
    meg.add_argument("--append-eos", type=int, metavar="ID", help="append this id after every document "
                     "(for builds tokenized without an EOS)")
    meg.add_argument("--weights", type=float, nargs="+", metavar="W", help="one weight per build: print (and "
                     "record in each sidecar) Megatron's --data-path blend with the weights normalised")
    if argv and argv[0] in JOBS:
        module = importlib.import_module(JOBS[argv[0]][0])
        return module.main(argv[1:])
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help()
        return 2
    from shardforge.shards.manifest import ManifestError
    from shardforge.fs import explain
    from shardforge.shards.webdataset import ExportError

    commands = {"inspect": cmd_inspect, "verify": cmd_verify, "export-webdataset": cmd_export_webdataset,
                "export-megatron": cmd_export_megatron}
    try:
        return commands[args.command](args)
    except ExportError as exc:
        print(f"shardforge {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return exc.code
    except ManifestError as exc:
        print(f"shardforge {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:       # a remote store that cannot be reached or refuses the credentials
        plain = explain(exc)
        if plain is None:
            raise
        print(f"shardforge {args.command}: error: {plain}", file=sys.stderr)
        return plain.code


if __name__ == "__main__":
    sys.exit(main())
