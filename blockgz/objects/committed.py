"""Reads checked against what a manifest committed: a sidecar or an object that is not the one
the export wrote is an :class:`~blockgz.errors.ArchiveIntegrityError` naming its key, never a
silent wrong answer (issue 41).

A manifest entry (:class:`~blockgz.written.files.WrittenFile`) binds each file's content (its
size and CRC-32, its sidecar's size and CRC-32) and identity (topic, partition, offsets,
records, times). A reader that found an object through a manifest or catalog checks, at no
extra request:

* the sidecar's bytes against ``index_size``/``index_crc32`` (a changed time range, a swapped
  sidecar), and what the sidecar says (its ``"object"`` member, its chunks' totals and times)
  against the entry, with :func:`check_sidecar` (old entries and sidecars without these fields:
  nothing to check);
* each ranged GET through :class:`CommittedRanges`: the object's size from the answer's
  ``Content-Range`` against the entry's, and the CRC-32 of every whole block fetched against
  the sidecar's per-block ``crc32`` (the sidecar itself proven by the manifest);
* an object read whole (no index: plain gzip, a companion without one), through
  :func:`checked_chunks`: its size and CRC-32 once its last byte has been read.

    >>> from blockgz.written.files import WrittenFile
    >>> entry = WrittenFile("t/t+0+0.json.gz", "t", 0, "", 0, 9, 10, 100, 120)
    >>> check_entry_size("s3://b/t/t+0+0.json.gz", entry, 96)
    Traceback (most recent call last):
    ...
    blockgz.errors.ArchiveIntegrityError: s3://b/t/t+0+0.json.gz: size 96, committed 100
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Sequence
from typing import Any

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.errors import ArchiveIntegrityError
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile


def mismatch(
    url: str, what: str, found: Any, committed: Any, said: str = "committed"
) -> ArchiveIntegrityError:
    """The error for one field that differs: ``<url>: <what> <found>, committed <committed>``
    (``said``: who says what it should be, when not a manifest)."""
    return ArchiveIntegrityError(f"{url}: {what} {found}, {said} {committed}", key=url)


def check_entry_size(url: str, entry: WrittenFile, size: int | None) -> None:
    """Raise unless the object's ``size`` (``None``: not known) is the committed one."""
    if size is not None and size != entry.size:
        raise mismatch(url, "size", size, entry.size)


def check_sidecar_bytes(url: str, entry: WrittenFile, data: bytes) -> None:
    """Raise unless the sidecar's bytes have the committed size and CRC-32 (where recorded)."""
    if entry.index_size is not None and len(data) != entry.index_size:
        raise mismatch(url, "index size", len(data), entry.index_size)
    if entry.index_crc32 is not None:
        crc = block_crc32(data)
        if crc != entry.index_crc32:
            raise mismatch(url, "index crc32", crc, entry.index_crc32)


def rebuilt_sidecar(data: bytes) -> bool:
    """Whether the sidecar was rebuilt from its object by ``blockgz audit --repair`` (its
    ``"object"`` member says ``rebuilt``): its bytes differ from the committed sidecar's, and
    only what it names (:func:`check_sidecar`) binds it to the entry."""
    try:
        member = json.loads(data).get("object")
    except (ValueError, AttributeError):
        return False
    return isinstance(member, dict) and member.get("rebuilt") is True


def check_sidecar(index_url: str, data_url: str, entry: WrittenFile, index: BlockIndex) -> None:
    """Raise unless the sidecar (``index``, loaded from ``index_url``; ``data_url`` for an
    object that is its own index) describes the object the entry committed: its ``"object"``
    member, its chunks' totals and time range. The error names the sidecar: what it says is
    what differs."""
    for what, found, committed in sidecar_claims(index, entry):
        if committed is not None and found is not None and found != committed:
            raise mismatch(index_url or data_url, what, found, committed)


def sidecar_claims(index: BlockIndex, entry: WrittenFile) -> Iterator[tuple[str, Any, Any]]:
    """``(what, the sidecar says, the entry says)`` for every fact both may record."""
    named = index.object
    if named is not None:
        yield "object key", named.key, entry.key
        yield "object size", named.size, entry.size
        yield "object crc32", named.crc32, entry.crc32
        yield "object topic", named.topic, entry.topic
        yield "object partition", named.partition, entry.partition
    if index.blocks is None:  # a sidecar's chunks tile the object (a Parquet footer's do not)
        yield "size by its index", index.byte_length, entry.size
    yield "records by its index", index.record_count, entry.records
    yield "first offset by its index", index.first_offset, entry.first_offset
    yield "last offset by its index", index.last_offset, entry.last_offset
    low, high = chunk_times(index.chunks)
    yield "min_timestamp by its index", low, entry.min_timestamp
    yield "max_timestamp by its index", high, entry.max_timestamp


def chunk_times(chunks: Sequence[Chunk]) -> tuple[int | None, int | None]:
    """The records' time range by the chunks, when every chunk with records gives one.

    >>> chunk_times([Chunk(0, 1, 0, 9, 9, min_timestamp=5, max_timestamp=7),
    ...              Chunk(1, 1, 9, 9, 9, min_timestamp=3, max_timestamp=4)])
    (3, 7)
    """
    timed = [c for c in chunks if c.num_records]
    if not timed or any(c.min_timestamp is None for c in timed):
        return None, None
    return min(c.min_timestamp for c in timed), max(c.max_timestamp for c in timed)  # type: ignore[type-var]


def checked_chunks(chunks: Iterator[bytes], url: str, entry: WrittenFile) -> Iterator[bytes]:
    """``chunks`` (a whole object streamed) passed on, and at their end the object's size
    and CRC-32 checked against the entry: an object read whole (no index) proves itself."""
    size = crc = 0
    for chunk in chunks:
        size += len(chunk)
        crc = block_crc32(chunk, crc)
        yield chunk
    check_entry_size(url, entry, size)
    if entry.crc32 is not None and crc != entry.crc32:
        raise mismatch(url, "crc32", crc, entry.crc32)


def check_blocks(
    source: str, chunks: Sequence[Chunk], start: int, data: bytes, said: str = "committed"
) -> None:
    """Raise unless every whole block of ``chunks`` (file order) inside ``data``, the bytes
    read from byte ``start`` of ``source``, has the CRC-32 its chunk records (where it does)."""
    at = bisect.bisect_left(chunks, start, key=lambda c: c.byte_offset)
    end = start + len(data)
    view = memoryview(data)
    while at < len(chunks) and chunks[at].byte_end <= end:
        chunk = chunks[at]
        if chunk.crc32 is not None:
            crc = block_crc32(view[chunk.byte_offset - start : chunk.byte_end - start])
            if crc != chunk.crc32:
                raise mismatch(source, f"block {at} crc32", crc, chunk.crc32, said)
        at += 1


class BlockCheckedRanges:
    """Any byte ranges (a local file's) whose reads have each whole block's CRC-32 checked
    against ``chunks`` (:func:`check_blocks`)."""

    def __init__(self, ranges: Any, chunks: Sequence[Chunk], said: str):
        self.ranges = ranges
        self.chunks = chunks
        self.said = said
        self.source = ranges.source

    def read(self, start: int, end: int) -> bytes:
        data = self.ranges.read(start, end)
        check_blocks(self.source, self.chunks, start, data, self.said)
        return data

    def size(self) -> int:
        return self.ranges.size()

    def close(self) -> None:
        self.ranges.close()


class CommittedRanges:
    """An object's byte ranges read from a store, checked against what was committed: the
    size each ranged GET's answer tells (``size``: the committed size; ``None``: unknown) and
    the CRC-32 of every whole block a read holds (by ``chunks``, the proven sidecar's). Same
    interface as :class:`~blockgz.objects.indexed.StoreRanges`: one ranged GET per read.
    ``said`` names who promised them in messages (``committed``: a manifest).
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        size: int | None,
        chunks: Sequence[Chunk] = (),
        *,
        said: str = "committed",
    ):
        self.store = store
        self.key = key
        self.expected_size = size
        self.chunks = chunks
        self.said = said
        self.source = store.url(key)

    def read(self, start: int, end: int) -> bytes:
        data, size = self.store.get_range_sized(self.key, start, end)
        self._check_size(size)
        self.check_blocks(start, data)
        return data

    def _check_size(self, size: int | None) -> None:
        expected = self.expected_size
        if size is not None and expected is not None and size != expected:
            raise mismatch(self.source, "size", size, expected, self.said)

    def check_blocks(self, start: int, data: bytes) -> None:
        """Raise unless every whole block inside ``data`` (read from byte ``start``) has the
        CRC-32 its chunk records."""
        check_blocks(self.source, self.chunks, start, data, self.said)

    def size(self) -> int:
        size = self.store.head(self.key).size
        self._check_size(size)
        return size

    def close(self) -> None:
        """Nothing to release: the store belongs to the caller."""


__all__ = [
    "BlockCheckedRanges",
    "CommittedRanges",
    "check_blocks",
    "check_entry_size",
    "check_sidecar",
    "check_sidecar_bytes",
    "checked_chunks",
    "chunk_times",
    "mismatch",
    "sidecar_claims",
]
