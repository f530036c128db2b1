"""Prometheus metrics of a running export, served from the driver (``blockgz.metrics.port``).

Everything comes from what the driver already reads each batch (:mod:`.tracking`): the batch's
manifest (files, records, sizes, dead letters, next offsets), Spark's progress (the batch's
duration) and Kafka's high watermarks. No extra request is made to S3 or Kafka for them.

Committed offsets are the manifests', so after a restart the gauges are right at once (the
job seeds them with :meth:`ExportMetrics.committed` from the manifest log); the counters count
what this process saw, so they start at zero after a restart as Prometheus counters should.

Each :class:`ExportMetrics` has its own :class:`~prometheus_client.CollectorRegistry`, not the
process-wide one, so several exports (or tests) in one process do not collide.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from blockgz.commits.manifests import Manifest
from blockgz.errors import ConfigError
from blockgz.sink.jobconfig.events import event
from blockgz.store.request_stats import OUTCOMES, REQUESTS, RETRIES

log = logging.getLogger("blockgz.export")

#: Seconds: from a second to ten minutes, what a micro-batch takes between an idle and a
#: backlogged job.
DURATION_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)

_PART = ("job", "topic", "partition")
TopicPartition = tuple[str, int]


class ExportMetrics:
    """One export's Prometheus metrics, in a registry of its own.

    The job feeds it each committed batch (:meth:`batch`) and Kafka's end offsets
    (:meth:`end_offsets`); :meth:`serve` exposes it over HTTP.

    >>> from prometheus_client import generate_latest
    >>> from blockgz.written.files import WrittenFile
    >>> m = ExportMetrics("s3-sink")
    >>> f = WrittenFile("k", "t", 0, "partition=0", 0, 9, 10, 321, 900)
    >>> manifest = Manifest("s3-sink", "e", "0", offsets={"t": {0: 10}}, files=(f,))
    >>> m.batch(manifest, {"durationMs": {"triggerExecution": 1500}}, now=1700000000.0)
    >>> m.end_offsets({("t", 0): 14})
    >>> text = generate_latest(m.registry).decode()
    >>> 'blockgz_lag_records{job="s3-sink",partition="0",topic="t"} 4.0' in text
    True
    >>> 'blockgz_bytes_stored_total{job="s3-sink",partition="0",topic="t"} 321.0' in text
    True
    """

    def __init__(self, job: str, registry: CollectorRegistry | None = None):
        self.job = job
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.committed_offset = Gauge(
            "blockgz_committed_offset",
            "The next offset after everything the manifests committed",
            _PART,
            registry=r,
        )
        self.end_offset = Gauge(
            "blockgz_end_offset", "Kafka's high watermark (end offset)", _PART, registry=r
        )
        self.lag_records = Gauge(
            "blockgz_lag_records",
            "Records in Kafka not yet archived: end offset minus committed offset",
            _PART,
            registry=r,
        )
        self.held_records = Gauge(
            "blockgz_held_records",
            "Records of the lag held back on purpose: the partial file waiting for flush.size "
            "or a time rotation (alert on blockgz_lag_records - blockgz_held_records)",
            _PART,
            registry=r,
        )
        #: ``flush.size`` when the export holds partial files back (0: a time rotation only).
        self._hold_size: int | None = None
        self.lag_seconds = Gauge(
            "blockgz_lag_seconds",
            "Age of the oldest record not yet archived (now minus its Kafka timestamp); "
            "0 when nothing waits",
            _PART,
            registry=r,
        )
        self.records_written = Counter(
            "blockgz_records_written",
            "Records written to committed value objects",
            _PART,
            registry=r,
        )
        self.bytes_stored = Counter(
            "blockgz_bytes_stored",
            "Bytes of the committed objects as stored (compressed)",
            _PART,
            registry=r,
        )
        self.bytes_raw = Counter(
            "blockgz_bytes_raw",
            "Bytes of the committed objects before compression",
            _PART,
            registry=r,
        )
        self.objects_committed = Counter(
            "blockgz_objects_committed",
            "Objects committed by a batch manifest (values, keys and headers files)",
            _PART,
            registry=r,
        )
        self.dead_letters = Counter(
            "blockgz_dead_letters",
            "Records sent to the dead-letter queue (errors.tolerance=all)",
            _PART,
            registry=r,
        )
        self.batches = Counter(
            "blockgz_batches", "Batches committed (one manifest each)", ("job",), registry=r
        )
        self.batch_duration = Histogram(
            "blockgz_batch_duration_seconds",
            "A batch's duration, Spark's durationMs.triggerExecution",
            ("job",),
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.s3_requests = Counter(
            "blockgz_s3_requests",
            "S3 requests of the batches' tasks and of the driver, by operation and outcome "
            "(ok, client_error, server_error, connection_error)",
            ("job", "operation", "outcome"),
            registry=r,
        )
        self.s3_retries = Counter(
            "blockgz_s3_retries",
            "S3 operations tried again after a retryable error, by operation",
            ("job", "operation"),
            registry=r,
        )
        self.last_commit = Gauge(
            "blockgz_last_commit_timestamp_seconds",
            "When the driver saw the last batch's manifest (Unix time)",
            ("job",),
            registry=r,
        )
        #: Where it is served (set by :func:`serve_metrics`).
        self.url: str | None = None
        self._committed: dict[TopicPartition, int] = {}
        self._ends: dict[TopicPartition, int] = {}
        #: Timestamps (Unix seconds) of the records at the committed offsets.
        self._oldest: dict[TopicPartition, float] = {}
        self.batches.labels(job)  # present (at 0) from the start, for rate() and alerts
        for outcome in OUTCOMES:
            self.s3_requests.labels(job, "PutObject", outcome)
        self._driver_requests = REQUESTS.snapshot()

    @property
    def names(self) -> frozenset[str]:
        """The metric names this exporter defines, as they appear in the exposition (counters
        with ``_total``, histograms with ``_bucket``, ``_sum`` and ``_count``)."""
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
        found: set[str] = set()
        for family in self.registry.collect():
            found.update(family.name + s for s in suffixes.get(family.type, ("",)))
        return frozenset(found)

    # -- fed by the job ---------------------------------------------------------------------
    def batch(
        self, manifest: Manifest, progress: Mapping[str, Any], *, now: float | None = None
    ) -> None:
        """Count one committed batch: its manifest and Spark's progress report of it."""
        job = self.job
        for f in manifest.files:
            labels = (job, f.topic, str(f.partition))
            if f.role == "value":
                self.records_written.labels(*labels).inc(f.records)
            self.bytes_stored.labels(*labels).inc(f.size)
            self.bytes_raw.labels(*labels).inc(f.uncompressed_size)
            self.objects_committed.labels(*labels).inc()
        for topic, parts in manifest.dead_letters.items():
            for part, count in parts.items():
                self.dead_letters.labels(job, topic, str(part)).inc(count)
        self.committed(manifest.offsets)
        self.requests(manifest.requests)
        driver = REQUESTS.snapshot()
        self.requests(REQUESTS.since(self._driver_requests))
        self._driver_requests = driver
        self.batches.labels(job).inc()
        duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
        if duration_ms is not None:
            self.batch_duration.labels(job).observe(duration_ms / 1000)
        self.last_commit.labels(job).set(time.time() if now is None else now)

    def committed(self, offsets: Mapping[str, Mapping[int, int]]) -> None:
        """Set the committed offsets (per topic, partition: the next offset to archive)."""
        for topic, parts in offsets.items():
            for part, offset in parts.items():
                if self._committed.get((topic, part)) != offset:
                    self._oldest.pop((topic, part), None)  # another record is the oldest now
                self._committed[(topic, part)] = offset
                self._zero(topic, part)
                self.committed_offset.labels(self.job, topic, str(part)).set(offset)
                self._lag((topic, part))

    def requests(self, digest: Mapping[str, Mapping[str, int]]) -> None:
        """Count S3 requests (a :data:`~blockgz.store.request_stats.RequestDigest`)."""
        for operation, kinds in digest.items():
            for kind, n in kinds.items():
                if kind == RETRIES:
                    self.s3_retries.labels(self.job, operation).inc(n)
                else:
                    self.s3_requests.labels(self.job, operation, kind).inc(n)

    def end_offsets(self, ends: Mapping[TopicPartition, int]) -> None:
        """Set Kafka's end offsets (high watermarks)."""
        for (topic, part), offset in ends.items():
            self._ends[(topic, part)] = offset
            self.end_offset.labels(self.job, topic, str(part)).set(offset)
            self._lag((topic, part))

    def pending(self) -> dict[TopicPartition, int]:
        """The committed offset of each partition with records waiting: where the oldest
        record not yet archived is (its timestamp is :meth:`oldest_waiting`'s business)."""
        return {
            tp: offset
            for tp, offset in self._committed.items()
            if self._ends.get(tp, offset) > offset
        }

    def oldest_waiting(self, times: Mapping[TopicPartition, float], *, now: float | None = None):
        """Set the lag in seconds from the timestamps (Unix seconds) of the records at the
        committed offsets of the partitions :meth:`pending` named.

        Between a commit and the reading of the new oldest record's timestamp (the tracker's
        next round, within a second or two) the gauge keeps its previous value: an upper bound
        of the lag, never below it, so an alert on it cannot miss."""
        self._oldest.update(times)
        for tp in times:
            self._lag(tp, now=now)

    def holding(self, hold_size: int | None) -> None:
        """Whether the export holds partial files back: ``flush.size`` (0: a time rotation
        only) or ``None`` (:mod:`blockgz.sink.kafka.holding`)."""
        self._hold_size = hold_size

    def _held(self, lag: int) -> int:
        """The part of ``lag`` held back on purpose (the partial file past the committed one)."""
        if self._hold_size is None:
            return 0
        return lag % self._hold_size if self._hold_size else lag

    def _lag(self, tp: TopicPartition, *, now: float | None = None) -> None:
        if tp in self._committed and tp in self._ends:
            lag = max(0, self._ends[tp] - self._committed[tp])
            labels = (self.job, tp[0], str(tp[1]))
            self.lag_records.labels(*labels).set(lag)
            self.held_records.labels(*labels).set(self._held(lag))
            if lag == 0:
                self.lag_seconds.labels(*labels).set(0)
            elif tp in self._oldest:
                now = time.time() if now is None else now
                self.lag_seconds.labels(*labels).set(max(0.0, now - self._oldest[tp]))

    def _zero(self, topic: str, part: int) -> None:
        """Make each counter of a partition exist at 0, so ``increase()`` sees its first step."""
        labels = (self.job, topic, str(part))
        for counter in (self.records_written, self.dead_letters, self.objects_committed):
            counter.labels(*labels)

    # -- served -----------------------------------------------------------------------------
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> MetricsServer:
        """Serve the metrics at ``http://host:port/metrics`` (``port`` 0: one the OS picks)."""
        return MetricsServer(self, host, port)


class MetricsServer:
    """The HTTP endpoint of an :class:`ExportMetrics`; :meth:`close` stops it."""

    def __init__(self, metrics: ExportMetrics, host: str, port: int):
        self.metrics = metrics
        self._server, self._thread = start_http_server(port, host, registry=metrics.registry)
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def serve_metrics(job_name: str, host: str, port: int) -> Iterator[ExportMetrics | None]:
    """While the block runs, serve a new :class:`ExportMetrics` (``port`` ``-1``: none, and
    ``None`` is yielded); its URL is logged at INFO. A port that cannot be opened is a
    :class:`~blockgz.errors.ConfigError` naming the option."""
    if port < 0:
        yield None
        return
    metrics = ExportMetrics(job_name)
    try:
        server = metrics.serve(host, port)
    except OSError as exc:
        raise ConfigError(
            f"blockgz.metrics.port={port}: cannot listen on {host}:{port} ({exc.strerror or exc})"
        ) from exc
    log.info("metrics at %s", server.url, extra=event("metrics", url=server.url))
    metrics.url = server.url
    try:
        yield metrics
    finally:
        server.close()
