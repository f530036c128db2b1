"""The open files of one topic-partition, by encoded partition, and what committing one does.

Committing a file closes it (the object and its index are stored), then the keys and headers
files beside it; a committed value object is tagged (``s3.object.tagging``) and reported to
``on_file``. :meth:`OpenFiles.abort` drops the open ones and deletes what this attempt
committed.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> files = OpenFiles(LocalStore(tempfile.mkdtemp()), "t", 0)
>>> len(files), files.written
(0, [])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from blockgz.store.base import ObjectStore
from blockgz.store.s3 import offset_tags
from blockgz.written.files import WrittenFile

log = logging.getLogger("blockgz.sink")


class OpenFiles:
    """Open object writers by encoded partition (in the order records opened them), and the
    files committed so far."""

    def __init__(
        self,
        store: ObjectStore,
        topic: str,
        partition: int,
        *,
        on_file: Callable[[WrittenFile], None] | None = None,
        converters: dict[str, str] | None = None,
    ):
        self.store = store
        #: Per role (``value``, ``keys``), the converter label each committed file records.
        self.converters = converters or {}
        self.topic = topic
        self.partition = partition
        self.on_file = on_file
        #: Open writers by encoded partition.
        self.open: dict[str, Any] = {}
        #: Files committed in this attempt (value files, then their keys and headers files).
        self.written: list[WrittenFile] = []

    def get(self, encoded: str) -> Any:
        return self.open.get(encoded)

    def add(self, encoded: str, writer: Any) -> Any:
        self.open[encoded] = writer
        return writer

    def __len__(self) -> int:
        return len(self.open)

    def __iter__(self) -> Iterator[str]:
        return iter(self.open)

    def oldest(self) -> str:
        """The encoded partition opened first of those open."""
        return next(iter(self.open))

    def drop_empty(self) -> None:
        """Abort the files that hold no record (opened for one that then failed)."""
        for encoded, writer in list(self.open.items()):
            if writer.records == 0:
                writer.abort()
                if writer.companions:
                    writer.companions.abort()
                del self.open[encoded]

    def commit(self, encoded: str) -> None:
        """Close the file of ``encoded`` and the files beside it; tag and report them."""
        writer = self.open.pop(encoded)
        closed = writer.close()
        done = None if closed is None else self._labelled(closed)
        if done is not None:
            self.written.append(done)
        if writer.companions:  # the keys and headers files, after their value file
            for companion in writer.companions.close():
                companion = self._labelled(companion)
                self.written.append(companion)
                if self.on_file is not None:
                    self.on_file(companion)
        if done is None:  # tombstones kept as keys only (NoValueFile)
            return
        if self.store.tags_objects:  # s3.object.tagging, as Confluent tags committed files
            self.store.tag(done.key, offset_tags(done.first_offset, done.last_offset, done.records))
        log.debug(
            "%s-%d: wrote %s (%d records, offsets %d..%d, %d bytes)",
            self.topic,
            self.partition,
            done.key,
            done.records,
            done.first_offset,
            done.last_offset,
            done.size,
        )
        if self.on_file is not None:
            self.on_file(done)

    def _labelled(self, done: WrittenFile) -> WrittenFile:
        """``done`` with the converter its role's records went through."""
        if not self.converters:
            return done
        label = self.converters.get(done.role)
        return done if label is None else replace(done, converter=label)

    def commit_all(self, reason: str | None = None, offset: int | None = None) -> None:
        """Commit every open file; ``reason`` (what changed at ``offset``) is logged, as
        Confluent commits all of a topic-partition's files on a schema change."""
        if reason is not None:
            log.info(
                "%s-%d: %s changed at offset %d: rotating %d open files",
                self.topic,
                self.partition,
                reason,
                offset,
                len(self.open),
            )
        for encoded in list(self.open):
            self.commit(encoded)

    def abort(self) -> bool:
        """Drop open files and delete the ones committed in this attempt; ``True`` when all is
        cleaned up (``False``: something of the attempt may still be in the store)."""
        left = False
        for writer in self.open.values():
            try:
                writer.abort()
                if writer.companions:
                    writer.companions.abort()
            except Exception:  # keep cleaning up; the original error is what matters
                left = True
                log.warning("could not abort the upload of %s", writer.key, exc_info=True)
        self.open.clear()
        for done in self.written:
            for key in (done.index_key, done.key):
                if key:
                    try:
                        self.store.delete(key)
                    except Exception:
                        left = True
                        log.warning("could not delete %s after a failure", key, exc_info=True)
        self.written.clear()
        return not left
