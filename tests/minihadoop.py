"""A real HDFS + YARN on 127.0.0.1: Hadoop's own MiniDFSCluster and MiniYARNCluster in a JVM of their own.

The launcher is `jvm/minicluster/ShardforgeMiniHadoop.java`, compiled by `make jars` against
`org.apache.hadoop:hadoop-client-minicluster` at the Hadoop version pyspark ships, into
`$SHARDFORGE_HADOOP_JARS/minicluster/` (default `.hadoop-jars/`). It starts one NameNode,
one DataNode, one ResourceManager (CapacityScheduler, queue `default`) and one NodeManager
offering `memory_mb` and `vcores`, every server socket on 127.0.0.1, and writes a client
configuration (core-site.xml, hdfs-site.xml, yarn-site.xml) into `<dir>/conf`: point
`HADOOP_CONF_DIR` there and `spark-submit --master yarn` and `hdfs://` paths reach it.

`MiniHadoop(dir)` is a context manager; `python -m minihadoop --dir D` starts one
from a shell, prints its addresses and runs until Ctrl-C. The JVM stops when its standard
input closes (the helper holds it) or on SIGTERM; `stop()` ends it and only it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from shardforge.deploy.cluster import _tail

LAUNCHER = "ShardforgeMiniHadoop"


class MiniHadoopError(RuntimeError):
    """The mini cluster could not start; the message names its log."""


def hadoop_jars() -> Path:
    """The folder `make jars` fills with Hadoop's jars (SHARDFORGE_HADOOP_JARS, else .hadoop-jars)."""
    env = os.environ.get("SHARDFORGE_HADOOP_JARS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / ".hadoop-jars"


def java_home() -> str:
    """JAVA_HOME, or the JDK behind `java` on PATH (the NodeManager starts containers with it)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        raise MiniHadoopError("java is not on PATH; install a JDK 17")
    return str(Path(os.path.realpath(java)).parent.parent)


@dataclass
class MiniHadoop:
    """`with MiniHadoop(dir) as h:` gives `h.fs_default` (hdfs://localhost:port), `h.conf_dir`
    (HADOOP_CONF_DIR), `h.webhdfs` (the NameNode's HTTP host:port) and `h.rm_url` (the
    ResourceManager's web address, for its REST API). `java_options` are added to its JVM's
    command line."""
    base_dir: str
    memory_mb: int = 4096
    vcores: int = 4
    heap: str = "768m"
    java_options: tuple[str, ...] = ()
    jars: str | None = None
    info: dict = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def conf_dir(self) -> str:
        return str(Path(self.base_dir).resolve() / "conf")

    @property
    def log(self) -> str:
        return str(Path(self.base_dir).resolve() / "minihadoop.log")

    @property
    def fs_default(self) -> str:
        return self.info["fs_default"]

    @property
    def webhdfs(self) -> str:
        return self.info["namenode_http"]

    @property
    def rm_url(self) -> str:
        return "http://" + self.info["rm_webapp"]

    def env(self) -> dict[str, str]:
        """What a client process needs in its environment to use this cluster."""
        return {"HADOOP_CONF_DIR": self.conf_dir, "YARN_CONF_DIR": self.conf_dir}

    def start(self, timeout: float = 240.0) -> "MiniHadoop":
        mini = Path(self.jars) if self.jars else hadoop_jars() / "minicluster"
        if not (mini / "classes" / f"{LAUNCHER}.class").exists():
            raise MiniHadoopError(f"{mini}/classes/{LAUNCHER}.class not found: run `make jars` "
                                  f"(python -m shardforge.deploy.jvm_deps --hadoop-dest {mini.parent})")
        base = Path(self.base_dir).resolve()
        shutil.rmtree(base / "conf", ignore_errors=True)
        base.mkdir(parents=True, exist_ok=True)
        log4j = base / "log4j.properties"
        log4j.write_text("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stderr.Target=System.err\n"
                         "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.stderr.layout.ConversionPattern=%d{HH:mm:ss} %p %c{1}: %m%n\n")
        env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "CLASSPATH")}
        env["JAVA_HOME"] = java_home()
        cmd = [str(Path(env["JAVA_HOME"]) / "bin" / "java"), f"-Xmx{self.heap}", *self.java_options,
               "-Djava.net.preferIPv4Stack=true",
               f"-Dlog4j.configuration={log4j.as_uri()}", "-cp", f"{mini / 'classes'}:{mini / '*'}", LAUNCHER,
               str(base), str(base / "conf"), str(self.memory_mb), str(self.vcores)]
        with open(self.log, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                          cwd=str(base), env=env, start_new_session=True)
        ready = base / "conf" / "cluster.json"
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self._proc.poll() is not None:
                raise MiniHadoopError(f"the mini cluster exited ({self._proc.returncode}) during start-up; "
                                      f"see {self.log}:\n{_tail(self.log)}")
            if time.monotonic() > deadline:
                self.stop()
                raise MiniHadoopError(f"the mini cluster did not come up within {timeout:.0f}s; see {self.log}")
            time.sleep(0.5)
        self.info = json.loads(ready.read_text())
        offered = [n["totalResource"] for n in self.rm("nodes")["nodes"]["node"]]
        if [(r["memory"], r["vCores"]) for r in offered] != [(self.memory_mb, self.vcores)]:
            self.stop()
            raise MiniHadoopError(f"the NodeManager offers {offered}, not {self.memory_mb} MB and "
                                  f"{self.vcores} vcores as asked")
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Close the launcher's standard input (it stops YARN, then HDFS); SIGKILL its process
        group if it is still there after `timeout` seconds."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # containers the NodeManager started are children in the launcher's process group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "MiniHadoop":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the ResourceManager's REST API --------------------------------------------------
    def rm(self, path: str) -> dict:
        """GET `<rm>/ws/v1/cluster/<path>` as JSON."""
        with urllib.request.urlopen(f"{self.rm_url}/ws/v1/cluster/{path.lstrip('/')}", timeout=10) as r:
            return json.loads(r.read().decode())

    def app(self, app_id: str) -> dict:
        return self.rm(f"apps/{app_id}")["app"]

    def container_logs(self, app_id: str, name: str = "stderr") -> dict[str, str]:
        """{container id: its log `name`} for the application's containers, after it finished.

        The ResourceManager's REST API names the application master's container and node
        (`apps/<id>/appattempts`); a finished application's other containers are no longer
        listed there, so they are taken from the AM's own log, where Spark's YarnAllocator
        names every container it launched, at INFO (in cluster mode the AM is the driver:
        keep its log level at INFO, `spark.yarn.appMasterEnv.SHARDFORGE_SPARK_LOG_LEVEL`).
        Each log is read from the NodeManager's REST API
        (`/ws/v1/node/containerlogs/<container>/<file>`)."""
        attempt = self.rm(f"apps/{app_id}/appattempts")["appAttempts"]["appAttempt"][-1]
        node = "http://" + attempt["nodeHttpAddress"]

        def read(cid: str, file: str) -> str:
            with urllib.request.urlopen(f"{node}/ws/v1/node/containerlogs/{cid}/{file}", timeout=10) as r:
                return r.read().decode(errors="replace")

        am = attempt["containerId"]
        launched = re.findall(r"Launching container (container_\w+)", read(am, "stderr"))
        return {cid: read(cid, name) for cid in sorted({am, *launched})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minihadoop",
                                 description="Run Hadoop's mini HDFS + YARN on 127.0.0.1 until Ctrl-C.")
    ap.add_argument("--memory-mb", type=int, default=4096, help="memory the NodeManager offers")
    ap.add_argument("--vcores", type=int, default=4, help="vcores the NodeManager offers")
    ap.add_argument("--dir", default="out/minihadoop", help="data, logs and conf/ go here")
    args = ap.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    h = MiniHadoop(args.dir, memory_mb=args.memory_mb, vcores=args.vcores).start()
    print(json.dumps({**h.info, "HADOOP_CONF_DIR": h.conf_dir}, indent=2), flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        h.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
