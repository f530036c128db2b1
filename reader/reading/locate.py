"""Where an archive's objects are: the partition listing, the exports' catalogs, and the
archive's root when the URL named a directory below it.

:class:`ObjectLocator` answers "which objects hold this topic-partition from this offset on"
for :class:`~blockgz.reader.reading.archive.Archive`, which reads them. One listing page of the
partition's
prefix answers for most archives; when it finds nothing (a time or field partitioner spreads a
partition over many directories) or more than a page, the exports' catalogs answer, reading only
the segments that reach the offset (see :mod:`blockgz.commits.catalog`). A URL naming the topics
directory or a topic's directory is moved up to the root once, and the layout the manifests
recorded (``topics.dir=bgz``) is adopted once when the default finds nothing.

>>> import tempfile
>>> from blockgz import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> key = "topics/t/partition=0/t+0+0000000005.json.gz"
>>> with BlockGzipUpload(store, key, first_offset=5) as out:
...     out.write(b"v5")
>>> refs, first = ObjectLocator(store).locate("t", 0, 5)
>>> [r.start_offset for r in refs], first
([5], 5)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from blockgz.archive.layout import KeyLayout, Layout, parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.archive.reader_layout import LAYOUT_FIELDS, completed_layout
from blockgz.commits.manifests import ExportFound, find_exports
from blockgz.errors import ObjectNotFoundError
from blockgz.reader.reading.catalog_source import CatalogSource
from blockgz.reader.reading.companion_entries import with_companions
from blockgz.reader.reading.strays import is_stray
from blockgz.store import LocalStore, ObjectStore
from blockgz.written.sidecars import sidecar_keys

#: Keys asked for in the one listing page of a partition's prefix before the catalog is used.
LISTING_PAGE = 1000
_UNSET = object()


class ObjectLocator:
    """Finds the data objects of topic-partitions under ``prefix`` (listings cached)."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "",
        *,
        layout: KeyLayout | None = None,
        use_catalog: bool = True,
        committed_only: bool = False,
        layout_given: Iterable[str] | None = None,
        job: str = "",
    ):
        self.store = store
        #: The export job whose catalog is read (``name``); ``""``: every job under the prefix.
        self.job = job
        self.prefix = prefix
        #: ``None`` given: the default layout, or the one the manifests under the prefix
        #: recorded when the default finds nothing (an export with ``topics.dir=bgz``).
        self.layout: KeyLayout = layout or Layout()
        #: The layout options the reader was given (``None``: all of ``layout``'s): the rest
        #: are learned from the manifests when the layout finds nothing (:meth:`learn_layout`).
        self.layout_given = frozenset(() if layout is None else (layout_given or LAYOUT_FIELDS))
        self._may_learn_layout = self.layout.has_exports  # DeviantArt's keeps no manifests
        self._may_relocate = True
        #: Find objects through the exports' catalogs when listing cannot (``catalog``).
        self.use_catalog = use_catalog
        #: Read what the manifests committed, where they cover a partition (``committed``).
        self.committed_only = committed_only
        self._catalog: CatalogSource | object | None = _UNSET
        #: Every object of a partition, by ``(topic, partition)``, once listed whole.
        self.objects: dict[tuple[str, int], list[ObjectRef]] = {}
        #: Keys the listings met that are neither data objects nor their sidecars (a
        #: ``….json.gz.bak``, a ``.txt``): never read, reported by ``ls`` and ``verify``.
        self.strays: dict[str, None] = {}

    def locate(
        self, topic: str, partition: int, from_offset: int | None, *, upto: int | None = None
    ) -> tuple[list[ObjectRef], int | None]:
        """``(objects holding from_offset or later, first archived offset)``; every object
        (kept for later calls) when ``from_offset`` is ``None``. ``upto``: the last offset the
        caller reads (``TO_THE_END``: all; default ``from_offset``), which a catalog head that
        may be behind the manifests must reach (:mod:`blockgz.commits.head`)."""
        key = (topic, partition)
        if key in self.objects:
            refs = self.objects[key]
            return refs, refs[0].start_offset if refs else None
        source = self.committed_source(topic, partition)
        if source is None:
            refs, complete = self.list_partition(topic, partition)
            if not (complete and refs):
                source = self.catalog_source()
            if source is None or not source.has(topic, partition):
                if not refs and (self.relocate() or self.learn_layout()):
                    return self.locate(topic, partition, from_offset, upto=upto)
                if not complete:  # more than a page and no catalog: every page
                    prefix = self.layout.partition_prefix(self.prefix, topic, partition)
                    refs = self.parse_listing(prefix, topic, partition)
                self.objects[key] = refs
                return refs, refs[0].start_offset if refs else None
        found = source.refs(topic, partition, from_offset=from_offset, upto=upto)
        if from_offset is None:
            self.objects[key] = found
        return found, source.first_offset(topic, partition)

    def list_partition(self, topic: str, partition: int) -> tuple[list[ObjectRef], bool]:
        """The partition prefix's first listing page: ``(refs, whether that was all)``."""
        prefix = self.layout.partition_prefix(self.prefix, topic, partition)
        listed = list(self.store.list(prefix, limit=LISTING_PAGE))
        return self.refs_of_listing(listed, topic, partition), len(listed) < LISTING_PAGE

    def committed_source(self, topic: str, partition: int) -> CatalogSource | None:
        """The catalogs, when only committed objects are wanted and they cover the partition."""
        if not self.committed_only:
            return None
        source = self.catalog_source()
        return source if source is not None and source.has(topic, partition) else None

    def catalog_source(self) -> CatalogSource | None:
        """The catalogs of the exports under the prefix (looked for once)."""
        if self._catalog is _UNSET:
            found = None
            if self.layout.has_exports and self.use_catalog:
                found = CatalogSource.find(
                    self.store,
                    self.prefix,
                    self.layout,  # type: ignore[arg-type]
                    job=self.job,
                )
            self._catalog = found
        return self._catalog  # type: ignore[return-value]

    def relocate(self) -> bool:
        """Once: the URL named the topics directory (``s3://arch/topics``) or a topic's
        directory (``s3://arch/topics/ev``) rather than the root above them; move up to it."""
        if not self._may_relocate:
            return False
        self._may_relocate = False
        topics = self.layout.topics_dir
        if not topics:
            return False
        store, parts = self.store, [p for p in self.prefix.split("/") if p]
        local_root = store.root if isinstance(store, LocalStore) and not parts else None
        if local_root is not None:  # a directory path: its own name and its parents' are the parts
            parts = [p.name for p in (local_root, *local_root.parents[:1])][::-1]
        for depth in (1, 2):
            if len(parts) >= depth and parts[-depth] == topics:
                if local_root is not None:
                    self.store = LocalStore(local_root.parents[depth - 1])
                    self.prefix = ""
                else:
                    kept = parts[:-depth]
                    self.prefix = "/".join(kept) + "/" if kept else ""
                self.objects.clear()
                self.strays.clear()
                self._catalog = _UNSET
                return True
        return False

    def learn_layout(self) -> bool:
        """Once: adopt the layout the manifests under the prefix recorded, if it differs; a
        reader given part of a layout takes the rest from the export that agrees with what
        it was given, and one given an option no export agrees with is refused, naming it
        (:func:`~blockgz.archive.reader_layout.completed_layout`)."""
        if not self._may_learn_layout:
            return False
        self._may_learn_layout = False
        given: Layout = self.layout  # type: ignore[assignment]  # has_exports: a Layout
        exports = find_exports(self.store, self.prefix, manifest_dir=given.manifest_dir)
        where = self.store.url(self.prefix)
        learned = completed_layout(given, self.layout_given, exports, where)
        if learned is None or learned == given:
            return False
        self.layout = learned
        self.objects.clear()
        self._catalog = _UNSET  # the catalogs in scope are those of the layout learned
        self.strays.clear()
        return True

    def where(self, topic: str | None = None, partition: int | None = None) -> str:
        """What was listed for ``topic``/``partition``, for messages."""
        if topic is not None and partition is not None:
            listed = self.layout.partition_prefix(self.prefix, topic, partition)
        else:
            listed = self.layout.topic_prefix(self.prefix, topic)
        return f"{self.store.url(listed)} ({self.layout.describe()})"

    def nothing_found(self, topic: str | None = None, partition: int | None = None):
        """The error for a listing that found no data object, with hints where others are."""
        what = "data objects" if topic is None else f"archived objects of topic {topic!r}"
        if partition is not None:
            what += f", partition {partition}"
        hints = [
            f"{url} holds export {found.name!r} with topics.dir={found.layout.topics_dir!r}"
            for url, found in self.exports_nearby()
        ]
        hint = f"; found instead: {'; '.join(hints)}" if hints else ""
        if self.strays:
            hint += (
                f"; {len(self.strays)} key(s) there are not data objects under this layout, e.g. "
                f"{next(iter(self.strays))} (a custom extension needs "
                "-O format.bytearray.extension=...)"
            )
        return ObjectNotFoundError(f"no {what}: listed {self.where(topic, partition)}{hint}")

    def exports_nearby(self) -> list[tuple[str, ExportFound]]:
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

    def parse_listing(
        self, prefix: str, topic: str | None, partition: int | None
    ) -> list[ObjectRef]:
        return self.refs_of_listing(list(self.store.list(prefix)), topic, partition)

    def refs_of_listing(
        self, listed: list, topic: str | None, partition: int | None
    ) -> list[ObjectRef]:
        keys = {o.key for o in listed}
        refs = []
        for info in listed:
            ref = parse_archive_key(self.layout, info.key, size=info.size)
            if ref is None and is_stray(self.layout, self.prefix, info.key):
                self.strays.setdefault(info.key)
            if ref is None or (topic and ref.topic != topic):
                continue
            if partition is not None and ref.partition != partition:
                continue
            index_key = next((k for k in sidecar_keys(info.key) if k in keys), None)
            has_index = ref.indexes_itself or (ref.seekable and index_key is not None)
            refs.append(
                replace(ref, has_index=has_index, index_key=index_key if has_index else None)
            )
        refs = with_companions(refs)
        refs.sort(key=lambda r: (r.topic, r.partition, r.start_offset, r.key))
        return self.layout.one_copy_each(refs)

    def refresh(self) -> None:
        """Forget cached listings and catalogs (new objects may have arrived)."""
        self.objects.clear()
        self.strays.clear()
        self._catalog = _UNSET
