"""The ``avro`` section of an ``.index.json``: what one Avro block needs to be decoded alone.

An Avro object container file is indexed like a block-GZIP object (:mod:`blockgz.blocks.index`):
each chunk is one Avro block (its count, size, data and sync marker). The ``avro`` section holds
the writer schema, codec and sync marker from the file's header, and where the first block
starts (``header_length``). Such an index says ``"version": 2`` and ``"framing": {"kind":
"avro"}``, so a blockgz that predates Avro refuses it instead of gunzipping Avro blocks.

>>> blocks = AvroBlocks('"long"', "null", bytes(16), header_length=60)
>>> avro_blocks_from_doc({"avro": blocks.to_dict()}, "t.avro.index.json") == blocks
True
>>> avro_blocks_from_doc({"avro": {**blocks.to_dict(), "codec": "lzma"}}, "i")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.CorruptIndexError: i: avro section: codec 'lzma' is not known; allowed: null, ...
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from blockgz.errors import CorruptIndexError

#: The index version of an Avro index (block-GZIP indexes are version 1, block-zstd 3).
AVRO_INDEX_VERSION = 2
AVRO_FRAMING = {"kind": "avro"}
AVRO_CODECS = ("null", "deflate", "snappy", "bzip2", "xz", "zstandard")
AVRO_SYNC_SIZE = 16


@dataclass(frozen=True, slots=True)
class AvroBlocks:
    """What the blocks of an Avro container file need to be decoded one at a time.

    ``schema`` is the writer schema's JSON text exactly as the file header holds it, ``codec``
    the header's ``avro.codec``, ``sync`` its 16-byte sync marker; the header ends (and the
    first block starts) at ``header_length``. ``schema_id`` is the Schema Registry id, if any.
    """

    schema: str
    codec: str
    sync: bytes
    header_length: int
    schema_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": self.schema,
            "codec": self.codec,
            "sync": self.sync.hex(),
            "header_length": self.header_length,
        }
        if self.schema_id is not None:
            out["schema_id"] = self.schema_id
        return out


def avro_blocks_from_doc(doc: dict[str, Any], source: str) -> AvroBlocks | None:
    """The index document's ``avro`` section, checked (``None`` when it has none)."""
    raw = doc.get("avro")
    if raw is None:
        return None
    where = f"{source}: avro section"
    if not isinstance(raw, dict):
        raise CorruptIndexError(f"{where} must be an object, got {raw!r}")
    if doc.get("framing", AVRO_FRAMING) != AVRO_FRAMING:
        raise CorruptIndexError(
            f"{source}: an Avro index must say framing {AVRO_FRAMING}, got {doc['framing']!r}"
        )
    schema, codec, sync = raw.get("schema"), raw.get("codec"), raw.get("sync")
    if not isinstance(schema, str) or not _is_json(schema):
        raise CorruptIndexError(f"{where}: 'schema' must be the writer schema as JSON text")
    if codec not in AVRO_CODECS:
        raise CorruptIndexError(
            f"{where}: codec {codec!r} is not known; allowed: {', '.join(AVRO_CODECS)}"
        )
    if doc.get("codec") not in (None, codec):
        raise CorruptIndexError(
            f"{source}: codec {doc['codec']!r} disagrees with the avro section's {codec!r}"
        )
    try:
        marker = bytes.fromhex(sync) if isinstance(sync, str) else b""
    except ValueError:
        marker = b""
    if len(marker) != AVRO_SYNC_SIZE:
        raise CorruptIndexError(
            f"{where}: 'sync' must be {AVRO_SYNC_SIZE} bytes as {2 * AVRO_SYNC_SIZE} hex digits, "
            f"got {sync!r}"
        )
    length = raw.get("header_length")
    if type(length) is not int or length < 1:
        raise CorruptIndexError(
            f"{where}: 'header_length' must be a positive integer, got {length!r}"
        )
    schema_id = raw.get("schema_id")
    if schema_id is not None and (type(schema_id) is not int or schema_id < 0):
        raise CorruptIndexError(
            f"{where}: 'schema_id' must be a non-negative integer, got {schema_id!r}"
        )
    return AvroBlocks(schema, codec, marker, length, schema_id)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
