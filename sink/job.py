"""``blockgz export``: run the Kafka → S3 streaming query, show progress, stop cleanly.

The job validates the whole config before Spark starts, picks Spark's own Kafka source when
its jar is on the classpath (ours otherwise), resolves ``startingOffsets=s3`` from the sink's
manifests, and runs ``readStream → writeStream.format("blockgz")`` with a checkpoint.
``once=True`` drains what is in Kafka now (``Trigger.AvailableNow``) and returns.

Example (starts Spark, so not a doctest)::

    job = ExportConfig.from_file("s3-sink.properties")
    result = run_export(job, checkpoint="/var/lib/blockgz/s3-sink", once=True)
    print(result.batches, result.files)
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from blockgz.errors import BlockGzError, ConfigError
from sink.commit import (
    committed_offsets,
    manifest_key,
    new_epoch,
    read_manifest,
    remove_uncommitted,
)
from sink.config import SOURCE_PREFIX
from sink.job_config import ExportConfig

log = logging.getLogger("blockgz.export")

EPOCH_FILE = "blockgz-epoch"


class ExportFailed(BlockGzError, RuntimeError):
    """The streaming query stopped with an error; the message is the root cause."""


@dataclass
class PartitionProgress:
    """What the job knows of one topic-partition."""

    next_offset: int | None = None
    latest: int | None = None
    files: int = 0
    rate: float = 0.0

    @property
    def lag(self) -> int | None:
        if self.latest is None or self.next_offset is None:
            return None
        return max(0, self.latest - self.next_offset)


@dataclass
class ExportResult:
    """Summary of a run: batches and files committed, records read, per-partition state."""

    batches: int = 0
    files: int = 0
    records: int = 0
    partitions: dict[tuple[str, int], PartitionProgress] = field(default_factory=dict)
    stopped_by_signal: bool = False


def checkpoint_epoch(checkpoint: Path) -> str:
    """The epoch of this checkpoint (created on first use): it keeps manifests of runs apart."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    path = checkpoint / EPOCH_FILE
    if path.exists():
        return path.read_text().strip()
    epoch = new_epoch()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(epoch + "\n")
    tmp.replace(path)
    return epoch


def _offsets_json(offsets: dict[str, dict[int, int]]) -> str:
    return json.dumps(
        {t: {str(p): n for p, n in sorted(parts.items())} for t, parts in sorted(offsets.items())}
    )


def resolve_s3_start(job: ExportConfig, partitions: dict[str, list[int]]) -> str:
    """``startingOffsets`` JSON from the manifests: committed offset, or earliest (-2).

    Objects that start at or after a committed offset come from a batch that never
    committed; they are removed first so the restarted job can write its own.
    """
    store, prefix = job.sink.make_store()
    committed = committed_offsets(store, prefix, job.sink)
    removed = remove_uncommitted(store, prefix, job.sink, committed)
    start: dict[str, dict[int, int]] = {}
    for topic, parts in partitions.items():
        for p in parts:
            start.setdefault(topic, {})[p] = committed.get(topic, {}).get(p, -2)
    for topic, parts in committed.items():  # topics no longer matched still resume where they were
        if topic in start:
            for p, n in parts.items():
                start[topic].setdefault(p, n)
    log.info(
        "startingOffsets=s3: resuming at %s (%d uncommitted objects removed)",
        _offsets_json(start),
        len(removed),
    )
    return _offsets_json(start)


def kafka_partitions(job: ExportConfig) -> dict[str, list[int]]:
    """The partitions of the job's topics, from the broker's metadata."""
    import re

    from confluent_kafka.admin import AdminClient

    conf = {k[len("kafka.") :]: v for k, v in job.source_options.items() if k.startswith("kafka.")}
    admin = AdminClient(conf)
    meta = admin.list_topics(timeout=15)
    wanted = set(job.topics)
    pattern = job.source_options.get("subscribePattern")
    regex = re.compile(pattern) if pattern else None
    found: dict[str, list[int]] = {}
    for name, topic in meta.topics.items():
        if name in wanted or (regex is not None and regex.fullmatch(name)):
            found[name] = sorted(topic.partitions)
    return found


class _Watermarks:
    """High watermarks per topic-partition, refreshed at most every ``period_s``."""

    def __init__(self, job: ExportConfig, period_s: float = 2.0):
        self.job = job
        self.period_s = period_s
        self._consumer: Any = None
        self._at = 0.0
        self.latest: dict[tuple[str, int], int] = {}

    def refresh(self, partitions) -> dict[tuple[str, int], int]:
        if time.monotonic() - self._at < self.period_s:
            return self.latest
        self._at = time.monotonic()
        try:
            from confluent_kafka import Consumer, TopicPartition

            if self._consumer is None:
                conf = {
                    k[len("kafka.") :]: v
                    for k, v in self.job.source_options.items()
                    if k.startswith("kafka.")
                }
                conf.setdefault("group.id", "blockgz-export-progress")
                conf["enable.auto.commit"] = False
                self._consumer = Consumer(conf)
            for topic, part in partitions:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, part), timeout=2, cached=False
                )
                self.latest[(topic, part)] = high
        except Exception:  # progress is best effort; the export itself does not depend on it
            log.debug("could not read watermarks", exc_info=True)
        return self.latest

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _end_offsets(progress: dict[str, Any]) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            for topic, parts in end.items():
                if isinstance(parts, dict):
                    for p, n in parts.items():
                        ends[(topic, int(p))] = int(n)
    return ends


def root_cause(exc: BaseException) -> str:
    """The useful line of a StreamingQueryException: the innermost Python or blockgz error."""
    import re

    text = str(exc)
    ours = re.findall(r"(?:blockgz\.errors|sink\.[\w.]+)\.(\w+Error): ([^\n]+)", text)
    if ours:
        name, message = ours[-1]
        return f"{name}: {message}"
    py = re.findall(r"^(\w+(?:Error|Exception)): ([^\n]+)$", text, re.M)
    if py:
        return f"{py[-1][0]}: {py[-1][1]}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def run_export(
    job: ExportConfig,
    *,
    checkpoint: str | Path,
    once: bool = False,
    master: str | None = None,
    on_progress: Callable[[ExportResult], None] | None = None,
    stop_event: threading.Event | None = None,
    install_signal_handlers: bool = True,
    spark=None,
) -> ExportResult:
    """Run the export until drained (``once``), stopped (signal or ``stop_event``) or failed."""
    from pyspark.errors import StreamingQueryException

    from sink.session import has_spark_kafka, spark_session

    checkpoint = Path(checkpoint)
    warn_if_not_exactly_once(job)
    epoch = checkpoint_epoch(checkpoint)
    fresh_checkpoint = not (checkpoint / "offsets").exists()
    source_options = dict(job.source_options)
    if source_options.get("startingOffsets", "").strip().lower() == "s3":
        if fresh_checkpoint:
            source_options["startingOffsets"] = resolve_s3_start(job, kafka_partitions(job))
        else:
            source_options.pop("startingOffsets")  # Spark resumes from the checkpoint
    if spark is None:
        spark = spark_session(
            master or default_master(), app_name=f"blockgz-export-{job.name}", conf=job.spark_conf
        )
    source = "kafka" if has_spark_kafka(spark) else "blockgz-kafka"
    log.info("reading Kafka with the %s source", "Spark Kafka" if source == "kafka" else "blockgz")
    tasks_read_kafka = source == "blockgz-kafka" and job.tasks_read_kafka
    reader = spark.readStream.format(source)
    for key, value in source_options.items():
        reader = reader.option(key, value)
    sink_options = dict(job.sink.options)
    if tasks_read_kafka:
        # Spark plans and replays offset ranges; each sink task reads its range itself.
        reader = reader.option("blockgz.emit", "ranges")
        sink_options.update(range_reading_options(source_options))
    frame = reader.load()
    columns = None if tasks_read_kafka else job.sink.columns_read()
    if columns is not None:
        frame = frame.select(*columns)
    writer = frame.writeStream.format("blockgz")
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    writer = writer.option("blockgz.epoch", epoch).option("checkpointLocation", str(checkpoint))
    writer = (
        writer.trigger(availableNow=True)
        if once
        else writer.trigger(processingTime=job.trigger_interval)
    )
    writer = writer.queryName(_query_name(job.name))

    stop = stop_event or threading.Event()
    result = ExportResult()
    restore = _install_handlers(stop, result) if install_signal_handlers else None
    query = writer.start()
    watermarks = _Watermarks(job)
    store, prefix = job.sink.make_store()
    sink_config = replace(job.sink, epoch=epoch)
    seen_batch = -1
    last_ends: dict[tuple[str, int], int] = {}
    last_time = time.monotonic()
    try:
        while query.isActive and not stop.is_set():
            try:
                query.awaitTermination(0.5)
            except StreamingQueryException as exc:
                raise ExportFailed(root_cause(exc)) from None
            for progress in _new_progress(query, seen_batch):
                seen_batch = progress["batchId"]
                ends = _end_offsets(progress)
                now = time.monotonic()
                files, records = _batch_output(store, prefix, sink_config, seen_batch)
                result.records += records
                if files is not None:
                    result.batches += 1
                    for tp, count in files.items():
                        result.partitions.setdefault(tp, PartitionProgress()).files += count
                        result.files += count
                for tp, end in ends.items():
                    state = result.partitions.setdefault(tp, PartitionProgress())
                    before = last_ends.get(tp, end)
                    state.rate = (end - before) / max(now - last_time, 1e-3)
                    state.next_offset = end
                last_ends, last_time = ends, now
            latest = watermarks.refresh(list(result.partitions))
            for tp, high in latest.items():
                result.partitions.setdefault(tp, PartitionProgress()).latest = high
            if on_progress is not None:
                on_progress(result)
        if stop.is_set() and query.isActive:
            log.info("stopping: the running batch is abandoned and will be replayed on restart")
            query.stop()
        error = query.exception()
        if error is not None:
            raise ExportFailed(root_cause(error)) from None
        return result
    finally:
        watermarks.close()
        if restore is not None:
            restore()


def range_reading_options(source_options: Mapping[str, str]) -> dict[str, str]:
    """The source options a sink task needs to read an offset range, as ``blockgz.source.*``.

    >>> range_reading_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t",
    ...                        "startingOffsets": "earliest", "maxOffsetsPerTrigger": "9"})
    {'blockgz.source.kafka.bootstrap.servers': 'b:9092', 'blockgz.source.subscribe': 't'}
    """
    planning = {"startingoffsets", "maxoffsetspertrigger", "blockgz.emit"}
    return {
        SOURCE_PREFIX + key: value
        for key, value in source_options.items()
        if key.lower() not in planning
    }


def warn_if_not_exactly_once(job: ExportConfig) -> list[str]:
    """Log (and return) the settings that make keys depend on the wall clock."""
    reasons = []
    if not job.sink.partitioner().deterministic:
        reasons.append(
            "timestamp.extractor=Wallclock puts records in directories by processing time"
        )
    if job.sink.rotate_schedule_interval_ms:
        reasons.append("rotate.schedule.interval.ms cuts files by the wall clock")
    for reason in reasons:
        log.warning(
            "%s: a replayed batch may write different keys, so exactly-once does not hold "
            "(as in Confluent's connector); use Record or RecordField for exactly-once",
            reason,
        )
    return reasons


def _query_name(name: str) -> str:
    import re

    return "blockgz_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def default_master() -> str:
    """``local[<cores>,3]``: every core, and up to 3 attempts per task."""
    from blockgz.pipeline import default_threads

    return f"local[{default_threads()},3]"


def _new_progress(query, after_batch: int) -> list[dict[str, Any]]:
    out = []
    for p in query.recentProgress:
        doc = json.loads(p.json) if hasattr(p, "json") else p
        if doc.get("batchId", -1) > after_batch and doc.get("numInputRows", 0) >= 0:
            out.append(doc)
    out.sort(key=lambda d: d["batchId"])
    return out


def _batch_output(store, prefix: str, sink_config, batch_id: int):
    """From a batch's manifest: files per topic-partition (``None`` without a manifest) and
    the records the batch consumed (written plus skipped nulls; Spark's row count would be
    the number of offset ranges when tasks read Kafka themselves)."""
    from blockgz.errors import ObjectNotFoundError

    try:
        doc = read_manifest(store, manifest_key(prefix, sink_config, batch_id))
    except ObjectNotFoundError:
        return None, 0
    counts: dict[tuple[str, int], int] = {}
    records = int(doc.get("skipped_nulls", 0))
    for f in doc["files"]:
        tp = (f["topic"], int(f["partition"]))
        counts[tp] = counts.get(tp, 0) + 1
        records += int(f["records"])
    return counts, records


def _install_handlers(stop: threading.Event, result: ExportResult):
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        result.stopped_by_signal = True
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for Spark
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore():
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


__all__ = ["ConfigError", "ExportConfig", "ExportFailed", "ExportResult", "run_export"]
