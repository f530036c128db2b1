"""Fetching only some columns of Parquet row groups: the byte ranges of their column chunks,
merged into few requests, and each row group's pieces handed on once all have arrived.

A query that names two fields of fifteen needs a third of a row group's bytes. A row group's
column chunks lie one after another in schema order, so the wanted ones make a few ranges per
row group; ranges closer than ``gap`` bytes (within a row group or across two) are read as
one, since a skipped run of bytes that short costs less than another request.

>>> from blockgz.blocks.index import Chunk
>>> from blockgz.blocks.plan import BlockRead
>>> a, b = BlockRead(0, Chunk(0, 5, 0, 100, 100)), BlockRead(1, Chunk(5, 5, 100, 100, 100))
>>> spans = column_spans([(a, [(0, 10), (90, 100)]), (b, [(100, 110), (150, 160)])], gap=20)
>>> [(s.start, s.end, len(s.parts)) for s in spans]
[(0, 10, 1), (90, 110, 2), (150, 160, 1)]
>>> data = bytes(range(200))
>>> got = fetched_columns(lambda start, end: data[start:end], spans)
>>> [(read.block, sorted(pieces)) for read, pieces in got]
[(0, [0, 90]), (1, [100, 150])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from blockgz.blocks.plan import BlockRead, join_ranges, prefetched
from blockgz.errors import CorruptBlockError

#: ``(start, end)`` byte range of an object.
Range = tuple[int, int]


def leaf_columns(schema: Any, names: Iterable[str]) -> tuple[int, ...]:
    """The leaf column numbers of a Parquet ``schema`` (``metadata.schema``) that the top-level
    columns ``names`` are made of: the same dotted-path rule pyarrow's ``read_row_group(columns=)``
    uses, so every column chunk it will read is among them.

    >>> import pyarrow as pa, pyarrow.parquet as pq, io
    >>> table = pa.table({"a": [1], "s": [{"x": 1, "y": "z"}], "b": [2]})
    >>> out = io.BytesIO(); pq.write_table(table, out)
    >>> leaf_columns(pq.ParquetFile(io.BytesIO(out.getvalue())).metadata.schema, ["s", "b"])
    (1, 2, 3)
    """
    wanted = set(names)
    leaves = []
    for n in range(len(schema)):
        path = schema.column(n).path
        parts = path.split(".")
        if any(".".join(parts[:k]) in wanted for k in range(1, len(parts) + 1)):
            leaves.append(n)
    return tuple(leaves)


def column_ranges(group: Any, leaves: Sequence[int]) -> list[Range]:
    """The byte ranges of row group ``group``'s (``metadata.row_group(n)``) column chunks
    ``leaves``, in file order, touching ones joined."""
    ranges: list[Range] = []
    for n in sorted(leaves, key=lambda leaf: column_start(group.column(leaf))):
        column = group.column(n)
        start = column_start(column)
        end = start + column.total_compressed_size
        if ranges and start <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((start, end))
    return ranges


def column_start(column: Any) -> int:
    """Where a column chunk (``row_group.column(n)``) starts: its dictionary page, if any."""
    return column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset


@dataclass(frozen=True, slots=True)
class ColumnSpan:
    """One request ``[start, end)`` and the pieces in it: ``(row group's read, range)``."""

    start: int
    end: int
    parts: tuple[tuple[BlockRead, Range], ...]


def column_spans(
    groups: Iterable[tuple[BlockRead, list[Range]]], *, gap: int, limit: int | None = None
) -> list[ColumnSpan]:
    """The ranges of ``groups`` (row groups in file order, each with its wanted ranges) as
    requests: a range joins the request before it when it starts at most ``gap`` bytes after
    it and the request stays within ``limit`` bytes."""
    parts = [(read, part) for read, ranges in groups for part in ranges]
    runs = join_ranges(parts, lambda item: item[1], gap=gap, limit=limit)
    return [ColumnSpan(run[0][1][0], run[-1][1][1], tuple(run)) for run in runs]


def fetched_columns(
    read_range: Callable[[int, int], bytes],
    spans: Sequence[ColumnSpan],
    *,
    executor: Executor | None = None,
    ahead: int = 0,
    source: str = "",
) -> Iterator[tuple[BlockRead, dict[int, memoryview]]]:
    """``(row group's read, {start: bytes})`` for each row group of ``spans``, in order, once
    all its pieces have arrived; one ``read_range(start, end)`` per span, ``ahead`` of them
    fetched on ``executor`` while the caller works. A short read raises
    :class:`~blockgz.errors.CorruptBlockError`."""
    remaining: dict[int, int] = {}
    for span in spans:
        for read, _ in span.parts:
            remaining[read.block] = remaining.get(read.block, 0) + 1
    pending: dict[int, dict[int, memoryview]] = {}
    for span, raw in prefetched(spans, lambda s: read_range(s.start, s.end), executor, ahead):
        if len(raw) != span.end - span.start:
            read = span.parts[0][0]
            raise CorruptBlockError(
                f"{source}: read {len(raw)} bytes of {span.start}..{span.end - 1}, the footer "
                f"promises {span.end - span.start}",
                block=read.block,
                byte_offset=span.start,
            )
        view = memoryview(raw)
        for read, (start, end) in span.parts:
            pieces = pending.setdefault(read.block, {})
            pieces[start] = view[start - span.start : end - span.start]
            remaining[read.block] -= 1
            if not remaining[read.block]:
                yield read, pending.pop(read.block)
