"""What ``blockgz status`` reads into its
:class:`~blockgz.sink.status.report.StatusReport`: the catalog (committed offsets, first
and last offsets, dead letters, commit times), each topic's lives, Kafka's watermarks and held
records, and what a restart would remove (open multipart uploads, objects no manifest
committed). :func:`~blockgz.sink.status.job_status.job_status` calls them in turn and assesses the
report.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from blockgz.errors import BlockGzError, StoreAccessDeniedError
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.status.report import (
    PROBLEM,
    WARNING,
    Issue,
    PartitionStatus,
    StatusReport,
)
from blockgz.times import iso_seconds

log = logging.getLogger("blockgz.status")

#: Listings of multipart uploads at once (one per topic).
_LIST_THREADS = 8


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


def read_archive(report: StatusReport, manifests):
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


def read_lives(report: StatusReport, manifests, view, job: ExportSettings | None) -> None:
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
    except (KafkaException, BlockGzError) as exc:  # the brokers: read_kafka says it
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


def read_kafka(report: StatusReport, job: ExportSettings) -> None:
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


def mark_held(report: StatusReport, job: ExportSettings) -> None:
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


def read_leftovers(
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
