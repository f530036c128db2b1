"""An archive of topics in Confluent's S3-sink layout, read by Kafka offset.

>>> import tempfile
>>> from blockgz.sample import write_sample_objects
>>> from blockgz.store import LocalStore
>>> root = tempfile.mkdtemp()
>>> store = LocalStore(root)
>>> _ = write_sample_objects(store, "t", (0, 5))
>>> with open_archive(root) as archive:
...     [r.value for r in archive.seek("t", 0, 3, count=4)]
[b'v3', b'v4', b'v5', b'v6']
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from blockgz.archive.layout import KeyLayout
from blockgz.archive.object_ref import ObjectRef
from blockgz.archive.reader_layout import given_layout_options, reader_layout
from blockgz.blocks.decode import Record
from blockgz.blocks.envelope import unwrap
from blockgz.blocks.framing import NEWLINE, Framing, framing_from_options
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.plan import (
    BlockRead,
    Span,
    merge_plans,
    merge_ranges,
    plan_blocks,
    prefetched,
)
from blockgz.commits.manifests import JOB_NAME_OPTIONS
from blockgz.errors import ConfigError, ObjectNotFoundError, OffsetNotFoundError
from blockgz.formats.by_name import format_of_extension, stream_decoder_of
from blockgz.objects.indexed import IndexedReader, load_index, object_ranges
from blockgz.objects.stream import stream_records
from blockgz.options import as_options
from blockgz.reader.analytics.frames import ArchiveAnalytics
from blockgz.reader.reading.catalog_source import TO_THE_END, overlapping
from blockgz.reader.reading.companion_entries import companions_for
from blockgz.reader.reading.companion_reader import CompanionReader
from blockgz.reader.reading.listing import ObjectSummary, list_objects
from blockgz.reader.reading.locate import ObjectLocator
from blockgz.reader.reading.overlap_reads import OverlapReads
from blockgz.reader.reading.overlaps import Overlap
from blockgz.reader.reading.read_options import ARCHIVE_OPTIONS, check_reader_options
from blockgz.reader.reading.record_runs import STREAM_RUN, enveloped, flattened, runs_of
from blockgz.reader.reading.strays import Listing
from blockgz.store import ObjectStore, open_store

#: ``ObjectSummary`` (:mod:`~blockgz.reader.reading.listing`) and ``STREAM_RUN``
#: (:mod:`~blockgz.reader.reading.record_runs`) live beside this module and are still importable
# from it.
__all__ = ["STREAM_RUN", "Archive", "ObjectSummary", "open_archive"]


def open_archive(url: str, options: Mapping[str, Any] | None = None) -> Archive:
    """Open an archive at ``s3://bucket/prefix``, ``file:///dir`` or a directory path.

    ``options`` are the S3 settings under Confluent's names (``store.url``, ``s3.region``,
    ...), the export's key layout (``topics.dir``, ``directory.delim``, ``file.delim``),
    ``prefetch`` (blocks fetched ahead, default 2), ``scan.unindexed`` (stream ``.gz``
    objects that have no index instead of failing), ``format.bytearray.framing`` (how objects
    without an index frame their records) and ``format.json.envelope`` (default ``true``:
    records the export wrapped in its envelope come back with their key, headers and timestamp;
    ``false`` returns the lines as stored) and ``catalog`` (default ``true``: where listing a
    partition's prefix finds nothing or more than a page, the exports' catalogs say which
    objects hold an offset; ``false`` lists only) and ``committed`` (default ``true``: where
    an export's manifests cover a partition, read only the objects they committed, never one
    a running or failed batch left or another tool put there; ``false``: every object the
    listing finds). An archive without manifests (another writer, DeviantArt's) is read from
    its listing either way. ``name`` (the export's job name) reads that job's catalog alone,
    from its head, without listing the jobs under the prefix: a cold seek is then 3 requests
    (the head, the object's sidecar, the block).

    Only the exports of the layout read (``topics.dir`` and the delimiters) are read: another
    export of the same topic under another ``topics.dir`` in the same bucket is another
    archive. Where objects hold the same offsets (two writers), each offset is returned once,
    from the object with the lowest first offset, then the lowest key, and a warning names
    the objects (see :mod:`blockgz.reader.reading.overlaps`; ``blockgz verify`` reports them as
    problems).

    ``layout=deviantart`` reads an archive of DeviantArt's ``kafka-connect-s3`` connector
    instead: ``<prefix><yyyy-MM-dd>/<topic>-<partition:05>-<offset:012>.gz`` and its
    ``.index.json`` (see :class:`~blockgz.archive.deviantart.DeviantArtLayout`). Every date
    directory under the prefix is listed; when the same object name sits in several (re-uploaded
    after a restart), the latest date's copy is read.

    >>> import gzip, json, pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> day = root / "2016-02-24"
    >>> day.mkdir()
    >>> block = gzip.compress(b"a\\nb\\n")
    >>> _ = (day / "t-00000-000000000007.gz").write_bytes(block)
    >>> chunk = {"first_record_offset": 7, "num_records": 2, "byte_offset": 0,
    ...          "byte_length": len(block), "byte_length_uncompressed": 4}
    >>> _ = (day / "t-00000-000000000007.index.json").write_text(json.dumps({"chunks": [chunk]}))
    >>> with open_archive(str(root), {"layout": "deviantart"}) as archive:
    ...     [(r.offset, r.value) for r in archive.seek("t", 0, 8)]
    [(8, b'b')]
    """
    opts = as_options(options)
    check_reader_options(opts, "open_archive")  # a likely typo is an error, before anything
    store, prefix = open_store(url, opts)
    read = ARCHIVE_OPTIONS.read
    return Archive(
        store,
        prefix,
        layout=reader_layout(opts),
        layout_given=given_layout_options(opts),
        prefetch=read(opts, "prefetch"),
        scan_unindexed=read(opts, "scan.unindexed"),
        envelopes=read(opts, "format.json.envelope"),
        framing=framing_from_options(opts),
        use_catalog=read(opts, "catalog"),
        committed_only=read(opts, "committed"),
        job=JOB_NAME_OPTIONS.read(opts, "name") if "name" in opts else "",
    )


class Archive(ArchiveAnalytics):
    """Topic-partitions archived under one prefix. Listings and indexes are cached."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "",
        *,
        layout: KeyLayout | None = None,
        prefetch: int = 2,
        scan_unindexed: bool = False,
        envelopes: bool = True,
        framing: Framing = NEWLINE,
        use_catalog: bool = True,
        committed_only: bool = True,
        layout_given: Iterable[str] | None = None,
        job: str = "",
    ):
        if prefetch < 0:
            raise ConfigError(f"prefetch must be 0 or more, got {prefetch}")
        #: Finds the objects (and owns the store, prefix and layout it found them with).
        self.locator: ObjectLocator = ObjectLocator(
            store,
            prefix,
            layout=layout,
            use_catalog=use_catalog,
            committed_only=committed_only,
            layout_given=layout_given,
            job=job,
        )
        self.prefetch = prefetch
        self.scan_unindexed = scan_unindexed
        #: Unwrap ``format.json.envelope`` lines into records with key, headers and timestamp.
        self.envelopes = envelopes
        #: How records of objects without an index are framed (``format.bytearray.framing``).
        self.framing = framing
        self._indexes: dict[str, BlockIndex] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max(1, prefetch), thread_name_prefix="blockgz-read")
        #: Joins records with their keys/headers/timestamps files (decoded blocks kept).
        self._companions = CompanionReader(store, self.index, self._stream_records)
        #: Merges objects that share offsets; warns once per pair of a copy left out.
        self._overlap_reads = OverlapReads(self.locator, self.index, self._blocks)

    # -- listing ------------------------------------------------------------------------------
    @property
    def store(self) -> ObjectStore:
        return self.locator.store

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The archive's read pool: block fetches ahead of the reader, index loads."""
        return self._executor

    @property
    def prefix(self) -> str:
        return self.locator.prefix

    @property
    def layout(self) -> KeyLayout:
        return self.locator.layout

    def objects(self, topic: str, partition: int) -> list[ObjectRef]:
        """The partition's data objects by start offset (see :meth:`seek_objects`)."""
        return self.locator.locate(topic, partition, None)[0]

    def seek_objects(
        self, topic: str, partition: int, offset: int, *, upto: int | None = None
    ) -> tuple[list[ObjectRef], int]:
        """The objects a seek from ``offset`` (up to the offset ``upto``, ``TO_THE_END``: all)
        reads, and the partition's first archived offset (``offset`` itself when nothing is
        archived).

        One listing page of the partition's prefix answers for most archives. When it finds
        nothing (a time or field partitioner spreads a partition over many directories) or
        more than a page, the exports' catalogs answer, reading only their segments that reach
        ``offset``: the cost stays bounded however many objects the partition has (see
        :mod:`blockgz.commits.catalog`).
        """
        refs, first = self.locator.locate(topic, partition, offset, upto=upto)
        return refs, offset if first is None else first

    def nothing_found(self, topic: str | None = None, partition: int | None = None):
        """The error for a listing that found no data object, with hints where others are."""
        return self.locator.nothing_found(topic, partition)

    def refresh(self) -> None:
        """Forget cached listings and indexes (new objects may have arrived)."""
        self.locator.refresh()
        self._indexes.clear()
        self._companions.forget()

    def avro_schema(self, ref: ObjectRef) -> str:
        """The writer's schema of an Avro object (from its index, else its header)."""
        if ref.has_index:
            avro = self.index(ref).avro
            if avro is not None:
                return avro.schema
        from blockgz.blocks.avro.block_read import read_avro_header

        head = self.store.get_range(ref.key, 0, min(ref.size, 1 << 20) if ref.size > 0 else 1 << 20)
        return read_avro_header(head, source=self.store.url(ref.key)).schema

    def remember_index(self, ref: ObjectRef, index: BlockIndex) -> None:
        """Use ``index`` for ``ref`` (loaded elsewhere, e.g. when a scan was planned)."""
        with self._lock:
            self._indexes.setdefault(ref.key, index)

    def block_records(
        self, ref: ObjectRef, block: int, *, timestamps: bool = False
    ) -> Iterable[Record]:
        """The records of one block of ``ref`` (``-1``: the whole object, streamed), with the
        keys and headers kept beside it (and with ``timestamps``, the record timestamps kept
        beside it: see :meth:`seek`) and envelopes unwrapped."""
        if block < 0:
            return self._unwrapped(self._fetch((companions_for(ref, timestamps), None))[0])
        return next(self.blocks_records(ref, [block], timestamps=timestamps))

    def blocks_records(
        self, ref: ObjectRef, blocks: Iterable[int], *, timestamps: bool = False
    ) -> Iterator[Iterable[Record]]:
        """:meth:`block_records` of each of ``blocks`` (indexed ``ref``, file order), in
        order; neighbouring blocks are fetched with one ranged GET."""
        chunks = self.index(ref).chunks
        ref = companions_for(ref, timestamps)
        reads = [BlockRead(n, chunks[n]) for n in blocks]
        for span in merge_ranges(reads):
            for records in self._fetch((ref, span)):
                yield self._unwrapped(records)

    def _unwrapped(self, records: Iterable[Record]) -> Iterable[Record]:
        """Envelopes unwrapped. The export wraps all records or none: a block whose first
        record is no envelope is passed on as it is, with no check per record."""
        if not self.envelopes or (isinstance(records, list) and not enveloped(records)):
            return records
        return (unwrap(r) for r in records)

    def index(self, ref: ObjectRef) -> BlockIndex:
        with self._lock:
            cached = self._indexes.get(ref.key)
        if cached is None:
            cached = load_index(
                self.store, ref.key, ref.index_key, size=ref.size, committed=ref.committed
            )
            with self._lock:
                self._indexes[ref.key] = cached
        return cached

    # -- reading ------------------------------------------------------------------------------
    def seek(
        self,
        topic: str,
        partition: int,
        offset: int,
        count: int | None = None,
        *,
        timestamps: bool = False,
    ) -> Iterator[Record]:
        """Records of ``topic``/``partition`` from ``offset`` on, across blocks and objects.

        An offset that no object holds (compacted, or a gap between objects) starts at the
        next one that exists. Offsets before the first or after the last archived record
        raise :class:`~blockgz.errors.OffsetNotFoundError`.

        The record timestamps an export keeps (``store.kafka.timestamps``: in the value file's
        sidecar, or in an older archive a hidden file beside it) are filled in only when asked
        for: with ``timestamps=True`` each record's ``timestamp``/``timestamp_type`` come from
        the sidecar already read (an older archive's file costs one more ranged GET per block);
        without, they are ``None`` unless the value file keeps them itself (an envelope,
        Parquet). :meth:`records` (and replay, restore, the Spark
        reader) always ask for them.
        """
        blocks = self.seek_blocks(topic, partition, offset, count, timestamps=timestamps)
        return flattened(blocks)

    def seek_blocks(
        self,
        topic: str,
        partition: int,
        offset: int,
        count: int | None = None,
        *,
        times: tuple[int | None, int | None] | None = None,
        timestamps: bool = False,
    ) -> Iterator[list[Record]]:
        """:meth:`seek` a block at a time: lists of records in offset order (a block's
        records from ``offset`` on; objects without an index in runs of
        ``STREAM_RUN`` records). For callers that handle many records, a list per block
        costs far less than a generator step per record. Raises as :meth:`seek` does, at
        the call. ``times`` (``(low, high)`` epoch ms, inclusive, ``None``: open) skips
        the blocks whose index says all their records are stamped outside it; the records
        of the blocks read are not filtered by it, but have their timestamps (as with
        ``timestamps=True``, see :meth:`seek`).
        """
        timestamps = timestamps or times is not None
        upto = TO_THE_END if count is None else offset + count - 1  # at least: gaps in offsets
        refs, first_archived = self.seek_objects(topic, partition, offset, upto=upto)
        where = f"{topic}/{partition} under {self.store.url(self.prefix)}"
        if not refs and first_archived == offset:
            raise self.nothing_found(topic, partition)
        if offset < first_archived:
            raise OffsetNotFoundError(
                f"offset {offset} of {where} is before the first archived offset {first_archived}"
            )
        if overlapping(refs):  # a time or field partitioner: one partition in many files
            return self._overlap_reads.merged(refs, offset, count, where, times, timestamps)
        if not refs:
            raise OffsetNotFoundError(f"offset {offset} of {where} is past the end")
        first = max(0, bisect.bisect_right([r.start_offset for r in refs], offset) - 1)
        # An earlier object that still holds the offset (two writers' objects overlap) is the
        # one read from: each offset comes from the object with the lowest first offset.
        while first > 0 and self._reaches(refs[first - 1], offset):
            first -= 1
        return self._blocks(refs, first, offset, count, where, times=times, timestamps=timestamps)

    def _reaches(self, ref: ObjectRef, offset: int) -> bool:
        """Whether ``ref`` holds ``offset`` or a later one (by its catalog entry or index)."""
        last = ref.last_offset
        if last is None and ref.has_index:
            last = self.index(ref).last_offset
        return last is not None and last >= offset

    def merged_blocks(
        self, refs: list[ObjectRef], offset: int, *, timestamps: bool = False
    ) -> Iterator[list[Record]]:
        """The records of ``refs`` (one topic-partition) from ``offset`` on, merged in offset
        order, each offset once (from the first object holding it); nothing past the end
        (:mod:`blockgz.reader.reading.overlap_reads`)."""
        return self._overlap_reads.merged_blocks(refs, offset, timestamps=timestamps)

    def read(
        self, topic: str, partition: int, start: int, end: int, *, timestamps: bool = False
    ) -> Iterator[Record]:
        """Records with ``start <= offset < end`` (``timestamps``: see :meth:`seek`)."""
        for record in self.seek(topic, partition, start, timestamps=timestamps):
            if record.offset >= end:
                return
            yield record

    def _blocks(
        self, refs, first, offset, count, where, *, quiet=False, times=None, timestamps=False
    ) -> Iterator[list[Record]]:
        remaining = count
        yielded = False
        below = offset  # the next record must have this offset or a higher one
        plan = self._plan(refs, first, offset, count, times, timestamps)
        jobs = merge_plans(plan, first_alone=count is None)
        for job, fetched in prefetched(jobs, self._fetch, self._executor, self.prefetch):
            for run in runs_of(self._unwrapped(records) for records in fetched):
                if run and run[0].offset < below:
                    if below > offset:  # an offset an earlier object already gave: a copy
                        self._overlap_reads.warn_duplicate(run[0].offset, job[0], refs)
                    run = [r for r in run if r.offset >= below]
                if run:
                    below = run[-1].offset + 1
                if remaining is not None:
                    run = run[:remaining]
                    remaining -= len(run)
                if run:
                    yield run
                    yielded = True
                if remaining == 0:
                    return
        if not yielded and not quiet:
            last = self._last_offset(refs[-1])
            raise OffsetNotFoundError(
                f"offset {offset} of {where} is past the end: last archived offset is {last}"
            )

    def _plan(
        self, refs, first, offset, count, times=None, timestamps=False
    ) -> Iterator[tuple[ObjectRef, list[BlockRead] | None]]:
        """``(object, its blocks to read)`` in order (:func:`~blockgz.blocks.plan.plan_blocks`);
        ``None`` means "stream the object". With ``times``, blocks stamped wholly outside them
        are left out. An object that starts inside an earlier one (two writers) is read from
        where the earlier one ends. Without ``timestamps``, the objects come without their
        timestamps companion, which is then not fetched."""
        needed = count
        covered = offset - 1  # planned up to here (or before the seek)
        keep = None if times is None else (lambda chunk: chunk.may_hold_times(*times))
        for ref in refs[first:]:
            ref = companions_for(ref, timestamps)
            if not ref.has_index:
                if ref.compressed and not ref.is_avro and not self.scan_unindexed:
                    raise ObjectNotFoundError(
                        f"{self.store.url(ref.key)} has no index sidecar, so offset {offset} "
                        "cannot be located in it; build one with `blockgz index`, or pass "
                        "scan.unindexed=true (--scan) to stream it from the start"
                    )
                yield ref, None
                continue
            index = self.index(ref)
            if index.last_offset is None or index.last_offset <= covered:
                continue  # it ends before the offset (or holds only what was planned)
            begin = covered + 1
            if index.first_offset is not None and offset <= index.first_offset < begin:
                self._overlap_reads.warn_duplicate(index.first_offset, ref, refs)
            reads = plan_blocks(index, begin, needed, keep=keep)
            yield ref, reads
            if needed is not None:
                needed -= sum(read.records for read in reads)
                if needed <= 0:
                    return
            covered = index.last_offset

    def _fetch(self, job: tuple[ObjectRef, Span | None]) -> Sequence[Iterable[Record]]:
        """The records of each block of the job's span (one ranged GET), with the entries of
        the keys and headers files beside them; no span: the object streamed (lazily)."""
        ref, span = job
        if span is not None:
            index = self.index(ref)
            ranges = object_ranges(self.store, ref.key, index.chunks, ref.committed)
            obj = IndexedReader(ranges, index)
            if not ref.companions:
                return obj.read_span(span)
            if index.blocks is not None:  # its format's records hold their own timestamps
                joined = self._companions.joined_records
                return [joined(ref, records) for records in obj.read_span(span)]
            return [
                self._companions.joined_block(ref, offsets, values)
                for offsets, values in obj.read_span_columns(span)
            ]
        if not ref.companions:
            return [self._stream_records(ref)]  # lazy: read as the caller iterates
        return [self._companions.streamed(ref, self._stream_records(ref))]

    def _stream_records(self, ref: ObjectRef) -> Iterator[Record]:
        """The object read whole: framed records, or decoded as its format says (Avro)."""
        decode = stream_decoder_of(ref.extension, ref.bytearray_extension)
        fmt = format_of_extension(ref.extension, ref.bytearray_extension)
        # format.bytearray.framing frames bytearray objects; JSON ones (a JSON keys or
        # timestamps file beside them) are always lines.
        framing = self.framing if fmt is None or fmt.takes_framing else NEWLINE
        return stream_records(
            self.store,
            ref.key,
            ref.start_offset,
            framing=framing,
            decode=decode,
            committed=ref.committed,  # the whole object read: its size and CRC-32 checked
        )

    def _last_offset(self, ref: ObjectRef) -> int | None:
        if ref.has_index:
            return self.index(ref).last_offset
        last = None
        for record in self._stream_records(ref):
            last = record.offset
        return last

    def overlaps(self, topic: str, partitions: Iterable[int] | None = None) -> list[Overlap]:
        """Pairs of objects of ``topic`` that hold the same offsets (two writers), which the
        readers resolve to the object with the lowest first offset
        (:mod:`blockgz.reader.reading.overlaps`).

        >>> import tempfile
        >>> from blockgz.sample import write_sample_objects
        >>> from blockgz.store import LocalStore
        >>> store = LocalStore(tempfile.mkdtemp())
        >>> _ = write_sample_objects(store, "t", (0, 3))
        >>> [(o.low, o.high, o.count) for o in Archive(store).overlaps("t")]
        [(3, 4, 2)]
        """
        return self._overlap_reads.overlaps(
            topic, self.partitions(topic) if partitions is None else partitions
        )

    # -- listing for people ----------------------------------------------------------------
    def ls(self, topic: str | None = None) -> Listing:
        """Every data object under the prefix (or one topic), with offsets and record counts;
        its ``strays`` are the other keys listed there, which no reader reads
        (:mod:`blockgz.reader.reading.listing`)."""
        return list_objects(self.locator, self.index, self._executor, topic)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
