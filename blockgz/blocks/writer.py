"""Write records as block-GZIP: a valid gzip file made of one member per block (or, with the
``zstd`` codec, block-zstd: one zstd frame per block and the seekable format's seek table).

Blocks are cut by uncompressed bytes (and optionally by record count), never split a
record, and are never empty; a record larger than the block size gets a block of its
own. Cuts happen on the calling thread, so the bytes written do not depend on the
number of compression threads.

    >>> import io
    >>> out = io.BytesIO()
    >>> with BlockGzipWriter(out, block_size=16, threads=1) as writer:
    ...     for n in range(5):
    ...         writer.write(b'{"n": %d}' % n)
    >>> [c.num_records for c in writer.index.chunks]
    [1, 1, 1, 1, 1]
    >>> import gzip; gzip.decompress(out.getvalue()).count(b"\\n")
    5
"""

from __future__ import annotations

import mmap
from typing import Any, Protocol

import numpy as np

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.codecs.families import block_codec
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.framing import NEWLINE, Framing, Separated
from blockgz.blocks.index import BlockIndex, Chunk, deltas_if_gapped
from blockgz.blocks.pipeline import OrderedCompressor, PendingBlock
from blockgz.errors import ConfigError, IndexNotReadyError, OffsetOrderError, RecordFramingError

DEFAULT_BLOCK_SIZE = 1024 * 1024  # 1 MiB: near-whole-file ratio, one small GET a seek
MIN_BLOCK_SIZE = 1


class ByteSink(Protocol):
    """Where a writer's bytes go: a binary file, an object store upload, anything with write."""

    def write(self, data: bytes, /) -> Any: ...


class BlockGzipWriter:
    """Frame, cut, compress and write records; :meth:`close` returns the :class:`BlockIndex`.

    ``write(record, offset)`` takes one record at a time with its Kafka offset (offsets
    must increase; gaps are recorded exactly). ``write_delimited(data)`` takes raw
    separator-delimited bytes in any chunking, with contiguous offsets — the fast path
    for files. Used as a context manager, an exception inside the block drops pending
    blocks and writes no index.
    """

    def __init__(
        self,
        fileobj: ByteSink,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_records: int | None = None,
        compression: Compression | None = None,
        threads: int | None = None,
        framing: Framing = NEWLINE,
        first_offset: int = 0,
    ):
        if block_size < MIN_BLOCK_SIZE:
            raise ConfigError(
                f"block size must be at least {MIN_BLOCK_SIZE} byte, got {block_size}"
            )
        if max_records is not None and max_records < 1:
            raise ConfigError(f"max records per block must be at least 1, got {max_records}")
        if first_offset < 0:
            raise ConfigError(f"first offset must not be negative, got {first_offset}")
        self._out = fileobj
        self.block_size = block_size
        self.max_records = max_records
        self.compression = compression or Compression()
        self.framing = framing
        self._compress = self.compression.compress
        self._pipeline = OrderedCompressor(self._work, self._emit, threads)
        self._unresolved = 0  # raw blocks whose first offset is known only once delivered
        self._chunks: list[Chunk] = []
        self._family = block_codec(self.compression.codec)
        self._frames: list[tuple[int, int, bytes]] = []  # what a trailer (seek table) lists
        self._trailer = 0
        self._bytes_written = 0
        self._records_written = 0
        self._next_offset = first_offset
        self._last_offset: int | None = None
        # The block being filled.
        self._buf = bytearray()
        self._buf_first: int | None = None
        self._buf_count = 0
        self._buf_offsets: list[int] | None = None  # only once this block has a gap
        # The block's smallest and largest record timestamp; once a record comes without
        # one, the block's time range is unknown (``_buf_untimed``) and not written.
        self._buf_min_time: int | None = None
        self._buf_max_time: int | None = None
        self._buf_untimed = False
        self._index: BlockIndex | None = None

    # -- properties used by callers that rotate files ------------------------------------
    @property
    def bytes_written(self) -> int:
        """Compressed bytes handed to the file object so far."""
        return self._bytes_written

    @property
    def records_written(self) -> int:
        """Records in blocks written so far."""
        return self._records_written

    @property
    def index(self) -> BlockIndex:
        if self._index is None:
            raise IndexNotReadyError("the index exists once the writer is closed")
        return self._index

    # -- one record at a time --------------------------------------------------------------
    def write(self, record: bytes, offset: int | None = None, timestamp: int | None = None) -> None:
        """Append one record; ``offset`` defaults to the previous one plus one. With every
        record's Kafka ``timestamp`` (epoch ms), the index says each block's time range."""
        self._settle_offsets()
        if offset is None:
            offset = self._next_offset
        elif self._last_offset is not None and offset <= self._last_offset:
            raise OffsetOrderError(f"offsets must increase: got {offset} after {self._last_offset}")
        framed = self.framing.encode(record)
        if self._buf_count and len(self._buf) + len(framed) > self.block_size:
            self._cut()
        if self._buf_count == 0:
            self._buf_first = offset
        elif self._buf_offsets is None and offset != self._next_offset:
            assert self._buf_first is not None
            self._buf_offsets = list(range(self._buf_first, self._next_offset))
        if self._buf_offsets is not None:
            self._buf_offsets.append(offset)
        self._buf += framed
        self._note_times(timestamp, timestamp)
        self._buf_count += 1
        self._last_offset = offset
        self._next_offset = offset + 1
        if len(self._buf) >= self.block_size or self._buf_count == self.max_records:
            self._cut()

    # -- many framed records at once --------------------------------------------------------
    def write_framed(
        self,
        data: bytes | memoryview,
        ends: np.ndarray,
        offsets: np.ndarray,
        timestamps: np.ndarray | None = None,
    ) -> None:
        """Append records that are already framed and checked, in one call.

        ``data`` holds the framed records back to back, ``ends[i]`` is where record ``i`` ends
        in it (int64, increasing), ``offsets[i]`` its Kafka offset (strictly increasing) and
        ``timestamps[i]``, if given, its Kafka timestamp (epoch ms; negative: none).
        Blocks are cut exactly where :meth:`write` would cut them, so the bytes and the index
        do not depend on which method (or which batching) wrote the records. The caller
        vouches that no record contains the separator (the sink checks whole batches at once).
        """
        n = len(ends)
        if n == 0:
            return
        if len(offsets) != n or (timestamps is not None and len(timestamps) != n):
            raise ValueError(f"{n} record ends but {len(offsets)} offsets or timestamps")
        self._settle_offsets()
        first = int(offsets[0])
        if (self._last_offset is not None and first <= self._last_offset) or (
            n > 1 and not bool(np.all(offsets[1:] > offsets[:-1]))
        ):
            raise OffsetOrderError(
                f"offsets must increase (batch from {first}, last {self._last_offset})"
            )
        limit, most = self.block_size, self.max_records
        view = memoryview(data)
        i = 0
        while i < n:
            held, count = len(self._buf), self._buf_count
            base = int(ends[i - 1]) if i else 0
            # The first record that fills the block, and the one that reaches max_records.
            fills = int(np.searchsorted(ends, limit - held + base, side="left"))
            full = i + (most - count) - 1 if most is not None else n
            if fills >= n and full >= n:
                self._append_framed(view, base, int(ends[-1]), offsets[i:], _part(timestamps, i, n))
                return
            if full < fills:
                stop, cut_before = full + 1, False
            else:
                size = held + int(ends[fills]) - base
                cut_before = size > limit and (count > 0 or fills > i)
                stop = fills if cut_before else fills + 1
            if stop > i:
                self._append_framed(
                    view, base, int(ends[stop - 1]), offsets[i:stop], _part(timestamps, i, stop)
                )
            self._cut()
            i = stop

    def _settle_offsets(self) -> None:
        """Before records with explicit offsets: cut what write_delimited left and wait until
        its blocks are delivered, which is when their offsets become known."""
        if self._buf and not self._buf_count:
            self._flush_delimited()
        if self._unresolved:
            self._pipeline.drain()

    def _append_framed(
        self,
        view: memoryview,
        start: int,
        end: int,
        offsets: np.ndarray,
        timestamps: np.ndarray | None,
    ) -> None:
        first, last, count = int(offsets[0]), int(offsets[-1]), len(offsets)
        if timestamps is None or int(timestamps.min()) < 0:
            self._note_times(None, None)
        else:
            self._note_times(int(timestamps.min()), int(timestamps.max()))
        if self._buf_count == 0:
            self._buf_first = first
            if last - first != count - 1:
                self._buf_offsets = []
        elif self._buf_offsets is None and (
            first != self._next_offset or last - first != count - 1
        ):
            assert self._buf_first is not None
            self._buf_offsets = list(range(self._buf_first, self._next_offset))
        if self._buf_offsets is not None:
            self._buf_offsets.extend(offsets.tolist())
        self._buf += view[start:end]
        self._buf_count += count
        self._last_offset = last
        self._next_offset = last + 1

    # -- raw delimited bytes -----------------------------------------------------------------
    def write_delimited(self, data: bytes | bytearray | memoryview | mmap.mmap) -> None:
        """Append separator-delimited bytes; a record may span calls. Offsets are contiguous.

        ``bytes`` and ``mmap`` inputs are not copied: blocks are compressed straight from
        them, so an mmap must stay open and unchanged until :meth:`close`. Anything else
        is copied. The unterminated tail of the last call becomes a record at :meth:`close`.
        """
        if not isinstance(self.framing, Separated):
            raise RecordFramingError("write_delimited needs separator framing")
        if self._buf_count:
            self._cut()  # records from write() close their block before raw data follows
        # Raw bytes come without timestamps; their blocks get no time range.
        if not self._buf and isinstance(data, (bytes, mmap.mmap)):
            consumed = self._cut_source(data, len(data), copy=False, final=False)
            self._buf += memoryview(data)[consumed:]
        else:
            self._buf += data
        consumed = self._cut_source(self._buf, len(self._buf), copy=True, final=False)
        del self._buf[:consumed]

    def _cut_source(self, src, size: int, *, copy: bool, final: bool) -> int:
        """Cut whole blocks from ``src[0:size]``; return how many bytes were consumed."""
        sep = self.framing.separator  # type: ignore[union-attr]
        limit, pos = self.block_size, 0
        with memoryview(src) as view:
            while size - pos > limit or (final and pos < size):
                end = src.rfind(sep, pos, pos + limit)  # scans back from the cut only
                if end >= 0:
                    end += len(sep)
                else:  # the next record is longer than a block: it gets a block of its own
                    end = src.find(sep, pos + max(0, limit - len(sep) + 1), size)
                    if end < 0:
                        break  # the record is not complete yet
                    end += len(sep)
                if self.max_records is not None:
                    end = self._limit_records(src, pos, end, sep)
                block = bytes(view[pos:end]) if copy else view[pos:end]
                self._unresolved += 1
                self._pipeline.submit(PendingBlock(block, None, None, None))
                pos = end
        return pos

    def _flush_delimited(self) -> None:
        """Cut what write_delimited left; an unterminated last record gets its separator."""
        sep = self.framing.separator  # type: ignore[union-attr]
        if not self._buf.endswith(sep):
            self._buf += sep
        self._cut_source(self._buf, len(self._buf), copy=True, final=True)
        self._buf.clear()

    def _limit_records(self, src, pos: int, end: int, sep: bytes) -> int:
        assert self.max_records is not None
        for _ in range(self.max_records):
            found = src.find(sep, pos, end)
            if found < 0:
                return end
            pos = found + len(sep)
        return pos

    # -- cutting and emitting ----------------------------------------------------------------
    def _note_times(self, low: int | None, high: int | None) -> None:
        """Widen the block's time range by ``low..high``; ``None`` (or a negative timestamp,
        Kafka's "none") makes it unknown."""
        if low is None or high is None or low < 0:
            self._buf_untimed = True
            return
        if self._buf_min_time is None or low < self._buf_min_time:
            self._buf_min_time = low
        if self._buf_max_time is None or high > self._buf_max_time:
            self._buf_max_time = high

    def _cut(self) -> None:
        if not self._buf_count:
            return
        assert self._buf_first is not None
        count = self._buf_count
        deltas = deltas_if_gapped(self._buf_offsets) if self._buf_offsets else None
        low, high = self._buf_min_time, self._buf_max_time
        times = None if self._buf_untimed or low is None or high is None else (low, high)
        pending = PendingBlock(bytes(self._buf), self._buf_first, count, deltas, times)
        self._buf.clear()
        self._buf_first, self._buf_count, self._buf_offsets = None, 0, None
        self._buf_min_time = self._buf_max_time = None
        self._buf_untimed = False
        self._pipeline.submit(pending)

    def _work(self, block: PendingBlock) -> tuple[bytes, int]:
        """Runs on a compression thread: deflate the block and, if unknown, count its records."""
        count = block.num_records
        if count is None:
            count = self.framing.count_terminated(block.data)  # type: ignore[union-attr]
        return self._compress(block.data), count

    def _emit(self, block: PendingBlock, result: tuple[bytes, int]) -> None:
        member, count = result
        first = block.first_record_offset
        if first is None:  # raw delimited data: offsets continue from the previous block
            first = self._next_offset
            self._unresolved -= 1
            self._next_offset = first + count
            self._last_offset = self._next_offset - 1
        self._out.write(member)
        self._frames.append((len(member), len(block.data), member[-4:]))
        low, high = block.times or (None, None)
        self._chunks.append(
            Chunk(
                first,
                count,
                self._bytes_written,
                len(member),
                len(block.data),
                block.offset_deltas,
                min_timestamp=low,
                max_timestamp=high,
                crc32=block_crc32(member),
            )
        )
        self._bytes_written += len(member)
        self._records_written += count

    # -- closing --------------------------------------------------------------------------------
    def close(self) -> BlockIndex:
        """Flush every block and return the index. Calling it twice returns the same index."""
        if self._index is not None:
            return self._index
        if self._buf and not self._buf_count:  # raw bytes left by write_delimited
            self._flush_delimited()
        self._cut()
        self._pipeline.finish()
        trailer = self._family.trailer(self._frames)
        if trailer:
            self._out.write(trailer)
            self._trailer = len(trailer)
            self._bytes_written += len(trailer)
        self._index = BlockIndex(
            self._chunks,
            framing=self.framing,
            codec=self.compression.codec,
            level=self.compression.level,
            block_size=self.block_size,
            trailer_length=self._trailer,
        )
        return self._index

    def abort(self) -> None:
        """Drop pending blocks and stop the threads; no index is produced."""
        self._pipeline.close()
        self._buf.clear()

    def __enter__(self) -> BlockGzipWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _part(timestamps: np.ndarray | None, start: int, stop: int) -> np.ndarray | None:
    return None if timestamps is None else timestamps[start:stop]
