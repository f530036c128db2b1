"""Reading a Parquet object by offset: its footer is its index, a row group is a block.

:func:`parquet_index` reads the footer (one ranged read of the object's last
:data:`FOOTER_READ` bytes; a second one only for a larger footer) and describes each row group
as a :class:`~blockgz.blocks.index.Chunk`: its offsets from the ``__kafka_offset`` column's
statistics (min, max, row count; the gaps between them from the footer's
``blockgz.row_groups`` metadata where they are not contiguous), its bytes from its column
chunks' offsets and sizes, its time range from the ``__kafka_timestamp`` statistics. The
readers then plan and fetch row groups as they do blocks (:func:`~blockgz.blocks.plan.
plan_blocks`, one ranged read per row group, neighbours merged), and :class:`ParquetBlocks`
decodes one row group from its bytes and the footer alone: pyarrow reads it from a file that
holds just those two pieces (:class:`Pieces`), so nothing else of the object is fetched.

>>> import io, tempfile
>>> from types import SimpleNamespace as ValueSchema
>>> from blockgz.formats.parquet.writer import ParquetObjectWriter
>>> from blockgz.blocks.plan import plan_blocks
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> schema = ValueSchema(json={"type": "record", "name": "r", "fields": [
...     {"name": "n", "type": "long"}]})
>>> w = ParquetObjectWriter(store, "t+0+0000000000.parquet", schema, block_records=10)
>>> for n in range(100):
...     w.write({"n": n}, n, 1000 + n)
>>> data = store.get("t+0+0000000000.parquet") if w.close() else None
>>> reads = []
>>> def read(start, end):
...     reads.append((start, end))
...     return data[start:end]
>>> index = parquet_index(read, len(data))
>>> len(index.chunks), index.first_offset, index.last_offset, len(reads)
(10, 0, 99, 1)
>>> (r,) = plan_blocks(index, 42, count=2)
>>> chunk = r.chunk
>>> index.blocks.records(read(chunk.byte_offset, chunk.byte_end), r)
[Record(offset=42, value={'n': 42}, timestamp=1042), Record(offset=43, value={'n': 43}, \
timestamp=1043)]
>>> len(reads)
2
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from blockgz.blocks.decode import Record
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import BlockRead
from blockgz.errors import CorruptBlockError, CorruptIndexError
from blockgz.formats.parquet.columns import column_start
from blockgz.formats.parquet.schema import (
    OFFSET_COLUMN,
    ROW_GROUPS_KEY,
    TIMESTAMP_COLUMN,
    VALUE_KEY,
)

#: Bytes read from the end of an object to find its footer: the footers of objects up to
#: about 300 MiB (4 MiB row groups, ~1.5 KiB of footer each) fit, so opening one is one
#: ranged read; a larger footer costs a second. (On S3 one more request costs about what
#: 256 KiB more of one does.)
FOOTER_READ = 256 * 1024
MAGIC = b"PAR1"
#: What a Parquet row keeps beside its value (:attr:`Record.holds`): keys and headers are in
#: companion files, which add themselves.
_TIMESTAMP = frozenset({"timestamp"})


class Pieces(io.RawIOBase):
    """A read-only file of ``size`` bytes of which only some pieces are known (``{start:
    bytes}``): pyarrow reads a row group through it, and a read outside the pieces is an
    error (the plan fetched too little), never a hidden request.

    >>> f = Pieces(10, {2: b"abc"})
    >>> _ = f.seek(3); f.read(2)
    b'bc'
    >>> f.read(1)
    Traceback (most recent call last):
    ...
    OSError: bytes 5..6 of the object were not fetched
    """

    def __init__(self, size: int, pieces: dict[int, bytes | memoryview]):
        self._size = size
        self._pieces = sorted(pieces.items())
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = base + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        start, end = self._pos, min(self._pos + n, self._size)
        for at, piece in self._pieces:
            if at <= start and end <= at + len(piece):
                self._pos = end
                return bytes(piece[start - at : end - at])
        raise OSError(f"bytes {start}..{end} of the object were not fetched")

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def read_footer(read: Callable[[int, int], bytes], size: int, *, source: str = "") -> Any:
    """``(the object's last bytes, where they start)``: at least its footer with its length
    and magic (and the :data:`FOOTER_READ` bytes pyarrow looks at first), for a Parquet object
    of ``size`` bytes read through ``read(start, end)``: one read, two for a large footer."""
    if size < 12:
        raise CorruptIndexError(f"{source}: {size} bytes is too short for a Parquet file")
    start = max(0, size - FOOTER_READ)
    tail = read(start, size)
    if len(tail) != size - start or tail[-4:] != MAGIC:
        raise CorruptIndexError(f"{source}: does not end with Parquet's PAR1 (not Parquet?)")
    length = int.from_bytes(tail[-8:-4], "little") + 8
    if length + 4 > size:
        raise CorruptIndexError(f"{source}: its footer length {length} exceeds the file")
    if length > len(tail):
        tail = read(size - length, start) + tail
    return tail, size - len(tail)


def parquet_index(
    read: Callable[[int, int], bytes], size: int, *, source: str = "object"
) -> BlockIndex:
    """The row groups of a Parquet object of ``size`` bytes as an index, from its footer
    (read through ``read(start, end)``); see the module docstring."""
    import pyarrow.parquet as pq

    footer, footer_start = read_footer(read, size, source=source)
    try:
        meta = pq.ParquetFile(Pieces(size, {footer_start: footer})).metadata
    except Exception as exc:  # pyarrow raises OSError/ArrowInvalid for a bad footer
        raise CorruptIndexError(f"{source}: the Parquet footer does not parse ({exc})") from exc
    kv = meta.metadata or {}
    gaps = json.loads(kv.get(ROW_GROUPS_KEY.encode(), b"[]"))
    paths = [meta.schema.column(n).path for n in range(meta.num_columns)]
    if OFFSET_COLUMN not in paths:
        raise CorruptIndexError(
            f"{source}: has no {OFFSET_COLUMN} column, so it cannot be read by offset (not "
            "written by blockgz?)"
        )
    columns = _Columns(
        paths.index(OFFSET_COLUMN),
        paths.index(TIMESTAMP_COLUMN) if TIMESTAMP_COLUMN in paths else None,
        meta.num_columns - 1,
    )
    chunks = [
        _chunk(meta.row_group(n), n, gaps[n] if n < len(gaps) else None, columns, source)
        for n in range(meta.num_row_groups)
    ]
    end = chunks[-1].byte_end if chunks else 0
    value = kv.get(VALUE_KEY.encode(), b"record").decode()
    return BlockIndex(
        chunks,
        trailer_length=size - end,
        blocks=ParquetBlocks(meta, size, footer, footer_start, value),
    )


@dataclass(frozen=True)
class _Columns:
    """Where the columns a row group's chunk is made from are (leaf column numbers)."""

    offset: int
    timestamp: int | None
    last: int


def _chunk(group: Any, n: int, gaps: list[int] | None, columns: _Columns, source: str) -> Chunk:
    """Row group ``n`` as a chunk. Only the columns it needs are looked at (a large object's
    footer has thousands of row groups): the offsets' and times' statistics, and the first and
    last column chunks, between which a row group's bytes lie (a writer lays its column chunks
    out in schema order, one after another)."""
    stats = group.column(columns.offset).statistics
    if stats is None or not stats.has_min_max:
        raise CorruptIndexError(
            f"{source}: row group {n} has no {OFFSET_COLUMN} column with statistics, so it "
            "cannot be read by offset (not written by blockgz?)"
        )
    first, last, rows = int(stats.min), int(stats.max), group.num_rows
    deltas = tuple(gaps) if gaps else None
    if deltas is None and last - first + 1 != rows:
        raise CorruptIndexError(
            f"{source}: row group {n} holds {rows} rows of offsets {first}..{last} and the "
            f"footer's {ROW_GROUPS_KEY} does not say where the gaps are"
        )
    last = group.column(columns.last)
    begin, end = column_start(group.column(0)), column_start(last) + last.total_compressed_size
    if end <= begin:
        raise CorruptIndexError(f"{source}: row group {n}'s column chunks are out of order")
    low = high = None
    tstats = None if columns.timestamp is None else group.column(columns.timestamp).statistics
    if tstats is not None and tstats.has_min_max and tstats.null_count == 0:
        low, high = _epoch_ms(tstats.min), _epoch_ms(tstats.max)
    return Chunk(
        first,
        rows,
        begin,
        end - begin,
        group.total_byte_size,
        offset_deltas=deltas,
        min_timestamp=low,
        max_timestamp=high,
    )


def _epoch_ms(value: Any) -> int:
    """A timestamp statistic (a datetime, or already an int) as epoch milliseconds."""
    if isinstance(value, int):
        return value
    return round(value.timestamp() * 1000)


class ParquetBlocks:
    """Decodes one row group of a Parquet object from its bytes and the object's footer."""

    def __init__(self, meta: Any, size: int, footer: bytes, footer_start: int, value: str):
        self.meta = meta
        self.size = size
        self.footer = footer
        self.footer_start = footer_start
        #: ``record``: the value columns make a dict; else the one column holding the value.
        self.value = value

    def table(
        self,
        raw: bytes | memoryview,
        read: BlockRead,
        *,
        source: str = "",
        columns: list[str] | None = None,
    ) -> Any:
        """The row group ``read`` names as an Arrow table: every column, or only ``columns``
        (top-level names; the others' pages are not decoded)."""
        chunk = read.chunk
        if len(raw) != chunk.byte_length:
            raise CorruptBlockError(
                f"{self._where(read, source)}: read {len(raw)} bytes, the footer promises "
                f"{chunk.byte_length}",
                block=read.block,
                byte_offset=chunk.byte_offset,
            )
        return self.table_of_pieces({chunk.byte_offset: raw}, read, source=source, columns=columns)

    def table_of_pieces(
        self,
        pieces: dict[int, bytes | memoryview],
        read: BlockRead,
        *,
        source: str = "",
        columns: list[str] | None = None,
    ) -> Any:
        """As :meth:`table`, from ``{start: bytes}`` pieces of the object that hold at least
        the column chunks of ``columns`` (:mod:`~blockgz.formats.parquet.columns`)."""
        import pyarrow.parquet as pq

        chunk, block = read.chunk, read.block
        where = self._where(read, source)
        known = Pieces(self.size, {**pieces, self.footer_start: self.footer})
        try:
            table = pq.ParquetFile(known, metadata=self.meta).read_row_group(block, columns=columns)
        except Exception as exc:  # pyarrow: OSError, ArrowInvalid for damaged pages
            raise CorruptBlockError(
                f"{where}: does not decode ({exc})", block=block, byte_offset=chunk.byte_offset
            ) from exc
        if table.num_rows != chunk.num_records:
            raise CorruptBlockError(
                f"{where}: holds {table.num_rows} rows, the footer promises {chunk.num_records}",
                block=block,
                byte_offset=chunk.byte_offset,
            )
        return table

    @staticmethod
    def _where(read: BlockRead, source: str) -> str:
        chunk = read.chunk
        return f"{source}: row group {read.block} (bytes {chunk.byte_offset}-{chunk.byte_end - 1})"

    def records(
        self, raw: bytes | memoryview, read: BlockRead, *, source: str = ""
    ) -> list[Record]:
        """Rows ``[read.start:read.stop]`` of the row group as records: the value (a dict
        of the value columns, or the one value column's value), offset and timestamp."""
        table = self.table(raw, read, source=source)
        stop = table.num_rows if read.stop is None else min(read.stop, table.num_rows)
        return table_records(table.slice(read.start, max(0, stop - read.start)), self.value)


def table_records(table: Any, value: str = "record") -> list[Record]:
    """The rows of a table of a blockgz Parquet object as records (see
    :meth:`ParquetBlocks.records`)."""
    offsets = table.column(OFFSET_COLUMN).to_pylist()
    stamps = table.column(TIMESTAMP_COLUMN).cast("int64").to_pylist()
    values_table = table.drop_columns([OFFSET_COLUMN, TIMESTAMP_COLUMN])
    if value == "record":
        values = values_table.to_pylist()
    else:
        values = values_table.column(value).to_pylist()
    return [
        Record(o, v) if t is None else Record.kept(o, v, timestamp=t, holds=_TIMESTAMP)
        for o, v, t in zip(offsets, values, stamps, strict=True)
    ]


def parquet_values(stream: Any) -> Iterator[Any]:
    """The values of a whole Parquet object read from ``stream`` (any readable file), in
    order: the stream decoder readers use for an object read whole."""
    import pyarrow.parquet as pq

    data = stream.read()
    parquet = pq.ParquetFile(io.BytesIO(data))
    value = (parquet.metadata.metadata or {}).get(VALUE_KEY.encode(), b"record").decode()
    for n in range(parquet.num_row_groups):
        for record in table_records(parquet.read_row_group(n), value):
            yield record.value
