"""Runs `shardforge ARGS...` and freezes the driver at a named point, for the test to SIGKILL it.

    python tests/crash_run.py POINT FLAG_FILE -- pipeline --conf ... --output ...

At POINT the driver writes FLAG_FILE (its pid) and sleeps; the test waits for the file,
then kills the process group. The freeze is installed from here, the test side, by
wrapping a shardforge function; nothing in shardforge knows about it.
Points: after-clean (the clean stage's marker is written), in-dedup (signatures and
candidate edges are done, connected components not started), before-manifest (the
build's files are in place under b-<id>/, manifest.json not yet written: on an object store,
just before its one PUT).
"""
from __future__ import annotations

import os
import sys
import time


def freeze(flag: str) -> None:
    with open(flag + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(flag + ".tmp", flag)
    while True:
        time.sleep(60)


def install(point: str, flag: str) -> None:
    if point == "after-clean":
        from shardforge.engine import runner

        original = runner.Runner._write_marker

        def write_marker(self, spec, done, **kwargs):
            original(self, spec, done, **kwargs)
            if spec.name == "clean":
                freeze(flag)

        runner.Runner._write_marker = write_marker
    elif point == "in-dedup":
        from shardforge.dedup import stage

        def components(*args, **kwargs):
            freeze(flag)

        stage.connected_components = components
    elif point == "before-manifest":
        from shardforge.shards import writer as shardio

        def write_manifest(*args, **kwargs):
            freeze(flag)

        shardio.write_manifest = write_manifest
    else:
        raise SystemExit(f"crash_run: unknown point {point!r}")


def main() -> int:
    point, flag, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: crash_run.py POINT FLAG_FILE -- ARGS..."
    install(point, flag)
    from shardforge.engine.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
