"""Where an export starts (checkpoint, manifests or startingOffsets), and what a killed run left."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from blockgz.archive.partition_offsets import EARLIEST, Offsets
from blockgz.sink.jobconfig.config import ExportSettings

if TYPE_CHECKING:
    from blockgz.sink.export.kafka_clients import DriverClients

log = logging.getLogger("blockgz.export")


class StartPlan(NamedTuple):
    """The source options for this run, and where it starts, in words for the one log line."""

    options: dict[str, str]
    where: str


def starting_offsets(
    job: ExportSettings,
    *,
    fresh: bool,
    checkpoint: Path | str = "the checkpoint",
    clients: DriverClients | None = None,
) -> StartPlan:
    """The source options resolved for where this run starts, and that place in words.

    An existing checkpoint (``fresh=False``) resumes from itself (Spark ignores
    ``startingOffsets`` then). A fresh one, with ``blockgz.resume=archive`` (the default) and
    manifests of this job in the archive, resumes from what they committed, as a Connect sink
    resumes from its consumer offsets; partitions they do not name start at
    ``startingOffsets``. Otherwise ``startingOffsets`` holds. The partitions are asked with
    ``clients``' admin client when given (the run's shared one), else with one made here.

    >>> import tempfile
    >>> job = ExportSettings.from_mapping({"name": "j", "topics": "t", "path": tempfile.mkdtemp(),
    ...                                  "kafka.bootstrap.servers": "k:9092"})
    >>> starting_offsets(job, fresh=True, checkpoint="/c").where
    'fresh checkpoint /c and no manifests of job j in the archive: from startingOffsets=earliest'
    """
    options = dict(job.source_options)
    given = options.get("startingOffsets", "earliest")
    if given.lower() == "s3":  # the archive's offsets (below), earliest where it has none
        given = options["startingOffsets"] = "earliest"
    if not fresh:
        return StartPlan(options, f"resuming from the checkpoint {checkpoint}")
    if not job.resume_from_manifests:
        return StartPlan(
            options,
            f"fresh checkpoint {checkpoint}, blockgz.resume=checkpoint-only: "
            f"from startingOffsets={given}",
        )
    committed = job.sink.manifest_log().committed_offsets()
    if not committed:
        return StartPlan(
            options,
            f"fresh checkpoint {checkpoint} and no manifests of job {job.name} in the archive: "
            f"from startingOffsets={given}",
        )
    partitions = kafka_partitions(job, clients)
    if job.source.strategy == "assign":  # Spark wants exactly the assigned ones
        partitions = [tp for tp in partitions if tp in set(job.source.assigned)]
    options["startingOffsets"], where = resume_from_manifests(job, partitions, fallback=given)
    return StartPlan(options, f"fresh checkpoint {checkpoint}: {where}")


def _fallback_offset(given: str, topic: str, partition: int) -> int:
    """``startingOffsets``' offset for one partition: -2 earliest, -1 latest, or its JSON's."""
    text = given.strip().lower()
    if text == "latest":
        return -1
    if text.startswith("{"):
        value = json.loads(given).get(topic, {}).get(str(partition))
        return EARLIEST if value is None else int(value)
    return EARLIEST


def resume_from_manifests(
    job: ExportSettings, partitions: list[tuple[str, int]], *, fallback: str = "earliest"
) -> tuple[str, str]:
    """``startingOffsets`` JSON from the manifests (the committed offset, or ``fallback``'s
    for partitions they do not name: ``startingOffsets``' earliest, latest or JSON), and what
    it says in words.

    Objects that start at or after a committed offset come from a batch that never
    committed; they are removed first so the restarted job can write its own.
    """
    manifests = job.sink.manifest_log()
    start = manifests.resume_point(partitions)
    committed: Offsets = {}
    for (topic, part), offset in start.items():
        if offset >= 0:
            committed.setdefault(topic, {})[part] = offset
        else:
            start[(topic, part)] = _fallback_offset(fallback, topic, part)
    removed = manifests.remove_uncommitted(
        committed, partition_directories=job.sink.partitioner().partition_directories
    )
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(start.items()):
        by_topic.setdefault(topic, {})[str(part)] = offset
    resumed = ", ".join(
        f"{t}-{p}@{n}" for t, ps in sorted(committed.items()) for p, n in sorted(ps.items())
    )
    others = sorted(f"{t}-{p}" for (t, p) in start if committed.get(t, {}).get(p) is None)
    where = (
        f"resuming from the archive's manifests "
        f"({manifests.layout.manifest_prefix(manifests.prefix, job.name)}): {resumed}"
        + (f"; {', '.join(others)} from startingOffsets={fallback}" if others else "")
        + f" ({len(removed)} uncommitted objects removed; blockgz.resume=checkpoint-only "
        "would start at startingOffsets)"
    )
    return json.dumps(by_topic), where


def abort_left_uploads(
    job: ExportSettings, *, started_before: float, clients: DriverClients | None = None
) -> list[str]:
    """Abort multipart uploads a killed run of this job left behind: under the directories of
    the topics it exports and under its own job directory (manifests, catalog, dead letters).

    Safe because one export runs per job and topic at a time (as its checkpoint requires):
    when this run starts, no writer of those objects is alive. Uploads begun after
    ``started_before`` are left alone.
    """
    store, prefix = job.sink.make_store()
    layout = job.sink.layout
    topics = list(job.topics) or sorted({t for t, _ in kafka_partitions(job, clients)})
    prefixes = [layout.topic_prefix(prefix, t) for t in topics]
    prefixes.append(layout.job_prefix(prefix, job.name))
    aborted: list[str] = []
    try:
        for where in prefixes:
            aborted += store.abort_uploads(where, started_before=started_before)
    finally:
        store.close()
    if aborted:
        log.warning("aborted %d multipart uploads a stopped run left unfinished", len(aborted))
    return aborted


def kafka_partitions(
    job: ExportSettings, clients: DriverClients | None = None
) -> list[tuple[str, int]]:
    """The partitions of the job's topics, from the broker's metadata (asked with ``clients``'
    admin client when given, else with one made for it)."""
    if clients is not None:
        admin = clients.admin().client
    else:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(job.source.admin_config())
    meta = admin.list_topics(timeout=15)
    wanted = set(job.topics)
    regex = re.compile(job.source.pattern) if job.source.pattern else None
    return sorted(
        (name, p)
        for name, topic in meta.topics.items()
        if name in wanted or (regex is not None and regex.fullmatch(name))
        for p in topic.partitions
    )
