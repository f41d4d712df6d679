"""An S3 API emulator on 127.0.0.1 for the object-store tests (not AWS): moto's server (`moto[server]`), in a
process of its own, with one bucket. `S3Server().start()`; `.env` is what a client process
needs (keys, region, endpoint; no instance-metadata lookups); `.spark_conf()` the s3a settings."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import closing

BUCKET = "shardforge-test"
KEYS = {"AWS_ACCESS_KEY_ID": "shardforge-test-key", "AWS_SECRET_ACCESS_KEY": "shardforge-test-secret"}
# s3a's credential chain without the instance-metadata provider (which would call a link-local address)
PROVIDERS = ("org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,"
             "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider")


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, log: str):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        return {**KEYS, "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_EC2_METADATA_DISABLED": "true"}

    def spark_conf(self) -> dict[str, str]:
        return {"spark.hadoop.fs.s3a.endpoint": self.endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.aws.credentials.provider": PROVIDERS}

    def start(self, timeout: float = 60) -> "S3Server":
        # the request recorder (started and read by a test through /moto-api/recorder/) writes here
        env = {**os.environ, "MOTO_RECORDER_FILEPATH": os.path.join(os.path.dirname(self.log), "recording.jsonl")}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env)
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's S3 server did not start; see {self.log}")
                time.sleep(0.3)
        req = urllib.request.Request(f"{self.endpoint}/{BUCKET}", method="PUT")
        urllib.request.urlopen(req, timeout=10).close()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def s3fs_client(server: S3Server):
    import s3fs

    return s3fs.S3FileSystem(key=KEYS["AWS_ACCESS_KEY_ID"], secret=KEYS["AWS_SECRET_ACCESS_KEY"],
                             endpoint_url=server.endpoint, client_kwargs={"region_name": "us-east-1"})


def set_env(env: dict[str, str]) -> dict[str, str | None]:
    """Set variables in this process; returns what to restore."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return old


def restore_env(old: dict[str, str | None]) -> None:
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
