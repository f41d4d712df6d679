"""Command-line flags shared by every job, and turning them into a Config.

Every job takes `--conf FILE` and repeated `--set section.key=value`; data jobs
also take `--input PATH` (repeatable), `--output PATH`, and where it applies
`--urls PATH` and `--as-of-version N`. Flags win over the file.
"""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from typing import Sequence

from shardforge.config import Config, ConfigError, load_config


def add_common(p: argparse.ArgumentParser, *, data: bool = True) -> None:
    p.add_argument("--conf", metavar="FILE", help="pipeline config (TOML); defaults apply without it")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (repeatable), e.g. --set shards.num_shards=8")
    if data:
        p.add_argument("--input", action="append", default=[], metavar="PATH",
                       help="input documents: JSONL, Parquet, text, or a Delta table (repeatable)")
        p.add_argument("--output", metavar="PATH", help="output folder")
        p.add_argument("--master", help="Spark master for an embedded run (default from [spark] master)")
        p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def config_from(args: argparse.Namespace) -> Config:
    """The Config the flags describe: file, then --set, then --input/--output/--urls/--master."""
    cfg = load_config(args.conf, args.overrides)
    pipe = cfg.pipeline
    if getattr(args, "input", None):
        pipe = replace(pipe, input=tuple(args.input))
    if getattr(args, "urls", None):
        pipe = replace(pipe, urls=tuple(args.urls))
    if getattr(args, "output", None):
        pipe = replace(pipe, output=args.output)
    cfg = cfg.replace(pipeline=pipe)
    if getattr(args, "master", None):
        cfg = cfg.replace(spark=replace(cfg.spark, master=args.master))
    return cfg


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parse(prog: str, description: str, argv: Sequence[str] | None, *, extra=None):
    """Parse a job's flags; config errors exit with status 2 and a message naming the key."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    add_common(p)
    if extra:
        extra(p)
    args = p.parse_args(argv)
    setup_logging(getattr(args, "verbose", False))
    try:
        cfg = config_from(args)
    except ConfigError as exc:
        p.exit(2, f"{prog}: config error: {exc}\n")
    return cfg, args


def require(cfg: Config, what: str, prog: str) -> str:
    value = getattr(cfg.pipeline, what)
    if not value:
        sys.stderr.write(f"{prog}: no --{what} given (and pipeline.{what} is not set)\n")
        raise SystemExit(2)
    return value


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad usage, config or input (a message naming the key or path, exit 2)."""
    from shardforge.config import ConfigError
    from shardforge.shards.manifest import ManifestError

    errors: list[type[BaseException]] = [ConfigError, ManifestError, FileNotFoundError]
    try:
        from shardforge.curated.tables import SchemaConflict
        from shardforge.ingest.stage import InputError
        from shardforge.shards.build import ShardBuildError

        errors += [InputError, ShardBuildError, SchemaConflict]
    except ImportError:  # no pyspark: only the Spark-free commands run
        pass
    return tuple(errors)


def contract_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the data broke a contract: rows lost or a schema off (exit 3)."""
    try:
        from shardforge.engine.run import AccountingError
        from shardforge.schemas import SchemaMismatch
    except ImportError:
        return ()
    return (AccountingError, SchemaMismatch)


EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONTRACT = 0, 1, 2, 3


def guarded(prog: str, fn, *args, **kwargs) -> int:
    """Run a job's body and map what it raises to the exit codes schedulers rely on:
    0 success; 2 bad usage, config or input (the message names the key or path);
    3 an accounting or data-contract violation; 1 anything else (a run lock held by a
    live run included: retrying later can succeed). A remote filesystem that cannot be
    reached (exit 1) or rejects the credentials (exit 2) is said in one line naming the
    endpoint (shardforge.fs.explain), not with a stack trace."""
    from shardforge.engine.lock import LockHeld
    from shardforge.fs import RemoteStorageError, explain

    try:
        return _remote_errors_explained(fn, explain, *args, **kwargs)
    except user_errors() as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return EXIT_USAGE
    except contract_errors() as exc:
        sys.stderr.write(f"{prog}: data contract violated: {exc}\n")
        return EXIT_CONTRACT
    except LockHeld as exc:
        sys.stderr.write(f"{prog}: output is busy: {exc}\n")
        return EXIT_ERROR
    except RemoteStorageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return exc.code


def _remote_errors_explained(fn, explain, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        plain = explain(exc)
        if plain is None:
            raise
        raise plain from None


def urls_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--urls", action="append", default=[], metavar="PATH",
                   help="URL list to download (CSV, TSV, JSONL or Parquet with a `url` column; repeatable)")


def run_flags(p: argparse.ArgumentParser) -> None:
    """Flags of every job that runs stages: resume control."""
    p.add_argument("--restart", action="store_true",
                   help="ignore the completed stages of an earlier, unfinished run into this output")
    p.add_argument("--keep-intermediate", action="store_true",
                   help="keep each stage's written outputs and markers (<output>/_run) after success")


def options_from(args: argparse.Namespace):
    from shardforge.engine.runner import RunOptions

    return RunOptions(restart=getattr(args, "restart", False),
                      keep_intermediate=getattr(args, "keep_intermediate", False),
                      as_of_version=getattr(args, "as_of_version", None))


def stage_job_main(name: str, doc: str, argv: Sequence[str] | None) -> int:
    """main() of a single-stage job (ingest, clean, redact, dedup): the runner with that one
    stage (after `read` when its input is document files); its rows go to `<output>/<table>`."""
    prog = f"shardforge {name}"

    def extra(p):
        if name == "ingest":
            urls_flag(p)
        run_flags(p)

    cfg, args = parse(prog, doc.splitlines()[0], argv, extra=extra)
    require(cfg, "output", prog)

    def body() -> int:
        from shardforge.engine.layout import Layout
        from shardforge.engine.runner import run_job

        report = run_job(cfg, (name,), layout=Layout.for_output(cfg.pipeline.output), options=options_from(args),
                         name=name)
        last = report["stages"][-1]
        print(f"{name}: {last['rows_in']} rows in, {last['kept']} kept, {last['rejected']} rejected; "
              f"output {report['output_table']['path']}")
        return 0

    return guarded(prog, body)
