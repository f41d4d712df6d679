"""A Spark standalone cluster on 127.0.0.1 (master plus N workers), for tests and for trying a real cluster.

Started with `spark-class` from the installed pyspark (SPARK_HOME is pyspark's package
folder), each daemon a separate JVM in its own process group, on free ports, with its
work dir and logs under a folder the caller gives. `StandaloneCluster` is a context
manager; `python -m shardforge.deploy.cluster start|stop|status --dir D` does the same from a
shell and records the cluster in `D/cluster.json`.

Executors run Python with the interpreter the application names
(`spark.pyspark.python`). `worker_python()` builds a separate venv for that, by default
`~/.cache/shardforge/worker-venv`: no system site-packages, only what executors need at
run time (numpy, pyarrow, pandas, requests, pillow, xxhash, pinned to the versions installed
here), and neither pyspark nor shardforge: Spark puts its own `pyspark.zip` on the
executors' path, and shardforge must arrive through `--py-files`, as on a real cluster.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shardforge.deploy.packaging import RUNTIME as WORKER_PACKAGES

WORKER_VENV = Path.home() / ".cache" / "shardforge" / "worker-venv"
# Distributions executors import at run time (pyspark itself comes from Spark's pyspark.zip):
# packaging.RUNTIME, imported above as WORKER_PACKAGES.
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster could not be started, or a daemon died; the message names its log."""


def spark_home() -> Path:
    """pyspark's package folder, which holds bin/spark-class, bin/spark-submit and jars/."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise ClusterError("pyspark is not installed; `pip install -e '.[spark]'`")
    home = Path(os.environ.get("SPARK_HOME") or Path(spec.origin).parent)
    if not (home / "bin" / "spark-class").exists():
        raise ClusterError(f"{home}/bin/spark-class not found; set SPARK_HOME")
    return home


def spark_submit() -> str:
    """Path of the `spark-submit` script matching the installed pyspark."""
    return str(spark_home() / "bin" / "spark-submit")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Daemon:
    """One JVM started by `spark-class`: its role, pid (also its process group), ports and log."""
    role: str
    pid: int
    port: int
    webui_port: int
    log: str
    work_dir: str = ""

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - another user's pid
            return True
        try:  # a zombie child of ours counts as dead
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().split(") ", 1)[1][:1] != "Z"
        except OSError:
            return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the daemon's whole process group (a worker's executors and Python workers too)."""
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class StandaloneCluster:
    """A master and `workers` workers on 127.0.0.1; use `with StandaloneCluster(base_dir) as c:`.

    `c.master_url` is `spark://127.0.0.1:<port>`; `c.master_json()` is the master's status
    (workers, applications); `c.kill_worker(i)` kills worker i and everything it started;
    `c.add_worker()` starts another. `stop()` ends every daemon it started, and only those.
    """
    base_dir: str
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    daemon_memory: str = "256m"
    env: dict[str, str] = field(default_factory=dict)
    master: Daemon | None = None
    worker_daemons: list[Daemon] = field(default_factory=list)
    _procs: dict[int, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def master_url(self) -> str:
        assert self.master is not None, "cluster not started"
        return f"spark://127.0.0.1:{self.master.port}"

    @property
    def master_webui(self) -> str:
        assert self.master is not None, "cluster not started"
        return f"http://127.0.0.1:{self.master.webui_port}"

    def _env(self) -> dict[str, str]:
        base = Path(self.base_dir).resolve()
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_HOST": "127.0.0.1",
            "SPARK_LOG_DIR": str(base / "logs"),
            "SPARK_PID_DIR": str(base / "pids"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_NO_DAEMONIZE": "1",
        })
        env.pop("PYSPARK_GATEWAY_PORT", None)
        env.update(self.env)
        return env

    def _spawn(self, role: str, args: list[str], port: int, webui: int, work_dir: str = "") -> Daemon:
        base = Path(self.base_dir).resolve()
        (base / "logs").mkdir(parents=True, exist_ok=True)
        log = base / "logs" / f"{role}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, env=self._env(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(base))
        self._procs[proc.pid] = proc
        return Daemon(role=role, pid=proc.pid, port=port, webui_port=webui, log=str(log), work_dir=work_dir)

    def _wait_port(self, d: Daemon, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not d.alive():
                raise ClusterError(f"{d.role} exited during start-up; see {d.log}:\n{_tail(d.log)}")
            if _port_open(d.port) and _port_open(d.webui_port):
                return
            time.sleep(0.2)
        raise ClusterError(f"{d.role} did not open port {d.port} within {timeout:.0f}s; see {d.log}")

    def start(self, timeout: float = 60.0) -> "StandaloneCluster":
        """Start the master, then the workers; returns once every worker is ALIVE at the master."""
        Path(self.base_dir).mkdir(parents=True, exist_ok=True)
        port, webui = free_port(), free_port()
        self.master = self._spawn("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                             "--webui-port", str(webui)], port, webui)
        try:
            self._wait_port(self.master, timeout)
            for _ in range(self.workers):
                self.add_worker(wait=False)
            self.wait_workers(len(self.worker_daemons), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, *, wait: bool = True, timeout: float = 60.0) -> Daemon:
        """Start one more worker (e.g. to replace a killed one)."""
        i = len(self.worker_daemons)
        work = Path(self.base_dir).resolve() / "work" / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        port, webui = free_port(), free_port()
        d = self._spawn(f"worker-{i}", [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                         "--webui-port", str(webui), "--cores", str(self.cores_per_worker),
                                         "--memory", self.memory_per_worker, "--work-dir", str(work),
                                         self.master_url], port, webui, str(work))
        self.worker_daemons.append(d)
        if wait:
            self.wait_workers(len(self.live_workers()), timeout)
        return d

    def live_workers(self) -> list[Daemon]:
        return [w for w in self.worker_daemons if w.alive()]

    def master_json(self) -> dict:
        """The master's status page as JSON (`workers`, `activeapps`, `completedapps`, ...)."""
        with urllib.request.urlopen(f"{self.master_webui}/json/", timeout=5) as r:
            return json.loads(r.read().decode())

    def wait_workers(self, n: int, timeout: float = 60.0) -> None:
        """Wait until `n` workers are ALIVE at the master."""
        deadline = time.monotonic() + timeout
        alive = 0
        while time.monotonic() < deadline:
            for w in self.worker_daemons:
                if not w.alive() and w.pid in self._procs:
                    raise ClusterError(f"{w.role} exited; see {w.log}:\n{_tail(w.log)}")
            try:
                alive = sum(1 for w in self.master_json().get("workers", []) if w.get("state") == "ALIVE")
            except (OSError, ValueError):  # not up yet, or an empty answer while it starts
                alive = 0
            if alive >= n:
                return
            time.sleep(0.3)
        raise ClusterError(f"only {alive} of {n} workers registered within {timeout:.0f}s; "
                           f"logs in {Path(self.base_dir) / 'logs'}")

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Kill worker `index` with its executors (its process group), as a lost machine would."""
        d = self.worker_daemons[index]
        d.kill(sig)
        proc = self._procs.get(d.pid)
        if proc is not None:
            proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop workers, then the master: SIGTERM to each process group, SIGKILL after 10 s."""
        daemons = [*self.worker_daemons, *([self.master] if self.master else [])]
        for d in daemons:
            d.kill(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for d in daemons:
            proc = self._procs.get(d.pid)
            while d.alive() and time.monotonic() < deadline:
                if proc is not None and proc.poll() is not None:
                    break
                time.sleep(0.1)
            if d.alive():
                d.kill(signal.SIGKILL)
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover
                    pass

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- state file for the CLI ---------------------------------------------------------
    def state(self) -> dict:
        return {"master_url": self.master_url, "master_webui": self.master_webui,
                "master": asdict(self.master), "workers": [asdict(w) for w in self.worker_daemons],
                "base_dir": str(Path(self.base_dir).resolve())}

    @classmethod
    def from_state(cls, state: dict) -> "StandaloneCluster":
        c = cls(base_dir=state["base_dir"], workers=len(state["workers"]))
        c.master = Daemon(**state["master"])
        c.worker_daemons = [Daemon(**w) for w in state["workers"]]
        return c


def _tail(path: str, n: int = 30) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def worker_python(venv: str | os.PathLike = WORKER_VENV, packages: tuple[str, ...] = WORKER_PACKAGES,
                  base_python: str | None = None) -> str:
    """The executors' interpreter: a venv without shardforge or pyspark; built once, then reused.

    The venv is created with the base interpreter behind `sys.executable` (same Python
    minor as the driver, which PySpark requires) and `--without-system-site-packages`
    semantics (the venv default). A stamp file records the pinned packages; a change
    rebuilds it. Raises ClusterError if shardforge turns out importable there.
    """
    venv = Path(venv)
    py = venv / "bin" / "python"
    from shardforge.deploy.packaging import pinned

    pins = pinned(packages)
    stamp = venv / ".shardforge-worker.json"
    if not (py.exists() and stamp.exists() and json.loads(stamp.read_text()) == pins):
        base = base_python or getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
        proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ClusterError(f"could not install {pins} into {venv}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        stamp.write_text(json.dumps(pins))
    probe = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('shardforge') is None)"],
                           capture_output=True, text=True, cwd=str(venv), env={"PATH": os.environ.get("PATH", "")})
    if probe.stdout.strip() != "True":
        raise ClusterError(f"{py} can import shardforge; the worker venv must not have it")
    return str(py)


# --- command line ----------------------------------------------------------------------------
def _state_path(d: str) -> Path:
    return Path(d) / "cluster.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shardforge.deploy.cluster",
                                 description="Start, stop or show a Spark standalone cluster on 127.0.0.1.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start", help="start a master and N workers (returns once they are up)")
    st.add_argument("--workers", type=int, default=2)
    st.add_argument("--cores", type=int, default=1, help="cores per worker")
    st.add_argument("--memory", default="1g", help="memory per worker, e.g. 1g")
    st.add_argument("--worker-venv", action="store_true",
                    help=f"also build the executors' venv (default {WORKER_VENV}) and print its python")
    for p in (st, sub.add_parser("stop", help="stop the cluster recorded in DIR"),
              sub.add_parser("status", help="show the master's view of the cluster (JSON)")):
        p.add_argument("--dir", default="out/cluster", help="work dirs, logs and cluster.json go here")
    args = ap.parse_args(argv)
    path = _state_path(args.dir)
    if args.cmd == "start":
        if path.exists() and StandaloneCluster.from_state(json.loads(path.read_text())).master.alive():
            print(f"a cluster is already running from {path}; stop it first", file=sys.stderr)
            return 1
        c = StandaloneCluster(base_dir=args.dir, workers=args.workers, cores_per_worker=args.cores,
                              memory_per_worker=args.memory).start()
        path.write_text(json.dumps(c.state(), indent=2))
        info = {"master_url": c.master_url, "master_webui": c.master_webui}
        if args.worker_venv:
            info["worker_python"] = worker_python()
        print(json.dumps(info, indent=2))
        return 0
    if not path.exists():
        print(f"no cluster recorded in {path}", file=sys.stderr)
        return 1
    c = StandaloneCluster.from_state(json.loads(path.read_text()))
    if args.cmd == "stop":
        c.stop()
        path.unlink()
        print(f"stopped {c.master_url}")
        return 0
    try:
        status = c.master_json()
    except (OSError, ValueError) as exc:
        print(f"master at {c.master_webui} not reachable: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"master_url": c.master_url, "status": status.get("status"),
                      "workers": [{k: w.get(k) for k in ("id", "host", "port", "state", "cores", "coresused",
                                                          "memory", "memoryused")} for w in status.get("workers", [])],
                      "activeapps": [a.get("name") for a in status.get("activeapps", [])]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
