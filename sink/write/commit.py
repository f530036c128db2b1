"""What a write task hands the driver, and the driver's batch manifest.

Each task returns a :class:`TaskCommitMessage` (its files and, per topic-partition, the next
offset after what it wrote). The driver's ``commit`` folds them into the batch manifest
(:class:`blockgz.commits.manifest_log.ManifestLog`); its ``abort`` deletes what the tasks wrote.

>>> import tempfile
>>> from blockgz.sink.write.config import SinkSettings
>>> cfg = SinkSettings.from_options({"path": tempfile.mkdtemp()})
>>> msg = TaskCommitMessage(files=[], next_offsets={"t": {0: 10, 1: 4}})
>>> write_manifest(cfg.manifest_log(), 0, [msg])
'_blockgz/blockgz/manifests/00000000000000000000.json'
>>> cfg.manifest_log().committed_offsets()
{'t': {0: 10, 1: 4}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from blockgz.archive.partition_offsets import Offsets, merge_offsets
from blockgz.commits.manifest_log import ManifestLog
from blockgz.store.request_stats import RequestDigest, merge_digests
from blockgz.written.files import WrittenFile

try:  # the message must subclass Spark's type when Spark is there; plain object otherwise
    from pyspark.sql.datasource import WriterCommitMessage
except ImportError:  # pragma: no cover - the [spark] extra is not installed
    WriterCommitMessage = object  # type: ignore[assignment,misc]


@dataclass
class TaskCommitMessage(WriterCommitMessage):
    """What one write task made: its files and, per topic-partition, the next offset after it."""

    files: list[WrittenFile] = field(default_factory=list)
    next_offsets: Offsets = field(default_factory=dict)
    skipped_nulls: int = 0
    #: Records sent to the dead-letter queue, per topic and partition.
    dead_letters: Offsets = field(default_factory=dict)
    #: The S3 requests the task made (:mod:`blockgz.store.request_stats`), for the metrics.
    s3_requests: RequestDigest = field(default_factory=dict)


def write_manifest(
    log: ManifestLog,
    batch_id: int | str,
    messages: Sequence[TaskCommitMessage | None],
    *,
    topic_ids: Mapping[str, str] | None = None,
) -> str:
    """Fold the tasks' messages into the batch manifest (with the Kafka ``topic_ids`` when
    known); return its key (idempotent)."""
    done = [m for m in messages if m is not None]
    offsets: Offsets = {}
    dead: Offsets = {}
    requests: RequestDigest = {}
    for message in done:
        merge_digests(requests, getattr(message, "s3_requests", {}))
        merge_offsets(offsets, message.next_offsets)
        for topic, parts in message.dead_letters.items():
            mine = dead.setdefault(topic, {})
            for partition, count in parts.items():
                mine[partition] = mine.get(partition, 0) + count
    return log.write(
        batch_id,
        files=[f for m in done for f in m.files],
        offsets=offsets,
        skipped_nulls=sum(m.skipped_nulls for m in done),
        dead_letters=dead,
        requests=requests,
        topic_ids=topic_ids,
    )
