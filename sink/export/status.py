"""``blockgz status``: one export job's health on one screen, and an exit code to alert on.

:func:`job_status` reads, for one job: the catalog (committed offsets, first and last archived
offsets, dead letters, the time of each topic-partition's last commit: when the manifest
that advanced it was written), Kafka's watermarks (end offset and lag), the multipart uploads
left open under the job's prefixes, and the objects no manifest committed (what a restart
would remove: :func:`blockgz.commits.recovery.find_uncommitted`), and each topic's lives (two
in the archive, or a topic recreated in Kafka since the archive recorded its id: both a
problem; :mod:`blockgz.sink.kafka.lives`). :func:`assess` turns that
into issues; :attr:`StatusReport.exit_code` into 0 (healthy), 1 (a warning: lag above
``max_lag``) or 2 (a problem: no commit for longer than ``max_commit_age`` while records wait,
an unreachable broker or archive, a corrupt manifest).

What it costs: the catalog's reads (:meth:`~blockgz.commits.catalog.Catalog.view`), one HEAD,
one metadata request, two watermark requests per leader and 500 partitions, one multipart
listing per topic (8 at once), and listings of each partition from its committed offset on, or
one of the topic where that costs fewer pages
(:func:`~blockgz.commits.recovery.find_uncommitted`).

>>> import tempfile
>>> from blockgz.sink.jobconfig.config import ExportSettings
>>> job = ExportSettings.from_mapping({"name": "j", "topics": "t", "path": tempfile.mkdtemp(),
...                                  "kafka.bootstrap.servers": "k:9092"})
>>> _ = job.sink.manifest_log().write(0, files=[], offsets={"t": {0: 10}})
>>> report = job_status(job, kafka=False)
>>> [(p.topic, p.partition, p.committed) for p in report.partitions], report.exit_code
([('t', 0, 10)], 0)
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

from blockgz.errors import (
    BlockGzError,
    CorruptManifestError,
    NewerVersionError,
    StoreAccessDeniedError,
)
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.times import format_duration, iso_seconds

log = logging.getLogger("blockgz.status")

HEALTHY, WARNING, PROBLEM = 0, 1, 2
#: Listings of multipart uploads at once (one per topic).
_LIST_THREADS = 8
_LEVELS = {WARNING: "warning", PROBLEM: "problem"}


@dataclass
class PartitionStatus:
    """One topic-partition: what the archive committed and what Kafka holds."""

    topic: str
    partition: int
    #: The first and last offsets of the committed objects (``None``: none yet).
    first_offset: int | None = None
    last_offset: int | None = None
    #: The next offset after everything the manifests committed (``None``: nothing yet).
    committed: int | None = None
    #: Kafka's log start and end offsets (``None``: the brokers were not asked, or failed).
    kafka_start: int | None = None
    kafka_end: int | None = None
    dead_letters: int = 0
    #: When the manifest that last advanced ``committed`` was written (epoch seconds).
    last_commit: float | None = None
    #: Records of the lag the export holds back on purpose: its partial file, waiting for
    #: ``flush.size`` or a time rotation (:mod:`blockgz.sink.kafka.holding`); never alarmed on.
    held: int = 0

    @property
    def lag(self) -> int | None:
        """Records in Kafka not archived yet (from its log start when nothing is committed)."""
        if self.kafka_end is None:
            return None
        start = self.committed if self.committed is not None else self.kafka_start
        return max(0, self.kafka_end - (start or 0))

    @property
    def late(self) -> int | None:
        """The lag without the records held on purpose: what alarms look at."""
        return None if self.lag is None else self.lag - self.held


#: A row's fields, for its JSON (``asdict`` deep-copies each: 3 s for 10,000 partitions).
_ROW_FIELDS = fields(PartitionStatus)


@dataclass(frozen=True)
class Issue:
    """A warning (1) or a problem (2), in one line."""

    level: int
    message: str

    def line(self) -> str:
        return f"{_LEVELS[self.level]}: {self.message}"


@dataclass
class StatusReport:
    """One job's status (see the module docstring); :meth:`to_json` for scripts."""

    job: str
    archive: str
    brokers: str
    checked_at: float
    partitions: list[PartitionStatus] = field(default_factory=list)
    #: Unfinished multipart uploads under the job's prefixes: key and start time.
    open_uploads: list[dict[str, Any]] = field(default_factory=list)
    #: Objects under the job's topic prefixes that no manifest committed: key, size, time.
    uncommitted: list[dict[str, Any]] = field(default_factory=list)
    manifests: int = 0
    records: int = 0
    issues: list[Issue] = field(default_factory=list)
    #: What held records wait for (``''``: the export holds nothing back).
    held_for: str = ""

    @property
    def held(self) -> int:
        """Records the export holds back on purpose, over all partitions."""
        return sum(p.held for p in self.partitions)

    @property
    def last_commit(self) -> float | None:
        """The newest commit of any topic-partition."""
        return max(
            (p.last_commit for p in self.partitions if p.last_commit is not None), default=None
        )

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 a warning, 2 a problem."""
        return max((issue.level for issue in self.issues), default=HEALTHY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "archive": self.archive,
            "brokers": self.brokers,
            "checked_at": iso_seconds(self.checked_at),
            "status": ("healthy", "warning", "problem")[self.exit_code],
            "exit_code": self.exit_code,
            "manifests": self.manifests,
            "records": self.records,
            "held": self.held,
            "held_for": self.held_for,
            "last_commit": iso_seconds(self.last_commit),
            "partitions": [
                {
                    **{f.name: getattr(p, f.name) for f in _ROW_FIELDS if f.name != "last_commit"},
                    "lag": p.lag,
                    "last_commit": iso_seconds(p.last_commit),
                }
                for p in self.partitions
            ],
            "open_uploads": self.open_uploads,
            "uncommitted": self.uncommitted,
            "issues": [{"level": _LEVELS[i.level], "message": i.message} for i in self.issues],
        }

    def to_json(self) -> str:
        """The report as JSON (times in ISO 8601 UTC)."""
        return json.dumps(self.to_dict(), indent=2)


def assess(
    report: StatusReport,
    *,
    max_lag: int | None = None,
    max_commit_age: float | None = None,
    now: float | None = None,
) -> list[Issue]:
    """The warnings and problems of ``report``'s figures (added to ``report.issues`` too).

    Lag above ``max_lag`` records is a warning. A topic-partition whose last commit is older
    than ``max_commit_age`` seconds while records wait for it (its lag is above 0, or unknown)
    is a problem; an idle one (lag 0) is not. Records held back on purpose (a partial file
    waiting for ``flush.size`` or a time rotation) count for neither.

    >>> r = StatusReport("j", "s3://b", "k:9092", 0.0, [PartitionStatus("t", 0, committed=5,
    ...                  kafka_end=105, last_commit=1000.0)])
    >>> for issue in assess(r, max_lag=50, max_commit_age=600, now=2000.0):
    ...     print(issue.line())
    warning: t-0: lag 100 records > --max-lag 50
    problem: t-0: no commit for 16m40s > --max-commit-age 10m (100 records wait)
    >>> r.exit_code
    2
    """
    now = time.time() if now is None else now
    found: list[Issue] = []
    for p in report.partitions:
        lag = p.late
        if max_lag is not None and lag is not None and lag > max_lag:
            found.append(
                Issue(WARNING, f"{p.topic}-{p.partition}: lag {lag} records > --max-lag {max_lag}")
            )
        if max_commit_age is None or lag == 0:
            continue
        waiting = "records wait" if lag is None else f"{lag} records wait"
        if p.last_commit is None:
            if p.committed is None and lag:
                what = f"{p.topic}-{p.partition}: nothing committed yet ({waiting})"
                found.append(Issue(WARNING, what))
            continue
        age = now - p.last_commit
        if age > max_commit_age:
            found.append(
                Issue(
                    PROBLEM,
                    f"{p.topic}-{p.partition}: no commit for {format_duration(age)} > "
                    f"--max-commit-age {format_duration(max_commit_age)} ({waiting})",
                )
            )
    report.issues.extend(found)
    return found


def job_status(
    job: ExportSettings,
    *,
    kafka: bool = True,
    max_lag: int | None = None,
    max_commit_age: float | None = None,
    partition_directories: bool | None = None,
) -> StatusReport:
    """The status of the export ``job`` (see the module docstring), issues assessed.

    ``kafka=False`` leaves the brokers alone (no end offsets, no lag).
    ``partition_directories`` overrides the job's partitioner's when looking for
    uncommitted objects (``False``: each topic's whole prefix is listed).
    """
    report = StatusReport(job.name, job.sink.target_url, job.source.bootstrap_servers, time.time())
    store, prefix = job.sink.make_store()
    try:
        manifests = job.sink.manifest_log(store, prefix)
        view = None  # the catalog, read once (an unreadable one is read again, and said)
        try:
            view = _read_archive(report, manifests)
            _read_lives(report, manifests, view, job if kafka else None)
        except (CorruptManifestError, NewerVersionError) as exc:
            report.issues.append(Issue(PROBLEM, f"corrupt manifest or catalog: {exc}"))
        except (BlockGzError, OSError) as exc:
            report.issues.append(Issue(PROBLEM, f"archive {report.archive}: {exc}"))
        if kafka:
            _read_kafka(report, job)
            _mark_held(report, job)
        report.partitions.sort(key=lambda p: (p.topic, p.partition))
        topics = sorted({p.topic for p in report.partitions} | set(job.topics))
        if partition_directories is None:
            partition_directories = job.sink.partitioner().partition_directories
        try:
            _read_leftovers(report, manifests, topics, partition_directories, view)
        except (CorruptManifestError, NewerVersionError) as exc:
            report.issues.append(Issue(PROBLEM, f"corrupt manifest or catalog: {exc}"))
        except (BlockGzError, OSError) as exc:
            report.issues.append(Issue(PROBLEM, f"archive {report.archive}: {exc}"))
    finally:
        store.close()
    assess(report, max_lag=max_lag, max_commit_age=max_commit_age, now=report.checked_at)
    return report


def _partition(
    report: StatusReport, topic: str, part: int, known: dict[tuple[str, int], PartitionStatus]
) -> PartitionStatus:
    """The report's row of ``topic``-``part``, added if new (``known``: the rows by key, kept
    up to date here, so that N partitions cost N lookups, not N² comparisons)."""
    p = known.get((topic, part))
    if p is None:
        p = known[(topic, part)] = PartitionStatus(topic, part)
        report.partitions.append(p)
    return p


def _rows(report: StatusReport) -> dict[tuple[str, int], PartitionStatus]:
    return {(p.topic, p.partition): p for p in report.partitions}


def _read_archive(report: StatusReport, manifests):
    """Committed offsets, first/last offsets, dead letters and commit times, from the catalog
    (whose view is returned)."""
    from blockgz.commits.catalog import Catalog
    from blockgz.errors import ObjectNotFoundError

    view = Catalog(manifests).view()
    report.manifests = (view.root.manifests if view.root else 0) + len(view.tail)
    report.records = view.records
    # Each partition's last commit: the newest manifest that advanced its offset; those the
    # tail does not advance were last committed by the root's newest manifest, or before.
    through_time = None
    if view.root is not None:
        try:
            through_time = manifests.store.head(view.root.through).modified
        except ObjectNotFoundError:
            through_time = None
    running = {t: dict(parts) for t, parts in (view.root.offsets if view.root else {}).items()}
    committed_at: dict[tuple[str, int], float | None] = {
        (t, p): through_time for t, parts in running.items() for p in parts
    }
    times = [info.modified for info in view.tail_listed] or [None] * len(view.tail)
    for manifest, when in zip(view.tail, times, strict=False):
        for topic, parts in manifest.offsets.items():
            for part, nxt in parts.items():
                if nxt > running.setdefault(topic, {}).get(part, -1):
                    running[topic][part] = nxt
                    committed_at[(topic, part)] = when
    dead, known = view.dead_letters, _rows(report)
    for topic, part in view.partitions():
        p = _partition(report, topic, part, known)
        p.committed = view.offsets[topic][part]
        p.first_offset = view.first_offset(topic, part)
        p.last_offset = view.last_offset(topic, part)
        p.dead_letters = dead.get(topic, {}).get(part, 0)
        p.last_commit = committed_at.get((topic, part))
    return view


def _read_lives(report: StatusReport, manifests, view, job: ExportSettings | None) -> None:
    """A topic's lives: two in the archive already (the audit's ``topic_lives``), or a topic
    recreated in Kafka since the archive recorded it (``job`` given: the brokers are asked),
    which the export refuses to archive beside the old life; each a problem."""
    from blockgz.commits.manifests import lives_message

    for topic, ids in sorted(view.lives.items()):
        if len(ids) > 1:
            report.issues.append(
                Issue(PROBLEM, f"{topic}: {lives_message(manifests.name, topic, ids)}")
            )
    recorded = {topic: ids[-1] for topic, ids in view.lives.items() if ids}
    if job is None or not recorded:
        return
    from confluent_kafka import KafkaException

    from blockgz.sink.export.kafka_clients import DriverClients
    from blockgz.sink.kafka.lives import changed_life, live_topic_ids

    clients = DriverClients(job.source.client_config())
    try:
        live = live_topic_ids(clients.admin().client, recorded)
    except (KafkaException, BlockGzError) as exc:  # the brokers: _read_kafka says it
        log.debug("topic ids not asked: %s", exc)
        return
    finally:
        clients.close()
    changed = changed_life(recorded, live)
    if changed is not None:
        topic, then, now = changed
        report.issues.append(
            Issue(
                PROBLEM,
                f"{topic}: deleted and recreated in Kafka (topic id {now}; the archive holds "
                f"the life with id {then}): the export refuses to archive the new life here; "
                "archive it under another topics.dir and name, or delete the old archive",
            )
        )


def _read_kafka(report: StatusReport, job: ExportSettings) -> None:
    """The job's partitions and their watermarks; an unreachable broker is a problem."""
    from blockgz.errors import PreflightError
    from blockgz.sink.export.preflight import KAFKA_TIMEOUT_S, kafka_topics
    from blockgz.sink.export.tracking import Watermarks

    try:
        topics = kafka_topics(job)
    except PreflightError as exc:
        report.issues.append(Issue(PROBLEM, str(exc)))
        return
    wanted = _job_partitions(job, topics, [(p.topic, p.partition) for p in report.partitions])
    watermarks = Watermarks(job)
    try:
        found = watermarks.read(wanted, timeout_s=KAFKA_TIMEOUT_S)
    except Exception as exc:  # KafkaException: timed out, unknown partition, ...
        error = exc.args[0] if exc.args else exc
        why = getattr(error, "str", lambda: str(error))()
        report.issues.append(
            Issue(PROBLEM, f"kafka.bootstrap.servers={report.brokers}: no end offsets ({why})")
        )
        return
    finally:
        watermarks.close()
    known = _rows(report)
    for (topic, part), (low, high) in found.items():
        p = _partition(report, topic, part, known)
        p.kafka_start, p.kafka_end = low, high


def _mark_held(report: StatusReport, job: ExportSettings) -> None:
    """Each partition's records a running export holds back on purpose: below a full
    ``flush.size`` file past the committed offset (all of its lag without ``flush.size``)."""
    from blockgz.sink.kafka.holding import holding, rules_of

    rules = rules_of(job.sink)
    if not holding(job.source.hold_mode, rules, once=False):
        return
    report.held_for = rules.waiting_for()
    for p in report.partitions:
        if p.lag:
            p.held = p.lag % rules.flush_size if rules.flush_size else p.lag


def _job_partitions(
    job: ExportSettings, topics: dict[str, list[int]], archived: Iterable[tuple[str, int]]
) -> list[tuple[str, int]]:
    """The partitions the job reads (of its named topics, its regex's or its assignment) that
    Kafka has, plus those the archive committed that Kafka still has."""
    source = job.source
    if source.strategy == "assign":
        wanted = set(source.assigned)
    elif source.strategy == "subscribe":
        wanted = {(t, p) for t in source.topics for p in topics.get(t, [])}
    else:
        pattern = re.compile(source.pattern or "")
        wanted = {
            (t, p)
            for t, parts in topics.items()
            if not t.startswith("__") and pattern.fullmatch(t)
            for p in parts
        }
    wanted |= set(archived)
    return sorted((t, p) for t, p in wanted if p in topics.get(t, []))


def _read_leftovers(
    report: StatusReport, manifests, topics: list[str], partition_directories: bool, view=None
) -> None:
    """Open multipart uploads under the job's prefixes, and objects no manifest committed."""
    from blockgz.commits.recovery import find_uncommitted

    store, layout = manifests.store, manifests.layout
    prefixes = [layout.topic_prefix(manifests.prefix, t) for t in topics]
    prefixes.append(layout.job_prefix(manifests.prefix, manifests.name))
    try:  # one request per topic, waiting on the server: side by side, in order
        with ThreadPoolExecutor(_LIST_THREADS) as pool:
            for uploads in pool.map(store.list_uploads, prefixes):
                report.open_uploads += [
                    {"key": u.key, "initiated": iso_seconds(u.initiated)} for u in uploads
                ]
    except StoreAccessDeniedError:  # read-only keys: the rest of the report still holds
        report.issues.append(
            Issue(WARNING, "open multipart uploads not listed: no s3:ListBucketMultipartUploads")
        )
    # From each partition's committed offset on (0 where nothing is committed).
    offsets: dict[str, dict[int, int]] = {}
    for p in report.partitions:
        offsets.setdefault(p.topic, {})[p.partition] = p.committed or 0
    found = find_uncommitted(
        manifests, offsets, partition_directories=partition_directories, view=view
    )
    report.uncommitted = [
        {"key": i.key, "size": i.size, "modified": iso_seconds(i.modified)}
        for i in sorted(found, key=lambda i: i.key)
    ]


def archive_jobs(
    url: str, options: dict[str, str], *, bootstrap_servers: str
) -> list[ExportSettings]:
    """The export jobs whose manifests sit under the archive ``url``, each as a config that
    reads the topics it committed from ``bootstrap_servers`` (``options``: S3 and ``kafka.*``
    settings by their Confluent names).

    >>> import tempfile
    >>> from blockgz.commits.manifest_log import ManifestLog
    >>> from blockgz.archive.layout import Layout
    >>> from blockgz.store import LocalStore
    >>> root = tempfile.mkdtemp()
    >>> _ = ManifestLog(LocalStore(root), "", Layout(), "j").write(0, files=[],
    ...                                                            offsets={"t": {0: 3}})
    >>> [(j.name, j.topics) for j in archive_jobs(root, {}, bootstrap_servers="k:9092")]
    [('j', ['t'])]
    """
    from blockgz.archive.layout import DEFAULT_MANIFEST_DIR
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.commits.manifests import find_exports
    from blockgz.store import StoreTarget

    store, prefix = StoreTarget.from_url(url, options).open()
    try:
        manifest_dir = options.get("blockgz.manifest.dir", DEFAULT_MANIFEST_DIR)
        found = find_exports(store, prefix, manifest_dir=manifest_dir)
        jobs = []
        for export in found:
            committed = ManifestLog(store, prefix, export.layout, export.name).committed_offsets()
            topics = ",".join(sorted(committed))
            jobs.append(
                ExportSettings.from_mapping(
                    {
                        **options,
                        **export.layout.to_dict(),
                        "path": url,
                        "name": export.name,
                        **({"topics": topics} if topics else {"topics.regex": "(?!)"}),
                        "kafka.bootstrap.servers": bootstrap_servers,
                    }
                )
            )
        return jobs
    finally:
        store.close()
