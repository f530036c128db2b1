"""A Spark standalone cluster (one master, N workers) on loopback, from the pyspark package.

pyspark's wheel has ``bin/spark-class`` but no ``sbin/start-*.sh``, so the master and the
workers are started with ``spark-class org.apache.spark.deploy.{master.Master,worker.Worker}``,
each on free loopback ports, with ``SPARK_LOCAL_IP=127.0.0.1`` (without it a worker registers
on the machine's other address). The workers get the environment a real cluster node has: no
AWS credentials and no endpoint of the driver's (so whatever the tasks need must be forwarded
by the job, as on a real cluster); Python is this interpreter, as a node with the same
environment installed would have.

Example (starts two JVMs, so not a doctest)::

    with LocalSparkCluster(workers=1) as cluster:
        spark = spark_session(cluster.master_url)
        print(cluster.executor_pids())
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from blockgz.local_servers.ports import LOOPBACK, StartStop, die_with_parent, free_port, free_ports

#: Environment variables a cluster node does not share with the machine that submits the job.
DRIVER_ONLY_ENV = ("AWS_", "PYSPARK_", "PYTHONPATH", "SPARK_CONF_DIR")


def spark_home() -> str:
    """The directory of the installed pyspark package (it holds ``bin/`` and ``jars/``)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def node_environment(work_dir: Path) -> dict[str, str]:
    """The environment of a cluster node: this machine's, minus what only the driver has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DRIVER_ONLY_ENV)}
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOG_DIR=str(work_dir),
        SPARK_NO_DAEMONIZE="1",
    )
    return env


_MASTER_AT = re.compile(r"Starting Spark master at (spark://[\w.-]+:\d+)")
_WEB_UI_AT = re.compile(r"Bound MasterWebUI to [^,]+, and started at http://[\w.-]+:(\d+)")


class LocalSparkCluster(StartStop):
    """A standalone master and ``workers`` workers on free loopback ports.

    ``master_url`` is what ``--master`` takes; ``executor_pids()`` lists the executor JVMs and
    ``python_worker_pids()`` their Python workers (for fault tests that kill one).
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        cores: int = 2,
        memory: str = "2g",
        node_env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 60.0,
    ):
        self.workers = workers
        self.cores = cores
        self.memory = memory
        #: Extra environment of every node (e.g. ``AWS_SHARED_CREDENTIALS_FILE`` for a profile).
        self.node_env = dict(node_env or {})
        self.ready_timeout_s = ready_timeout_s
        self.master_url = ""
        self.web_url = ""
        self._procs: list[subprocess.Popen[bytes]] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why a cluster cannot start here, or ``None``."""
        try:
            home = spark_home()
        except ImportError:
            return "pyspark is not installed (the [spark] extra)"
        if not Path(home, "bin", "spark-class").exists():
            return f"{home}/bin/spark-class is missing"
        return None

    @property
    def work_dir(self) -> Path:
        assert self._dir is not None, "the cluster is not running"
        return Path(self._dir.name)

    def start(self) -> Self:
        self._dir = tempfile.TemporaryDirectory(prefix="blockgz-spark-cluster-")
        port, web = free_ports(LOOPBACK, 2)
        self.master_url = f"spark://{LOOPBACK}:{port}"
        self.web_url = f"http://{LOOPBACK}:{web}"
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            ["--host", LOOPBACK, "--port", str(port), "--webui-port", str(web)],
        )
        self._learn_master_addresses()
        for n in range(self.workers):
            work = self.work_dir / f"worker-{n}"
            work.mkdir()
            self._spawn(
                f"worker-{n}",
                "org.apache.spark.deploy.worker.Worker",
                [
                    self.master_url,
                    "--host",
                    LOOPBACK,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(free_port(LOOPBACK)),
                ],
            )
        self._wait_ready()
        return self

    def _spawn(self, name: str, main_class: str, args: list[str]) -> None:
        launcher = str(Path(spark_home(), "bin", "spark-class"))
        log = open(self.work_dir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
        self._procs.append(
            subprocess.Popen(
                [launcher, main_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**node_environment(self.work_dir), **self.node_env},
                cwd=self.work_dir,
                start_new_session=True,  # stop() ends the JVM and what it started, together
                preexec_fn=die_with_parent(),
            )
        )
        log.close()

    @property
    def pids(self) -> list[int]:
        """The master's and the workers' JVMs (executors run below the workers)."""
        return [p.pid for p in self._procs]

    def state(self) -> dict:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(self.web_url + "/json/", timeout=2) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def _learn_master_addresses(self) -> None:
        """The master's URL and web UI as it bound them. A port chosen free may be taken
        before the master binds it (by another test process's Spark UI, say); Spark then
        moves to the next port and says so in its log, which is the one source of truth."""
        log = self.work_dir / "master.log"
        deadline = time.monotonic() + self.ready_timeout_s
        master = web = None
        while time.monotonic() < deadline and not (master and web):
            text = log.read_text(errors="replace") if log.exists() else ""
            master = master or _MASTER_AT.search(text)
            web = web or _WEB_UI_AT.search(text)
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.1)  # polling the log with a deadline
        if master:
            self.master_url = master[1]
        if web:
            self.web_url = f"http://{LOOPBACK}:{web[1]}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self._procs):
                break
            try:
                if self.alive_workers() >= self.workers:
                    return
            except OSError as exc:  # the master's web UI is not up yet
                last = exc
            time.sleep(0.2)
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
            for p in sorted(self.work_dir.glob("*.log"))
        )
        self.stop()
        raise RuntimeError(f"the Spark cluster did not come up ({last}); logs:\n{logs}")

    def executor_pids(self) -> list[int]:
        """The running executor JVMs of this cluster's workers."""
        return _children_matching(self._procs, "CoarseGrainedExecutorBackend")

    def python_worker_pids(self) -> list[int]:
        """The Python worker processes the executors started (``pyspark.daemon`` and forks)."""
        return _children_matching(self._procs, "pyspark.daemon", "pyspark.worker")

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


def _children_matching(roots: list[subprocess.Popen[bytes]], *needles: str) -> list[int]:
    """Descendants of ``roots`` whose command line contains one of ``needles``."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
        commands[int(entry.name)] = cmdline
    found, todo = [], [p.pid for p in roots]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if any(n in commands.get(child, "") for n in needles):
                found.append(child)
            todo.append(child)
    return sorted(found)


__all__ = ["LocalSparkCluster", "node_environment", "spark_home"]
