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

import time

from blockgz.errors import BlockGzError, CorruptManifestError, NewerVersionError
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.status.report import (
    HEALTHY,
    PROBLEM,
    WARNING,
    Issue,
    PartitionStatus,
    StatusReport,
    assess,
)
from blockgz.sink.status.sources import (
    mark_held,
    read_archive,
    read_kafka,
    read_leftovers,
    read_lives,
)

__all__ = [
    "HEALTHY",
    "PROBLEM",
    "WARNING",
    "Issue",
    "PartitionStatus",
    "StatusReport",
    "assess",
    "job_status",
]


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
            view = read_archive(report, manifests)
            read_lives(report, manifests, view, job if kafka else None)
        except (CorruptManifestError, NewerVersionError) as exc:
            report.issues.append(Issue(PROBLEM, f"corrupt manifest or catalog: {exc}"))
        except (BlockGzError, OSError) as exc:
            report.issues.append(Issue(PROBLEM, f"archive {report.archive}: {exc}"))
        if kafka:
            read_kafka(report, job)
            mark_held(report, job)
        report.partitions.sort(key=lambda p: (p.topic, p.partition))
        topics = sorted({p.topic for p in report.partitions} | set(job.topics))
        if partition_directories is None:
            partition_directories = job.sink.partitioner().partition_directories
        try:
            read_leftovers(report, manifests, topics, partition_directories, view)
        except (CorruptManifestError, NewerVersionError) as exc:
            report.issues.append(Issue(PROBLEM, f"corrupt manifest or catalog: {exc}"))
        except (BlockGzError, OSError) as exc:
            report.issues.append(Issue(PROBLEM, f"archive {report.archive}: {exc}"))
    finally:
        store.close()
    assess(report, max_lag=max_lag, max_commit_age=max_commit_age, now=report.checked_at)
    return report
