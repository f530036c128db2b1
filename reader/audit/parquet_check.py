"""``blockgz audit --deep`` of a Parquet object: its footer against the manifest, and every row
group read once and checked against the footer.

Parquet objects have no sidecar: the footer is their index (:mod:`blockgz.formats.
parquet_read`). A deep audit reads the footer (one ranged GET, two for a large one) and checks:

* the footer parses, and its row groups say the manifest's first and last offsets and record
  count, in offset order without overlap;
* every row group decodes (page CRCs verified where the writer wrote them: blockgz does) and
  holds the rows its statistics promise: its ``__kafka_offset`` values are exactly those of
  the ``__kafka_offset`` statistics (min, max, row count) and the ``blockgz.row_groups`` gaps,
  in order, none null; its ``__kafka_timestamp`` values lie in the range its statistics say.

Row groups are fetched as spans of up to :data:`~blockgz.reader.audit.deep.SPAN_BYTES` (one
ranged GET each, the next fetched while one is checked). A footer that does not parse, or an
object cut short, is one finding (``(None, problem)``), a bad row group one finding per row
group: never an exception.

>>> import tempfile
>>> from types import SimpleNamespace
>>> from blockgz.written.files import WrittenFile
>>> from blockgz.formats.parquet.writer import ParquetObjectWriter
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> key = "t+0+0000000000.snappy.parquet"
>>> schema = SimpleNamespace(json={"type": "record", "name": "r", "fields": [
...     {"name": "n", "type": "long"}]})
>>> w = ParquetObjectWriter(store, key, schema, block_records=10)
>>> for n in range(30):
...     w.write({"n": n}, n, 1000 + n)
>>> size = w.close().size
>>> f = WrittenFile(key, "t", 0, "", 0, 29, 30, size, 0)
>>> check_parquet(store, f, size)
[]
>>> check_parquet(store, WrittenFile(key, "t", 0, "", 0, 31, 32, size, 0), size)
[(None, 'its footer holds offsets 0..29 (30 records), the manifest committed 0..31 (32 records)')]
>>> store.put(key, store.get(key)[: size - 100])
>>> [(chunk, problem[:54]) for chunk, problem in check_parquet(store, f, size - 100)]
[(None, "the footer cannot be read: does not end with Parquet's")]
"""

from __future__ import annotations

from concurrent.futures import Executor
from itertools import pairwise
from typing import Any

from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import BlockRead, fetched, merge_ranges
from blockgz.errors import BlockGzError
from blockgz.formats.parquet.read import Pieces, parquet_index
from blockgz.formats.parquet.schema import OFFSET_COLUMN, TIMESTAMP_COLUMN
from blockgz.reader.audit.deep import SPAN_BYTES
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile

Problems = list[tuple[Chunk | None, str]]


def check_parquet(
    store: ObjectStore, f: WrittenFile, size: int, executor: Executor | None = None
) -> Problems:
    """Read the Parquet object ``f`` (``size`` bytes as listed) once and check it (see the
    module docstring); each problem with its row group's chunk (``None``: the whole object)."""
    key = f.key
    try:
        index = parquet_index(lambda a, b: store.get_range(key, a, b), size, source=key)
    except BlockGzError as exc:
        return [(None, f"the footer cannot be read: {_what(exc, key)}")]
    problems: Problems = [(None, p) for p in _against_manifest(index, f)]
    reads = [BlockRead(n, chunk) for n, chunk in enumerate(index.chunks)]
    spans = merge_ranges(reads, gap=0, limit=SPAN_BYTES)
    blocks = fetched(lambda a, b: store.get_range(key, a, b), spans, executor=executor, ahead=1)
    try:
        for read, raw in blocks:
            problem = row_group_problem(index, read, raw)
            if problem is not None:
                where = f"row group {read.block} (bytes {read.chunk.byte_offset}.."
                problems.append((read.chunk, f"{where}{read.chunk.byte_end - 1}): {problem}"))
    except BlockGzError as exc:  # the object went away or shrank while it was read
        problems.append((None, f"cannot be read to its end: {_what(exc, key)}"))
    return problems


def _against_manifest(index: BlockIndex, f: WrittenFile) -> list[str]:
    """The footer's offsets and count against the manifest's; row groups out of order."""
    found = []
    said = (index.first_offset, index.last_offset, index.record_count)
    if said != (f.first_offset, f.last_offset, f.records):
        found.append(
            f"its footer holds offsets {said[0]}..{said[1]} ({said[2]} records), the manifest "
            f"committed {f.first_offset}..{f.last_offset} ({f.records} records)"
        )
    for n, (a, b) in enumerate(pairwise(index.chunks), 1):
        if b.first_record_offset <= a.last_record_offset:
            found.append(
                f"row group {n} starts at offset {b.first_record_offset}, not after row group "
                f"{n - 1}'s last offset {a.last_record_offset}"
            )
    return found


def row_group_problem(index: BlockIndex, read: BlockRead, raw: bytes | memoryview) -> str | None:
    """What is wrong with one row group's stored bytes ``raw``, or ``None``."""
    import numpy as np

    chunk = read.chunk
    if len(raw) != chunk.byte_length:
        return f"read {len(raw)} bytes, the footer promises {chunk.byte_length} (truncated?)"
    try:
        table = _read_row_group(index.blocks, raw, read)
    except Exception as exc:  # pyarrow: OSError (a page CRC), ArrowInvalid, ...
        return f"does not decode ({exc})"
    if table.num_rows != chunk.num_records:
        return f"holds {table.num_rows} rows, the footer promises {chunk.num_records}"
    column = table.column(OFFSET_COLUMN)
    if column.null_count:
        return f"{column.null_count} rows have no {OFFSET_COLUMN}"
    got = column.to_numpy()
    want = np.asarray(chunk.record_offsets(), dtype=got.dtype)
    if not np.array_equal(got, want):
        row = int(np.flatnonzero(got != want)[0])
        return f"row {row} has offset {got[row]}, the footer's statistics and gaps say {want[row]}"
    if chunk.min_timestamp is not None and TIMESTAMP_COLUMN in table.column_names:
        stamps = table.column(TIMESTAMP_COLUMN).cast("int64").to_numpy(zero_copy_only=False)
        low, high = int(stamps.min()), int(stamps.max())
        if (low, high) != (chunk.min_timestamp, chunk.max_timestamp):
            return (
                f"its timestamps run {low}..{high} ms, the footer's statistics say "
                f"{chunk.min_timestamp}..{chunk.max_timestamp}"
            )
    return None


def _read_row_group(blocks: Any, raw: bytes | memoryview, read: BlockRead) -> Any:
    """Row group ``read.block`` as an Arrow table, its pages' CRCs checked where written."""
    import pyarrow.parquet as pq

    pieces = Pieces(blocks.size, {read.chunk.byte_offset: raw, blocks.footer_start: blocks.footer})
    parquet = pq.ParquetFile(pieces, metadata=blocks.meta, page_checksum_verification=True)
    return parquet.read_row_group(read.block)


def _what(exc: Exception, key: str) -> str:
    return str(exc).removeprefix(f"{key}: ")
