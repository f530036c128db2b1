"""What an export has done so far: per topic-partition offsets, rates, lag, objects, dead letters.

:class:`ProgressTracker` turns Spark's progress reports and the batch manifests into an
:class:`ExportResult`; the high watermarks for the lag come from Kafka every few seconds.
:mod:`blockgz.sink.export.progress` shows it; :mod:`blockgz.sink.export.job` returns it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from blockgz.archive.partition_offsets import merge_offsets
from blockgz.archive.timestamps_keys import TIMESTAMPS
from blockgz.commits.cluster_snapshots import Snapshots
from blockgz.commits.manifests import Manifest
from blockgz.sink.export.kafka_clients import DriverClients
from blockgz.sink.export.record_times import RecordTimes
from blockgz.sink.export.snapshots import Snapshotter
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.jobconfig.events import event
from blockgz.sink.jobconfig.job_options import parse_groups

log = logging.getLogger("blockgz.export")


@dataclass
class PartitionProgress:
    """What the job knows of one topic-partition."""

    next_offset: int | None = None
    latest: int | None = None
    files: int = 0
    rate: float = 0.0
    #: Records sent to the dead-letter queue (``errors.tolerance=all``).
    dead_letters: int = 0
    #: With held partial files (:mod:`blockgz.sink.kafka.holding`): ``flush.size``, or 0 when
    #: only a time rotation holds; ``None``: the export holds nothing back.
    hold_size: int | None = None

    @property
    def lag(self) -> int | None:
        if self.latest is None or self.next_offset is None:
            return None
        return max(0, self.latest - self.next_offset)

    @property
    def held(self) -> int:
        """Records of the lag held back on purpose (the partial file past the next offset)."""
        lag = self.lag
        if not lag or self.hold_size is None:
            return 0
        return lag % self.hold_size if self.hold_size else lag


def _hold_size(job: ExportSettings, once: bool) -> int | None:
    """:attr:`PartitionProgress.hold_size` of ``job``'s partitions."""
    from blockgz.sink.kafka.holding import holding, rules_of

    rules = rules_of(job.sink)
    if not holding(job.source.hold_mode, rules, once=once):
        return None
    return rules.flush_size or 0


@dataclass
class ExportResult:
    """Summary of a run: batches and files committed, records read, per-partition state."""

    batches: int = 0
    files: int = 0
    records: int = 0
    dead_letters: int = 0
    partitions: dict[tuple[str, int], PartitionProgress] = field(default_factory=dict)
    stopped_by_signal: bool = False
    #: Where the driver serves the export's Prometheus metrics (``blockgz.metrics.port``).
    metrics_url: str | None = None


class BatchObserver(Protocol):
    """Told of each batch the tracker counts and of Kafka's end offsets (the export's metrics,
    :class:`blockgz.sink.export.metrics.ExportMetrics`)."""

    def batch(self, manifest: Manifest, progress: dict[str, Any]) -> None: ...

    def end_offsets(self, ends: dict[tuple[str, int], int]) -> None: ...

    def pending(self) -> dict[tuple[str, int], int]: ...

    def oldest_waiting(self, times: dict[tuple[str, int], float]) -> None: ...

    def committed(self, offsets: dict[str, dict[int, int]]) -> None: ...

    def holding(self, hold_size: int | None) -> None: ...


class ProgressTracker:
    """Turns Spark's progress reports and the batch manifests into an :class:`ExportResult`.

    Records are counted from the manifests (written, skipped nulls, dead letters), which is right
    whether Spark's rows are records or offset ranges.
    """

    def __init__(
        self,
        job: ExportSettings,
        epoch: str,
        result: ExportResult,
        observer: BatchObserver | None = None,
        clients: DriverClients | None = None,
        *,
        once: bool = False,
    ):
        self.result = result
        self.hold_size = _hold_size(job, once)
        if observer is not None:
            observer.holding(self.hold_size)
        #: The Kafka clients the watermarks, record times and snapshots share (closed by
        #: :meth:`close` unless the caller gave them: then the caller closes them).
        self.clients = clients or DriverClients(job.source.client_config())
        self._own_clients = clients is None
        self.observer = observer
        store, prefix = job.sink.make_store()
        self.manifests = job.sink.manifest_log(store, prefix, epoch=epoch)
        #: What the archive has committed (per topic, partition: the next offset), as known.
        self.committed: dict[str, dict[int, int]] = {}
        self.snapshotter = snapshotter_for(job, store, prefix, self.clients)
        self.watermarks = Watermarks(job, clients=self.clients)
        self.record_times = (
            RecordTimes(job.source.client_config(), clients=self.clients) if observer else None
        )
        self._seen_batch = -1
        self._last_ends: dict[tuple[str, int], int] = {}
        self._last_time = time.monotonic()

    def update(self, recent_progress) -> None:
        for progress in _new_progress(recent_progress, self._seen_batch):
            self._seen_batch = progress["batchId"]
            manifest = self._count_batch(self._seen_batch)
            # Records from the manifest: Spark's numInputRows counts offset ranges when the
            # sink's tasks read Kafka (blockgz.tasks.read.kafka, the default).
            records = None if manifest is None else manifest.records
            log.info(
                "batch %d: %s records, %s",
                progress["batchId"],
                "no" if records is None else f"{records:,}",
                _phases(progress),
                extra=event(
                    "batch",
                    batch=progress["batchId"],
                    records=records,
                    spark_rows=progress.get("numInputRows"),
                    started=progress.get("timestamp"),  # when Spark's trigger began (UTC)
                    duration_ms=progress.get("durationMs") or {},
                ),
            )
            if manifest is not None:
                merge_offsets(self.committed, manifest.offsets)
                if self.observer is not None:
                    self.observer.batch(manifest, progress)
                if self.snapshotter is not None:
                    self.snapshotter.after_commit(self.committed)
            self._advance(_end_offsets(progress))
        partitions = list(self.result.partitions)
        unknown = any(state.latest is None for state in self.result.partitions.values())
        latest = self.watermarks.refresh(partitions, now=unknown)  # new partitions: at once
        for tp, high in latest.items():
            state = self.result.partitions.setdefault(tp, PartitionProgress())
            state.latest, state.hold_size = high, self.hold_size
        if self.observer is not None and latest:
            self.observer.end_offsets(latest)
            if self.record_times is not None:
                self.observer.oldest_waiting(self.record_times.at(self.observer.pending()))

    def know_committed(self) -> None:
        """Read what the manifests committed before this run (best effort: the export does not
        depend on its progress figures, so an unreadable log is a warning) and :meth:`know` it,
        so a restarted export reports its offsets at once."""
        try:
            offsets = self.manifests.committed_offsets()
        except Exception:
            log.warning("could not read the committed offsets for progress", exc_info=True)
            return
        self.know(offsets)

    def know(self, offsets: dict[str, dict[int, int]]) -> None:
        """Start from committed offsets (the manifests'): end offsets and lag are read for these
        partitions before this run's first batch, and the observer is told of them."""
        merge_offsets(self.committed, offsets)
        if self.observer is not None:
            self.observer.committed(offsets)
        for topic, parts in offsets.items():
            for part, offset in parts.items():
                state = self.result.partitions.setdefault((topic, part), PartitionProgress())
                if state.next_offset is None:
                    state.next_offset = offset

    def count_unreported(self, first_batch: int) -> int:
        """Count the batches from ``first_batch`` on (this run's first) whose manifests are in
        the archive but whose progress Spark never reported (its JVM went away first), so a
        stop says what this run committed; best effort (a warning if unreadable). Returns how
        many were found."""
        batch, found = max(first_batch, self._seen_batch + 1), 0
        try:
            while (manifest := self._count_batch(batch)) is not None:
                merge_offsets(self.committed, manifest.offsets)
                self._seen_batch, batch, found = batch, batch + 1, found + 1
        except Exception:
            log.warning("could not read this run's last manifests for progress", exc_info=True)
        return found

    def _count_batch(self, batch_id: int) -> Manifest | None:
        manifest = self.manifests.read_batch(batch_id)
        if manifest is None:
            return None
        self.result.batches += 1
        self.result.records += manifest.records
        for f in manifest.files:
            state = self.result.partitions.setdefault((f.topic, f.partition), PartitionProgress())
            if f.role == TIMESTAMPS:
                continue  # the hidden file beside a value object, as its index: not counted
            state.files += 1
            self.result.files += 1
        for topic, parts in manifest.dead_letters.items():
            for part, count in parts.items():
                state = self.result.partitions.setdefault((topic, part), PartitionProgress())
                state.dead_letters += count
                self.result.dead_letters += count
        return manifest

    def _advance(self, ends: dict[tuple[str, int], int]) -> None:
        now = time.monotonic()
        for tp, end in ends.items():
            state = self.result.partitions.setdefault(tp, PartitionProgress())
            before = self._last_ends.get(tp, end)
            state.rate = (end - before) / max(now - self._last_time, 1e-3)
            state.next_offset = end
        self._last_ends, self._last_time = ends, now

    def close(self) -> None:
        self.watermarks.close()
        if self.record_times is not None:
            self.record_times.close()
        if self.snapshotter is not None:
            self.snapshotter.close()
        if self._own_clients:
            self.clients.close()


def snapshotter_for(
    job: ExportSettings, store, prefix: str, clients: DriverClients | None = None
) -> Snapshotter | None:
    """The job's :class:`~blockgz.sink.export.snapshots.Snapshotter` (``None``: turned off)."""
    if job.snapshot_interval_s is None:
        return None
    snapshots = Snapshots(store, prefix, job.sink.layout, job.name)
    return Snapshotter(
        job.source.client_config(), snapshots, topics=job.topics,
        interval_s=job.snapshot_interval_s, groups=parse_groups(job.snapshot_groups),
        clients=clients,
    )  # fmt: skip


class Watermarks:
    """Kafka's low and high watermarks per topic-partition, read with one consumer (made on
    first use; ``clients``' when given, closed by their owner); :meth:`refresh` rereads the
    high ones at most every ``period_s``."""

    def __init__(
        self, job: ExportSettings, period_s: float = 2.0, *, clients: DriverClients | None = None
    ):
        self.job = job
        self.period_s = period_s
        self._clients = clients or DriverClients(job.source.client_config())
        self._own_clients = clients is None
        self._at = 0.0
        self.latest: dict[tuple[str, int], int] = {}

    def read(self, partitions, *, timeout_s: float = 2.0) -> dict[tuple[str, int], tuple[int, int]]:
        """``(low, high)`` of each of ``partitions`` now; raises ``KafkaException`` when the
        brokers do not answer within ``timeout_s`` (per request) or a partition is unknown.

        The same ListOffsets requests as ``get_watermark_offsets`` (log start and end, at the
        consumer's isolation level), but batched as the source asks its start offsets
        (:func:`~blockgz.sink.kafka.oldest.offsets_for_times`: chunks of partitions, a few at
        a time), not two requests per partition (10,000 partitions one by one took ~12 s)."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

        from blockgz.sink.kafka.oldest import offsets_for_times

        consumer = self._clients.consumer()
        wanted = list(partitions)
        ends = []
        for spec in (OFFSET_BEGINNING, OFFSET_END):
            asked = [TopicPartition(t, p, spec) for t, p in wanted]
            answers = offsets_for_times(consumer, asked, timeout_s)
            for answer in answers:
                if answer.error is not None:
                    raise KafkaException(answer.error)
            ends.append({(a.topic, a.partition): a.offset for a in answers})
        found = {key: (ends[0][key], ends[1][key]) for key in wanted}
        self.latest.update((key, high) for key, (_, high) in found.items())
        return found

    def refresh(self, partitions, *, now: bool = False) -> dict[tuple[str, int], int]:
        """The high watermarks, read again if ``period_s`` passed (or ``now``)."""
        if not now and time.monotonic() - self._at < self.period_s:
            return self.latest
        self._at = time.monotonic()
        try:
            self.read(partitions)
        except Exception:  # progress is best effort; the export itself does not depend on it
            log.debug("could not read watermarks", exc_info=True)
        return self.latest

    def close(self) -> None:
        if self._own_clients:
            self._clients.close()


def _new_progress(recent, after_batch: int) -> list[dict[str, Any]]:
    """The reports in ``recent`` of batches that ran after ``after_batch``, by batch id."""
    out = []
    for p in recent:
        doc = json.loads(p.json) if hasattr(p, "json") else p
        if doc.get("batchId", -1) > after_batch and ran(doc):
            out.append(doc)
    out.sort(key=lambda d: d["batchId"])
    return out


def ran(progress: dict[str, Any]) -> bool:
    """Whether a progress report is of a batch that ran, not of an idle trigger.

    Spark reports an idle trigger (no new data) with the id of the *next* batch, no input rows
    and no ``addBatch`` phase; taken for that batch, it hid the batch's own report, so the
    first batch after an idle spell was never counted (issue 41).

    >>> ran({"batchId": 3, "numInputRows": 0, "durationMs": {"triggerExecution": 2}})
    False
    >>> ran({"batchId": 3, "numInputRows": 0, "durationMs": {"addBatch": 40}})
    True
    >>> ran({"batchId": 3, "numInputRows": 12})
    True
    """
    return (progress.get("numInputRows") or 0) > 0 or "addBatch" in (
        progress.get("durationMs") or {}
    )


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


def _phases(progress: dict[str, Any]) -> str:
    """Where a batch's time went, from Spark's progress (``durationMs``), longest first."""
    spans = sorted((progress.get("durationMs") or {}).items(), key=lambda kv: -kv[1])
    return ", ".join(f"{name} {ms / 1000:.1f} s" for name, ms in spans) or "no timings"
