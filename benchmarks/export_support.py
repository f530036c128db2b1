"""Helpers of the export benchmark (``test_export_bench.py``): data, the consumer loop,
memory/CPU sampling, output checks and the report.

The report goes to ``results/export.md`` (full scale only) and to the terminal.
Nothing here imports pyspark: the consumer-loop processes import this module too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks.support import MB, SCALE, _table, _version, machine_line, report_head

MiB = 1024 * 1024
RESULTS_PATH = Path(__file__).resolve().parent / "results" / "export.md"
REPRODUCE = (
    ".venv/bin/python -m pytest benchmarks/test_export_bench.py -p no:cacheprovider "
    "--benchmark-only"
)
MEANINGFUL = SCALE >= 1.0  # the targets are defined on 1M records

PARTITIONS = 4
TOTAL_RECORDS = max(PARTITIONS * 1000, round(1_000_000 * SCALE / PARTITIONS) * PARTITIONS)
PER_PARTITION = TOTAL_RECORDS // PARTITIONS  # includes produce_bulk's one sentinel
MAX_OFFSETS_PER_TRIGGER = max(PARTITIONS * 250, round(250_000 * SCALE))  # 4 micro-batches
#: The consumer loop cuts an object every this many offsets, like one micro-batch does.
OFFSETS_PER_OBJECT = MAX_OFFSETS_PER_TRIGGER // PARTITIONS
ARROW_BATCH_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch (Spark's default)
WARMUP_PER_PARTITION = 2_500
SEED = 20261122

TARGET_VS_NATIVE = 1.0
TARGET_VS_LOOP = 0.6

SAMPLE_PERIOD_S = 0.2
PSS_EVERY = 5  # PSS (smaps_rollup, ~0.5-7 ms per process) on every 5th sample: once a second

KEY_BLOCKGZ = "blockgz"
KEY_BLOCKGZ_TASKS = "blockgz-tasks-read-kafka"
KEY_JSON = "spark-json"
KEY_TEXT = "spark-text"
KEY_LOOP = "loop"
KEY_LOOP_DEFAULTS = "loop-defaults"
ALL_KEYS = (KEY_BLOCKGZ, KEY_BLOCKGZ_TASKS, KEY_JSON, KEY_TEXT, KEY_LOOP_DEFAULTS, KEY_LOOP)
#: librdkafka >= 2.4 postpones a partition's next fetch by ``fetch.queue.backoff.ms`` (1 s by
#: default) once its local queue is over ``queued.min.messages`` (100k): a consumer slower than
#: the fetcher then drains the queue and waits. The loop reads 250k records per partition, so
#: it hits that; the ceiling uses 10 ms. (The Spark source reads 62.5k per task and does not.)
LOOP_CONSUMER_TUNING = {"fetch.queue.backoff.ms": 10}
CASE_TITLES = {
    KEY_BLOCKGZ: "A. blockgz export (`run_export`, blockgz-kafka → `blockgz` sink → S3)",
    KEY_BLOCKGZ_TASKS: (
        "A'. the same with `blockgz.tasks.read.kafka=true` (sink tasks read their offset "
        "ranges from Kafka; records skip the JVM)"
    ),
    KEY_JSON: 'B. Spark `format("json")` sink, gzip, same DataFrame (local disk)',
    KEY_TEXT: 'B\'. Spark `format("text")` sink, gzip, `CAST(value AS STRING)` (local disk)',
    KEY_LOOP_DEFAULTS: "C0. the same loop, librdkafka defaults (`fetch.queue.backoff.ms=1000`)",
    KEY_LOOP: "C. plain confluent-kafka loop, 2 processes → S3 (`fetch.queue.backoff.ms=10`)",
}


# -- data ---------------------------------------------------------------------------------------
_EVENTS = (b"page_view", b"click", b"search", b"add_to_cart", b"checkout", b"purchase")
_COUNTRIES = (b"US", b"DE", b"FR", b"GB", b"JP", b"BR", b"IN", b"CA")


def value_maker(partition: int) -> Callable[[int], bytes]:
    """Deterministic ~200-byte JSON values for one partition: fields plus a random-hex token."""
    rng = random.Random(SEED * 16 + partition)
    randrange, randbytes, choice = rng.randrange, rng.randbytes, rng.choice

    def make(i: int) -> bytes:
        return (
            b'{"id":%d,"partition":%d,"user":"user-%06d","event":"%s","country":"%s",'
            b'"amount":%d.%02d,"currency":"EUR","ts":%d,"session":"%s","trace":"%s","ok":true}'
            % (
                i,
                partition,
                randrange(1_000_000),
                choice(_EVENTS),
                choice(_COUNTRIES),
                randrange(1000),
                randrange(100),
                1_795_305_600_000 + i * 37,
                randbytes(8).hex().encode(),
                randbytes(16).hex().encode(),
            )
        )

    return make


@dataclass(frozen=True)
class Dataset:
    """The produced topic: exact high watermarks and the bytes of the values."""

    topic: str
    watermarks: dict[int, int]
    value_bytes: int
    key_bytes: int
    produce_s: float

    @property
    def records(self) -> int:
        return sum(self.watermarks.values())


def produce_dataset(kafka, topic: str, per_partition: int) -> Dataset:
    """``per_partition - 1`` keyed records per partition in large batches, then
    ``produce_bulk``'s single-record sentinel per partition (exact Tansu watermarks)."""
    from confluent_kafka import Producer

    started = time.perf_counter()
    kafka.create_topic(topic, partitions=PARTITIONS)
    producer = Producer(
        kafka.client_config(
            {
                "linger.ms": 5,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
    )
    errors: list[Any] = []

    def delivered(error, _message) -> None:
        if error is not None:
            errors.append(error)

    value_bytes = key_bytes = 0
    bulk = per_partition - 1
    for partition in range(PARTITIONS):
        make = value_maker(partition)
        for i in range(bulk):
            value, key = make(i), b"k%06d" % (i % 1_000_000)
            value_bytes += len(value)
            key_bytes += len(key)
            while True:
                try:
                    producer.produce(topic, value, key, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
    if producer.flush(120):
        raise TimeoutError("records left undelivered")
    if errors:
        raise RuntimeError(f"{len(errors)} records not delivered: {errors[0]}")
    sentinels = {p: value_maker(p + 100)(bulk) for p in range(PARTITIONS)}
    value_bytes += sum(map(len, sentinels.values()))
    watermarks = kafka.produce_bulk(
        topic, 0, PARTITIONS, value_fn=lambda partition, _i: sentinels[partition]
    )
    if watermarks != dict.fromkeys(range(PARTITIONS), per_partition):
        raise AssertionError(f"unexpected high watermarks {watermarks}")
    return Dataset(topic, watermarks, value_bytes, key_bytes, time.perf_counter() - started)


# -- the plain consumer loop ----------------------------------------------------------------------
@dataclass(frozen=True)
class LoopJob:
    """What one consumer-loop process does (picklable)."""

    bootstrap: str
    topic: str
    partitions: tuple[int, ...]
    ends: dict[int, int]
    bucket_url: str
    s3_options: dict[str, str]
    offsets_per_object: int
    consumer_config: dict[str, Any] = field(default_factory=dict)


def _object_key(topic: str, partition: int, start: int) -> str:
    return f"topics/{topic}/partition={partition}/{topic}+{partition}+{start:010d}.json.gz"


class _LoopObject:
    """One object of the loop: a BlockGzipWriter on a multipart upload, like the sink's."""

    def __init__(self, store, prefix: str, topic: str, partition: int, start: int):
        from blockgz.codec import Compression
        from blockgz.framing import Separated
        from blockgz.writer import DEFAULT_BLOCK_SIZE, BlockGzipWriter

        self.store = store
        self.key = prefix + _object_key(topic, partition, start)
        self.upload = store.open_upload(self.key)
        self.writer = BlockGzipWriter(
            self.upload,
            block_size=DEFAULT_BLOCK_SIZE,
            compression=Compression(),
            threads=1,
            framing=Separated(b"\n"),
        )
        self.records = 0

    def close(self) -> tuple[str, int, int]:
        from blockgz.index import sidecar_key

        index = self.writer.close()
        self.upload.close()
        self.store.put(sidecar_key(self.key), index.to_json().encode())
        return self.key, self.records, self.upload.bytes_written


def run_loop(job: LoopJob) -> dict[str, Any]:
    """One consumer-loop process: read the partitions to their end, validate each value
    (orjson), block-GZIP it into S3, one object (+ index) per ``offsets_per_object``."""
    import orjson
    from confluent_kafka import KafkaError, TopicPartition

    from blockgz.store import open_store

    started = time.time()
    store, prefix = open_store(job.bucket_url, job.s3_options)
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": job.bootstrap,
            "group.id": f"bench-loop-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **job.consumer_config,
        }
    )
    consumer.assign([TopicPartition(job.topic, p, 0) for p in job.partitions])
    position = dict.fromkeys(job.partitions, 0)
    objects: dict[int, _LoopObject] = {}
    done: list[tuple[str, int, int]] = []
    records = value_bytes = 0
    first_message = None
    loads = orjson.loads
    try:
        while any(position[p] < job.ends[p] for p in job.partitions):
            left = sum(max(0, job.ends[p] - position[p]) for p in job.partitions)
            messages = consumer.consume(num_messages=min(10_000, left), timeout=0.2)
            if first_message is None and messages:
                first_message = time.time()
            for message in messages:
                error = message.error()
                p = message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"partition {p}: {error}")
                offset = message.offset()
                if offset < position[p] or offset >= job.ends[p]:
                    continue
                value = message.value()
                loads(value)  # the sink validates every JSON value
                obj = objects.get(p)
                if obj is None:
                    obj = objects[p] = _LoopObject(store, prefix, job.topic, p, offset)
                obj.writer.write(value, offset)
                obj.records += 1
                records += 1
                value_bytes += len(value)
                position[p] = offset + 1
                if obj.records >= job.offsets_per_object or position[p] >= job.ends[p]:
                    done.append(objects.pop(p).close())
        for p in list(objects):
            done.append(objects.pop(p).close())
    finally:
        consumer.close()
        store.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pid": os.getpid(),
        "records": records,
        "value_bytes": value_bytes,
        "objects": done,
        "started": started,
        "first_message": first_message,
        "finished": time.time(),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss": _peak_rss(),
    }


def _peak_rss() -> int:
    """This process's peak RSS (``VmHWM``). Not ``ru_maxrss``: after fork + exec that keeps
    the parent's high-water mark (a spawned child of a 600 MB parent reports 600 MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_loop_processes(jobs: list[LoopJob]) -> list[dict[str, Any]]:
    """Start one ``spawn`` process per job (process start is part of the time); wait."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(len(jobs)) as pool:
        return pool.map(run_loop, jobs, chunksize=1)


# -- memory and CPU of the process tree -----------------------------------------------------------
GROUPS = ("driver", "jvm", "workers", "loop", "moto", "tansu")
GROUP_LABELS = {
    "driver": "this Python process (driver)",
    "jvm": "JVM",
    "workers": "Python workers (JVM's children)",
    "loop": "loop processes",
    "moto": "moto (child process)",
    "tansu": "Tansu broker",
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

    def set_cpu(self, group: str, seconds: float) -> None:
        """Replace a group's sampled CPU by an exact figure (e.g. the loop's own rusage)."""
        if self.other_cores is not None and self.wall_s:
            missed = seconds - self.cpu_s.get(group, 0.0)
            self.other_cores = max(0.0, self.other_cores - missed / self.wall_s)
        self.cpu_s[group] = seconds


class TreeSampler:
    """Samples RSS (every ``period_s``) and PSS (every ``pss_every``-th sample) of this
    process's tree in a background thread, grouped as in :data:`GROUPS`.

    ``servers`` maps ``moto``/``tansu`` to their pids, so they are reported apart; the JVM is
    the ``java`` child of this process and ``workers`` everything below it. CPU seconds are
    ``cpu_times`` deltas of every process seen (a process that exits between two samples
    loses at most its last ``period_s`` of CPU).
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
        u.cpu_s = cpu
        busy = _machine_busy() - self._busy0
        u.other_cores = max(0.0, busy - sum(cpu.values())) / max(u.wall_s, 1e-9)
        return u


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


# -- checking the outputs -------------------------------------------------------------------------
@dataclass
class Output:
    """What a case wrote: records found by decompressing it, and sizes."""

    objects: int = 0
    records: int = 0
    compressed: int = 0
    uncompressed: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)
    check_s: float = 0.0


def _count_lines(data: bytes) -> tuple[int, int]:
    from isal import igzip

    raw = igzip.decompress(data)
    return raw.count(b"\n"), len(raw)


def check_s3_output(store, prefix: str, topic: str) -> Output:
    """Decompress every data object under ``topics/<topic>/``; check each index sidecar
    agrees with it and that each partition's objects cover contiguous offsets from 0."""
    from blockgz.index import BlockIndex, sidecar_key

    started = time.perf_counter()
    out = Output()
    keys = sorted(
        i.key for i in store.list(f"{prefix}topics/{topic}/") if i.key.endswith(".json.gz")
    )
    ranges: dict[int, list[tuple[int, int]]] = {}
    for key in keys:
        data = store.get(key)
        lines, size = _count_lines(data)
        index = BlockIndex.from_json(store.get(sidecar_key(key)))
        if index.record_count != lines or index.byte_length != len(data):
            raise AssertionError(f"{key}: index says {index.record_count} records, has {lines}")
        partition = int(key.rsplit("/", 2)[-2].split("=", 1)[1])
        ranges.setdefault(partition, []).append((index.first_offset, index.record_count))
        out.objects += 1
        out.records += lines
        out.compressed += len(data)
        out.uncompressed += size
        out.per_partition[partition] = out.per_partition.get(partition, 0) + lines
    for partition, spans in ranges.items():
        expected = 0
        for first, count in sorted(spans):
            if first != expected:
                raise AssertionError(f"partition {partition}: gap or overlap at {expected}")
            expected = first + count
    out.check_s = time.perf_counter() - started
    return out


def check_local_output(directory: Path, pattern: str) -> Output:
    """Decompress Spark's ``part-*`` files under ``directory`` and count the lines."""
    started = time.perf_counter()
    out = Output()
    for path in sorted(directory.glob(pattern)):
        data = path.read_bytes()
        lines, size = _count_lines(data)
        out.objects += 1
        out.records += lines
        out.compressed += len(data)
        out.uncompressed += size
    out.check_s = time.perf_counter() - started
    return out


# -- the report -----------------------------------------------------------------------------------
@dataclass
class CaseResult:
    key: str
    seconds: float
    records: int
    value_bytes: int
    output: Output
    usage: TreeUsage
    extra: dict[str, Any] = field(default_factory=dict)
    first_seconds: float | None = None  # the untimed first full-size round

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds


RESULTS: dict[str, Any] = {}


def _gb(n: int | None) -> str:
    return "—" if not n else f"{n / 1024**3:.2f}"


def java_version() -> str:
    try:
        done = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def versions_line() -> str:
    libs = ("pyspark", "pyarrow", "confluent-kafka", "isal", "orjson", "boto3", "moto")
    out = ", ".join(f"{name} {_version(name)}" for name in libs)
    try:
        import confluent_kafka

        out += f" (librdkafka {confluent_kafka.libversion()[0]})"
    except ImportError:
        pass
    return f"blockgz {_version('blockgz')}; {out}; {java_version()}"


def _verdict(margin: float) -> str:
    verdict = "PASS" if margin >= 0 else "FAIL"
    return verdict if MEANINGFUL else verdict + " (not meaningful at this scale)"


def targets(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    a = results.get(KEY_BLOCKGZ)
    for key, need, label in (
        (KEY_JSON, TARGET_VS_NATIVE, "blockgz export vs Spark's native file sink (json, gzip)"),
        (KEY_LOOP, TARGET_VS_LOOP, "blockgz export vs plain consumer loop"),
    ):
        b = results.get(key)
        if a is None or b is None:
            continue
        x = a.records_per_s / b.records_per_s
        rows.append(
            [
                label,
                f"{x:.2f}× ({a.records_per_s:,.0f} vs {b.records_per_s:,.0f} rec/s)",
                f"≥ {need:g}×",
                f"{x / need - 1:+.1%}",
                _verdict(x / need - 1),
            ]
        )
    for key, label in (
        (KEY_BLOCKGZ_TASKS, "(for information) the default plan vs tasks reading Kafka (A')"),
        (KEY_TEXT, "(for information) blockgz export vs Spark text sink, values only"),
        (KEY_LOOP_DEFAULTS, "(for information) blockgz export vs the loop on librdkafka defaults"),
    ):
        other = results.get(key)
        if a is not None and other is not None:
            x = a.records_per_s / other.records_per_s
            rows.append(
                [
                    label,
                    f"{x:.2f}× ({a.records_per_s:,.0f} vs {other.records_per_s:,.0f} rec/s)",
                    "—",
                    "—",
                    "—",
                ]
            )
    return rows


def _cases(results: dict[str, Any]) -> list[CaseResult]:
    return [results[k] for k in ALL_KEYS if k in results]


def render(results: dict[str, Any]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    data: Dataset | None = results.get("dataset")
    lines = report_head(
        "blockgz export: Kafka → S3 end to end",
        REPRODUCE,
        MEANINGFUL,
        "The targets are defined on 1M records (scale 1.0).",
    )
    lines += [
        "BLOCKGZ_BENCH_SCALE=0.02 " + REPRODUCE + "   # smoke test",
        "```",
        "",
        f"- run: {now}, `BLOCKGZ_BENCH_SCALE={SCALE:g}`",
        f"- machine: {machine_line()}",
        f"- versions: {versions_line()}",
    ]
    if data is not None:
        lines.append(
            f"- data: topic of {PARTITIONS} partitions, {data.records:,} records "
            f"({data.records // PARTITIONS:,} each, one of them `produce_bulk`'s sentinel), "
            f"values {data.value_bytes / MB:,.1f} MB ({data.value_bytes / data.records:.0f} B "
            f"average, JSON with random hex), keys {data.key_bytes / max(1, data.records):.0f}"
            f" B, no headers; produced in {data.produce_s:.1f} s (Tansu, memory storage)"
        )
    fixed = results.get("fixed", {})
    lines += [
        f"- Spark: one `SparkSession` `local[2,3]` (driver memory default), "
        f"`maxOffsetsPerTrigger={MAX_OFFSETS_PER_TRIGGER:,}` "
        f"({TOTAL_RECORDS // MAX_OFFSETS_PER_TRIGGER} micro-batches), "
        f"`Trigger.AvailableNow`, `spark.sql.execution.arrow.maxRecordsPerBatch="
        f"{ARROW_BATCH_ROWS}` (the default), `includeHeaders=false`, fresh checkpoint per "
        "case; the Kafka source is blockgz-kafka (no spark-sql-kafka jar here)",
        f"- fixed costs, not in the timings: SparkSession start "
        f"{fixed.get('session_s', float('nan')):.1f} s; warm-up exports of "
        f"{PARTITIONS * WARMUP_PER_PARTITION:,} records (first use of the Python workers, "
        f"JIT): blockgz {fixed.get('warmup_blockgz_s', float('nan')):.1f} s (A') "
        f"{fixed.get('warmup_blockgz_tasks_s', float('nan')):.1f} s, json sink "
        f"{fixed.get('warmup_json_s', float('nan')):.1f} s, text sink "
        f"{fixed.get('warmup_text_s', float('nan')):.1f} s",
        "- S3 is moto in a child process (`MotoS3(in_process=False)`), no added latency; "
        "Spark has no S3 jars here, so its native sinks write to local disk (the favourable "
        "case for them)",
        "- time: wall time of one run (`run_export(..., once=True)`, or `start()` to "
        "termination, or process start to the last object). Each case runs twice on the "
        "whole topic (fresh checkpoint, bucket or directory each time): an untimed first "
        "round (its time is shown: the JVM is still warming up on it), then the measured "
        "one. MB/s = 10^6 bytes of Kafka values per second",
        "",
        "## Results",
        "",
    ]
    cases = _cases(results)
    base = results.get(KEY_BLOCKGZ)
    rows = []
    for c in cases:
        first = (
            "—"
            if c.first_seconds is None
            else f"{c.first_seconds:.1f} ({c.records / c.first_seconds:,.0f})"
        )
        rows.append(
            [
                CASE_TITLES[c.key],
                f"{c.seconds:.1f}",
                first,
                f"{c.records_per_s:,.0f}",
                f"{c.mb_per_s:.1f}",
                "1.00×" if c is base or base is None else f"{base.seconds / c.seconds:.2f}×",
                f"{c.output.objects}",
                f"{c.output.compressed / MB:,.1f}",
                f"{c.output.uncompressed / max(1, c.output.records):.0f}",
                f"{c.usage.other_cores:.2f}" + (" ⚠" if c.usage.other_cores > 0.2 else ""),
            ]
        )
    lines += _table(
        [
            "case",
            "wall s",
            "first round s (records/s)",
            "records/s",
            "MB/s",
            "A's speed vs this",
            "objects",
            "output MB",
            "B/record uncompressed",
            "other cores",
        ],
        rows,
    )
    a, loop = results.get(KEY_BLOCKGZ), results.get(KEY_LOOP)
    if a is not None:
        lines += [
            "",
            f"A committed {a.extra.get('batches')} micro-batches and {a.extra.get('files')} "
            "objects (one per partition per batch; each with its `.index.json`).",
        ]
    if loop is not None:
        lines += [
            "",
            "C tunes one consumer setting: "
            + ", ".join(f"`{k}={v}`" for k, v in LOOP_CONSUMER_TUNING.items())
            + ". With librdkafka's default (C0) a consumer slower than its fetcher lets the "
            "local queue pass `queued.min.messages`, the next fetch is postponed by 1 s, and "
            "the loop waits with the queue empty. The blockgz-kafka source sets the same "
            "10 ms by default (its tasks here read 62.5k-record ranges, below the threshold).",
        ]
    if loop is not None and "process_start_s" in loop.extra:
        lines += [
            "",
            f"C's objects are cut every {OFFSETS_PER_OBJECT:,} offsets, as A's batches cut them; "
            f"its processes were running {loop.extra['process_start_s']:.2f} s and had their "
            f"first records {loop.extra['first_message_s']:.2f} s after the clock started.",
        ]
    lines += [
        "",
        "Every case's output is decompressed and its lines counted after the run (not timed): "
        "each found exactly the produced records"
        + (
            "; for the S3 cases each index sidecar matches its object and each partition's "
            "objects cover offsets 0..end without gap or overlap."
            if any(c.key != KEY_JSON and c.key != KEY_TEXT for c in cases)
            else "."
        ),
        "'other cores': CPU used by processes outside this benchmark's tree and its servers "
        "(machine-wide, psutil); above 0.2 the row is marked ⚠.",
        "",
        "## Targets",
        "",
    ]
    lines += _table(["target", "measured", "required", "margin", "verdict"], targets(results))
    lines += ["", "## Peak memory (GB)", ""]
    rows = []
    for c in cases:
        u = c.usage
        rows.append(
            [
                CASE_TITLES[c.key].split(" ", 1)[0].rstrip("."),
                _gb(u.peak_rss.get("driver")),
                _gb(u.peak_rss.get("jvm")),
                f"{_gb(u.peak_driver_rss)} / {_gb(u.peak_driver_pss)}",
                f"{_gb(u.peak_rss.get('workers'))} / {_gb(u.peak_pss.get('workers'))}",
                f"{_gb(u.start_rss.get('workers'))}",
                str(u.peak_processes.get("workers", 0)),
                _loop_memory(c),
                _gb(u.peak_rss.get("moto")),
                _gb(u.peak_rss.get("tansu")),
            ]
        )
    lines += _table(
        [
            "case",
            "driver Python RSS",
            "JVM RSS",
            "driver side (Python + JVM) RSS / PSS",
            "Python workers RSS / PSS",
            "workers RSS at case start",
            "worker processes (peak)",
            "loop processes RSS / PSS (max per process)",
            "moto RSS",
            "Tansu RSS",
        ],
        rows,
    )
    lines += [
        "",
        f"Sampled with psutil every {SAMPLE_PERIOD_S} s (RSS) and every "
        f"{SAMPLE_PERIOD_S * PSS_EVERY:g} s (PSS, from `smaps_rollup`); each figure is the peak "
        "of the group's sum over one sample. RSS counts fork-shared pages once per process, "
        "PSS splits them. Figures are for the measured round. The Python workers are pooled by "
        "Spark across queries, so every round starts with what earlier rounds left in them "
        "('workers RSS at case start'). The loop "
        "processes' exact peak RSS per process (in brackets) is their `VmHWM`.",
        "",
        "## CPU seconds per case",
        "",
    ]
    rows = []
    for c in cases:
        cpu = c.usage.cpu_s
        total = sum(cpu.values())
        rows.append(
            [CASE_TITLES[c.key].split(" ", 1)[0].rstrip("."), f"{c.seconds:.1f}"]
            + [f"{cpu.get(g, 0.0):.1f}" for g in GROUPS]
            + [f"{total:.1f}", f"{total / max(1, c.records) * 1e6:.0f}"]
        )
    lines += _table(
        ["case", "wall s"]
        + [GROUP_LABELS[g] for g in GROUPS]
        + ["total CPU s", "CPU µs per record"],
        rows,
    )
    lines.append("")
    notes = results.get("notes")
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def _loop_memory(c: CaseResult) -> str:
    if c.key not in (KEY_LOOP, KEY_LOOP_DEFAULTS):
        return "—"
    u = c.usage
    per = c.extra.get("loop_max_rss", [])
    most = f" ({_gb(max(per))})" if per else ""
    return f"{_gb(u.peak_rss.get('loop'))} / {_gb(u.peak_pss.get('loop'))}{most}"
