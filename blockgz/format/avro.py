"""Seekable Avro object container files: fastavro writes the blocks, this module indexes them.

An Avro container file is a header (magic, metadata with ``avro.schema`` and ``avro.codec``,
a 16-byte sync marker) followed by blocks: a record count, a byte size, the codec-compressed
records and the sync marker. :class:`AvroBlockWriter` writes a plain, valid container file and
records where each block starts and ends and which Kafka offsets it holds, so that one block
can later be fetched with one ranged read and decoded alone (:func:`avro_block_values`,
given only its bytes and the index's :class:`~blockgz.format.index.AvroBlocks`).

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
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import islice
from types import SimpleNamespace
from typing import Any, Protocol

import fastavro
from fastavro.write import Writer

from blockgz.errors import (
    BadRecordError,
    ConfigError,
    CorruptBlockError,
    CorruptIndexError,
    IndexNotReadyError,
    MissingDependencyError,
    OffsetOrderError,
)
from blockgz.format.index import (
    AVRO_CODECS,
    AVRO_SYNC_SIZE,
    AvroBlocks,
    BlockIndex,
    Chunk,
    deltas_if_gapped,
)
from blockgz.format.writer import DEFAULT_BLOCK_SIZE

__all__ = [
    "AVRO_CODECS",
    "AvroBlockWriter",
    "AvroHeader",
    "avro_block_bytes",
    "avro_block_values",
    "avro_sync_marker",
    "check_avro_codec",
    "read_avro_header",
]

#: Codecs that take a compression level, and the levels they take.
_CODEC_LEVELS = {"deflate": range(0, 10), "zstandard": range(-7, 23)}
#: The container file header, as the Avro specification defines it.
_HEADER_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": AVRO_SYNC_SIZE}},
        ],
    }
)
_MAGIC = b"Obj\x01"


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
    problem = _codec_problem(codec)
    if problem:
        raise MissingDependencyError(f"Avro codec {codec!r}: {problem}")
    return codec


@cache
def _codec_problem(codec: str) -> str:
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
    """The sink as fastavro sees it: counts bytes, so block ends need no ``tell()``."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.position = 0

    def write(self, data: bytes | bytearray) -> None:
        if type(data) is bytearray:  # fastavro may reuse its small scratch buffers
            data = bytes(data)
        self.sink.write(data)
        self.position += len(data)

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
        schema = _parse_schema_text(schema)
        try:
            fastavro.parse_schema(schema)
        except Exception as exc:  # SchemaParseException, UnknownType, and plain TypeErrors
            raise ConfigError(f"not a valid Avro schema: {exc}") from exc
        self._out = _Counting(sink)
        self._writer = Writer(
            self._out,
            schema,
            codec=codec,
            sync_interval=block_size,
            metadata=meta,
            sync_marker=sync_marker,
            compression_level=codec_level,
        )
        self.schema_text: str = self._writer.metadata["avro.schema"]
        self.sync_marker = sync_marker
        self.header_length = self._out.position
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
        return self._uncompressed_done + self._writer.io.tell()

    @property
    def records(self) -> int:
        """Records written so far, the open block's included."""
        return self._records_done + self._writer.block_count

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

    def _refuse(self, offset: int, *, batch: bool = False) -> None:
        if offset < 0:
            raise OffsetOrderError(f"offsets must not be negative, got {offset}")
        what = "in a batch starting at" if batch else "got"
        raise OffsetOrderError(f"offsets must increase: {what} {offset} after {self._last}")

    def _recover(self, exc: Exception, offsets: list[int], before: int) -> None:
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
@lru_cache(maxsize=64)
def _synthetic_header(schema: str, codec: str, sync: bytes) -> bytes:
    """A header fastavro writes for these settings: what one block needs to be read alone."""
    out = io.BytesIO()
    Writer(out, json.loads(schema), codec=codec, sync_marker=sync)
    return out.getvalue()


def _read_block(
    raw: bytes | memoryview, chunk: Chunk, avro: AvroBlocks, block: int, source: str
) -> tuple[Any, str]:
    """The fastavro block of ``raw``, its framing checked against the index; and its name."""
    where = (
        f"{source}: Avro block {block} (offsets {chunk.first_record_offset}-"
        f"{chunk.last_record_offset}, bytes {chunk.byte_offset}-{chunk.byte_end - 1})"
    )

    def corrupt(message: str) -> CorruptBlockError:
        return CorruptBlockError(f"{where}: {message}", block=block, byte_offset=chunk.byte_offset)

    if len(raw) != chunk.byte_length:
        raise corrupt(f"read {len(raw)} bytes, the index promises {chunk.byte_length} (truncated?)")
    if bytes(raw[-AVRO_SYNC_SIZE:]) != avro.sync:
        raise corrupt("it does not end with the index's sync marker (corrupt, or another file)")
    problem = _codec_problem(avro.codec) if avro.codec in AVRO_CODECS else "unknown codec"
    if problem:
        raise MissingDependencyError(f"{where}: Avro codec {avro.codec!r}: {problem}")
    try:
        header = _synthetic_header(avro.schema, avro.codec, avro.sync)
    except Exception as exc:
        raise CorruptIndexError(f"{source}: the index's Avro schema does not parse: {exc}") from exc
    try:
        found = fastavro.block_reader(io.BytesIO(header + bytes(raw)))
        got = next(found, None)
        if got is None or got.size != len(raw):
            raise ValueError("the bytes are not one whole block")
    except Exception as exc:
        raise corrupt(f"not a valid {avro.codec} Avro block ({exc})") from exc
    if got.num_records != chunk.num_records:
        raise corrupt(f"holds {got.num_records} records, the index promises {chunk.num_records}")
    size = got.bytes_.getbuffer().nbytes
    if size != chunk.byte_length_uncompressed:
        raise corrupt(
            f"decompressed to {size} bytes, the index promises {chunk.byte_length_uncompressed}"
        )
    return got, where


def avro_block_slice(
    raw: bytes | memoryview,
    chunk: Chunk,
    avro: AvroBlocks,
    start: int,
    stop: int | None,
    *,
    block: int = 0,
    source: str = "",
) -> list[Any]:
    """Records ``[start:stop]`` of one Avro block, decoding only those.

    Avro records carry no lengths, so the ``start`` records before them are still read, but
    skipped without building them (schema resolution against a record with no fields, in
    fastavro's C code): a seek to the middle of a 1 MiB block costs a quarter of decoding it
    all. The block's framing, record count and size are checked as for a whole read.
    """
    got, where = _read_block(raw, chunk, avro, block, source)
    writer, skipper = _slice_schemas(avro.schema)
    stop = chunk.num_records if stop is None else min(stop, chunk.num_records)
    data = got.bytes_
    data.seek(0)
    read = fastavro.schemaless_reader
    try:
        for _ in range(min(start, stop)):
            read(data, writer, skipper)
        return [read(data, writer, None) for _ in range(max(0, stop - start))]
    except Exception as exc:
        raise CorruptBlockError(
            f"{where}: a record does not decode ({type(exc).__name__}: {exc})",
            block=block,
            byte_offset=chunk.byte_offset,
        ) from exc


@lru_cache(maxsize=64)
def _slice_schemas(schema: str) -> tuple[Any, Any]:
    """The parsed writer schema, and a reader schema that skips a whole record (``None``
    when the schema is not a named record: such values are cheap to read anyway)."""
    doc = json.loads(schema)
    writer = fastavro.parse_schema(doc)
    if not (isinstance(doc, dict) and doc.get("type") == "record"):
        return writer, None
    skip = {"type": "record", "name": doc["name"], "fields": []}
    if doc.get("namespace"):
        skip["namespace"] = doc["namespace"]
    return writer, fastavro.parse_schema(skip)


def avro_block_bytes(
    raw: bytes | memoryview, chunk: Chunk, avro: AvroBlocks, *, block: int = 0, source: str = ""
) -> bytes:
    """The uncompressed (binary-encoded) records of one Avro block, checked against the index."""
    got, _ = _read_block(raw, chunk, avro, block, source)
    return got.bytes_.getvalue()


def avro_block_values(
    raw: bytes | memoryview, chunk: Chunk, avro: AvroBlocks, *, block: int = 0, source: str = ""
) -> list[Any]:
    """Every record of one Avro block, decoded, from only its bytes and the index's Avro facts.

    The block must end with the index's sync marker and hold the records and bytes the index
    promises (else :class:`CorruptBlockError` naming the block).
    """
    got, where = _read_block(raw, chunk, avro, block, source)
    try:
        values = list(got)
    except Exception as exc:
        raise CorruptBlockError(
            f"{where}: a record does not decode ({type(exc).__name__}: {exc})",
            block=block,
            byte_offset=chunk.byte_offset,
        ) from exc
    if got.bytes_.tell() != chunk.byte_length_uncompressed:
        raise CorruptBlockError(
            f"{where}: its {chunk.num_records} records end at byte {got.bytes_.tell()} of "
            f"{chunk.byte_length_uncompressed}",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    return values


@dataclass(frozen=True)
class AvroHeader:
    """A container file's header: ``schema`` (JSON text), ``codec``, ``sync``, ``metadata``
    (every entry, as text) and ``length`` (where the first block starts)."""

    schema: str
    codec: str
    sync: bytes
    metadata: dict[str, str]
    length: int


def read_avro_header(data: bytes, *, source: str = "") -> AvroHeader:
    """Parse the header at the start of ``data`` (which may go on into the blocks).

    >>> out = io.BytesIO()
    >>> fastavro.writer(out, "long", [1], sync_marker=bytes(16))
    >>> header = read_avro_header(out.getvalue())
    >>> header.schema, header.codec, header.sync == bytes(16)
    ('"long"', 'null', True)
    """
    fo = io.BytesIO(data)
    try:
        raw = fastavro.schemaless_reader(fo, _HEADER_SCHEMA)
        meta = {key: value.decode() for key, value in raw["meta"].items()}
    except Exception as exc:
        raise CorruptBlockError(f"{source}: not an Avro header ({exc})", byte_offset=0) from exc
    if raw["magic"] != _MAGIC or "avro.schema" not in meta:
        raise CorruptBlockError(
            f"{source}: not an Avro container file (no Obj\\x01 header with a schema)",
            byte_offset=0,
        )
    return AvroHeader(
        schema=meta["avro.schema"],
        codec=meta.get("avro.codec", "null"),
        sync=raw["sync"],
        metadata=meta,
        length=fo.tell(),
    )


def header_problems(header: AvroHeader, avro: AvroBlocks) -> list[str]:
    """How a file's header disagrees with its index's Avro section (nothing when it agrees)."""
    problems = []
    if header.length != avro.header_length:
        problems.append(f"header is {header.length} bytes, the index says {avro.header_length}")
    if header.schema != avro.schema:
        problems.append("header's writer schema differs from the index's")
    if header.codec != avro.codec:
        problems.append(f"header's codec is {header.codec!r}, the index says {avro.codec!r}")
    if header.sync != avro.sync:
        problems.append("header's sync marker differs from the index's")
    return problems
