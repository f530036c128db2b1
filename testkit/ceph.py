"""Ceph's RADOS Gateway (``radosgw``) on a throwaway one-node cluster, as a local S3 server.

SeaweedFS and moto are S3 look-alikes; radosgw is what many on-premises archives actually run,
with its own answers at the edges (CompleteMultipartUpload's ETag is empty, ListParts after an
abort says NoSuchKey). Debian 12 ships Ceph Pacific, whose gateway needs a RADOS cluster, so
this starts the smallest one that works: one ``ceph-mon``, one ``ceph-osd`` keeping its objects
in memory (``memstore``), no manager, and ``radosgw`` with its beast front end on a free loopback
port. Authentication between the daemons is off, and the monitor must offer ``crc`` before
``secure`` (with auth off there is no key to encrypt with, and Pacific's default order leaves a
client waiting for minutes). The configuration, keyring path, monitor store, logs, pid files
and admin sockets all live in one temporary directory; nothing under ``/etc``, ``/var/lib``,
``/var/log`` or ``/run`` is read or written. The S3 user gets the keys of
:data:`~blockgz.local_servers.moto_s3.ACCESS_KEY` unless others are given.

The daemons come from the Debian packages ``radosgw ceph-mon ceph-osd`` (``scripts/install-tools``
installs them when run as root). Start-up takes one to two seconds; :meth:`CephRgwS3.stop`
kills each daemon's process group and removes the directory.

Example (starts a cluster, so not a doctest)::

    with CephRgwS3() as s3:
        s3.client().create_bucket(Bucket="archive")
        print(s3.endpoint_url)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from blockgz.local_servers.moto_s3 import (
    REGION,
    KeyedS3Server,
    _wait_until_http_ready,
)
from blockgz.local_servers.ports import LOOPBACK, die_with_parent, free_ports

if TYPE_CHECKING:
    pass

#: What a start needs on PATH (``ceph`` is the CLI, from ceph-common, which ceph-mon pulls in).
BINARIES = ("monmaptool", "ceph-mon", "ceph-osd", "ceph", "radosgw", "radosgw-admin")
#: The Debian packages that provide :data:`BINARIES`.
PACKAGES = ("radosgw", "ceph-mon", "ceph-osd")
#: The gateway's client name (``radosgw -n client.rgw.<this>``) and the S3 user's uid.
_RGW_ID = "blockgz"
#: Environment variables that would point the Ceph tools at another cluster or Python.
_FOREIGN_ENV = ("CEPH_ARGS", "CEPH_CONF", "PYTHONPATH", "PYTHONHOME")


def missing_binaries() -> list[str]:
    """The Ceph executables of :data:`BINARIES` that are not on PATH."""
    return [name for name in BINARIES if shutil.which(name) is None]


def _config(root: Path, fsid: str, mon_port: int, rgw_port: int, memstore_bytes: int) -> str:
    """``ceph.conf`` for a one-monitor, one-OSD cluster whose every path is under ``root``."""
    return f"""\
[global]
fsid = {fsid}
mon host = v2:{LOOPBACK}:{mon_port}
public addr = {LOOPBACK}
cluster addr = {LOOPBACK}
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
# With auth off no session key exists; "crc" must come first or clients stall in AUTH_CONNECTING.
ms mon client mode = crc secure
ms mon service mode = crc secure
ms mon cluster mode = crc secure
ms client mode = crc secure
ms service mode = crc secure
ms cluster mode = crc secure
run dir = {root}/run
admin socket = $run_dir/$cluster-$name.$pid.asok
pid file = $run_dir/$cluster-$name.pid
log file = {root}/log/$cluster-$name.log
crash dir = {root}/crash
keyring = {root}/keyring
mon data = {root}/mon/$id
osd data = {root}/osd/$id
rgw data = {root}/rgw
mon cluster log to file = false
# The monitor batches map changes for 1 s by default; each start-up step waits on one.
paxos propose interval = 0.01
osd objectstore = memstore
memstore device bytes = {memstore_bytes}
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0

[client.rgw.{_RGW_ID}]
rgw frontends = beast endpoint={LOOPBACK}:{rgw_port}
rgw thread pool size = 64
rgw enable usage log = false
rgw enable ops log = false
rgw dynamic resharding = false
"""


class CephRgwS3(KeyedS3Server):
    """radosgw's S3 endpoint on a free loopback port, over a one-node in-memory Ceph cluster."""

    def __init__(
        self, *, ready_timeout_s: float = 60.0, memstore_bytes: int = 2 << 30, **keys: str
    ):
        """``keys``: ``access_key`` and ``secret_key`` (:class:`KeyedS3Server`'s defaults)."""
        super().__init__(ready_timeout_s=ready_timeout_s, **keys)
        #: The OSD's reported capacity; it refuses writes near it (objects live in its RAM).
        self.memstore_bytes = memstore_bytes
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._deadline = 0.0

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why the cluster cannot start here, or ``None``."""
        missing = missing_binaries()
        if missing:
            return (
                f"Ceph is not installed (no {', '.join(missing)} on PATH): run "
                "scripts/install-tools as root, or apt-get install --no-install-recommends "
                + " ".join(PACKAGES)
            )
        return None

    @property
    def directory(self) -> Path | None:
        """The temporary directory holding the cluster's files, while it runs."""
        return Path(self._dir.name) if self._dir is not None else None

    @property
    def pids(self) -> dict[str, int]:
        """The daemons' process ids (each leads its own process group), by daemon name."""
        return {name: proc.pid for name, proc in self._procs.items()}

    # -- starting -----------------------------------------------------------------------------
    def start(self) -> Self:
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self._deadline = time.monotonic() + self.ready_timeout_s
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="blockgz-ceph-")
        root = Path(self._dir.name)
        for sub in ("run", "log", "crash", "mon", "osd/0", "rgw"):
            (root / sub).mkdir(parents=True)
        conf = str(root / "ceph.conf")
        mon_port, rgw_port = free_ports(LOOPBACK, 2)
        fsid, osd_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        Path(conf).write_text(_config(root, fsid, mon_port, rgw_port, self.memstore_bytes))

        monmap = str(root / "monmap")
        self._run(
            "monmaptool",
            ["--create", "--fsid", fsid, "--addv", "a", f"[v2:{LOOPBACK}:{mon_port}]", monmap],
        )
        self._run("ceph-mon", ["-c", conf, "--mkfs", "-i", "a", "--monmap", monmap])
        self._spawn("mon", ["ceph-mon", "-c", conf, "-i", "a", "-f"])
        # Registers osd.0 (waiting for the monitor to answer), then gives it its store.
        timeout = max(1, int(self._remaining()))
        self._run(
            "ceph", ["-c", conf, "--connect-timeout", str(timeout), "osd", "new", osd_uuid, "0"]
        )
        self._run("ceph-osd", ["-c", conf, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid])
        self._spawn("osd", ["ceph-osd", "-c", conf, "-i", "0", "-f"])
        # radosgw creates its pools once the OSD is up, then listens.
        self._spawn("rgw", ["radosgw", "-c", conf, "-n", f"client.rgw.{_RGW_ID}", "-f"])
        self.endpoint_url = f"http://{LOOPBACK}:{rgw_port}"
        self._wait_listening(rgw_port)
        self._run(
            "radosgw-admin",
            [
                *("-c", conf, "user", "create", "--uid", _RGW_ID, "--display-name", _RGW_ID),
                *("--access-key", self.access_key, "--secret-key", self.secret_key),
            ],
        )
        self._wait_signed_requests()

    def add_user(self, uid: str, access_key: str, secret_key: str) -> None:
        """Another S3 user, with no rights on the buckets of others until a bucket policy
        grants some (``"Principal": {"AWS": ["arn:aws:iam:::user/UID"]}``)."""
        assert self._dir is not None, "start the cluster first"
        self._deadline = time.monotonic() + 30
        conf = str(Path(self._dir.name) / "ceph.conf")
        self._run(
            "radosgw-admin",
            [
                *("-c", conf, "user", "create", "--uid", uid, "--display-name", uid),
                *("--access-key", access_key, "--secret-key", secret_key),
            ],
        )

    def _remaining(self) -> float:
        return self._deadline - time.monotonic()

    def _env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}

    def _popen(self, args: list[str], stdout: Any) -> subprocess.Popen[bytes]:
        """A Ceph process in the cluster's directory and its own process group, output to
        ``stdout`` (errors too), ended when this process dies."""
        assert self._dir is not None
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self._dir.name,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )

    def _spawn(self, name: str, args: list[str]) -> None:
        """Start a daemon in the foreground (``-f``) in its own process group, logging to a file."""
        assert self._dir is not None
        out = open(Path(self._dir.name, "log", f"{name}.out"), "wb")  # noqa: SIM115 - child keeps it
        try:
            self._procs[name] = self._popen(args, out)
        finally:
            out.close()

    def _run(self, tool: str, args: list[str]) -> str:
        """Run one Ceph tool to completion in the deadline; its output, or an error with logs."""
        proc = self._popen([tool, *args], subprocess.PIPE)
        try:
            output, _ = proc.communicate(timeout=max(self._remaining(), 1.0))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            output, _ = proc.communicate()
            raise self._failure(f"{tool} did not finish in time", output) from None
        if proc.returncode != 0:
            raise self._failure(f"{tool} failed with exit status {proc.returncode}", output)
        return output.decode(errors="replace")

    def _check_daemons(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise self._failure(f"ceph {name} exited with status {proc.returncode}")

    def _wait_listening(self, port: int) -> None:
        """Poll until radosgw answers HTTP (it listens only after its pools exist)."""

        def alive() -> bool:
            self._check_daemons()  # a daemon that died raises its own failure
            return True

        try:
            _wait_until_http_ready(LOOPBACK, port, self._deadline, alive)
        except TimeoutError as exc:
            raise self._failure(f"radosgw did not listen on port {port} in time ({exc})") from exc

    def _wait_signed_requests(self) -> None:
        """Poll until a request signed with the user's keys succeeds."""
        client = self.client(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5)
        last: Exception | None = None
        while self._remaining() > 0:
            self._check_daemons()
            try:
                client.list_buckets()
                return
            except Exception as exc:  # the new user not seen yet
                last = exc
                time.sleep(0.05)  # poll interval; the deadline bounds the wait
        raise self._failure(f"radosgw refused the S3 user's requests ({last})")

    def _failure(self, what: str, output: bytes = b"") -> RuntimeError:
        """An error naming the step, with the tool's output and the tails of the daemons' logs."""
        parts = [f"Ceph radosgw did not start: {what}"]
        if output:
            parts.append(f"output:\n{output.decode(errors='replace')[-2000:]}")
        log_dir = self.directory / "log" if self.directory else None
        if log_dir is not None and log_dir.is_dir():
            for path in sorted(log_dir.iterdir()):
                text = path.read_text(errors="replace")[-1500:]
                if text.strip():
                    parts.append(f"{path.name} ends:\n{text}")
        return RuntimeError("\n\n".join(parts))

    # -- using and stopping -------------------------------------------------------------------
    def stop(self) -> None:
        """Kill every daemon (gateway first) and remove the directory. Safe to call twice.

        SIGKILL, not SIGTERM: a memstore OSD shutting down cleanly writes every object it holds
        into the directory that is about to be deleted.
        """
        for name in ("rgw", "osd", "mon"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                _kill_group(proc)
        self.endpoint_url = ""
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _kill_group(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGKILL ``proc``'s process group (it leads one), reap it, wait for the group to empty."""
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout_s)
    while time.monotonic() < deadline:  # children of the leader, if any, die a moment later
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise RuntimeError(f"process group {proc.pid} survived SIGKILL")


__all__ = ["BINARIES", "PACKAGES", "REGION", "CephRgwS3", "missing_binaries"]
