"""moto's S3 server on a free loopback port (in a thread or a child process), and clients for it.

Importing this module is cheap: boto3 and moto are imported only when a server or client is made.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from blockgz.local_servers.ports import StartStop

if TYPE_CHECKING:
    from botocore.client import BaseClient

from blockgz.local_servers.ports import LOOPBACK

REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"


def fake_aws_env(endpoint_url: str | None = None) -> dict[str, str]:
    """Environment variables that point an AWS SDK (or a subprocess) at a fake S3, never real AWS.

    Merge them into ``os.environ`` (e.g. with ``monkeypatch.setenv``) or a subprocess's ``env``:

    Example::

        env = {**os.environ, **fake_aws_env(moto.endpoint_url)}
        subprocess.run(["blockgz", "..."], env=env, check=True)
    """
    env = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    if endpoint_url is not None:
        env["AWS_ENDPOINT_URL_S3"] = endpoint_url
    return env


def make_s3_client(
    endpoint_url: str,
    *,
    access_key: str = ACCESS_KEY,
    secret_key: str = SECRET_KEY,
    verify: str | bool | None = None,
    **config: Any,
) -> BaseClient:
    """A boto3 S3 client for a local endpoint: dummy credentials, us-east-1, path-style addressing.

    The botocore session is hermetic: it reads no ``~/.aws`` files and ignores ``AWS_PROFILE``,
    so a developer's real credentials are never looked up. ``config`` goes to
    ``botocore.config.Config`` (e.g. ``retries={"total_max_attempts": 1}``); retries default to
    standard mode with 3 attempts. ``verify``: the CA bundle of an HTTPS endpoint (boto3's).

    Example::

        s3 = make_s3_client("http://127.0.0.1:5000", retries={"total_max_attempts": 1})
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session(
        session_vars={
            "profile": (None, None, None, None),
            "config_file": (None, None, os.devnull, None),
            "credentials_file": (None, None, os.devnull, None),
        }
    )
    config["retries"] = {"mode": "standard", **config.get("retries", {"total_max_attempts": 3})}
    config.setdefault("s3", {"addressing_style": "path"})
    config.setdefault("connect_timeout", 10)
    config.setdefault("read_timeout", 60)
    return boto3.session.Session(
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=REGION,
        botocore_session=session,
    ).client("s3", endpoint_url=endpoint_url, verify=verify, config=Config(**config))


class KeyedS3Server(StartStop):
    """A local S3 server that checks one access key pair: its endpoint (set by ``start()``),
    how long it may take to become ready, and boto3 clients that sign with its keys."""

    def __init__(
        self, *, ready_timeout_s: float, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY
    ) -> None:
        self.ready_timeout_s = ready_timeout_s
        self.access_key = access_key
        self.secret_key = secret_key
        self.endpoint_url = ""
        #: The CA bundle an HTTPS endpoint's certificate verifies with (``None``: plain HTTP).
        self.ca_bundle: str | None = None

    def client(self, **config: Any) -> BaseClient:
        """A boto3 client for this endpoint (path-style; the server's keys unless
        ``access_key``/``secret_key`` are given)."""
        config.setdefault("access_key", self.access_key)
        config.setdefault("secret_key", self.secret_key)
        return make_s3_client(self.endpoint_url, verify=self.ca_bundle, **config)


def _wait_until_http_ready(
    host: str, port: int, deadline: float, alive: Callable[[], bool]
) -> None:
    """Poll ``GET /`` until the server answers anything at all, or the deadline passes."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server on {host}:{port} died while starting")
        conn = http.client.HTTPConnection(host, port, timeout=2)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()
            return
        except OSError as exc:
            last_error = exc
            time.sleep(0.02)  # poll interval; the deadline bounds the wait
        finally:
            conn.close()
    raise TimeoutError(f"server on {host}:{port} not ready in time: {last_error!r}")


_CHILD_MOTO = """
import logging, sys
logging.getLogger("werkzeug").setLevel(logging.WARNING)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address=sys.argv[1], port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # exit when the parent closes our stdin (or dies)
"""


class MotoS3(StartStop):
    """moto's S3 server on a free loopback port, with a boto3 client factory and a state reset.

    ``in_process=True`` (default) runs moto's ``ThreadedMotoServer`` in a daemon thread;
    ``in_process=False`` runs it in a child Python process, which keeps moto's memory use (it
    holds every object in RAM) and its GIL time out of this process: use that for benchmarks
    and memory measurements. In-process servers share moto's global state with each other
    (and with ``moto.mock_aws``): ``reset()`` on one wipes them all.

    Example::

        with MotoS3() as moto:
            s3 = moto.client()
            s3.create_bucket(Bucket="archive")
            ...
            moto.reset()  # wipe all buckets between tests
    """

    def __init__(
        self, *, in_process: bool = True, quiet: bool = True, start_timeout_s: float = 30.0
    ) -> None:
        self.in_process = in_process
        self.quiet = quiet
        self.start_timeout_s = start_timeout_s
        self.host = LOOPBACK
        self.port: int | None = None
        self._server: Any = None  # moto.server.ThreadedMotoServer when in process
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self.port is None:
            raise RuntimeError("MotoS3 is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        """Start the server and return once it answers HTTP requests."""
        if self.port is not None:
            return self
        deadline = time.monotonic() + self.start_timeout_s
        if self.in_process:
            self._start_thread()
            alive: Callable[[], bool] = lambda: True  # noqa: E731
        else:
            self._start_process(deadline)
            process = self._process
            alive = lambda: process is not None and process.poll() is None  # noqa: E731
        assert self.port is not None
        try:
            _wait_until_http_ready(self.host, self.port, deadline, alive)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_thread(self) -> None:
        from moto.server import ThreadedMotoServer  # moto is optional: import it only when used

        if self.quiet:
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        # Port 0: the kernel picks a free port on the listening socket itself, so there is no
        # window between choosing the port and binding it.
        server = ThreadedMotoServer(ip_address=self.host, port=0, verbose=False)
        server.start()
        self._server = server
        self.port = server.get_host_and_port()[1]

    def _start_process(self, deadline: float) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MOTO, self.host],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if self.quiet else None,
        )
        self._process = process
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                break
            ready, _, _ = select.select([process.stdout], [], [], min(remaining, 0.5))
            if ready:
                data = os.read(process.stdout.fileno(), 64)  # unbuffered, so select() stays true
                if not data:
                    break  # the child closed stdout: it is exiting
                line += data
        if not line.endswith(b"\n"):
            self.stop()
            raise RuntimeError(f"moto child process did not report its port (got {line!r})")
        self.port = int(line)

    def stop(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            wsgi_server = getattr(server, "_server", None)
            if wsgi_server is not None:
                wsgi_server.server_close()  # ThreadedMotoServer.stop() leaves the socket open
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(OSError):
                assert process.stdin is not None
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()
        self.port = None

    def reset(self) -> None:
        """Wipe all of moto's state (buckets, objects, uploads): ``POST /moto-api/reset``."""
        if self.port is None:
            raise RuntimeError("MotoS3 is not started")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("POST", "/moto-api/reset")
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"moto reset failed: HTTP {response.status}")
        finally:
            conn.close()

    def client(self, **config: Any) -> BaseClient:
        """A boto3 S3 client for this server; ``config`` as for :func:`make_s3_client`."""
        return make_s3_client(self.endpoint_url, **config)

    def env(self) -> dict[str, str]:
        """:func:`fake_aws_env` for this server."""
        return fake_aws_env(self.endpoint_url)
