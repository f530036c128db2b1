"""``blockgz export`` run as a service would run it: its own process group, keys from the
environment, stopped by a signal.

``ServiceExport`` starts the process (output to a file), waits for the first committed batch,
lists every process of its tree (the JVM and Spark's Python workers included) with the
arguments ``ps -ww -eo pid,args`` shows, and signals the Python process alone or its group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import manifest_keys_of
from testkit.s3 import s3_options

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))


def service_config(
    path: Path,
    kafka,
    s3_server,
    bucket: str,
    topic: str,
    *,
    store: dict | None = None,
    **extra: str,
) -> Path:
    """A job config with no keys in it (the export takes them from its environment); ``store``
    are the S3 options (default: ``s3_server``'s)."""
    store = s3_options(s3_server.endpoint_url) if store is None else store
    options = {
        "name": "service-test",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **{k: v for k, v in store.items() if not k.startswith("aws.")},
        "flush.size": "7",
        "maxOffsetsPerTrigger": "30",
        "blockgz.trigger.interval": "1 second",
        **extra,
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    return path


class ServiceExport:
    """A running ``blockgz export`` (or ``--once``) in its own session, keys in its environment."""

    def __init__(
        self,
        config: Path,
        checkpoint: Path,
        output: Path,
        *,
        once: bool = False,
        env: dict[str, str] | None = None,
    ):
        self.tag = uuid.uuid4().hex
        self.output = output
        env = {**os.environ, **fake_aws_env(), **(env or {}), "BLOCKGZ_TEST_RUN": self.tag}
        args = [BLOCKGZ, "export", str(config), "--checkpoint", str(checkpoint)]
        self.proc = subprocess.Popen(
            [*args, *(["--once"] if once else []), "--master", "local[2,3]"],
            stdout=output.open("ab"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # as systemd or a container runtime starts a service
        )

    def wait_committed(
        self, s3_server, bucket: str, timeout_s: float = 150, *, store: dict | None = None
    ) -> None:
        """Until the job's first manifest is in the bucket (read with ``store``'s options,
        default ``s3_server``'s)."""
        config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "service-test"})
        options = s3_options(s3_server.endpoint_url) if store is None else store
        store, prefix = open_store(f"s3://{bucket}", options)
        deadline = time.monotonic() + timeout_s
        while not manifest_keys_of(store, prefix, config):
            assert self.proc.poll() is None, self.output.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no batch committed in {timeout_s} s"
            time.sleep(0.2)  # polling S3 with a deadline

    def tree(self) -> list[int]:
        """The Python process and every process under it, or with its tag in the environment."""
        import psutil

        pids = {self.proc.pid}
        with contextlib.suppress(psutil.Error):
            pids |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if p.environ().get("BLOCKGZ_TEST_RUN") == self.tag:
                    pids.add(p.pid)
        return sorted(pids)

    def arguments(self) -> dict[int, str]:
        """``ps -ww -eo pid,args`` for every process of :meth:`tree`."""
        tree = set(self.tree())
        shown = subprocess.run(
            ["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True
        ).stdout
        found = {}
        for line in shown.splitlines()[1:]:
            pid, _, args = line.strip().partition(" ")
            if int(pid) in tree:
                found[int(pid)] = args
        return found

    def signal(self, signum: signal.Signals, *, to: str = "process") -> None:
        """``signum`` to the Python process alone (``process``), its process group (``group``,
        a container runtime's or a shell's way), or every process of its tree (``tree``,
        systemd's default: each process of the unit's cgroup)."""
        if to == "group":
            os.killpg(self.proc.pid, signum)
        elif to == "tree":
            for pid in self.tree():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
        else:
            self.proc.send_signal(signum)

    def wait(self, timeout_s: float = 90) -> int:
        """The exit code; every process of the tree is killed if it does not end in time."""
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL whatever of the tree is left (nothing, after a clean stop)."""
        import psutil

        for pid in self.tree():
            with contextlib.suppress(psutil.Error, OSError):
                psutil.Process(pid).kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
