"""An archive of topics in Confluent's S3-sink layout, read by Kafka offset.

>>> import tempfile
>>> from blockgz import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> root = tempfile.mkdtemp()
>>> store = LocalStore(root)
>>> for start in (0, 5):
...     key = f"topics/t/partition=0/t+0+{start:010d}.json.gz"
...     with BlockGzipUpload(store, key, first_offset=start) as out:
...         for n in range(start, start + 5):
...             out.write(b"v%d" % n)
>>> with open_archive(root) as archive:
...     [r.value for r in archive.seek("t", 0, 3, count=4)]
[b'v3', b'v4', b'v5', b'v6']
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from blockgz.errors import ConfigError, ObjectNotFoundError, OffsetNotFoundError
from blockgz.format.decode import Record
from blockgz.format.envelope import ENVELOPE_START, unwrap
from blockgz.format.framing import NEWLINE, Framing, framing_from_options
from blockgz.format.index import BlockIndex
from blockgz.layout import DeviantArtLayout, Layout, ObjectRef, reader_layout, sidecar_key
from blockgz.manifests import ExportFound, find_exports
from blockgz.objects.indexed import IndexedReader, load_index
from blockgz.objects.stream import stream_records
from blockgz.options import as_options
from blockgz.store import LocalStore, ObjectStore, open_store
from reader.catalog_source import CatalogSource, merged_by_offset, overlapping

#: Keys asked for in the one listing page of a partition's prefix before the catalog is used.
LISTING_PAGE = 1000
_UNSET = object()
_PAST_ANY_OFFSET = 2**63 - 1

J = TypeVar("J")
R = TypeVar("R")


@dataclass(frozen=True)
class ObjectSummary:
    """One line of ``blockgz ls``."""

    key: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int | None
    records: int | None
    size: int
    indexed: bool


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
    objects hold an offset; ``false`` lists only) and ``committed`` (default ``false``;
    ``true``: where an export's manifests cover a partition, read only the objects they
    committed, never one a running or failed batch left).

    ``layout=deviantart`` reads an archive of DeviantArt's ``kafka-connect-s3`` connector
    instead: ``<prefix><yyyy-MM-dd>/<topic>-<partition:05>-<offset:012>.gz`` and its
    ``.index.json`` (see :class:`~blockgz.layout.DeviantArtLayout`). Every date directory under
    the prefix is listed; when the same object name sits in several (re-uploaded after a
    restart), the latest date's copy is read.

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
    store, prefix = open_store(url, opts)
    return Archive(
        store,
        prefix,
        layout=reader_layout(opts),
        prefetch=opts.integer("prefetch", 2, low=0),
        scan_unindexed=opts.flag("scan.unindexed", False),
        envelopes=opts.flag("format.json.envelope", True),
        framing=framing_from_options(opts),
        use_catalog=opts.flag("catalog", True),
        committed_only=opts.flag("committed", False),
    )


class Archive:
    """Topic-partitions archived under one prefix. Listings and indexes are cached."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "",
        *,
        layout: Layout | DeviantArtLayout | None = None,
        prefetch: int = 2,
        scan_unindexed: bool = False,
        envelopes: bool = True,
        framing: Framing = NEWLINE,
        use_catalog: bool = True,
        committed_only: bool = False,
    ):
        if prefetch < 0:
            raise ConfigError(f"prefetch must be 0 or more, got {prefetch}")
        self.store = store
        self.prefix = prefix
        #: ``None`` given: the default layout, or the one the manifests under the prefix
        #: recorded when the default finds nothing (an export with ``topics.dir=bgz``).
        self.layout: Layout | DeviantArtLayout = layout or Layout()
        self._may_learn_layout = layout is None
        self._may_relocate = True
        self.prefetch = prefetch
        self.scan_unindexed = scan_unindexed
        #: Unwrap ``format.json.envelope`` lines into records with key, headers and timestamp.
        self.envelopes = envelopes
        #: How records of objects without an index are framed (``format.bytearray.framing``).
        self.framing = framing
        #: Find objects through the exports' catalogs when listing cannot (``catalog``).
        self.use_catalog = use_catalog
        #: Read what the manifests committed, where they cover a partition (``committed``).
        self.committed_only = committed_only
        self._catalog: CatalogSource | object | None = _UNSET
        self._objects: dict[tuple[str, int], list[ObjectRef]] = {}
        self._indexes: dict[str, BlockIndex] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max(1, prefetch), thread_name_prefix="blockgz-read")

    # -- listing ------------------------------------------------------------------------------
    def objects(self, topic: str, partition: int) -> list[ObjectRef]:
        """The partition's data objects by start offset.

        Lists the partition's prefix; when that finds nothing (a time or field partitioner
        spreads a partition over many directories) or more than one listing page, the
        exports' catalogs say instead (see :meth:`seek_objects`)."""
        cache_key = (topic, partition)
        if cache_key not in self._objects:
            committed = self._committed_source(topic, partition)
            if committed is not None:
                self._objects[cache_key] = committed.refs(topic, partition)
                return self._objects[cache_key]
            refs, complete = self._list_partition(topic, partition)
            source = None if complete and refs else self._catalog_source()
            if source is not None and source.has(topic, partition):
                refs = source.refs(topic, partition)
            elif not complete:
                prefix = self.layout.partition_prefix(self.prefix, topic, partition)
                refs = self._parse_listing(prefix, topic, partition)
            elif not refs and (self._relocate() or self._learn_layout()):
                return self.objects(topic, partition)
            self._objects[cache_key] = refs
        return self._objects[cache_key]

    def seek_objects(self, topic: str, partition: int, offset: int) -> tuple[list[ObjectRef], int]:
        """The objects a seek from ``offset`` reads, and the partition's first archived offset.

        One listing page of the partition's prefix answers for most archives. Otherwise the
        catalog does, reading only its segments that reach ``offset``: the cost stays bounded
        however many objects the partition has (see :mod:`blockgz.catalog`).
        """
        committed = self._committed_source(topic, partition)
        if committed is not None:
            first = committed.first_offset(topic, partition)
            found = committed.refs(topic, partition, from_offset=offset)
            return found, first if first is not None else offset
        if (topic, partition) not in self._objects:
            refs, complete = self._list_partition(topic, partition)
            if complete and refs:  # the one listing page answers: keep it for later seeks
                self._objects[(topic, partition)] = refs
            else:
                source = self._catalog_source()
                if source is not None and source.has(topic, partition):
                    first = source.first_offset(topic, partition)
                    found = source.refs(topic, partition, from_offset=offset)
                    return found, first if first is not None else offset
                if not refs and (self._relocate() or self._learn_layout()):
                    return self.seek_objects(topic, partition, offset)
        refs = self.objects(topic, partition)
        return refs, refs[0].start_offset if refs else offset

    def _list_partition(self, topic: str, partition: int) -> tuple[list[ObjectRef], bool]:
        """The partition prefix's first listing page: ``(refs, whether that was all)``."""
        prefix = self.layout.partition_prefix(self.prefix, topic, partition)
        listed = list(self.store.list(prefix, limit=LISTING_PAGE))
        return self._refs_of_listing(listed, topic, partition), len(listed) < LISTING_PAGE

    def _committed_source(self, topic: str, partition: int) -> CatalogSource | None:
        """The catalogs, when only committed objects are wanted and they cover the partition."""
        if not self.committed_only:
            return None
        source = self._catalog_source()
        return source if source is not None and source.has(topic, partition) else None

    def _catalog_source(self) -> CatalogSource | None:
        """The catalogs of the exports under the prefix (looked for once)."""
        if self._catalog is _UNSET:
            found = None
            if not isinstance(self.layout, DeviantArtLayout) and self.use_catalog:
                found = CatalogSource.find(self.store, self.prefix)
            self._catalog = found
        return self._catalog  # type: ignore[return-value]

    def _relocate(self) -> bool:
        """Once: the URL named the topics directory (``s3://arch/topics``) or a topic's
        directory (``s3://arch/topics/ev``) rather than the root above them; move up to it."""
        if not self._may_relocate or isinstance(self.layout, DeviantArtLayout):
            return False
        self._may_relocate = False
        topics = self.layout.topics_dir
        if not topics:
            return False
        store, parts = self.store, [p for p in self.prefix.split("/") if p]
        local_root = isinstance(store, LocalStore) and not parts
        if local_root:  # a directory path: its own name and its parents' are the parts
            parts = [p.name for p in (store.root, *store.root.parents[:1])][::-1]
        for depth in (1, 2):
            if len(parts) >= depth and parts[-depth] == topics:
                if local_root:
                    self.store = LocalStore(store.root.parents[depth - 1])
                    self.prefix = ""
                else:
                    kept = parts[:-depth]
                    self.prefix = "/".join(kept) + "/" if kept else ""
                self._objects.clear()
                self._catalog = _UNSET
                return True
        return False

    def _learn_layout(self) -> bool:
        """Once: adopt the layout the manifests under the prefix recorded, if it differs."""
        if not self._may_learn_layout:
            return False
        self._may_learn_layout = False
        layouts = {found.layout for found in find_exports(self.store, self.prefix)}
        if len(layouts) != 1 or self.layout in layouts:
            return False
        self.layout = layouts.pop()
        self._objects.clear()
        return True

    def where(self, topic: str | None = None, partition: int | None = None) -> str:
        """What was listed for ``topic``/``partition``, for messages."""
        if topic is not None and partition is not None:
            listed = self.layout.partition_prefix(self.prefix, topic, partition)
        else:
            listed = self.layout.topic_prefix(self.prefix, topic)
        if isinstance(self.layout, DeviantArtLayout):
            return f"{self.store.url(listed)} (layout=deviantart)"
        return f"{self.store.url(listed)} (topics.dir={self.layout.topics_dir!r})"

    def nothing_found(self, topic: str | None = None, partition: int | None = None):
        """The error for a listing that found no data object, with hints where others are."""
        what = "data objects" if topic is None else f"archived objects of topic {topic!r}"
        if partition is not None:
            what += f", partition {partition}"
        hints = [
            f"{url} holds export {found.name!r} with topics.dir={found.layout.topics_dir!r}"
            for url, found in self._exports_nearby()
        ]
        hint = f"; found instead: {'; '.join(hints)}" if hints else ""
        return ObjectNotFoundError(f"no {what}: listed {self.where(topic, partition)}{hint}")

    def _exports_nearby(self) -> list[tuple[str, ExportFound]]:
        """(URL, export) for exports under this prefix and each parent up to the bucket's root
        (for a local directory: it and its two parent directories)."""
        parts = self.prefix.rstrip("/").split("/") if self.prefix else []
        places = [
            (self.store, "/".join(parts[:n]) + "/" if n else "") for n in range(len(parts), -1, -1)
        ]
        if isinstance(self.store, LocalStore):
            places += [(LocalStore(parent), "") for parent in self.store.root.parents[:2]]
        return [
            (store.url(prefix).rstrip("/") + "/", found)
            for store, prefix in places
            for found in find_exports(store, prefix)
        ]

    def _parse_listing(
        self, prefix: str, topic: str | None, partition: int | None
    ) -> list[ObjectRef]:
        return self._refs_of_listing(list(self.store.list(prefix)), topic, partition)

    def _refs_of_listing(
        self, listed: list, topic: str | None, partition: int | None
    ) -> list[ObjectRef]:
        keys = {o.key for o in listed}
        refs = []
        for info in listed:
            ref = self.layout.parse_data_key(info.key, size=info.size)
            if ref is None or (topic and ref.topic != topic):
                continue
            if partition is not None and ref.partition != partition:
                continue
            has_index = ref.seekable and sidecar_key(info.key) in keys
            refs.append(replace(ref, has_index=has_index))
        refs = _with_companions(refs)
        refs.sort(key=lambda r: (r.topic, r.partition, r.start_offset, r.key))
        if isinstance(self.layout, DeviantArtLayout):
            # The same name in several date directories: re-uploaded after a restart (the
            # connector resumes from its last committed index). Keep the latest day's copy.
            latest = {(r.topic, r.partition, r.start_offset): r for r in refs}
            refs = [r for r in refs if latest[(r.topic, r.partition, r.start_offset)] is r]
        return refs

    def refresh(self) -> None:
        """Forget cached listings and indexes (new objects may have arrived)."""
        self._objects.clear()
        self._indexes.clear()
        self._catalog = _UNSET

    def avro_schema(self, ref: ObjectRef) -> str:
        """The writer's schema of an Avro object (from its index, else its header)."""
        if ref.has_index:
            avro = self.index(ref).avro
            if avro is not None:
                return avro.schema
        from blockgz.format.avro_read import read_avro_header

        head = self.store.get_range(ref.key, 0, min(ref.size, 1 << 20) if ref.size > 0 else 1 << 20)
        return read_avro_header(head, source=self.store.url(ref.key)).schema

    def index(self, ref: ObjectRef) -> BlockIndex:
        with self._lock:
            cached = self._indexes.get(ref.key)
        if cached is None:
            cached = load_index(self.store, ref.key)
            with self._lock:
                self._indexes[ref.key] = cached
        return cached

    # -- reading ------------------------------------------------------------------------------
    def seek(
        self, topic: str, partition: int, offset: int, count: int | None = None
    ) -> Iterator[Record]:
        """Records of ``topic``/``partition`` from ``offset`` on, across blocks and objects.

        An offset that no object holds (compacted, or a gap between objects) starts at the
        next one that exists. Offsets before the first or after the last archived record
        raise :class:`~blockgz.errors.OffsetNotFoundError`.
        """
        refs, first_archived = self.seek_objects(topic, partition, offset)
        where = f"{topic}/{partition} under {self.store.url(self.prefix)}"
        if not refs and first_archived == offset:
            raise self.nothing_found(topic, partition)
        if offset < first_archived:
            raise OffsetNotFoundError(
                f"offset {offset} of {where} is before the first archived offset {first_archived}"
            )
        if overlapping(refs):  # a time or field partitioner: one partition in many files
            return self._merged(refs, offset, count, where)
        if not refs:
            raise OffsetNotFoundError(f"offset {offset} of {where} is past the end")
        first = max(0, bisect.bisect_right([r.start_offset for r in refs], offset) - 1)
        return self._records(refs, first, offset, count, where)

    def _merged(self, refs, offset, count, where) -> Iterator[Record]:
        """Records from ``offset`` of objects whose offsets interleave, in offset order."""
        reaching = [r for r in refs if r.last_offset is None or r.last_offset >= offset]
        merged = merged_by_offset(
            reaching, lambda ref: self._records([ref], 0, offset, None, where, quiet=True)
        )
        yielded = 0
        for record in merged:
            yield record
            yielded += 1
            if count is not None and yielded >= count:
                return
        if not yielded:
            raise OffsetNotFoundError(f"offset {offset} of {where} is past the end")

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        """Records with ``start <= offset < end``."""
        for record in self.seek(topic, partition, start):
            if record.offset >= end:
                return
            yield record

    # -- analytics ----------------------------------------------------------------------------
    def topics(self) -> list[str]:
        """The topics the archive holds (from the catalog and the topics directory)."""
        found: set[str] = set()
        source = self._catalog_source()
        if source is not None:
            found = {t for t, _ in source.partitions()}
        if not isinstance(self.layout, DeviantArtLayout):
            root = self.layout.topic_prefix(self.prefix)
            found |= {d[len(root) :].rstrip("/") for d in self.store.list_prefixes(root)}
        if not found and (self._relocate() or self._learn_layout()):
            return self.topics()
        return sorted(found)

    def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` the archive holds (from the catalog, else the listing
        of the topic's directory)."""
        source = self._catalog_source()
        found: set[int] = set()
        if source is not None:
            found = {p for t, p in source.partitions() if t == topic}
        if not found:
            for directory in self.store.list_prefixes(self.layout.topic_prefix(self.prefix, topic)):
                name = directory.rstrip("/").rsplit("/", 1)[-1]
                if name.startswith("partition=") and name[10:].isdigit():
                    found.add(int(name[10:]))
        if not found and (self._relocate() or self._learn_layout()):
            return self.partitions(topic)
        return sorted(found)

    def records(
        self,
        topic: str,
        partitions: Iterable[int] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
    ) -> Iterator[tuple[int, Record]]:
        """``(partition, record)`` for every archived record of ``topic`` (or of the given
        ``partitions``), partition by partition in offset order, with ``start <= offset <
        end`` and ``from_time <= timestamp < to_time`` (epoch ms; needs an archive that kept
        timestamps, ``format.json.envelope``). Blocks are fetched ``prefetch`` ahead, so
        memory stays bounded whatever the size of the topic."""
        timed = from_time is not None or to_time is not None
        for partition in self.partitions(topic) if partitions is None else partitions:
            begin = self.first_offset(topic, partition)
            if start is not None:
                begin = max(begin, start)
            try:
                found = self.seek(topic, partition, begin)
                head = next(found)  # an offset past the end raises here
            except OffsetNotFoundError:
                continue
            for record in itertools.chain([head], found):
                if end is not None and record.offset >= end:
                    break
                if timed:
                    if record.timestamp is None:
                        raise ConfigError(
                            f"{topic}/{partition}: the archive kept no record timestamps, so a "
                            "time window cannot be applied (exports keep them with "
                            "format.json.envelope=true); give offsets instead"
                        )
                    if (from_time is not None and record.timestamp < from_time) or (
                        to_time is not None and record.timestamp >= to_time
                    ):
                        continue
                yield partition, record

    def first_offset(self, topic: str, partition: int) -> int:
        """The partition's first archived offset (from the catalog or one listing)."""
        refs, first = self.seek_objects(topic, partition, _PAST_ANY_OFFSET)
        if not refs and first == _PAST_ANY_OFFSET:
            raise self.nothing_found(topic, partition)
        return first

    def read_arrow(
        self, topic: str, partition: int, start: int | None = None, end: int | None = None
    ) -> Any:
        """The records with ``start <= offset < end`` as a ``pyarrow.Table`` of Kafka's
        columns (see :mod:`reader.tables`)."""
        from reader.tables import table_of

        records = (r for _, r in self.records(topic, [partition], start=start, end=end))
        return table_of(topic, partition, records)

    def to_pandas(
        self, topic: str, partition: int, start: int | None = None, end: int | None = None
    ) -> Any:
        """:meth:`read_arrow` as a pandas DataFrame."""
        return self.read_arrow(topic, partition, start, end).to_pandas()

    def _records(self, refs, first, offset, count, where, *, quiet=False) -> Iterator[Record]:
        remaining = count
        yielded = False
        jobs = self._plan(refs, first, offset, count)
        for _job, records in _prefetched(jobs, self._fetch, self._executor, self.prefetch):
            # The export wraps all records or none: a block whose first record is no envelope
            # is yielded as it is, without a check per record.
            wrapped = self.envelopes and (not isinstance(records, list) or _enveloped(records))
            for record in records:
                if record.offset < offset:
                    continue
                yield unwrap(record) if wrapped else record
                yielded = True
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
        if not yielded and not quiet:
            last = self._last_offset(refs[-1])
            raise OffsetNotFoundError(
                f"offset {offset} of {where} is past the end: last archived offset is {last}"
            )

    def _plan(self, refs, first, offset, count) -> Iterator[tuple[ObjectRef, int, int, int | None]]:
        """(object, block, start, stop) needed, in order; block -1 means "stream the object"."""
        needed = count
        for ref in refs[first:]:
            if not ref.has_index:
                if ref.compressed and not ref.is_avro and not self.scan_unindexed:
                    raise ObjectNotFoundError(
                        f"{self.store.url(ref.key)} has no index sidecar, so offset {offset} "
                        "cannot be located in it; build one with `blockgz index`, or pass "
                        "scan.unindexed=true (--scan) to stream it from the start"
                    )
                yield ref, -1, 0, None
                continue
            index = self.index(ref)
            if index.last_offset is None or index.last_offset < offset:
                continue  # this object ends before the offset: the next one starts after it
            start = index.locate(offset) if offset >= (index.first_offset or 0) else 0
            for block in range(start, len(index.chunks)):
                chunk = index.chunks[block]
                skip = chunk.position_of(offset) if block == start else 0
                yield ref, block, skip, None if needed is None else skip + needed
                if needed is not None:
                    needed -= chunk.num_records - skip
                    if needed <= 0:
                        return

    def _fetch(self, job: tuple[ObjectRef, int, int, int | None]) -> Iterable[Record]:
        ref, block, start, stop = job
        if block >= 0:
            obj = IndexedReader.open_object(self.store, ref.key, self.index(ref))
            records = obj.block_records(block, start, stop)
            if not ref.companions or not records:
                return records
            kept = [
                self._companion_entries(c, records[0].offset, len(records)) for c in ref.companions
            ]
            return [
                _kept(r, ref.companions, [entries[n] for entries in kept])
                for n, r in enumerate(records)
            ]
        if not ref.companions:
            return self._stream_records(ref)  # lazy: read as the caller iterates
        streams = [self._stream_records(c) for c in ref.companions]
        return (
            _kept(r, ref.companions, [e.value for e in entries])
            for r, *entries in zip(self._stream_records(ref), *streams, strict=False)
        )

    def _companion_entries(self, ref: ObjectRef, offset: int, count: int) -> list[Any]:
        """The entries of a keys/headers object for ``count`` records from ``offset``."""
        if ref.has_index:
            with IndexedReader.open_object(self.store, ref.key, self.index(ref)) as obj:
                return [r.value for r in obj.seek(offset, count)]
        found = [r.value for r in self._stream_records(ref) if r.offset >= offset]
        return found[:count]

    def _stream_records(self, ref: ObjectRef) -> Iterator[Record]:
        return stream_records(self.store, ref.key, ref.start_offset, framing=self.framing)

    def _last_offset(self, ref: ObjectRef) -> int | None:
        if ref.has_index:
            return self.index(ref).last_offset
        last = None
        for record in self._stream_records(ref):
            last = record.offset
        return last

    # -- listing for people ----------------------------------------------------------------
    def ls(self, topic: str | None = None) -> list[ObjectSummary]:
        """Every data object under the prefix (or one topic), with offsets and record counts."""
        refs = self._parse_listing(self.layout.topic_prefix(self.prefix, topic), topic, None)
        if not refs and (self._relocate() or self._learn_layout()):
            return self.ls(topic)
        indexes = list(self._executor.map(lambda r: self.index(r) if r.has_index else None, refs))
        out = []
        for n, (ref, index) in enumerate(zip(refs, indexes, strict=True)):
            following = refs[n + 1] if n + 1 < len(refs) else None
            same_partition = following is not None and (following.topic, following.partition) == (
                ref.topic,
                ref.partition,
            )
            last = (
                index.last_offset
                if index
                else (following.start_offset - 1 if same_partition else None)
            )
            out.append(
                ObjectSummary(
                    ref.key,
                    ref.topic,
                    ref.partition,
                    ref.start_offset,
                    last,
                    index.record_count if index else None,
                    ref.size,
                    index is not None,
                )
            )
        return out

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _enveloped(records: list[Record]) -> bool:
    """Whether a block's records look like the export's envelope (its first one does)."""
    first = records[0].value if records else None
    return isinstance(first, (bytes, bytearray)) and first.startswith(ENVELOPE_START)


def _with_companions(refs: list[ObjectRef]) -> list[ObjectRef]:
    """Value objects only, each with the ``.keys``/``.headers`` objects beside it."""
    values = [r for r in refs if r.role == "value"]
    beside: dict[tuple[str, str, int, int], list[ObjectRef]] = {}
    for ref in refs:
        if ref.role != "value":
            beside.setdefault((ref.directory, ref.topic, ref.partition, ref.start_offset), [])
            beside[(ref.directory, ref.topic, ref.partition, ref.start_offset)].append(ref)
    return [
        replace(r, companions=tuple(sorted(found, key=lambda c: c.role)))
        if (found := beside.get((r.directory, r.topic, r.partition, r.start_offset)))
        else r
        for r in values
    ]


def _kept(record: Record, companions: tuple[ObjectRef, ...], entries: list[Any]) -> Record:
    """The record with the key and headers its ``.keys``/``.headers`` entries hold."""
    found = {c.role: _entry(c.format, entry) for c, entry in zip(companions, entries, strict=True)}
    headers = record.headers
    if "headers" in found:  # no headers and an empty list are the same to Kafka
        kept = found["headers"]
        headers = [(h["key"], _from_text(h["value"])) for h in kept] if kept else None
    return Record.kept(
        record.offset,
        record.value,
        key=found.get("keys", record.key),
        headers=headers,
        timestamp=record.timestamp,
    )


def _entry(fmt: str, entry: Any) -> Any:
    """A keys/headers entry as stored -> Python: JSON parsed (text and base64 to bytes)."""
    if fmt == "json":
        doc = json.loads(entry)
        return doc if isinstance(doc, list) else _from_text(doc)
    if isinstance(entry, str):  # an Avro "string" key
        return entry.encode()
    return entry  # bytearray bytes, Avro bytes, a decoded Avro key or headers list


def _from_text(doc: Any) -> Any:
    """Text back to bytes, ``{"base64": ...}`` to its bytes; other JSON as it is."""
    if isinstance(doc, str):
        return doc.encode()
    if isinstance(doc, dict) and set(doc) == {"base64"}:
        return base64.b64decode(doc["base64"])
    return doc


def _prefetched(
    jobs: Iterator[J], fetch: Callable[[J], R], executor: ThreadPoolExecutor, depth: int
) -> Iterator[tuple[J, R]]:
    """``(job, fetch(job))`` in job order, keeping ``depth`` fetches running ahead."""
    pending: deque[tuple[J, Future[R]]] = deque()
    try:
        for job in jobs:
            pending.append((job, executor.submit(fetch, job)))
            while len(pending) > depth:
                done_job, future = pending.popleft()
                yield done_job, future.result()
        while pending:
            done_job, future = pending.popleft()
            yield done_job, future.result()
    finally:
        for _, future in pending:
            future.cancel()
