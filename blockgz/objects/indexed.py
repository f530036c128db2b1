"""Read a block-GZIP object through its index: one byte range per block, records by offset.

An Avro container file with an index (:class:`~blockgz.formats.avro.upload.AvroUpload` writes
them) reads the same way: each block is decoded alone from its byte range and the index's
Avro section, so a seek is still one ranged read.

One reader, :class:`IndexedReader`, over a small "read this byte range" interface with two
implementations: :class:`FileRanges` (a local file, one ``pread`` per range) and
:class:`StoreRanges` (an object store, one ranged GET per range). Which blocks a seek needs
comes from :func:`~blockgz.blocks.plan.plan_blocks`; neighbouring ones are read as one range.

    >>> import tempfile
    >>> from blockgz.written.upload import BlockGzipUpload
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> with BlockGzipUpload(store, "e.json.gz", block_size=64, first_offset=1000) as out:
    ...     for n in range(100):
    ...         out.write(b'{"n":%d}' % n)
    >>> with IndexedReader.open_object(store, "e.json.gz") as obj:
    ...     [r.value for r in obj.seek(1042, count=2)]
    [b'{"n":42}', b'{"n":43}']
    >>> with IndexedReader.open_file(store.path("e.json.gz")) as f:
    ...     f.verify().ok
    True
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from blockgz.blocks.avro.block_read import avro_block_bytes, header_problems, read_avro_header
from blockgz.blocks.decode import (
    Record,
    block_columns,
    block_records,
    check_seek,
    inflate_chunk,
)
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import (
    DEFAULT_GAP,
    DEFAULT_SPAN_BYTES,
    BlockRead,
    Span,
    fetched,
    merge_ranges,
    plan_blocks,
)
from blockgz.errors import BlockGzError, IndexMismatchError, MissingIndexError, ObjectNotFoundError
from blockgz.formats.by_name import format_indexing_itself
from blockgz.objects.committed import (
    BlockCheckedRanges,
    CommittedRanges,
    check_sidecar,
    check_sidecar_bytes,
    mismatch,
    rebuilt_sidecar,
)
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile
from blockgz.written.sidecars import data_key_for, is_sidecar, sidecar_keys


class ByteRanges(Protocol):
    """Where an indexed object's bytes are read from."""

    #: Names the object in messages (a path or a URL).
    source: str

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``: one read or one request."""
        ...

    def size(self) -> int:
        """The object's size in bytes."""
        ...

    def close(self) -> None: ...


class FileRanges:
    """A local file, kept open; each range is one ``pread``."""

    def __init__(self, path: str | os.PathLike[str]):
        self.source = str(path)
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{path}: no such file") from exc

    def read(self, start: int, end: int) -> bytes:
        return os.pread(self._fd, end - start, start)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StoreRanges:
    """An object in a store; each range is one ranged GET."""

    def __init__(self, store: ObjectStore, key: str):
        self.store = store
        self.key = key
        self.source = store.url(key)

    def read(self, start: int, end: int) -> bytes:
        return self.store.get_range(self.key, start, end)

    def size(self) -> int:
        return self.store.head(self.key).size

    def close(self) -> None:
        """Nothing to release: the store belongs to the caller."""


def object_ranges(
    store: ObjectStore,
    key: str,
    chunks: Sequence[Chunk] = (),
    committed: WrittenFile | None = None,
) -> ByteRanges:
    """The byte ranges of object ``key``: checked against the manifest entry that
    ``committed`` it (:class:`~blockgz.objects.committed.CommittedRanges`: size by each
    answer, CRC-32 of each whole block of ``chunks``, in file order) when there is one, else
    plain ranged GETs."""
    if committed is None:
        return StoreRanges(store, key)
    return CommittedRanges(store, key, committed.size, chunks)


def load_index(
    store: ObjectStore,
    data_key: str,
    index_key: str | None = None,
    *,
    size: int = -1,
    committed: WrittenFile | None = None,
) -> BlockIndex:
    """Fetch and validate the sidecar of ``data_key``: first at ``index_key`` when a listing
    or manifest named it, then under the hidden name blockgz writes, then the old name beside
    the object (:func:`~blockgz.written.sidecars.sidecar_keys`; an old manifest may name a sidecar
    since renamed to the hidden name). An object that carries its own index (Parquet) is
    asked for it instead (its ``size``, when known, saves a HEAD).

    With the manifest entry that ``committed`` the object, the sidecar must be the one it
    committed (its bytes' size and CRC-32) and describe that object
    (:mod:`blockgz.objects.committed`), else :class:`~blockgz.errors.ArchiveIntegrityError`."""
    inside = format_indexing_itself(data_key)
    if inside is not None:
        index = inside.read_index(store, data_key, size)
        if committed is not None:
            check_sidecar(store.url(data_key), store.url(data_key), committed, index)
        return index
    named = (index_key,) if index_key else ()
    keys = tuple(dict.fromkeys((*named, *sidecar_keys(data_key))))
    for key in keys:
        try:
            text = store.get(key)
        except ObjectNotFoundError:
            continue
        rebuilt = committed is not None and rebuilt_sidecar(text)
        if committed is not None and not rebuilt:
            check_sidecar_bytes(store.url(key), committed, text)
        index = BlockIndex.from_json(text, source=store.url(key))
        if committed is not None:
            check_sidecar(store.url(key), store.url(data_key), committed, index)
        return without_block_times(index) if rebuilt else index
    raise MissingIndexError(
        f"{store.url(data_key)}: no index sidecar ({' or '.join(map(store.url, keys))}); the "
        "object is not seekable until `blockgz index` builds one (or stream it with --scan)"
    )


def without_block_times(index: BlockIndex) -> BlockIndex:
    """``index`` with its blocks' time ranges forgotten: a sidecar whose bytes the manifest
    did not commit (rebuilt by ``audit --repair``) may not make a time window skip a block,
    since nothing proves those times (its blocks are read and their records filtered)."""
    chunks = [replace(c, min_timestamp=None, max_timestamp=None) for c in index.chunks]
    return replace(index, chunks=chunks)


def resolve_data_key(store: ObjectStore, key: str) -> str:
    """The data key of ``key``, a data key or an ``.index.json`` key: for an index key, its
    name with the suffix its codec writes (``.gz``, ``.zst``), the index read to know which.

    >>> import tempfile
    >>> from blockgz.blocks.codecs.gzip_members import Compression
    >>> from blockgz.written.upload import BlockGzipUpload
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> zstd = Compression("zstd", 1)
    >>> with BlockGzipUpload(store, "t+0+0000000000.json.zst", compression=zstd) as out:
    ...     out.write(b"x")
    >>> resolve_data_key(store, ".t+0+0000000000.json.index.json")
    't+0+0000000000.json.zst'
    """
    if not is_sidecar(key):
        return key
    try:
        index = BlockIndex.from_json(store.get(key), source=store.url(key))
    except ObjectNotFoundError:
        return data_key_for(key)
    return data_key_for(key, index.block_codec.suffix)


@dataclass
class VerifyReport:
    """What :meth:`IndexedReader.verify` found: counts, and one line per problem."""

    blocks: int = 0
    records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class IndexedReader:
    """A block-GZIP object (or an Avro container file) and its index, opened for random
    access by Kafka offset."""

    def __init__(self, ranges: ByteRanges, index: BlockIndex):
        self.ranges = ranges
        self.index = index

    @classmethod
    def open_file(
        cls,
        path: str | os.PathLike[str],
        index: BlockIndex | None = None,
        *,
        check_size: bool = True,
    ) -> IndexedReader:
        """A local data file (or its ``.index.json``); the sidecar is read from beside it."""
        from blockgz.store.local import LocalStore

        data = Path(path)
        data = data.with_name(resolve_data_key(LocalStore(data.parent), data.name))
        ranges = FileRanges(data)
        try:
            if index is None:
                index = load_index(LocalStore(data.parent), data.name)
            if check_size:
                index.check_object_size(ranges.size(), name=ranges.source)
        except BaseException:
            ranges.close()
            raise
        return cls(ranges, index)

    @classmethod
    def open_object(
        cls, store: ObjectStore, key: str, index: BlockIndex | None = None
    ) -> IndexedReader:
        """An object in ``store`` (``key`` may name its ``.index.json``)."""
        key = resolve_data_key(store, key)
        return cls(StoreRanges(store, key), index or load_index(store, key))

    @property
    def source(self) -> str:
        return self.ranges.source

    # -- blocks -------------------------------------------------------------------------------
    def read_raw(self, block: int) -> bytes:
        """The compressed bytes of one block, exactly as stored: one range read."""
        chunk = self.index.chunks[block]
        return self.ranges.read(chunk.byte_offset, chunk.byte_end)

    def read_block(self, block: int) -> bytes | bytearray:
        """The uncompressed bytes of one block, checked against the index (for Avro: the
        binary-encoded records)."""
        chunk, avro = self.index.chunks[block], self.index.avro
        if avro is not None:
            return avro_block_bytes(
                self.read_raw(block), chunk, avro, block=block, source=self.source
            )
        return inflate_chunk(
            self.read_raw(block),
            chunk,
            block=block,
            source=self.source,
            codec=self.index.block_codec,
        )

    def block_records(self, block: int, start: int = 0, stop: int | None = None) -> list[Record]:
        """Records ``[start:stop]`` of one block (all of them by default): one range read."""
        read = BlockRead(block, self.index.chunks[block], start, stop)
        return block_records(self.read_raw(block), read, self.index, source=self.source)

    def read_blocks(
        self,
        reads: list[BlockRead],
        *,
        first_alone: bool = False,
        gap: int = DEFAULT_GAP,
        limit: int | None = DEFAULT_SPAN_BYTES,
    ) -> Iterator[list[Record]]:
        """The records of each planned block (:func:`~blockgz.blocks.plan.plan_blocks`), in
        order; neighbouring blocks are fetched with one range read
        (:func:`~blockgz.blocks.plan.merge_ranges`), as the caller iterates."""
        spans = merge_ranges(reads, gap=gap, limit=limit, first_alone=first_alone)
        for read, raw in fetched(self.ranges.read, spans):
            yield block_records(raw, read, self.index, source=self.source)

    def read_span(self, span: Span) -> list[list[Record]]:
        """The records of each block of ``span`` (from :func:`~blockgz.blocks.plan.merge_ranges`):
        one range read."""
        return [
            block_records(raw, read, self.index, source=self.source)
            for read, raw in fetched(self.ranges.read, [span])
        ]

    def read_span_columns(self, span: Span) -> list[tuple[list[int], list[Any]]]:
        """:meth:`read_span` as ``(offsets, values)`` columns for each block."""
        return [
            block_columns(raw, read, self.index, source=self.source)
            for read, raw in fetched(self.ranges.read, [span])
        ]

    # -- records ------------------------------------------------------------------------------
    def seek(self, offset: int, count: int | None = None) -> Iterator[Record]:
        """Records from ``offset`` on (the next existing one if it was compacted away).

        The blocks that hold ``count`` records are read with as few range reads as they can;
        without ``count`` the first block is read alone (the first record comes after one
        block), the rest in merged ranges as the caller iterates.
        """
        check_seek(self.index, offset, source=self.source)
        reads = plan_blocks(self.index, offset, count)
        return itertools.chain.from_iterable(self.read_blocks(reads, first_alone=count is None))

    def records(self) -> Iterator[Record]:
        """Every record, in order."""
        first = self.index.first_offset
        return iter(()) if first is None else self.seek(first)

    def verify(self, on_block: Callable[[int], None] | None = None) -> VerifyReport:
        """Decompress every block (CRC and size checked by the gzip trailer) and count records.

        An Avro file's header must also match the index (schema, codec, sync marker, length),
        and every block is decoded whole (its count and sync marker checked).
        """
        report = VerifyReport()
        try:
            self.index.check_object_size(self.ranges.size(), name=self.source)
        except IndexMismatchError as exc:
            report.problems.append(str(exc))
        avro = self.index.avro
        if avro is not None:
            try:
                header = read_avro_header(
                    self.ranges.read(0, avro.header_length), source=self.source
                )
                report.problems.extend(
                    f"{self.source}: {problem}" for problem in header_problems(header, avro)
                )
            except BlockGzError as exc:
                report.problems.append(str(exc))
        for block in range(len(self.index.chunks)):
            try:
                report.records += len(self.block_records(block))
            except BlockGzError as exc:
                report.problems.append(str(exc))
            report.blocks += 1
            if on_block is not None:
                on_block(self.index.chunks[block].byte_length)
        return report

    # -- life cycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self.ranges.close()

    def __enter__(self) -> IndexedReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_indexed(target: str | os.PathLike[str], options: Mapping[str, Any] | None = None):
    """Open a block-GZIP object by path or URL (``s3://bucket/key``, ``file://``, a path).

    ``options`` are S3 settings under Confluent's names (``store.url``, ``s3.region``, ...).
    An object whose sidecar names it (``"object"``) is read as that object or not at all: a
    sidecar naming another file, an object of another size (each ranged GET's answer tells)
    or a block with another CRC-32 is an :class:`~blockgz.errors.ArchiveIntegrityError`.
    """
    from urllib.parse import urlparse

    text = os.fspath(target)
    if urlparse(text).scheme == "s3":
        from blockgz.store import split_object_url

        store, key = split_object_url(text, options)
        key = resolve_data_key(store, key)
        obj = IndexedReader.open_object(store, key)
        named = obj.index.object
        if named is not None:  # no manifest at hand: the object its sidecar names is the promise
            _check_named(obj, key, named.key)
            obj.ranges = CommittedRanges(store, key, named.size, obj.index.chunks, said=_SAID)
        return obj
    path = urlparse(text).path if text.startswith("file://") else text
    obj = IndexedReader.open_file(path)  # its size checked against the index
    named = obj.index.object
    if named is not None:
        try:
            _check_named(obj, obj.source, named.key)
        except BaseException:
            obj.close()
            raise
        obj.ranges = BlockCheckedRanges(obj.ranges, obj.index.chunks, _SAID)
    return obj


_SAID = "its sidecar says"


def _check_named(obj: IndexedReader, key: str, named: str) -> None:
    """Raise unless ``key`` (or path) has the file name the sidecar names (a copy of an
    archive may sit under another prefix, so only the name counts)."""
    if named.rsplit("/", 1)[-1] != key.rsplit("/", 1)[-1]:
        raise mismatch(obj.source, "object", key.rsplit("/", 1)[-1], named, _SAID)
