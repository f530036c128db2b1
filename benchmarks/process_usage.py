"""Memory and CPU of a benchmark's process tree (driver, JVM, Python workers, loop processes,
servers), sampled with psutil; and waiting for a quiet machine before a case starts.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SAMPLE_PERIOD_S = 0.2
PSS_EVERY = 5  # PSS (smaps_rollup, ~0.5-7 ms per process) on every 5th sample: once a second


GROUPS = ("driver", "jvm", "workers", "loop", "s3", "kafka")
GROUP_LABELS = {
    "driver": "this Python process (driver)",
    "jvm": "JVM",
    "workers": "Python workers (JVM's children)",
    "loop": "loop processes",
    "s3": "S3 server (SeaweedFS)",
    "kafka": "Kafka broker",
}


@dataclass
class TreeUsage:
    """Peaks (bytes) and CPU seconds per group of processes over one case."""

    wall_s: float = 0.0
    peak_rss: dict[str, int] = field(default_factory=dict)
    peak_pss: dict[str, int] = field(default_factory=dict)
    start_rss: dict[str, int] = field(default_factory=dict)
    peak_driver_rss: int = 0  # this process + the JVM, summed per sample
    peak_driver_pss: int = 0
    peak_processes: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    other_cores: float | None = None
    samples: int = 0
    #: CPU seconds the sampling itself cost this process (taken out of ``driver``).
    sampler_cpu_s: float = 0.0

    def set_cpu(self, group: str, seconds: float) -> None:
        """Replace a group's sampled CPU by an exact figure (e.g. the loop's own rusage)."""
        if self.other_cores is not None and self.wall_s:
            missed = seconds - self.cpu_s.get(group, 0.0)
            self.other_cores = max(0.0, self.other_cores - missed / self.wall_s)
        self.cpu_s[group] = seconds


class TreeSampler:
    """Samples RSS (every ``period_s``) and PSS (every ``pss_every``-th sample) of this
    process's tree in a background thread, grouped as in :data:`GROUPS`.

    ``servers`` maps ``s3``/``kafka`` (the broker) to their pids, so they are reported apart;
    the JVM is the ``java`` child of this process and ``workers`` everything below it. CPU
    seconds are ``cpu_times`` deltas of every process seen (a process that exits between two
    samples loses at most its last ``period_s`` of CPU). The sampling's own CPU (reading
    ``/proc`` of every process, PSS included: ~0.1 s per second of a case with a JVM and its
    workers) is measured per call and taken out of ``driver``: it is the benchmark's cost, not
    the case's, and it would otherwise weigh on every case by how many processes it samples.
    """

    def __init__(
        self,
        servers: dict[str, int],
        *,
        period_s: float = SAMPLE_PERIOD_S,
        pss_every: int = PSS_EVERY,
    ):
        self.servers = {pid: name for name, pid in servers.items() if pid}
        self.period_s = period_s
        self.pss_every = pss_every
        self.me = psutil.Process()
        self.usage = TreeUsage()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_first: dict[int, tuple[str, float]] = {}
        self._cpu_last: dict[int, float] = {}
        self._t0 = 0.0
        self._t0_epoch = 0.0
        self._busy0 = 0.0

    def _classify(self) -> list[tuple[str, psutil.Process]]:
        out: list[tuple[str, psutil.Process]] = [("driver", self.me)]
        try:
            children = self.me.children()
        except psutil.Error:
            return out
        for child in children:
            try:
                name = self.servers.get(child.pid)
                if name is None:
                    if "resource_tracker" in " ".join(child.cmdline()):
                        continue  # multiprocessing's helper, not a loop process
                    name = "jvm" if child.name() == "java" else "loop"
                out.append((name, child))
                below = "workers" if name == "jvm" else name
                out.extend((below, p) for p in child.children(recursive=True))
            except psutil.Error:
                continue
        return out

    def sample(self, *, first: bool = False) -> None:
        started = time.thread_time()
        try:
            self._sample(first)
        finally:
            self.usage.sampler_cpu_s += time.thread_time() - started

    def _sample(self, first: bool) -> None:
        with_pss = self.usage.samples % self.pss_every == 0
        rss = dict.fromkeys(GROUPS, 0)
        pss = dict.fromkeys(GROUPS, 0)
        count = dict.fromkeys(GROUPS, 0)
        for group, proc in self._classify():
            try:
                if with_pss:
                    info = proc.memory_full_info()
                    pss[group] += info.pss
                else:
                    info = proc.memory_info()
                rss[group] += info.rss
                cpu = proc.cpu_times()
            except psutil.Error:
                continue
            count[group] += 1
            used = cpu.user + cpu.system
            if proc.pid not in self._cpu_first:
                born_before = first or proc.create_time() < self._t0_epoch
                self._cpu_first[proc.pid] = (group, used if born_before else 0.0)
            self._cpu_last[proc.pid] = used
        u = self.usage
        if first:
            u.start_rss = dict(rss)
        for g in GROUPS:
            u.peak_rss[g] = max(u.peak_rss.get(g, 0), rss[g])
            u.peak_processes[g] = max(u.peak_processes.get(g, 0), count[g])
            if with_pss:
                u.peak_pss[g] = max(u.peak_pss.get(g, 0), pss[g])
        u.peak_driver_rss = max(u.peak_driver_rss, rss["driver"] + rss["jvm"])
        if with_pss:
            u.peak_driver_pss = max(u.peak_driver_pss, pss["driver"] + pss["jvm"])
        u.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def __enter__(self) -> TreeSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> TreeSampler:
        """Take the first sample and start the sampling thread."""
        self._t0 = time.monotonic()
        self._t0_epoch = time.time() - 0.5  # create_time has a coarse clock
        self._busy0 = _machine_busy()
        self.sample(first=True)
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> TreeUsage:
        """Stop sampling, take a last sample and total the CPU; returns :attr:`usage`."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.sample()
        u = self.usage
        u.wall_s = time.monotonic() - self._t0
        cpu = dict.fromkeys(GROUPS, 0.0)
        for pid, (group, first) in self._cpu_first.items():
            cpu[group] += max(0.0, self._cpu_last.get(pid, first) - first)
        busy = _machine_busy() - self._busy0
        u.other_cores = max(0.0, busy - sum(cpu.values())) / max(u.wall_s, 1e-9)
        cpu["driver"] = max(0.0, cpu["driver"] - u.sampler_cpu_s)
        u.cpu_s = cpu
        return u


#: The JVM's JIT compiler threads (``/proc/<pid>/task/<tid>/comm`` is cut at 15 characters).
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def jit_cpu_s(pid: int) -> float:
    """CPU seconds the JIT compiler threads of the JVM ``pid`` have used so far (0 when it
    is gone). Linux only: read from ``/proc``, as psutil names no threads."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                if name.startswith(JIT_THREADS):
                    fields = stat[stat.rindex(")") + 2 :].split()
                    total += (int(fields[11]) + int(fields[12])) / tick
    return total


def jvm_child() -> int | None:
    """The pid of this process's Spark JVM (a ``java`` child running ``SparkSubmit``), if it
    has one; a broker started by the benchmark is another ``java`` child."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error):
                if child.name() == "java" and "SparkSubmit" in " ".join(child.cmdline()):
                    return child.pid
    return None


def _machine_busy() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


def busy_processes(exclude: Iterable[int] = ()) -> list[str]:
    """Other processes using CPU now (pytest, java, python): a heavy one spoils the numbers."""
    mine = {os.getpid(), *exclude}
    with contextlib.suppress(psutil.Error):
        mine |= {p.pid for p in psutil.Process().children(recursive=True)}
    procs = []
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.pid in mine or (p.info["name"] or "") not in ("java", "python", "python3", "pytest"):
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue
    time.sleep(1.0)
    out = []
    for p in procs:
        try:
            load = p.cpu_percent(None)
        except psutil.Error:
            continue
        if load > 20:
            out.append(f"{p.pid} {p.info['name']} {load:.0f}%: {' '.join(p.info['cmdline'])[:100]}")
    return out


def wait_until_idle(timeout_s: float = 300.0) -> list[str]:
    """Wait (up to ``timeout_s``) until no other java/python process is busy; return the
    ones still busy (empty when the machine is quiet)."""
    deadline = time.monotonic() + timeout_s
    busy = busy_processes()
    while busy and time.monotonic() < deadline:
        time.sleep(10)
        busy = busy_processes()
    return busy
