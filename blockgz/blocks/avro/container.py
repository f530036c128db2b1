"""Seekable Avro object container files: fastavro writes the blocks, this module indexes them.

An Avro container file is a header (magic, metadata with ``avro.schema`` and ``avro.codec``,
a 16-byte sync marker) followed by blocks: a record count, a byte size, the codec-compressed
records and the sync marker. :class:`AvroBlockWriter` writes a plain, valid container file and
records where each block starts and ends and which Kafka offsets it holds, so that one block
can later be fetched with one ranged read and decoded alone
(:func:`blockgz.blocks.avro.block_read.avro_block_values`, given only its bytes and the index's
:class:`~blockgz.blocks.index.AvroBlocks`).

    >>> import io
    >>> import fastavro
    >>> schema = {"type": "record", "name": "N", "fields": [{"name": "n", "type": "long"}]}
    >>> out = io.BytesIO()
    >>> with AvroBlockWriter(out, schema, block_size=8, sync_marker=avro_sync_marker("k")) as w:
    ...     w.write_many([{"n": n} for n in range(10)], range(100, 110))
    >>> [c.num_records for c in w.index.chunks]
    [8, 2]
    >>> [r["n"] for r in fastavro.reader(io.BytesIO(out.getvalue()))][-3:]   # plain Avro
    [7, 8, 9]
    >>> from blockgz.blocks.avro.block_read import avro_block_values
    >>> c = w.index.chunks[1]
    >>> avro_block_values(out.getvalue()[c.byte_offset : c.byte_end], c, w.index.avro)
    [{'n': 8}, {'n': 9}]
"""

from __future__ import annotations

import hashlib
import io
import json
import operator
from collections import deque
from collections.abc import Mapping, Sequence
from functools import cache
from itertools import islice
from types import SimpleNamespace
from typing import Any, Protocol

import fastavro
import numpy as np
from fastavro.write import Writer

from blockgz.blocks.avro.block_index import AVRO_CODECS, AVRO_SYNC_SIZE, AvroBlocks
from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.index import BlockIndex, Chunk, deltas_if_gapped
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.errors import (
    BadRecordError,
    ConfigError,
    IndexNotReadyError,
    MissingDependencyError,
    OffsetOrderError,
)

__all__ = [
    "AVRO_CODECS",
    "AvroBlockWriter",
    "avro_sync_marker",
    "check_avro_codec",
]

#: Codecs that take a compression level, and the levels they take.
_CODEC_LEVELS = {"deflate": range(0, 10), "zstandard": range(-7, 23)}


class Sink(Protocol):
    def write(self, data: bytes, /) -> Any: ...


def avro_sync_marker(key: str) -> bytes:
    """The 16-byte sync marker of the object ``key``: its MD5, so a rewrite is byte-identical.

    >>> avro_sync_marker("t+0+0000000000.avro").hex()
    'c17d2fc55f9eebf7285287f91f72760b'
    """
    return hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()


def check_avro_codec(codec: str) -> str:
    """``codec`` if fastavro can write and read it here; else :class:`ConfigError` (unknown)
    or :class:`MissingDependencyError` (its library is not installed).

    >>> check_avro_codec("lz4")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: Avro codec 'lz4' is not known; allowed: null, deflate, ...
    """
    if codec not in AVRO_CODECS:
        raise ConfigError(f"Avro codec {codec!r} is not known; allowed: {', '.join(AVRO_CODECS)}")
    problem = avro_codec_problem(codec)
    if problem:
        raise MissingDependencyError(f"Avro codec {codec!r}: {problem}")
    return codec


@cache
def avro_codec_problem(codec: str) -> str:
    """Why fastavro cannot use ``codec`` here ('' when it can): it says so on its first block."""
    try:
        fastavro.writer(io.BytesIO(), "null", [None], codec=codec)
    except ValueError as exc:  # fastavro: "... you need to install one of the following ..."
        return str(exc)
    return ""


def _parse_schema_text(schema: Mapping[str, Any] | Sequence[Any] | str) -> Any:
    """A schema given as JSON text becomes its object; a bare type name (``"long"``) stays."""
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"'):
        try:
            return json.loads(schema)
        except ValueError as exc:
            raise ConfigError(f"Avro schema is not valid JSON: {exc}") from exc
    return schema


class _Counting:
    """The sink as fastavro sees it: counts bytes, so block ends need no ``tell()``, and keeps
    the CRC-32 of what was written since the last block ended (:attr:`block_end`): the next
    block's checksum, as it is written (fastavro writes its count before the block callback)."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.position = 0
        self.crc = 0
        self.block_end = -1

    def write(self, data: bytes | bytearray) -> None:
        if isinstance(data, bytearray):  # fastavro may reuse its small scratch buffers
            data = bytes(data)
        self.sink.write(data)
        self.position += len(data)
        self.crc = 0 if self.position == self.block_end else block_crc32(data, self.crc)

    def seekable(self) -> bool:  # fastavro appends to a seekable non-empty file: never here
        return False

    def flush(self) -> None:
        """Nothing: the sink is flushed by its owner."""


class AvroBlockWriter:
    """Write records as an Avro container file to ``sink`` and index its blocks.

    ``write(datum, offset)`` appends one record (a Python object matching ``schema``, logical
    types as fastavro takes them) with its Kafka ``offset``; offsets must increase, gaps are
    recorded exactly. ``write_many(data, offsets)`` is the fast path: every record is encoded
    by fastavro's C code with no Python step in between. A block is cut once its uncompressed
    bytes reach ``block_size`` (so a record larger than that gets a block of its own), or
    when it holds ``max_records``. ``sync_marker`` is the file's 16-byte sync marker (see
    :func:`avro_sync_marker`); ``metadata`` adds header entries (``avro.*`` is reserved).
    :meth:`close` flushes the last block and returns the :class:`BlockIndex`.

    fastavro's ``Writer`` does all the encoding and framing; what this class relies on (its
    Cython ``Writer``, the one fastavro's wheels ship): the header is written to ``fo`` by
    the constructor; ``write()`` appends a record to an in-memory buffer, counts it in
    ``block_count`` and calls ``dump()`` once the buffer reaches ``sync_interval`` bytes;
    ``dump()`` writes the count, then calls ``block_writer(fo, uncompressed, level)`` (which
    writes the size and compressed bytes), then writes the sync marker; ``write_block()``
    frames an already-encoded block the same way; ``io.tell()``, ``io.getvalue()`` and
    ``io.clear()`` show and drop the open block. Wrapping ``block_writer`` tells us each
    block's record count and uncompressed size; counting the bytes that reach ``fo`` tells
    us where it ends. So no block framing is written here, and nothing is done per record
    but fastavro's ``write``.
    """

    def __init__(
        self,
        sink: Sink,
        schema: Mapping[str, Any] | Sequence[Any] | str,
        *,
        codec: str = "null",
        codec_level: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_records: int | None = None,
        sync_marker: bytes,
        metadata: Mapping[str, str] | None = None,
        schema_id: int | None = None,
    ):
        check_avro_codec(codec)
        if codec_level is not None and codec_level not in _CODEC_LEVELS.get(codec, ()):
            allowed = _CODEC_LEVELS.get(codec)
            raise ConfigError(
                f"Avro codec {codec!r} takes no compression level, got {codec_level}"
                if allowed is None
                else f"Avro codec {codec!r} level {codec_level} is out of range; "
                f"allowed: {allowed.start}..{allowed.stop - 1}"
            )
        if block_size < 1:
            raise ConfigError(f"block size must be at least 1 byte, got {block_size}")
        if max_records is not None and not 1 <= max_records < 2**31:
            raise ConfigError(f"max records per block must be 1..2**31-1, got {max_records}")
        if not isinstance(sync_marker, bytes) or len(sync_marker) != AVRO_SYNC_SIZE:
            raise ConfigError(f"an Avro sync marker is {AVRO_SYNC_SIZE} bytes, got {sync_marker!r}")
        meta = dict(metadata or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise ConfigError("Avro metadata keys and values must be text")
        reserved = sorted(k for k in meta if k.startswith("avro."))
        if reserved:
            raise ConfigError(f"Avro metadata keys {reserved} are reserved (avro.*)")
        if schema_id is not None and schema_id < 0:
            raise ConfigError(f"schema id must not be negative, got {schema_id}")
        self.codec, self.codec_level = codec, codec_level
        self.block_size, self.max_records, self.schema_id = block_size, max_records, schema_id
        parsed = _parse_schema_text(schema)
        try:
            fastavro.parse_schema(parsed)
        except Exception as exc:  # SchemaParseException, UnknownType, and plain TypeErrors
            raise ConfigError(f"not a valid Avro schema: {exc}") from exc
        self._out = _Counting(sink)
        # Any: the Writer internals used below (io, block_count, block_writer, dump) are
        # fastavro's Cython writer's, not in its stubs (which type io as a BinaryEncoder).
        self._writer: Any = Writer(
            self._out,  # type: ignore[arg-type]  # any object with write(); stubs ask for IO
            parsed,
            codec=codec,
            sync_interval=block_size,
            metadata=meta,
            sync_marker=sync_marker,
            compression_level=codec_level,
        )
        self.schema_text: str = self._writer.metadata["avro.schema"]
        self.sync_marker = sync_marker
        self.header_length = self._out.position
        self._out.crc = 0  # the first block starts here
        self._compress_block = self._writer.block_writer
        self._writer.block_writer = self._block_written
        self._chunks: list[Chunk] = []
        self._block_start = self.header_length
        self._records_done = 0  # records in blocks already written
        self._uncompressed_done = 0
        self._offsets: list[int] = []  # offsets of records not yet in a written block...
        self._cursor = 0  # ...from here on
        self._last = -1
        self._count_override: int | None = None  # the count of a block write_block frames
        # Records given already encoded (write_encoded), not yet in a block. At most one of
        # this and fastavro's open block holds records at any time.
        self._raw: list[bytes] = []
        self._raw_bytes = 0
        self._raw_count = 0
        self._in_block = False  # a block is being written to the sink
        self._index: BlockIndex | None = None

    # -- facts callers rotate files by ------------------------------------------------------
    @property
    def bytes_written(self) -> int:
        """Bytes handed to the sink so far: the header and every finished block."""
        return self._out.position

    @property
    def uncompressed_size(self) -> int:
        """Encoded (uncompressed) bytes of every record written, the open block's included."""
        return self._uncompressed_done + self._writer.io.tell() + self._raw_bytes

    @property
    def records(self) -> int:
        """Records written so far, the open block's included."""
        return self._records_done + self._writer.block_count + self._raw_count

    @property
    def index(self) -> BlockIndex:
        if self._index is None:
            raise IndexNotReadyError("the index exists once the writer is closed")
        return self._index

    # -- writing ----------------------------------------------------------------------------
    def write(self, datum: Any, offset: int) -> None:
        """Append one record holding Kafka ``offset`` (greater than the previous one).

        A datum that does not match the schema raises :class:`BadRecordError`; the records
        before it stay written and the writer can go on.
        """
        if offset <= self._last:
            self._refuse(offset)
        if self._raw_count:  # encoded records are open: this one joins them, encoded alike
            self._write_one_encoded(datum, offset)
            return
        self._offsets.append(offset)
        writer = self._writer
        try:
            writer.write(datum)
        except Exception as exc:
            self._recover(exc, [offset], self.records)
        self._last = offset
        if writer.block_count == self.max_records:
            writer.dump()

    def write_many(self, data: Sequence[Any], offsets: Sequence[int]) -> None:
        """Append ``data[i]`` holding ``offsets[i]`` for every ``i``: the fast path.

        Blocks are cut exactly where :meth:`write` would cut them. A datum that does not
        match the schema raises :class:`BadRecordError` naming its offset; the ones before it
        are written, the ones after it are not.
        """
        if hasattr(offsets, "tolist"):  # a numpy array
            offsets = offsets.tolist()
        elif not isinstance(offsets, list):
            offsets = list(offsets)
        if len(data) != len(offsets):
            raise ConfigError(f"write_many: {len(data)} records but {len(offsets)} offsets")
        if not offsets:
            return
        if offsets[0] <= self._last or not all(map(operator.lt, offsets, offsets[1:])):
            self._refuse(offsets[0], batch=True)
        if self._raw_count:
            for datum, offset in zip(data, offsets, strict=True):
                self._write_one_encoded(datum, offset)
            return
        before = self.records
        self._offsets.extend(offsets)
        writer, most = self._writer, self.max_records
        try:
            if most is None:
                deque(map(writer.write, data), maxlen=0)  # no Python step per record
            else:
                records, remaining = iter(data), len(offsets)
                while remaining:
                    room = min(most - writer.block_count, remaining)
                    deque(map(writer.write, islice(records, room)), maxlen=0)
                    remaining -= room
                    if writer.block_count == most:
                        writer.dump()
        except Exception as exc:
            self._recover(exc, offsets, before)
        self._last = offsets[-1]

    def write_encoded(self, data: Any, ends: Any, offsets: Any) -> None:
        """Append records already encoded in this file's schema: record ``i`` is
        ``data[ends[i-1]:ends[i]]`` (``data`` bytes-like, e.g. a numpy ``uint8`` array) and
        holds ``offsets[i]``. Blocks are cut exactly where :meth:`write` would cut them; the
        bytes are trusted to match the schema (see :mod:`blockgz.formats.arrow_entries`).
        """
        offsets = offsets.tolist() if hasattr(offsets, "tolist") else list(offsets)
        count = len(offsets)
        if len(ends) != count:
            raise ConfigError(f"write_encoded: {len(ends)} records but {count} offsets")
        if not count:
            return
        if offsets[0] <= self._last or not all(map(operator.lt, offsets, offsets[1:])):
            self._refuse(offsets[0], batch=True)
        writer = self._writer
        if writer.block_count:  # fastavro's open block continues as encoded records
            self._raw, self._raw_bytes = [writer.io.getvalue()], writer.io.tell()
            self._raw_count, writer.block_count = writer.block_count, 0
            writer.io.clear()
        self._offsets.extend(offsets)
        self._last = offsets[-1]
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        ends = np.asarray(ends, np.int64)
        start = 0
        while start < count:
            base = int(ends[start - 1]) if start else 0
            # fastavro cuts a block after the record that brings it to block_size bytes
            cut = int(np.searchsorted(ends, base + self.block_size - self._raw_bytes, "left"))
            if self.max_records is not None:
                cut = min(cut, start + self.max_records - self._raw_count - 1)
            stop = min(cut + 1, count)
            self._raw.append(bytes(view[base : int(ends[stop - 1])]))
            self._raw_bytes += int(ends[stop - 1]) - base
            self._raw_count += stop - start
            if cut < count:
                self._write_raw_block()
            start = stop

    def _write_one_encoded(self, datum: Any, offset: int) -> None:
        """One record into the encoded records (a record path call amid batch-path ones)."""
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._writer.schema, datum)
        except Exception as exc:
            raise BadRecordError(
                f"offset {offset}: the value does not match the Avro schema: {exc}", offset=offset
            ) from exc
        encoded = out.getvalue()
        self.write_encoded(encoded, [len(encoded)], [offset])

    def _write_raw_block(self) -> None:
        """Frame the encoded records as one block (fastavro compresses and frames it)."""
        block = SimpleNamespace(num_records=self._raw_count, bytes_=io.BytesIO(b"".join(self._raw)))
        self._count_override = self._raw_count
        try:
            self._writer.write_block(block)
        finally:
            self._count_override = None
        self._raw, self._raw_bytes, self._raw_count = [], 0, 0

    def _refuse(self, offset: int, *, batch: bool = False) -> None:
        if offset < 0:
            raise OffsetOrderError(f"offsets must not be negative, got {offset}")
        what = "in a batch starting at" if batch else "got"
        raise OffsetOrderError(f"offsets must increase: {what} {offset} after {self._last}")

    def _recover(self, exc: Exception, offsets: Sequence[int], before: int) -> None:
        """A record failed to encode: drop its partial bytes and the offsets from it on."""
        if self._in_block:
            raise exc  # the sink failed while a block was written: the object is lost
        done = self.records - before  # records of this call that were encoded
        bad = offsets[done]
        del self._offsets[self._cursor + self._writer.block_count :]
        self._drop_partial_record()
        if done:
            self._last = offsets[done - 1]
        raise BadRecordError(
            f"offset {bad}: the value does not match the Avro schema: {exc}", offset=bad
        ) from exc

    def _drop_partial_record(self) -> None:
        """Cut the open block after its last whole record (fastavro has no undo)."""
        writer = self._writer
        whole, buffered = writer.block_count, writer.io.getvalue()
        reader = io.BytesIO(buffered)
        for _ in range(whole):
            fastavro.schemaless_reader(reader, writer.schema)
        writer.io.clear()
        writer.block_count = 0
        if whole:
            block = SimpleNamespace(num_records=whole, bytes_=io.BytesIO(buffered[: reader.tell()]))
            self._count_override = whole
            writer.write_block(block)
            self._count_override = None

    # -- one block written by fastavro ------------------------------------------------------
    def _block_written(self, fo: Any, uncompressed: bytes, level: int | None) -> None:
        count = self._count_override or self._writer.block_count
        self._in_block = True  # a failure from here on is the sink's, not a record's
        self._compress_block(fo, uncompressed, level)
        end = self._out.position + AVRO_SYNC_SIZE  # fastavro writes the sync marker next
        crc = block_crc32(self.sync_marker, self._out.crc)  # the block as stored, marker too
        self._out.block_end = end  # the next block's checksum starts after the marker
        cursor = self._cursor
        offsets = self._offsets[cursor : cursor + count]
        self._chunks.append(
            Chunk(
                offsets[0],
                count,
                self._block_start,
                end - self._block_start,
                len(uncompressed),
                deltas_if_gapped(offsets),
                crc32=crc,
            )
        )
        self._block_start = end
        self._records_done += count
        self._uncompressed_done += len(uncompressed)
        cursor += count
        if cursor > 4096 and cursor * 2 > len(self._offsets):
            del self._offsets[:cursor]
            cursor = 0
        self._cursor = cursor
        self._in_block = False

    # -- finishing --------------------------------------------------------------------------
    def close(self) -> BlockIndex:
        """Write the open block and return the index. Calling it twice returns the same index."""
        if self._index is not None:
            return self._index
        if self._writer.block_count:
            self._writer.dump()
        if self._raw_count:
            self._write_raw_block()
        self._index = BlockIndex(
            self._chunks,
            codec=self.codec,
            level=self.codec_level,
            block_size=self.block_size,
            avro=AvroBlocks(
                self.schema_text, self.codec, self.sync_marker, self.header_length, self.schema_id
            ),
        )
        return self._index

    def abort(self) -> None:
        """Drop the open block (the sink's upload is aborted by its owner)."""
        self._chunks.clear()

    def __enter__(self) -> AvroBlockWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()


# -- reading ----------------------------------------------------------------------------------
