"""Turn the compressed bytes of one indexed block back into records, checking everything.

Shared by every reader: they plan the blocks a read needs and fetch their byte ranges
(:mod:`blockgz.blocks.plan`), then call :func:`block_records` (:func:`chunk_records`, or for
an Avro file's block :func:`avro_chunk_records`).

    >>> from blockgz.blocks.codecs.gzip_members import Compression
    >>> from blockgz.blocks.index import BlockIndex, Chunk
    >>> raw = Compression().compress(b"a\\nb\\n")
    >>> chunk_records(raw, Chunk(7, 2, 0, len(raw), 4))
    [Record(offset=7, value=b'a'), Record(offset=8, value=b'b')]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from blockgz.blocks.avro.block_index import AvroBlocks
from blockgz.blocks.avro.block_read import avro_block_slice, avro_block_values
from blockgz.blocks.codecs.families import GZIP, BlockCodec
from blockgz.blocks.framing import NEWLINE, Framing
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import BlockRead
from blockgz.errors import CorruptBlockError, OffsetNotFoundError

#: Everything a record has beside its value.
ALL_KEPT = frozenset({"key", "headers", "timestamp"})


class Record(NamedTuple):
    """One record read back: its Kafka offset and its value — a 2-tuple, so ``offset, value =
    record`` works — and, where the archive kept them (``format.json.envelope``, the
    ``.keys``/``.headers``/``.timestamps`` files), its ``key``, ``headers``, ``timestamp``
    (epoch milliseconds) and ``timestamp_type``; ``None`` where it did not (:attr:`holds`
    says which it kept).

    ``value`` is the record's bytes for a block-GZIP object, and the decoded datum (a
    ``dict`` for an Avro record schema, logical types as fastavro returns them) for an Avro one.

    >>> Record(7, b"v")
    Record(offset=7, value=b'v')
    >>> kept = Record.kept(7, b"v", key=b"k", timestamp=1000)
    >>> kept.key, kept.headers, kept == (7, b"v")
    (b'k', None, True)
    """

    offset: int
    value: Any

    # Not tuple fields: a plain record has no key, headers or timestamp. Declared as
    # properties for type checkers (a NamedTuple body's assignments are fields to them) and
    # replaced by plain class attributes below the class, so a kept record's own values (in
    # its __dict__) win over them, as a property would not let them.
    @property
    def key(self) -> bytes | None:
        """The record's key, where kept."""
        return None

    @property
    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """The record's headers, where kept."""
        return None

    @property
    def timestamp(self) -> int | None:
        """The record's timestamp (epoch milliseconds), where kept."""
        return None

    @property
    def timestamp_type(self) -> int | None:
        """Kafka's timestamp type id (``0`` CreateTime, ``1`` LogAppendTime), where kept."""
        return None

    @property
    def holds(self) -> frozenset[str]:
        """What the archive kept beside the value (``key``, ``headers``, ``timestamp``): a
        ``None`` of a field not in it means "not kept", not "null in Kafka"."""
        return frozenset()

    @staticmethod
    def kept(
        offset: int,
        value: Any,
        *,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        timestamp_type: int | None = None,
        holds: frozenset[str] = ALL_KEPT,
    ) -> Record:
        """A record with the key, headers and timestamp the archive kept (``holds``: which
        of them it kept; all three by default, as an envelope does)."""
        # tuple.__new__ directly: the NamedTuple's __new__ is one more Python call, per record
        record = _tuple_new(_KeptRecord, (offset, value))
        record.__dict__.update(
            key=key,
            headers=headers,
            timestamp=timestamp,
            timestamp_type=timestamp_type,
            holds=holds,
        )
        return record

    def with_value(self, value: Any) -> Record:
        """The same record (offset, and what the archive kept beside the value) with ``value``.

        >>> Record.kept(7, b"null", key=b"k").with_value(None)
        Record(offset=7, value=None, key=b'k')
        """
        return Record.kept(
            self.offset,
            value,
            key=self.key,
            headers=self.headers,
            timestamp=self.timestamp,
            timestamp_type=self.timestamp_type,
            holds=self.holds,
        )


#: The plain class attributes that replace Record's properties (see its class body).
_NOT_KEPT: dict[str, Any] = dict.fromkeys(("key", "headers", "timestamp", "timestamp_type"))
_NOT_KEPT["holds"] = frozenset()
for _name, _absent in _NOT_KEPT.items():
    setattr(Record, _name, _absent)
_tuple_new = tuple.__new__


class _KeptRecord(Record):
    """A :class:`Record` that carries its key, headers and timestamp (in ``__dict__``)."""

    def __repr__(self) -> str:
        kept = "".join(
            f", {name}={getattr(self, name)!r}"
            for name in ("key", "headers", "timestamp", "timestamp_type")
            if getattr(self, name) is not None
        )
        return f"Record(offset={self.offset!r}, value={self.value!r}{kept})"


def utf16_units(data: bytes | bytearray | memoryview) -> int:
    """How many UTF-16 code units (Java ``char``) the UTF-8 text ``data`` decodes to.

    Every character is one unit except those beyond U+FFFF (4-byte UTF-8), which are two.

    >>> utf16_units("a\\u00e9\\u20ac\\U0001f600\\n".encode())
    6
    """
    octets = np.frombuffer(data, np.uint8)
    continuation = np.count_nonzero((octets & 0xC0) == 0x80)
    return len(octets) - int(continuation) + int(np.count_nonzero(octets >= 0xF0))


def inflate_chunk(
    raw: bytes | memoryview,
    chunk: Chunk,
    *,
    block: int = 0,
    source: str = "",
    codec: BlockCodec = GZIP,
) -> bytes | bytearray:
    """Decompress a chunk's bytes with ``codec`` (the index's :attr:`BlockIndex.block_codec`,
    gzip by default) and check their size against the index.

    A DeviantArt chunk (``chunk.utf16_length``) counts its size in UTF-16 code units, as Java's
    ``String.length()`` does, so there the decoded text's UTF-16 length must match instead.

    >>> from blockgz.blocks.codecs.gzip_members import Compression
    >>> raw = Compression().compress("\\u00e9t\\u00e9\\n".encode())
    >>> inflate_chunk(raw, Chunk(0, 1, 0, len(raw), 4, utf16_length=True)).decode()
    'été\\n'
    """
    offsets = (
        f"offsets {chunk.first_record_offset}-{chunk.last_record_offset}"
        if chunk.num_records
        else f"no records, at offset {chunk.first_record_offset}"
    )
    where = f"{source}: block {block} ({offsets}, bytes {chunk.byte_offset}-{chunk.byte_end - 1})"
    if len(raw) != chunk.byte_length:
        raise CorruptBlockError(
            f"{where}: read {len(raw)} bytes, the index promises {chunk.byte_length} (truncated?)",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    try:
        data = codec.decompress(raw, chunk.members)
    except CorruptBlockError as exc:
        raise CorruptBlockError(
            f"{where}: {exc}", block=block, byte_offset=chunk.byte_offset
        ) from exc
    expected = chunk.byte_length_uncompressed
    if len(data) != expected and not (chunk.utf16_length and utf16_units(data) == expected):
        unit = f" ({utf16_units(data)} UTF-16 code units)" if chunk.utf16_length else ""
        raise CorruptBlockError(
            f"{where}: decompressed to {len(data)} bytes{unit}, the index promises {expected}",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    return data


def chunk_records(
    raw: bytes | memoryview,
    chunk: Chunk,
    framing: Framing = NEWLINE,
    *,
    block: int = 0,
    source: str = "",
    start: int = 0,
    stop: int | None = None,
    codec: BlockCodec = GZIP,
) -> list[Record]:
    """Records ``[start:stop]`` of one chunk, with offsets; the chunk's count must match."""
    offsets, values = chunk_values(
        raw, chunk, framing, block=block, source=source, start=start, stop=stop, codec=codec
    )
    # tuple.__new__ of each (offset, value) pair: no Python call per record (Record(o, v) is one)
    return [_tuple_new(Record, pair) for pair in zip(offsets, values, strict=True)]


def chunk_values(
    raw: bytes | memoryview,
    chunk: Chunk,
    framing: Framing = NEWLINE,
    *,
    block: int = 0,
    source: str = "",
    start: int = 0,
    stop: int | None = None,
    codec: BlockCodec = GZIP,
) -> tuple[list[int], list[Any]]:
    """:func:`chunk_records` as two columns, ``(offsets, values)``, for code that builds its
    own records (a reader joining the timestamps kept beside them)."""
    data = inflate_chunk(raw, chunk, block=block, source=source, codec=codec)
    values, total = framing.slice(data, start, stop)
    if total != chunk.num_records:
        raise CorruptBlockError(
            f"{source}: block {block} holds {total} records, the index promises "
            f"{chunk.num_records}",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    return chunk.record_offsets()[start : start + len(values)], values


def avro_chunk_records(
    raw: bytes | memoryview,
    chunk: Chunk,
    avro: AvroBlocks,
    *,
    block: int = 0,
    source: str = "",
    start: int = 0,
    stop: int | None = None,
) -> list[Record]:
    """Records ``[start:stop]`` of one Avro block, decoded from its bytes alone (a whole block
    is decoded and checked to its end; a slice skips the records before it undecoded).

    >>> import io
    >>> from blockgz.blocks.avro.container import AvroBlockWriter
    >>> out = io.BytesIO()
    >>> with AvroBlockWriter(out, "string", sync_marker=bytes(16)) as w:
    ...     w.write_many(["a", "b", "c"], [5, 7, 9])
    >>> c = w.index.chunks[0]
    >>> avro_chunk_records(out.getvalue()[c.byte_offset : c.byte_end], c, w.index.avro, start=1)
    [Record(offset=7, value='b'), Record(offset=9, value='c')]
    """
    if start == 0 and stop is None:  # the whole block: decoded, counted and checked to the end
        values = avro_block_values(raw, chunk, avro, block=block, source=source)
    else:
        values = avro_block_slice(raw, chunk, avro, start, stop, block=block, source=source)
    offsets = chunk.record_offsets()[start : start + len(values)]
    # tuple.__new__ of each (offset, value) pair: no Python call per record (Record(o, v) is one)
    return [_tuple_new(Record, pair) for pair in zip(offsets, values, strict=True)]


def block_records(
    raw: bytes | memoryview, read: BlockRead, index: BlockIndex, *, source: str = ""
) -> list[Record]:
    """The records ``read`` asks for, from its block's bytes ``raw``: an Avro block through the
    index's Avro section, any other through the index's framing.

    >>> from blockgz.blocks.codecs.gzip_members import Compression
    >>> raw = Compression().compress(b"a\\nb\\nc\\n")
    >>> chunk = Chunk(7, 3, 0, len(raw), 6)
    >>> block_records(raw, BlockRead(0, chunk, 1, 2), BlockIndex([chunk]))
    [Record(offset=8, value=b'b')]
    """
    chunk, block = read.chunk, read.block
    if index.blocks is not None:  # the object's format decodes its own blocks (Parquet)
        return index.blocks.records(raw, read, source=source)
    if index.avro is not None:
        return avro_chunk_records(
            raw, chunk, index.avro, block=block, source=source, start=read.start, stop=read.stop
        )
    return chunk_records(
        raw,
        chunk,
        index.framing,
        block=block,
        source=source,
        start=read.start,
        stop=read.stop,
        codec=index.block_codec,
    )


def block_columns(
    raw: bytes | memoryview, read: BlockRead, index: BlockIndex, *, source: str = ""
) -> tuple[list[int], list[Any]]:
    """:func:`block_records` as two columns, ``(offsets, values)``.

    >>> from blockgz.blocks.codecs.gzip_members import Compression
    >>> raw = Compression().compress(b"a\\nb\\nc\\n")
    >>> chunk = Chunk(7, 3, 0, len(raw), 6)
    >>> block_columns(raw, BlockRead(0, chunk, 1), BlockIndex([chunk]))
    ([8, 9], [b'b', b'c'])
    """
    if index.blocks is not None or index.avro is not None:
        records = block_records(raw, read, index, source=source)
        return [r.offset for r in records], [r.value for r in records]
    return chunk_values(
        raw,
        read.chunk,
        index.framing,
        block=read.block,
        source=source,
        start=read.start,
        stop=read.stop,
        codec=index.block_codec,
    )


def check_seek(index: BlockIndex, offset: int, *, source: str = "") -> None:
    """Raise :class:`OffsetNotFoundError` naming ``source`` for an offset before the object's
    first or past its last; one compacted away is fine (a seek starts at the next one).

    >>> check_seek(BlockIndex([Chunk(5, 2, 0, 9, 9)]), 3, source="o.gz")
    Traceback (most recent call last):
    ...
    blockgz.errors.OffsetNotFoundError: o.gz: offset 3 is before the first offset 5
    """
    first = index.first_offset
    if first is not None and offset < first:
        raise OffsetNotFoundError(f"{source}: offset {offset} is before the first offset {first}")
    try:
        index.locate(offset)
    except OffsetNotFoundError as exc:
        raise OffsetNotFoundError(f"{source}: {exc}") from exc
