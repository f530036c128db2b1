"""The ``.index.json`` sidecar: where each block starts, how long it is, which offsets it holds.

The chunk keys are the DeviantArt ``kafka-connect-s3`` ones, so their indexes still
load. blockgz adds a format name and version, the framing, totals, and — only for a
chunk whose offsets are not contiguous — ``offset_deltas`` (the gaps between
consecutive offsets), which keeps the index exact under compaction or interleaving
and compact otherwise. A chunk whose records all came with a Kafka timestamp also says
``min_timestamp`` and ``max_timestamp`` (epoch ms), so a time window skips the blocks outside
it; readers that predate the keys ignore them, so the version stays 1. A chunk may also say
``crc32``: the CRC-32 of the block's bytes as stored (:mod:`blockgz.blocks.checksum`; an Avro
chunk too), which ``blockgz audit --deep`` checks without decompressing; an index without it
(older writers, DeviantArt's) is checked by decoding each block (a gzip member's trailer holds
a CRC of its own).

    >>> idx = BlockIndex([Chunk(0, 3, 0, 40, 12)])
    >>> BlockIndex.from_json(idx.to_json()).locate(2)
    0

An Avro object container file is indexed the same way: each chunk is one Avro block (its
count, size, data and sync marker), and an ``avro`` section holds what decoding one block alone
needs (the writer schema, codec and sync marker) and where the blocks start (``header_length``).
Such an index says ``"version": 2`` and ``"framing": {"kind": "avro"}``, so a blockgz that
predates Avro refuses it instead of gunzipping Avro blocks.

    >>> avro = AvroBlocks('"long"', "null", bytes(16), header_length=60)
    >>> idx = BlockIndex([Chunk(7, 2, 60, 20, 2)], avro=avro)
    >>> loaded = BlockIndex.from_json(idx.to_json())
    >>> loaded.avro.codec, loaded.byte_length
    ('null', 80)

An index without ``version`` is one written by DeviantArt's Java connector, and two of its
habits are accepted only there (a versioned blockgz index stays strict):

* a chunk may have ``num_records: 0``. Their writer closes the current gzip member before a
  record that would push it past the block size; when that is the file's *first* record, the
  member it closes is empty, so the chunk is a complete, empty gzip member (about 20 bytes,
  ``byte_length_uncompressed`` 0) with the same ``first_record_offset`` as the next chunk. It
  holds no part of any record: :meth:`BlockIndex.locate` never returns it, and reading it
  yields no records.
* ``byte_length_uncompressed`` counts UTF-16 code units (Java's ``String.length()`` of each
  record plus one for the newline), not bytes, so such chunks say ``utf16_length`` and
  :func:`blockgz.blocks.decode.inflate_chunk` compares the block's UTF-16 length instead.

    >>> legacy = BlockIndex.from_json(
    ...     '{"chunks": [{"first_record_offset": 5, "num_records": 0, "byte_offset": 0,'
    ...     ' "byte_length": 20, "byte_length_uncompressed": 0},'
    ...     ' {"first_record_offset": 5, "num_records": 1, "byte_offset": 20,'
    ...     ' "byte_length": 30, "byte_length_uncompressed": 9}]}'
    ... )
    >>> legacy.locate(5), legacy.record_count, legacy.chunks[1].utf16_length
    (1, 1, True)

A block-zstd index (blocks written as zstd frames, :mod:`blockgz.blocks.codecs.zstd`) says
``"codec": "zstd"`` and ``"version": 3`` for the same reason: a blockgz that predates zstd
refuses it ("index version 3 is newer than this blockgz reads") rather than gunzipping zstd
frames. Its ``trailer_length`` counts the bytes after the last block (the zstd seek table), so
the blocks and the trailer together tile the object.

    >>> idx = BlockIndex([Chunk(0, 2, 0, 30, 8)], codec="zstd", level=1, trailer_length=29)
    >>> doc = json.loads(idx.to_json())
    >>> doc["version"], doc["trailer_length"], BlockIndex.from_json(idx.to_json()).byte_length
    (3, 29, 59)

A sidecar written since issue 41 also names its data object (``"object"``: key, size and
CRC-32 of its stored bytes, topic, partition, offsets, records, :class:`IndexedObject`), so an
object and its sidecar prove each other even where the manifest that committed them is lost.
An index without it reads as before (nothing to check).

    >>> named = BlockIndex([Chunk(0, 3, 0, 40, 12)], object=IndexedObject("t+0.json.gz", 40, 7,
    ...     topic="t", partition=0, first_offset=0, last_offset=2, records=3))
    >>> BlockIndex.from_json(named.to_json()).object.crc32
    7

A chunk written since issue 44 may also keep each record's timestamp and timestamp type
(``"timestamps"`` with ``"timestamp_type"`` or ``"timestamp_types"``,
:mod:`blockgz.blocks.stamps`), so the sidecar replaces the hidden timestamps file an export
wrote beside its value object before; readers that predate the members ignore them, so the
version stays as it was. :meth:`BlockIndex.block_stamps` decodes one block's.

    >>> import numpy as np
    >>> idx = BlockIndex([Chunk(0, 2, 0, 30, 8, min_timestamp=5, max_timestamp=9)])
    >>> stamped = idx.with_stamps(np.array([9, 5]), np.array([0, 0]), np.array([0, 1]))
    >>> [a.tolist() for a in BlockIndex.from_json(stamped.to_json()).block_stamps(0)]
    [[9, 5], [0, 0]]

Where the sidecar sits is :func:`blockgz.written.sidecars.sidecar_key`'s business.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from blockgz.blocks.avro.block_index import (
    AVRO_FRAMING,
    AVRO_INDEX_VERSION,
    AvroBlocks,
    avro_blocks_from_doc,
)
from blockgz.blocks.codecs.families import BlockCodec, block_codec
from blockgz.blocks.framing import NEWLINE, Framing, framing_from_json
from blockgz.blocks.stamps import BlockStamps, encode_stamps
from blockgz.errors import CorruptIndexError, IndexMismatchError, OffsetNotFoundError

INDEX_FORMAT = "blockgz-index"
INDEX_VERSION = 3  # the newest version read; block-GZIP indexes are still written as version 1
#: The Avro codecs an index may name (fastavro's names, the ones Confluent's sink writes).
_CHUNK_INT_KEYS = (
    "first_record_offset",
    "num_records",
    "byte_offset",
    "byte_length",
    "byte_length_uncompressed",
)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One block: a run of whole records stored as one gzip member (or several, when rebuilt).

    ``utf16_length`` says that ``byte_length_uncompressed`` counts UTF-16 code units, as a
    DeviantArt (versionless) index does; it is not written back and not compared.
    """

    first_record_offset: int
    num_records: int
    byte_offset: int
    byte_length: int
    byte_length_uncompressed: int
    offset_deltas: tuple[int, ...] | None = None
    members: int = 1
    utf16_length: bool = field(default=False, compare=False)
    #: The smallest and largest Kafka timestamp (epoch ms) of the block's records, when the
    #: writer knew every record's timestamp; ``None`` otherwise (older indexes, ``blockgz
    #: index``, Avro). Lets a time window skip blocks without fetching them.
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    #: CRC-32 of the block's stored bytes (:func:`~blockgz.blocks.checksum.block_crc32`), when
    #: the writer recorded it; ``None`` in older indexes. Not compared: the same block
    #: indexed by an older blockgz is the same block.
    crc32: int | None = field(default=None, compare=False)
    #: Each record's timestamp and type, as the sidecar keeps them (:mod:`blockgz.blocks.stamps`);
    #: ``None``: not recorded (older sidecars: a timestamps file beside the object, if any).
    stamps: BlockStamps | None = field(default=None, compare=False)

    @property
    def last_record_offset(self) -> int:
        """The last record's offset; ``first_record_offset - 1`` for a chunk with no records."""
        if self.offset_deltas is None:
            return self.first_record_offset + self.num_records - 1
        return self.first_record_offset + sum(self.offset_deltas)

    @property
    def byte_end(self) -> int:
        return self.byte_offset + self.byte_length

    def record_offsets(self) -> list[int]:
        """The Kafka offset of every record in the block, in order."""
        first = self.first_record_offset
        if self.offset_deltas is None:
            return list(range(first, first + self.num_records))
        offsets = [first]
        for delta in self.offset_deltas:
            first += delta
            offsets.append(first)
        return offsets

    def position_of(self, offset: int) -> int:
        """Index within the block of the first record whose offset is ``>= offset``."""
        if self.offset_deltas is None:
            return max(0, offset - self.first_record_offset)
        return bisect.bisect_left(self.record_offsets(), offset)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "first_record_offset": self.first_record_offset,
            "num_records": self.num_records,
            "byte_offset": self.byte_offset,
            "byte_length": self.byte_length,
            "byte_length_uncompressed": self.byte_length_uncompressed,
        }
        if self.offset_deltas is not None:
            out["offset_deltas"] = list(self.offset_deltas)
        if self.members != 1:
            out["members"] = self.members
        if self.min_timestamp is not None:
            out["min_timestamp"] = self.min_timestamp
            out["max_timestamp"] = self.max_timestamp
        if self.crc32 is not None:
            out["crc32"] = self.crc32
        if self.stamps is not None:
            out.update(self.stamps.to_dict())
        return out

    def may_hold_times(self, low: int | None, high: int | None) -> bool:
        """Whether a record stamped ``low <= t <= high`` (``None``: open) can be in the
        block; a block whose times are unknown may hold any.

        >>> chunk = Chunk(0, 2, 0, 30, 10, min_timestamp=100, max_timestamp=200)
        >>> chunk.may_hold_times(150, None), chunk.may_hold_times(201, 300)
        (True, False)
        """
        if self.min_timestamp is None or self.max_timestamp is None:
            return True
        return (low is None or self.max_timestamp >= low) and (
            high is None or self.min_timestamp <= high
        )


def deltas_if_gapped(offsets: Sequence[int]) -> tuple[int, ...] | None:
    """``None`` when ``offsets`` are contiguous, else the gaps between consecutive ones."""
    if offsets[-1] - offsets[0] == len(offsets) - 1:
        return None  # strictly increasing and spanning exactly len-1: contiguous
    return tuple(b - a for a, b in itertools.pairwise(offsets))


@dataclass(frozen=True, slots=True)
class IndexedObject:
    """The data object a sidecar describes (its ``"object"`` member): what a reader compares
    with the object it fetches and with the manifest entry that committed both.

    ``topic`` and ``partition`` are ``None`` for an object written outside an export
    (``blockgz compress``); offsets are ``None`` for an object without records.
    """

    key: str
    size: int
    crc32: int
    topic: str | None = None
    partition: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The ``"object"`` member: fields in a fixed order, unknown ones left out."""
        doc: dict[str, Any] = {"key": self.key, "size": self.size, "crc32": self.crc32}
        for name in ("topic", "partition", "first_offset", "last_offset"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        doc["records"] = self.records
        return doc

    @classmethod
    def from_doc(cls, raw: Any, source: str) -> IndexedObject:
        """Parse an ``"object"`` member; :class:`CorruptIndexError` names what is wrong."""
        if not isinstance(raw, dict) or not isinstance(raw.get("key"), str):
            raise CorruptIndexError(f"{source}: 'object' must be an object with a 'key'")
        values: dict[str, Any] = {"key": raw["key"]}
        for name in ("size", "crc32", "partition", "first_offset", "last_offset", "records"):
            value = raw.get(name)
            required = name in ("size", "crc32", "records")
            if (value is None and required) or (
                value is not None and (type(value) is not int or value < 0)
            ):
                raise CorruptIndexError(
                    f"{source}: object {name} must be a non-negative integer, got {value!r}"
                )
            values[name] = value
        topic = raw.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise CorruptIndexError(f"{source}: object topic must be a string, got {topic!r}")
        return cls(**values, topic=topic)


@dataclass(frozen=True)
class BlockIndex:
    """The blocks of one block-GZIP object (or, with ``avro``, of one Avro file), in file order.

    For an Avro index, ``framing`` is unused and ``codec``/``level`` are the Avro codec's.
    ``trailer_length`` bytes follow the last block (a block-zstd object's seek table).
    """

    chunks: Sequence[Chunk]
    framing: Framing = NEWLINE
    codec: str | None = None
    level: int | None = None
    block_size: int | None = None
    avro: AvroBlocks | None = None
    trailer_length: int = 0
    #: The object's own block decoder, for a format whose objects index themselves (a
    #: Parquet footer's row groups, :mod:`blockgz.formats.parquet.read`): its
    #: ``records(raw, read, source=...)`` decodes a block; such an index is never written.
    blocks: Any = field(default=None, compare=False)
    #: The data object the sidecar names (``"object"``), when the writer recorded it.
    object: IndexedObject | None = field(default=None, compare=False)
    _lasts: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.avro is None:
            block_codec(self.codec)  # an unknown codec is refused here, not at the first read
        object.__setattr__(self, "chunks", tuple(self.chunks))
        object.__setattr__(self, "_lasts", [c.last_record_offset for c in self.chunks])

    # -- derived facts ---------------------------------------------------------------
    @property
    def block_codec(self) -> BlockCodec:
        """The family that decodes the blocks (gzip, zstd), as the index's ``codec`` says."""
        return block_codec(None if self.avro is not None else self.codec)

    @property
    def record_count(self) -> int:
        return sum(c.num_records for c in self.chunks)

    @property
    def byte_length(self) -> int:
        """Size of the data object in bytes."""
        if self.chunks:
            return self.chunks[-1].byte_end + self.trailer_length
        return (self.avro.header_length if self.avro is not None else 0) + self.trailer_length

    @property
    def byte_length_uncompressed(self) -> int:
        return sum(c.byte_length_uncompressed for c in self.chunks)

    @property
    def keeps_stamps(self) -> bool:
        """Whether every chunk keeps its records' timestamps (a sidecar written since issue 44;
        an object without records keeps none to miss)."""
        return bool(self.chunks) and all(c.stamps is not None for c in self.chunks)

    def block_stamps(self, block: int, *, source: str = "index") -> tuple[Any, Any]:
        """The ``(ms, types)`` int64 arrays (``-1``: none) the chunk ``block`` keeps for its
        records; :class:`CorruptIndexError` when it keeps none or the wrong count."""
        chunk = self.chunks[block]
        if chunk.stamps is None:
            raise CorruptIndexError(f"{source}: chunk {block} keeps no timestamps")
        return chunk.stamps.decode(chunk.num_records, source=f"{source} chunk {block}")

    def stamps_from(self, other: BlockIndex) -> BlockIndex | None:
        """This index with the timestamps ``other`` (an older index of the same object) keeps,
        when its chunks are these blocks (same offsets and records each); ``None`` otherwise.

        >>> import numpy as np
        >>> old = BlockIndex([Chunk(0, 2, 0, 9, 9)])
        >>> old = old.with_stamps(np.array([5, 6]), np.array([0, 0]), np.array([0, 1]))
        >>> BlockIndex([Chunk(0, 2, 0, 9, 9)]).stamps_from(old).keeps_stamps
        True
        >>> BlockIndex([Chunk(0, 1, 0, 4, 4), Chunk(1, 1, 4, 5, 5)]).stamps_from(old) is None
        True
        """
        if not other.keeps_stamps or [
            (c.first_record_offset, c.num_records, c.offset_deltas) for c in self.chunks
        ] != [(c.first_record_offset, c.num_records, c.offset_deltas) for c in other.chunks]:
            return None
        chunks = [
            dataclasses.replace(c, stamps=o.stamps)
            for c, o in zip(self.chunks, other.chunks, strict=True)
        ]
        return dataclasses.replace(self, chunks=chunks)

    def with_stamps(self, stamps: Any, kinds: Any, offsets: Any) -> BlockIndex:
        """This index with each chunk keeping its records' timestamps and types: ``stamps``,
        ``kinds`` and ``offsets`` (numpy int64, ``-1``: none) hold one entry per record, in
        order; offsets that are not the index's raise :class:`IndexMismatchError`."""
        import numpy as np

        offsets = np.asarray(offsets, np.int64)
        if len(offsets) != self.record_count or len(stamps) != len(offsets):
            raise IndexMismatchError(
                f"{len(stamps)} timestamps for an object of {self.record_count} records"
            )
        chunks, at = [], 0
        for chunk in self.chunks:
            end = at + chunk.num_records
            if chunk.num_records and (
                int(offsets[at]) != chunk.first_record_offset
                or int(offsets[end - 1]) != chunk.last_record_offset
            ):
                raise IndexMismatchError(
                    f"timestamps for offsets {int(offsets[at])}..{int(offsets[end - 1])} do not "
                    f"line up with the block of offsets {chunk.first_record_offset}.."
                    f"{chunk.last_record_offset}"
                )
            kept = None
            if chunk.num_records:
                kept = encode_stamps(stamps[at:end], kinds[at:end])
            chunks.append(dataclasses.replace(chunk, stamps=kept))
            at = end
        return dataclasses.replace(self, chunks=chunks)

    @property
    def first_offset(self) -> int | None:
        return self.chunks[0].first_record_offset if self.chunks else None

    @property
    def last_offset(self) -> int | None:
        return self._lasts[-1] if self.chunks else None

    def locate(self, offset: int) -> int:
        """Position of the block holding the first record with offset ``>= offset``."""
        pos = bisect.bisect_left(self._lasts, offset)
        if pos == len(self.chunks):
            last = self.last_offset
            where = "the object holds no records" if last is None else f"last offset is {last}"
            raise OffsetNotFoundError(f"offset {offset} is past the end: {where}")
        return pos

    def check_object_size(self, size: int, *, name: str = "data file") -> None:
        """Raise :class:`IndexMismatchError` unless the blocks exactly tile ``size`` bytes."""
        if size != self.byte_length:
            raise IndexMismatchError(
                f"{name} is {size} bytes but its index describes {self.byte_length} bytes"
                + (" (truncated?)" if size < self.byte_length else "")
            )

    # -- JSON ------------------------------------------------------------------------
    def to_json(self) -> str:
        """Deterministic JSON: the same index always gives the same bytes."""
        avro = self.avro
        doc: dict[str, Any] = {
            "format": INDEX_FORMAT,
            "version": self.block_codec.index_version if avro is None else AVRO_INDEX_VERSION,
            "codec": self.codec,
            "level": self.level,
            "block_size": self.block_size,
            "framing": self.framing.to_json() if avro is None else AVRO_FRAMING,
            "record_count": self.record_count,
            "first_record_offset": self.first_offset,
            "last_record_offset": self.last_offset,
            "byte_length": self.byte_length,
            "byte_length_uncompressed": self.byte_length_uncompressed,
        }
        if avro is not None:
            doc["avro"] = avro.to_dict()
        if self.trailer_length:
            doc["trailer_length"] = self.trailer_length
        doc["chunks"] = [c.to_dict() for c in self.chunks]
        if self.object is not None:
            doc["object"] = self.object.to_dict()
        return json.dumps(doc, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "index") -> BlockIndex:
        """Parse and validate an index; a DeviantArt index (no version) loads as newline-framed."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptIndexError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("chunks"), list):
            raise CorruptIndexError(f"{source}: expected an object with a 'chunks' list")
        version = doc.get("version", 0)
        if not isinstance(version, int) or version > INDEX_VERSION:
            raise CorruptIndexError(
                f"{source}: index version {version!r} is newer than this blockgz reads "
                f"(up to {INDEX_VERSION}); upgrade blockgz"
            )
        legacy = version == 0  # no version: DeviantArt's connector (see the module docstring)
        chunks = [
            _chunk_from_dict(raw, i, source, legacy=legacy) for i, raw in enumerate(doc["chunks"])
        ]
        avro = avro_blocks_from_doc(doc, source)
        trailer = doc.get("trailer_length", 0)
        if type(trailer) is not int or trailer < 0:
            raise CorruptIndexError(
                f"{source}: 'trailer_length' must be a non-negative integer, got {trailer!r}"
            )
        codec = doc.get("codec")
        framing = NEWLINE if avro is not None else _framing(doc.get("framing"), source)
        if avro is None:
            try:
                family = block_codec(codec)
            except CorruptIndexError as exc:
                raise CorruptIndexError(f"{source}: {exc}") from exc
            if version and version < family.index_version:
                raise CorruptIndexError(
                    f"{source}: codec {codec!r} needs index version {family.index_version} or "
                    f"later, the index says {version}"
                )
        index = cls(
            chunks,
            framing=framing,
            codec=codec,
            level=doc.get("level"),
            block_size=doc.get("block_size"),
            avro=avro,
            trailer_length=trailer,
            object=IndexedObject.from_doc(doc["object"], source) if "object" in doc else None,
        )
        _check_layout(index, source)
        _check_totals(index, doc, source)
        _check_object(index, source)
        return index


def _framing(obj: Any, source: str) -> Framing:
    if obj == AVRO_FRAMING:
        raise CorruptIndexError(f"{source}: framing is avro but the index has no 'avro' section")
    try:
        return framing_from_json(obj)
    except CorruptIndexError as exc:
        raise CorruptIndexError(f"{source}: {exc}") from exc


def _chunk_from_dict(raw: Any, pos: int, source: str, *, legacy: bool = False) -> Chunk:
    """One chunk; ``legacy`` (a DeviantArt index) allows ``num_records: 0`` and counts
    ``byte_length_uncompressed`` in UTF-16 code units."""
    if not isinstance(raw, dict):
        raise CorruptIndexError(f"{source}: chunk {pos} is not an object")
    values = []
    for key in _CHUNK_INT_KEYS:
        value = raw.get(key)
        if type(value) is not int or value < 0:
            raise CorruptIndexError(
                f"{source}: chunk {pos} field {key!r} must be a non-negative integer, got {value!r}"
            )
        values.append(value)
    if values[3] < 1 or (values[1] < 1 and not legacy):
        raise CorruptIndexError(f"{source}: chunk {pos} is empty (no records or no bytes)")
    if values[1] == 0 and raw.get("offset_deltas") is not None:
        raise CorruptIndexError(f"{source}: chunk {pos} has no records but has offset_deltas")
    deltas = raw.get("offset_deltas")
    if deltas is not None:
        if (
            not isinstance(deltas, list)
            or len(deltas) != values[1] - 1
            or not all(type(d) is int and d >= 1 for d in deltas)
        ):
            raise CorruptIndexError(
                f"{source}: chunk {pos} offset_deltas must be {values[1] - 1} positive integers"
            )
        deltas = tuple(deltas)
    members = raw.get("members", 1)
    if type(members) is not int or members < 1:
        raise CorruptIndexError(f"{source}: chunk {pos} members must be a positive integer")
    low, high = raw.get("min_timestamp"), raw.get("max_timestamp")
    if (low, high) != (None, None) and not (
        type(low) is int and type(high) is int and 0 <= low <= high
    ):
        raise CorruptIndexError(
            f"{source}: chunk {pos} min_timestamp and max_timestamp must both be given, as "
            f"epoch milliseconds with min <= max, got {low!r} and {high!r}"
        )
    crc = raw.get("crc32")
    if crc is not None and not (type(crc) is int and 0 <= crc <= 0xFFFFFFFF):
        raise CorruptIndexError(
            f"{source}: chunk {pos} crc32 must be an unsigned 32-bit integer, got {crc!r}"
        )
    first, count, byte_offset, byte_length, uncompressed = values  # _CHUNK_INT_KEYS, in order
    return Chunk(
        first,
        count,
        byte_offset,
        byte_length,
        uncompressed,
        offset_deltas=deltas,
        members=members,
        utf16_length=legacy,
        min_timestamp=low,
        max_timestamp=high,
        crc32=crc,
        stamps=BlockStamps.from_dict(raw, pos, source),
    )


def _check_layout(index: BlockIndex, source: str) -> None:
    expected_byte = index.avro.header_length if index.avro is not None else 0
    previous_last = None
    for pos, chunk in enumerate(index.chunks):
        if chunk.byte_offset != expected_byte:
            raise CorruptIndexError(
                f"{source}: chunk {pos} starts at byte {chunk.byte_offset}, expected "
                f"{expected_byte} (blocks must follow each other with no gap or overlap)"
            )
        if previous_last is not None and chunk.first_record_offset <= previous_last:
            raise CorruptIndexError(
                f"{source}: chunk {pos} starts at offset {chunk.first_record_offset}, "
                f"not after the previous chunk's last offset {previous_last}"
            )
        expected_byte = chunk.byte_end
        previous_last = chunk.last_record_offset


def _check_totals(index: BlockIndex, doc: dict[str, Any], source: str) -> None:
    for key, actual in (
        ("record_count", index.record_count),
        ("byte_length", index.byte_length),
        ("byte_length_uncompressed", index.byte_length_uncompressed),
    ):
        if key in doc and doc[key] != actual:
            raise CorruptIndexError(
                f"{source}: {key} says {doc[key]!r} but the chunks add up to {actual}"
            )


def _check_object(index: BlockIndex, source: str) -> None:
    """An ``"object"`` member must say what the chunks say (size, offsets, records)."""
    named = index.object
    if named is None:
        return
    for name, said, actual in (
        ("size", named.size, index.byte_length),
        ("records", named.records, index.record_count),
        ("first_offset", named.first_offset, index.first_offset),
        ("last_offset", named.last_offset, index.last_offset),
    ):
        if said != actual:
            raise CorruptIndexError(
                f"{source}: object {name} says {said!r} but the chunks say {actual!r}"
            )
