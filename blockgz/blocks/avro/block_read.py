"""Reading seekable Avro: one block decoded from its bytes alone, and a container's header.

:class:`~blockgz.blocks.avro.container.AvroBlockWriter` writes the blocks and their index; this
module
reads them back: a block's framing checked against the index (:func:`avro_block_values`,
:func:`avro_block_slice`, :func:`avro_block_bytes`) and the file header checked against the
index (:func:`read_avro_header`, :func:`header_problems`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import fastavro
from fastavro.write import Writer

from blockgz.blocks.avro.block_index import AVRO_CODECS, AVRO_SYNC_SIZE, AvroBlocks
from blockgz.blocks.avro.container import avro_codec_problem
from blockgz.blocks.index import Chunk
from blockgz.errors import CorruptBlockError, CorruptIndexError, MissingDependencyError

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
    problem = avro_codec_problem(avro.codec) if avro.codec in AVRO_CODECS else "unknown codec"
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
    # bytes_ (a BytesIO of the decompressed block) is set by Block.__init__; fastavro's stub
    # of Block leaves it out.
    size = got.bytes_.getbuffer().nbytes  # type: ignore[attr-defined]
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
        # The header schema is a record: fastavro reads it as a dict.
        raw = cast(dict[str, Any], fastavro.schemaless_reader(fo, _HEADER_SCHEMA))
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
