"""Commit protocol: task commit messages, per-batch manifests, and resuming from them.

Order (DESIGN.md): every data object, then its index, then the batch manifest. Spark may run a
task twice and call ``commit(batchId)`` twice, so everything here is idempotent: a manifest's key
is a function of the query epoch and batch id, and its bytes of the files it lists.

A manifest also records, per topic-partition, the next offset to read after that batch. The
highest such offset over all manifests is where a job can resume when its checkpoint is lost
(``startingOffsets=s3``); objects starting at or after it were never committed and are removed
(:func:`remove_uncommitted`).

>>> import tempfile
>>> from sink.config import SinkConfig
>>> cfg = SinkConfig.from_options({"path": tempfile.mkdtemp()})
>>> store, prefix = cfg.make_store()
>>> msg = TaskCommitMessage(files=[], next_offsets={"t": {0: 10, 1: 4}})
>>> write_manifest(store, prefix, cfg, 0, [msg])
'_blockgz/blockgz/manifests/00000000000000000000.json'
>>> committed_offsets(store, prefix, cfg)
{'t': {0: 10, 1: 4}}
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from blockgz.errors import ObjectNotFoundError
from blockgz.store.base import ObjectStore
from sink.config import SinkConfig
from sink.objects import WrittenFile

try:  # the message must subclass Spark's type when Spark is there; plain object otherwise
    from pyspark.sql.datasource import WriterCommitMessage
except ImportError:  # pragma: no cover - the [spark] extra is not installed
    WriterCommitMessage = object  # type: ignore[assignment,misc]

log = logging.getLogger("blockgz.sink")

MANIFEST_VERSION = 1

Offsets = dict[str, dict[int, int]]


@dataclass
class TaskCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one write task made: its files and, per topic-partition, the next offset after it."""

    files: list[WrittenFile] = field(default_factory=list)
    next_offsets: Offsets = field(default_factory=dict)
    skipped_nulls: int = 0


def merge_offsets(target: Offsets, more: Offsets) -> Offsets:
    """Fold ``more`` into ``target`` keeping the highest next offset per topic-partition."""
    for topic, parts in more.items():
        mine = target.setdefault(topic, {})
        for part, nxt in parts.items():
            part = int(part)
            mine[part] = max(mine.get(part, 0), int(nxt))
    return target


def manifest_prefix(prefix: str, config: SinkConfig) -> str:
    return f"{prefix}{config.manifest_dir}/{config.name}/manifests/"


def manifest_key(prefix: str, config: SinkConfig, batch_id: int | str) -> str:
    """``_blockgz/<name>/manifests/[<epoch>-]<batch, 20 digits>.json``: sorts by epoch, batch."""
    batch = f"{int(batch_id):020d}" if str(batch_id).isdigit() else str(batch_id)
    epoch = f"{config.epoch}-" if config.epoch else ""
    return f"{manifest_prefix(prefix, config)}{epoch}{batch}.json"


def write_manifest(
    store: ObjectStore,
    prefix: str,
    config: SinkConfig,
    batch_id: int | str,
    messages: Sequence[TaskCommitMessage | None],
) -> str:
    """Write the batch manifest (idempotent: same messages, same bytes) and return its key."""
    files: list[WrittenFile] = []
    offsets: Offsets = {}
    for message in messages:
        if message is None:
            continue
        files.extend(message.files)
        merge_offsets(offsets, message.next_offsets)
    files.sort(key=lambda f: (f.topic, f.partition, f.first_offset, f.key))
    doc = {
        "version": MANIFEST_VERSION,
        "name": config.name,
        "epoch": config.epoch,
        "batch": str(batch_id),
        "offsets": {
            t: {str(p): n for p, n in sorted(ps.items())} for t, ps in sorted(offsets.items())
        },
        "files": [f.to_dict() for f in files],
        "skipped_nulls": sum(m.skipped_nulls for m in messages if m is not None),
    }
    key = manifest_key(prefix, config, batch_id)
    store.put(key, json.dumps(doc, indent=1, sort_keys=True).encode())
    return key


def read_manifest(store: ObjectStore, key: str) -> dict[str, Any]:
    """One manifest document."""
    return json.loads(store.get(key))


def manifest_keys(store: ObjectStore, prefix: str, config: SinkConfig) -> list[str]:
    """Every manifest of this job name, oldest first."""
    return sorted(
        info.key
        for info in store.list(manifest_prefix(prefix, config))
        if info.key.endswith(".json")
    )


def committed_offsets(store: ObjectStore, prefix: str, config: SinkConfig) -> Offsets:
    """Per topic-partition, the next offset after everything any manifest has committed."""
    keys = manifest_keys(store, prefix, config)
    offsets: Offsets = {}
    with ThreadPoolExecutor(8) as pool:
        for doc in pool.map(lambda k: read_manifest(store, k), keys):
            merge_offsets(
                offsets, {t: {int(p): n for p, n in ps.items()} for t, ps in doc["offsets"].items()}
            )
    return offsets


def committed_files(store: ObjectStore, prefix: str, config: SinkConfig) -> list[WrittenFile]:
    """Every file listed in any manifest of this job name (for audits and tests)."""
    keys = manifest_keys(store, prefix, config)
    files: list[WrittenFile] = []
    with ThreadPoolExecutor(8) as pool:
        for doc in pool.map(lambda k: read_manifest(store, k), keys):
            files.extend(WrittenFile.from_dict(f) for f in doc["files"])
    return files


def _file_name_pattern(config: SinkConfig, topic: str) -> re.Pattern[str]:
    d = re.escape(config.file_delim)
    return re.compile(
        rf"(?:^|{re.escape(config.directory_delim)}){re.escape(topic)}{d}(\d+){d}(\d+)\."
    )


def remove_uncommitted(
    store: ObjectStore, prefix: str, config: SinkConfig, offsets: Offsets
) -> list[str]:
    """Delete objects of the given topic-partitions that start at or after the committed offset.

    They come from a batch that never committed (its checkpoint was lost with it). Only
    topic-partitions present in ``offsets`` are touched; each deletion is logged.
    """
    deleted: list[str] = []
    head = f"{prefix}{config.topics_dir}{config.directory_delim}" if config.topics_dir else prefix
    for topic, parts in offsets.items():
        pattern = _file_name_pattern(config, topic)
        for info in store.list(f"{head}{topic}{config.directory_delim}"):
            match = pattern.search(info.key)
            if match is None:
                continue
            part, start = int(match.group(1)), int(match.group(2))
            if part in parts and start >= parts[part]:
                store.delete(info.key)
                deleted.append(info.key)
                log.warning(
                    "%s-%d: removed %s, written by a batch that never committed",
                    topic,
                    part,
                    info.key,
                )
    return deleted


def delete_files(store: ObjectStore, files: Iterable[WrittenFile]) -> int:
    """Delete data objects and their indexes (used by ``abort``); missing ones are fine."""
    count = 0
    for f in files:
        for key in (f.index_key, f.key):
            if not key:
                continue
            try:
                store.delete(key)
                count += 1
            except ObjectNotFoundError:
                pass
    return count


def new_epoch() -> str:
    """A sortable id for a new checkpoint: UTC time plus a few random hex digits."""
    import secrets

    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + secrets.token_hex(3)
