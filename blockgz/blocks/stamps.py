"""A block's record timestamps as its ``.index.json`` chunk keeps them (issue 44): compact and
readable without the other blocks.

Each chunk of a sidecar may carry ``"timestamps"``: the block's Kafka timestamps (epoch ms, one
per record, ``-1`` for none) as zig-zag varints of the differences between consecutive ones, the
first one's from 0 (so the member stands alone: no other key of the chunk is needed to read it),
in base64 (standard alphabet, no padding). Records a few milliseconds apart cost one byte each, so
about 1.4 characters of JSON per record. ``"timestamp_type"`` is the one Kafka timestamp type
(``0`` CreateTime, ``1`` LogAppendTime, ``-1`` none) of all of the block's records; a block
whose records differ says ``"timestamp_types"`` instead, encoded as the timestamps are
(differences from 0).

    >>> import numpy as np
    >>> kept = encode_stamps(np.array([1700000000000, 1700000000003, -1]), np.array([0, 0, 0]))
    >>> kept
    BlockStamps(encoded='gKCr/vliBoegq/75Yg', kind=0, kinds=None)
    >>> [a.tolist() for a in kept.decode(3)]
    [[1700000000000, 1700000000003, -1], [0, 0, 0]]

Decoding is numpy's (no Python step per record): a restore or a Spark scan reads millions.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np

from blockgz.errors import CorruptIndexError

#: The longest varint a 64-bit value needs.
_MAX_VARINT = 10


@dataclass(frozen=True, slots=True)
class BlockStamps:
    """One chunk's ``timestamps`` member (as stored) and its type(s)."""

    encoded: str
    #: The type of every record of the block, or ``None`` when :attr:`kinds` lists them.
    kind: int | None = 0
    kinds: str | None = None

    def decode(self, count: int, *, source: str = "index") -> tuple[Any, Any]:
        """``(ms, types)`` as two int64 arrays of ``count`` entries (``-1``: none); a member
        that holds another count raises :class:`CorruptIndexError`."""
        stamps = np.cumsum(_unzigzag(_varints(self.encoded, source)), dtype=np.int64)
        if self.kinds is not None:
            kinds = np.cumsum(_unzigzag(_varints(self.kinds, source)), dtype=np.int64)
        else:
            kinds = np.full(count, -1 if self.kind is None else self.kind, np.int64)
        if len(stamps) != count or len(kinds) != count:
            raise CorruptIndexError(
                f"{source}: a chunk of {count} records keeps {len(stamps)} timestamps and "
                f"{len(kinds)} timestamp types"
            )
        return stamps, kinds

    def to_dict(self) -> dict[str, Any]:
        """The chunk's members."""
        if self.kinds is not None:
            return {"timestamps": self.encoded, "timestamp_types": self.kinds}
        return {"timestamps": self.encoded, "timestamp_type": self.kind}

    @classmethod
    def from_dict(cls, raw: dict[str, Any], pos: int, source: str) -> BlockStamps | None:
        """A chunk's members (``None``: it keeps no timestamps); malformed ones raise
        :class:`CorruptIndexError`."""
        encoded = raw.get("timestamps")
        if encoded is None:
            return None
        kind, kinds = raw.get("timestamp_type"), raw.get("timestamp_types")
        if (
            not isinstance(encoded, str)
            or (kinds is not None and not isinstance(kinds, str))
            or (kinds is None and not (type(kind) is int and kind >= -1))
        ):
            raise CorruptIndexError(
                f"{source}: chunk {pos} timestamps must be a base64 string with a "
                "timestamp_type (an integer >= -1) or timestamp_types (a base64 string)"
            )
        return cls(encoded, None if kinds is not None else kind, kinds)


def encode_stamps(stamps: Any, kinds: Any) -> BlockStamps:
    """A block's timestamps (epoch ms, ``-1``: none) and types as its chunk keeps them."""
    stamps = np.asarray(stamps, np.int64)
    kinds = np.asarray(kinds, np.int64)
    encoded = _text(_varint_bytes(_zigzag(np.diff(stamps, prepend=np.int64(0)))))
    if len(kinds) and bool(np.all(kinds == kinds[0])):
        return BlockStamps(encoded, int(kinds[0]))
    return BlockStamps(encoded, None, _text(_varint_bytes(_zigzag(np.diff(kinds, prepend=0)))))


def _zigzag(values: Any) -> Any:
    values = values.astype(np.int64)
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _unzigzag(values: Any) -> Any:
    return ((values >> np.uint64(1)).view(np.int64)) ^ -((values & np.uint64(1)).view(np.int64))


def _varint_bytes(values: Any) -> bytes:
    """Unsigned LEB128 of each value, back to back."""
    if not len(values):
        return b""
    lengths = np.ones(len(values), np.int64)
    rest = values >> np.uint64(7)
    while bool(rest.any()):
        lengths += rest > 0
        rest = rest >> np.uint64(7)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = np.zeros(int(ends[-1]), np.uint8)
    rest = values.copy()
    for step in range(int(lengths.max())):
        live = lengths > step
        more = lengths[live] > step + 1
        byte = (rest[live] & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        out[starts[live] + step] = byte
        rest = rest >> np.uint64(7)
    return out.tobytes()


def _varints(text: str, source: str) -> Any:
    """The unsigned varints of a base64 member, as a uint64 array."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError as exc:
        raise CorruptIndexError(f"{source}: chunk timestamps are not base64 ({exc})") from exc
    data = np.frombuffer(raw, np.uint8)
    if not len(data):
        return np.empty(0, np.uint64)
    last = data < 0x80  # the last byte of each varint
    if not bool(last[-1]):
        raise CorruptIndexError(f"{source}: chunk timestamps end inside a number")
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    if int((ends - starts).max()) >= _MAX_VARINT:
        raise CorruptIndexError(f"{source}: chunk timestamps hold a number over 64 bits")
    position = np.arange(len(data)) - np.repeat(starts, ends - starts + 1)
    parts = (data & 0x7F).astype(np.uint64) << (position.astype(np.uint64) * np.uint64(7))
    return np.add.reduceat(parts, starts)


def _text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


__all__ = ["BlockStamps", "encode_stamps"]
