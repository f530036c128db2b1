"""Write-ahead intents: the directories a write task is about to fill, recorded before it does.

A batch that dies before its manifest leaves objects nobody committed. A restart from the
manifests (``startingOffsets=s3``) removes them: every object of a topic-partition that starts at
or after the committed offset. Under the default partitioner they all sit in the partition's
directory, listed from that offset on. Under a field or time partitioner they may sit in any
directory of the topic, including old hours when late records come in, so finding them used to
mean listing the whole topic: a cost that grows with the history.

So a task that writes under such a partitioner first records, for each topic-partition, the
directories it will write into: one small object per task attempt, rewritten when a new
directory joins (one PUT per task and batch in the common case of one hour or one field value)::

    <prefix><manifest dir>/<job>/intents/<topic>/<partition>/<first offset, 20 digits>-<id>.json

A restart reads only the intents that start at or after the committed offset (S3 ``StartAfter``)
and lists only their directories, from the committed offset on: its cost depends on the batch
that died, not on the archive's age. Catalog compaction deletes the intents of committed batches.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> intents = DirectoryIntents(store, "", Layout(), "job", "t", 0)
>>> intents.note("topics/t/day=1/t+0+0000000500.json", start_offset=500)
>>> sorted(intended_directories(store, "", Layout(), "job", "t", 0, from_offset=500))
['topics/t/day=1/']
>>> intended_directories(store, "", Layout(), "job", "t", 0, from_offset=501)
set()
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from blockgz.archive.layout import Layout
from blockgz.archive.partition_offsets import Offsets
from blockgz.errors import CorruptManifestError
from blockgz.store.base import ObjectStore

log = logging.getLogger("blockgz.intents")

_DELETE_THREADS = 8


class DirectoryIntents:
    """One task attempt's intents for one topic-partition (see the module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        store_prefix: str,
        layout: Layout,
        job: str,
        topic: str,
        partition: int,
    ):
        self.store = store
        self.layout = layout
        self._where = (store_prefix, job, topic, partition)
        self._key: str | None = None
        self.directories: set[str] = set()

    def note(self, data_key: str, *, start_offset: int) -> None:
        """Record ``data_key``'s directory before the object is written (a PUT only when the
        directory is new to this task)."""
        directory = self.layout.directory_of(data_key)
        if directory in self.directories:
            return
        self.directories.add(directory)
        if self._key is None:  # named by the task's first offset: a restart lists from there
            token = secrets.token_hex(4)
            self._key = self.layout.intent_key(*self._where, start_offset, token)
        doc = {"directories": sorted(self.directories)}
        self.store.put(self._key, json.dumps(doc).encode())

    def intended(self, from_offset: int) -> set[str]:
        """The directories that tasks starting at or after ``from_offset`` said they would write
        to this topic-partition (1 LIST, plus 1 GET per such task attempt)."""
        store = self.store
        where = self.layout.intents_prefix(*self._where)
        after = self.layout.intents_start_after(*self._where, from_offset)
        found: set[str] = set()
        for info in store.list(where, start_after=after):
            try:
                found.update(str(d) for d in json.loads(store.get(info.key))["directories"])
            except (ValueError, KeyError, TypeError) as exc:
                # Unreadable: the caller cannot know where that task wrote, so it must not guess.
                raise CorruptManifestError(
                    f"{store.url(info.key)}: not a blockgz intent ({exc}); delete it only if no "
                    "batch of this job died after the last committed one"
                ) from exc
        return found

    def discard(self) -> None:
        """Delete the record (the attempt failed and deleted what it wrote)."""
        if self._key is not None:
            self.store.delete(self._key)
            self._key = None
            self.directories.clear()


def intended_directories(*where: Any, from_offset: int) -> set[str]:
    """:meth:`DirectoryIntents.intended` of the intents at ``where``: :class:`DirectoryIntents`'s
    arguments (store, store prefix, layout, job, topic, partition)."""
    return DirectoryIntents(*where).intended(from_offset)


def expire_intents(
    store: ObjectStore, store_prefix: str, layout: Layout, job: str, committed: Offsets
) -> int:
    """Delete the intents of tasks whose records are all committed (they start below the
    committed offset: a batch starts only after the one before it committed). One listing of
    the job's intents, which compaction keeps short."""
    stale: list[str] = []
    for info in store.list(layout.intents_prefix(store_prefix, job)):
        parsed = layout.parse_intent_key(store_prefix, job, info.key)
        if parsed is None:
            continue
        topic, partition, first = parsed
        if first < committed.get(topic, {}).get(partition, 0):
            stale.append(info.key)
    _delete_all(store, stale)
    if stale:
        log.info("%s: deleted %d intents of committed batches", job, len(stale))
    return len(stale)


def _delete_all(store: ObjectStore, keys: Iterable[str]) -> None:
    with ThreadPoolExecutor(_DELETE_THREADS) as pool:
        list(pool.map(store.delete, keys))
