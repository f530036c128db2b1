"""How records sit inside a block: separated (one per line) or length-prefixed.

Separator framing (the default, newline) is what Confluent's JSON and bytearray
formats write and what ``zcat`` users expect. A record must not contain the
separator; length-prefixed framing (4-byte big-endian length) accepts any bytes.

    >>> NEWLINE.split(b"a\\nb\\n")
    [b'a', b'b']
    >>> LengthPrefixed().split(LengthPrefixed().encode(b"x\\ny"))
    [b'x\\ny']
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from blockgz.blocks.byte_count import count_byte
from blockgz.errors import ConfigError, CorruptBlockError, CorruptIndexError, RecordFramingError
from blockgz.option_defs import OptionDef, OptionSet

_U32 = struct.Struct(">I")


@dataclass(frozen=True)
class Separated:
    """Records followed by ``separator`` (``b"\\n"`` by default)."""

    separator: bytes = b"\n"

    def __post_init__(self) -> None:
        if not self.separator:
            raise RecordFramingError("the record separator must not be empty")

    def encode(self, record: bytes) -> bytes:
        """Frame one record, refusing one that contains the separator."""
        if self.separator in record:
            raise RecordFramingError(
                f"record contains the record separator {self.separator!r}; "
                "pick another separator or length-prefixed framing"
            )
        return record + self.separator

    def overhead(self, record: bytes) -> int:
        return len(self.separator)

    def split(self, data: bytes) -> list[bytes]:
        """The records of a block; a last record without its separator still counts."""
        if not data:
            return []
        records = data.split(self.separator)
        if data.endswith(self.separator):
            records.pop()
        return records

    def slice(
        self, data: bytes | bytearray, start: int, stop: int | None
    ) -> tuple[list[bytes], int]:
        """Records ``[start:stop]`` of a block as ``bytes``, and how many the block holds.

        Only the wanted records are built: for a one-byte separator numpy finds every
        separator position, so fetching one record of a 1 MiB block costs ~0.2 ms
        instead of splitting ~1,800 records.
        """
        if (start == 0 and stop is None) or len(self.separator) != 1:
            records = self.split(bytes(data))
            return records[start:stop], len(records)
        ends = np.flatnonzero(np.frombuffer(data, np.uint8) == self.separator[0])
        total = len(ends) + (0 if not data or data[-1] == self.separator[0] else 1)
        bounds = (
            [0, *(ends + 1).tolist()]
            if total == len(ends)
            else [0, *(ends + 1).tolist(), len(data) + 1]
        )
        view = memoryview(data)
        stop = total if stop is None else min(stop, total)
        return [bytes(view[bounds[k] : bounds[k + 1] - 1]) for k in range(start, stop)], total

    def count(self, data: bytes | bytearray) -> int:
        if not data:
            return 0
        sep = self.separator
        return data.count(sep) + (0 if data.endswith(sep) else 1)

    def count_terminated(self, data: bytes | bytearray | memoryview) -> int:
        """Records in ``data`` known to end with the separator; safe on worker threads.

        For a one-byte separator numpy counts at ~6.6 GB/s and releases the GIL during
        the comparison (:func:`~blockgz.blocks.byte_count.count_byte`: no allocation per
        call); ``bytes.count`` manages ~1.7 GB/s holding it.
        """
        if len(self.separator) == 1:
            return count_byte(data, self.separator[0])
        return bytes(data).count(self.separator)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "separator", "separator": self.separator.decode("latin-1")}


@dataclass(frozen=True)
class LengthPrefixed:
    """Each record preceded by its length as a 4-byte big-endian unsigned integer."""

    def encode(self, record: bytes) -> bytes:
        if len(record) >= 2**32:
            raise RecordFramingError(f"record of {len(record)} bytes is too large to frame")
        return _U32.pack(len(record)) + record

    def overhead(self, record: bytes) -> int:
        return _U32.size

    def split(self, data: bytes) -> list[bytes]:
        records: list[bytes] = []
        pos, end = 0, len(data)
        view = memoryview(data)
        while pos < end:
            if pos + 4 > end:
                raise CorruptBlockError("length-prefixed block ends inside a length field")
            (size,) = _U32.unpack_from(data, pos)
            pos += 4
            if pos + size > end:
                raise CorruptBlockError("length-prefixed block ends inside a record")
            records.append(bytes(view[pos : pos + size]))
            pos += size
        return records

    def count(self, data: bytes | bytearray) -> int:
        return len(self.split(bytes(data)))

    def slice(
        self, data: bytes | bytearray, start: int, stop: int | None
    ) -> tuple[list[bytes], int]:
        records = self.split(bytes(data))
        return records[start:stop], len(records)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "length-prefixed", "length_bytes": 4, "byteorder": "big"}


Framing = Separated | LengthPrefixed
NEWLINE = Separated(b"\n")


def framing_from_json(obj: dict[str, Any] | None) -> Framing:
    """Read a framing from an index; a missing one means newline (DeviantArt indexes)."""
    if obj is None:
        return NEWLINE
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "separator" and isinstance(obj.get("separator"), str) and obj["separator"]:
        return Separated(obj["separator"].encode("latin-1"))
    if kind == "length-prefixed":
        return LengthPrefixed()
    raise CorruptIndexError(
        f"index framing {obj!r} is not known; allowed kinds: separator, length-prefixed"
    )


#: The option naming a bytearray framing (the sink's and the reader's), and its values.
FRAMING_OPTION = "format.bytearray.framing"
FRAMINGS = ("separator", "length-prefixed")
FRAMING_OPTIONS = OptionSet(
    OptionDef(
        FRAMING_OPTION,
        "choice",
        "separator",
        "`length-prefixed` puts a 4-byte big-endian length before each bytearray record "
        "instead, so values may hold any bytes (Protobuf, binary); the index records it, and "
        "readers of objects without an index take the same option "
        "(`blockgz cat -O format.bytearray.framing=length-prefixed`)",
        "sink",
        allowed=FRAMINGS,
        also=("reader",),
    ),
    OptionDef(
        "format.bytearray.separator",
        "raw",
        None,
        "between bytearray records (`\\u0000` style escapes work)",
        "sink",
        origin="confluent",
        shown="`\\n`",
        also=("reader",),
    ),
)


def framing_from_options(options: Any) -> Framing:
    """The framing ``format.bytearray.framing`` and ``format.bytearray.separator`` name
    (the reader needs it for objects without an index, which do not say).

    >>> framing_from_options({"format.bytearray.framing": "length-prefixed"})
    LengthPrefixed()
    >>> framing_from_options({})
    Separated(separator=b'\\n')
    """
    from blockgz.options import as_options

    opts = as_options(options or {})
    if FRAMING_OPTIONS.read(opts, FRAMING_OPTION) == "length-prefixed":
        return LengthPrefixed()
    raw = FRAMING_OPTIONS.read(opts, "format.bytearray.separator")
    if raw is None:
        return NEWLINE
    # Properties files cannot hold a bare newline, so accept the usual escapes.
    separator = raw.encode("utf-8").decode("unicode_escape").encode("latin-1")
    if not separator:
        raise ConfigError("format.bytearray.separator: must not be empty (default: \\n)")
    return Separated(separator)
