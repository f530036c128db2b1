"""The entries the ``.keys``/``.headers``/``.timestamps`` objects keep for a block of records.

A companion's blocks do not line up with its value object's: a timestamps entry is a few bytes,
so one block of the timestamps file covers many value blocks (often the whole object). Each
companion block is decoded once and kept, a few of the most recent, while the value blocks it
covers are read. Decoding it again for each value block made reading with timestamps five
times slower than without (1M records: 4.6 s against 0.9 s).

>>> import tempfile
>>> from blockgz.written.upload import BlockGzipUpload
>>> from blockgz.objects.indexed import load_index
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> with BlockGzipUpload(store, "k.json.gz", first_offset=10) as out:
...     for n in range(10, 20):
...         out.write(b'"key-%d"' % n)
>>> stamps = ObjectRef("k.json.gz", "t", 0, 10, "keys.json.gz", has_index=True)
>>> reader = CompanionReader(store, lambda ref: load_index(store, ref.key), None)
>>> reader.entries(stamps, 12, 3)
[b'key-12', b'key-13', b'key-14']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record
from blockgz.blocks.index import BlockIndex
from blockgz.objects.indexed import IndexedReader, object_ranges
from blockgz.reader.reading.companion_entries import (
    check_entries,
    decoded_column,
    is_sidecar_stamps,
    joined,
    joined_columns,
    stamp_block,
    stamp_pairs,
    with_entries,
)
from blockgz.store import ObjectStore

#: What :func:`joined` takes for a timestamps column (only its role is looked at).
_STAMPS = ObjectRef("", "", 0, 0, "timestamps.index.json")

#: Decoded companion blocks kept (a block is at most the export's block size uncompressed;
#: a few cover the value blocks the read pool has in flight).
KEPT_BLOCKS = 8


class CompanionReader:
    """Records joined with the entries their companion objects keep for them.

    ``index_of`` gives an indexed object's index (the archive's cached one); ``stream_of``
    reads an object without an index whole, as records.
    """

    def __init__(
        self,
        store: ObjectStore,
        index_of: Callable[[ObjectRef], BlockIndex],
        stream_of: Callable[[ObjectRef], Iterator[Record]] | None,
        *,
        kept_blocks: int = KEPT_BLOCKS,
    ):
        self.store = store
        self._index_of = index_of
        self._stream_of = stream_of
        self._kept_blocks = kept_blocks
        self._blocks: OrderedDict[tuple[str, int, int], list[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def joined_block(self, ref: ObjectRef, offsets: list[int], values: list[Any]) -> list[Record]:
        """The records of a block read as columns, with the entries ``ref``'s companions keep
        for them (:func:`~blockgz.reader.reading.companion_entries.joined_columns`)."""
        if not offsets:
            return []
        companions, columns = self._columns(ref, offsets[0], len(offsets))
        return joined_columns(offsets, values, companions, columns)

    def joined_records(self, ref: ObjectRef, records: list[Record]) -> list[Record]:
        """The records of a block its format decodes itself (Parquet), with the entries
        ``ref``'s companions keep for them; what the records hold of their own (a Parquet
        row's ``__kafka_timestamp``) stays where no companion keeps it
        (:func:`~blockgz.reader.reading.companion_entries.joined`)."""
        if not records:
            return []
        companions, columns = self._columns(ref, records[0].offset, len(records))
        return joined(records, companions, columns)

    def _columns(
        self, ref: ObjectRef, offset: int, count: int
    ) -> tuple[tuple[ObjectRef, ...], list[list[Any]]]:
        """The companions that keep entries for ``count`` records from ``offset`` of the value
        object ``ref``, and each one's decoded entries (a sidecar that keeps no timestamps
        is left out: they were not recorded)."""
        companions, columns = [], []
        for companion in ref.companions:
            if is_sidecar_stamps(companion):
                kept = self._sidecar_stamps(ref, offset, count)
                if kept is None:
                    continue
                column = kept
            elif companion.has_index:
                column = self.entries(companion, offset, count)
            else:  # its offsets are not known: its entries line up with ref's records
                column = self.entries_at(companion, self._position(ref, offset), count)
            check_entries(companion, len(column), count)
            companions.append(companion)
            columns.append(column)
        return tuple(companions), columns

    def _sidecar_stamps(self, ref: ObjectRef, offset: int, count: int) -> list[Any] | None:
        """The ``(ms, type)`` pairs ``ref``'s sidecar keeps for ``count`` records from
        ``offset``; ``None`` when it keeps none (written before issue 44)."""
        index = self._index_of(ref)
        if not index.keeps_stamps:
            return None
        found: list[Any] = []
        block = index.locate(offset)
        position = index.chunks[block].position_of(offset)
        while len(found) < count and block < len(index.chunks):
            pairs = self._stamps_of_block(ref, index, block)
            found.extend(pairs[position : position + count - len(found)])
            block, position = block + 1, 0
        return found

    def _stamps_of_block(self, ref: ObjectRef, index: BlockIndex, block: int) -> list[Any]:
        """One chunk's kept timestamps as pairs, decoded once while recently used."""
        key = (ref.key + "#stamps", ref.size, block)
        with self._lock:
            kept = self._blocks.get(key)
            if kept is not None:
                self._blocks.move_to_end(key)
                return kept
        pairs = stamp_pairs(*index.block_stamps(block, source=ref.index_key or ref.key))
        with self._lock:
            self._blocks[key] = pairs
            while len(self._blocks) > self._kept_blocks:
                self._blocks.popitem(last=False)
        return pairs

    def _position(self, ref: ObjectRef, offset: int) -> int:
        """How many records the indexed value object ``ref`` holds before ``offset``."""
        index = self._index_of(ref)
        block = index.locate(offset)
        before = sum(chunk.num_records for chunk in index.chunks[:block])
        return before + index.chunks[block].position_of(offset)

    def streamed(self, ref: ObjectRef, records: Iterable[Record]) -> Iterator[Record]:
        """``records`` (``ref`` read whole, lazily) joined with its companions read whole."""
        assert self._stream_of is not None, "streaming needs stream_of"
        companions = tuple(c for c in ref.companions if not is_sidecar_stamps(c))
        stamps = self._all_sidecar_stamps(ref) if len(companions) < len(ref.companions) else None
        streams = [self._stream_of(c) for c in companions]
        for n, (record, *entries) in enumerate(zip(records, *streams, strict=False)):
            joined_record = with_entries(record, companions, [e.value for e in entries])
            if stamps is not None:
                joined_record = joined([joined_record], (_STAMPS,), [[stamps[n]]])[0]
            yield joined_record

    def _all_sidecar_stamps(self, ref: ObjectRef) -> list[Any] | None:
        """Every record's ``(ms, type)`` as ``ref``'s sidecar keeps them (``None``: none)."""
        index = self._index_of(ref)
        if not index.keeps_stamps:
            return None
        pairs: list[Any] = []
        for block in range(len(index.chunks)):
            pairs.extend(self._stamps_of_block(ref, index, block))
        return pairs

    def entries(self, ref: ObjectRef, offset: int, count: int) -> list[Any]:
        """The entries of the indexed companion ``ref`` for ``count`` records from
        ``offset``, decoded (:func:`~blockgz.reader.reading.companion_entries.decoded_column`);
        fewer
        when it holds fewer."""
        index = self._index_of(ref)
        found: list[Any] = []
        block = index.locate(offset)
        position = index.chunks[block].position_of(offset)
        while len(found) < count and block < len(index.chunks):
            values = self._decoded(ref, block, index)
            found.extend(values[position : position + count - len(found)])
            block, position = block + 1, 0
        return found

    def entries_at(self, ref: ObjectRef, position: int, count: int) -> list[Any]:
        """The decoded entries of companion ``ref`` (read whole: it has no index) for
        ``count`` records from its ``position``-th on."""
        return self._decoded(ref, -1, None)[position : position + count]

    def _decoded(self, ref: ObjectRef, block: int, index: BlockIndex | None) -> list[Any]:
        """The decoded entries of one block of ``ref`` (``-1``: the object streamed whole),
        decoded once while it is among the most recently used."""
        key = (ref.key, ref.size, block)  # a rewritten object (another size) is not confused
        with self._lock:
            kept = self._blocks.get(key)
            if kept is not None:
                self._blocks.move_to_end(key)
                return kept
        if index is None:
            assert self._stream_of is not None, "an object without an index needs stream_of"
            decoded = decoded_column(ref, [r.value for r in self._stream_of(ref)])
        else:
            decoded = self._block_entries(ref, index, block)
        with self._lock:
            self._blocks[key] = decoded
            while len(self._blocks) > self._kept_blocks:
                self._blocks.popitem(last=False)
        return decoded

    def _block_entries(self, ref: ObjectRef, index: BlockIndex, block: int) -> list[Any]:
        """The decoded entries of one block of an indexed companion: a timestamps block of
        JSON lines parsed whole (:func:`~blockgz.reader.reading.companion_entries.stamp_block`), any
        other through its records."""
        ranges = object_ranges(self.store, ref.key, index.chunks, ref.committed)
        reader = IndexedReader(ranges, index)
        if ref.role == "timestamps" and index.avro is None and index.blocks is None:
            stamps = stamp_block(ref, reader.read_block(block), index.chunks[block].num_records)
            if stamps is not None:
                return stamps
        return decoded_column(ref, [r.value for r in reader.block_records(block)])

    def forget(self) -> None:
        """Drop the decoded blocks (the archive's objects may have changed)."""
        with self._lock:
            self._blocks.clear()


__all__ = ["KEPT_BLOCKS", "CompanionReader"]
