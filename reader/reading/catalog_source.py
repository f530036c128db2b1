"""Where a topic-partition's objects are, from the exports' catalogs instead of a listing.

With ``TimeBasedPartitioner`` or ``FieldPartitioner`` one Kafka partition's records are spread
over many directories, and a year of 5-second batches puts millions of objects in one; listing
is then no way to find an offset. The export's catalog (:mod:`blockgz.commits.catalog`) knows every
committed object with its first and last offset, whatever the partitioner: this module turns
it into the reader's :class:`~blockgz.archive.object_ref.ObjectRef` list for one topic-partition,
reading only the segments that reach the offset asked for.

Several exports may write under one prefix (other topics, or a job renamed); the objects of
those that share the reader's key layout (``topics.dir`` and delimiters) are merged. An export
of another ``topics.dir`` is another archive: its catalog never adds objects to this one.
"""

from __future__ import annotations

import heapq
import logging
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import pairwise

from blockgz.archive.layout import DEFAULT_MANIFEST_DIR, Layout, parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record
from blockgz.commits.catalog import Catalog, CatalogRoot, CatalogView
from blockgz.commits.head import CatalogHead, Heads, read_heads
from blockgz.commits.manifest_sequence import check_commits, check_present, check_sequence
from blockgz.commits.manifests import ExportFound, Manifests
from blockgz.errors import ConfigError, CorruptManifestError, ObjectNotFoundError
from blockgz.options import Options
from blockgz.store import ObjectStore
from blockgz.written.files import WrittenFile

log = logging.getLogger("blockgz.reader")
_FIND_THREADS = 8
#: ``upto`` of a read that goes on to the partition's end (:meth:`CatalogSource.refs`).
TO_THE_END = sys.maxsize


@dataclass
class JobCatalog:
    """One export's committed state as a reader found it: from the job's head (one GET, maybe
    behind the newest manifest: ``behind`` is the head's ``through``) or by listing."""

    export: ExportFound
    log: Manifests
    view: CatalogView
    #: The newest manifest key the view holds when it came from a head (``None``: listed, so
    #: nothing newer was there when it was read).
    behind: str | None = None
    #: The manifests the head named after its root (checked against the listing on catch-up).
    head_keys: tuple[str, ...] = ()

    def covers(self, topic: str, partition: int, offset: int | None) -> bool:
        """Whether the view surely holds every committed file of the topic-partition up to
        ``offset`` (``None``: the whole partition): listed, or the head reaches past it."""
        if self.behind is None:
            return True
        end = self.view.offsets.get(topic, {}).get(partition)
        return offset is not None and end is not None and offset < end

    def catch_up(self) -> None:
        """Add the manifests committed after the head (1 LIST of those after its root, 1 GET
        each new one), checking the sequence: a manifest the head names that is gone, or a hole
        anywhere after the root, is a :class:`~blockgz.errors.MissingCommitError`."""
        if self.behind is None:
            return
        v = self.view
        after = v.root.through if v.root is not None else ""
        listed = self.log.listed(after=after)
        keys = [i.key for i in listed]
        check_sequence(keys, self.log, after=after)
        check_present(self.head_keys, keys, self.log)
        newer = [i for i in listed if i.key > self.behind]
        tail = v.tail + list(self.log.manifests([i.key for i in newer]))
        named = {i.key: i for i in listed}
        held = [named[key] for key in self.head_keys]  # the listing, one entry per tail manifest
        self.view = CatalogView(v.catalog, v.root, tail, held + newer)
        self.behind = None


def find_jobs(
    store: ObjectStore, prefix: str, manifest_dir: str = DEFAULT_MANIFEST_DIR, job: str = ""
) -> list[JobCatalog]:
    """The exports under ``prefix``, each with its committed state, in one pass.

    The prefix's heads document (:class:`~blockgz.commits.head.Heads`, 1 GET) names its jobs
    and holds each one's head, trusted as the record of the manifests it names (``job``
    named: that job alone). An offset past a head's end, or a read to a partition's end,
    lists the job's manifests after its root (:meth:`JobCatalog.catch_up`: a newer manifest
    is read, a deleted one is a missing commit). Without a heads document (an archive
    written before it) every job directory is listed (1 LIST) and read by listing its
    manifests (a job named: its manifests alone); so is a job the document names without a
    head, and a corrupt document is passed over with a warning."""
    keys = Layout(manifest_dir=manifest_dir)
    try:
        heads = read_heads(store, prefix, keys)
    except CorruptManifestError as exc:
        log.warning("catalog heads not used (%s); the jobs are listed instead", exc)
        heads = None
    if job:
        names = [job]
    elif heads is not None:
        names = sorted(heads.jobs)
    else:
        names = [keys.job_of_directory(d) for d in store.list_prefixes(keys.exports_prefix(prefix))]
    found = [Manifests(store, prefix, keys, name) for name in names]

    def one(manifests: Manifests) -> JobCatalog | None:
        return _job_catalog(manifests, heads)

    if len(found) <= 1:
        jobs = [one(m) for m in found]
    else:
        with ThreadPoolExecutor(min(_FIND_THREADS, len(found))) as pool:
            jobs = list(pool.map(one, found))
    return [j for j in jobs if j is not None]


def _job_catalog(manifests: Manifests, heads: Heads | None) -> JobCatalog | None:
    """The job's committed state (``None``: it has no manifest): from its head in ``heads``,
    else by listing (see :func:`find_jobs`)."""
    catalog = Catalog(manifests)
    head = None if heads is None else heads.jobs.get(manifests.name)
    view = None if head is None else _head_view(catalog, head)
    if view is None:
        view = catalog.view()
        check_commits(view, manifests)  # a deleted manifest
    if view.layout is None:
        return None
    layout = Layout.from_options(Options(view.layout))
    found = ExportFound(manifests.prefix, manifests.name, layout)
    if head is None or view.tail_listed:
        return JobCatalog(found, manifests, view)
    return JobCatalog(found, manifests, view, head.through, tuple(head.tail_keys))


def _head_view(catalog: Catalog, head: CatalogHead) -> CatalogView | None:
    """The view the job's head gives (its root, and the manifests after it: inline or read by
    key); ``None`` when the head names an object that is gone or unreadable (the listing
    answers then, after a warning)."""
    m = catalog.log
    try:
        root = _head_root(catalog, head)
        check_sequence(head.tail_keys, m, after=head.root_through)
        return CatalogView(catalog, root, head.manifests(m))
    except (ObjectNotFoundError, CorruptManifestError) as exc:
        log.warning("catalog head of %s not used (%s); listing its manifests instead", m.name, exc)
        return None


def _head_root(catalog: Catalog, head: CatalogHead) -> CatalogRoot | None:
    """The root the head names: inline, or read by key (1 GET)."""
    if head.root_json is not None:
        return CatalogRoot.from_json(head.root_json, source=catalog.store.url(head.root_key))
    return catalog._read_root(head.root_key) if head.root_key else None


def _no_such_job(store: ObjectStore, prefix: str, manifest_dir: str, job: str) -> ConfigError:
    """The error for a job name (``name``) that no export under the prefix has."""
    where = Layout(manifest_dir=manifest_dir).exports_prefix(prefix)
    names = [Layout.job_of_directory(d) for d in store.list_prefixes(where)]
    there = f"the jobs there: {', '.join(names)}" if names else "there is none"
    return ConfigError(
        f"name={job}: no export job of that name has committed under {store.url(where)} "
        f"({there}); give the export's name, or leave name out to read every job"
    )


class CatalogSource:
    """The committed objects of every export under a prefix, per topic-partition."""

    def __init__(self, store: ObjectStore, prefix: str, jobs: list[JobCatalog]):
        self.jobs = jobs
        self.exports = [j.export for j in jobs]
        self._prefix = prefix

    @classmethod
    def find(
        cls, store: ObjectStore, prefix: str, layout: Layout | None = None, job: str = ""
    ) -> CatalogSource | None:
        """The catalogs of the exports under ``prefix`` (``job`` alone when named) whose keys
        have ``layout``'s scope (every export when ``layout`` is ``None``); ``None`` when there
        is none."""
        manifest_dir = layout.manifest_dir if layout is not None else DEFAULT_MANIFEST_DIR
        found = find_jobs(store, prefix, manifest_dir, job)
        if job and not found:
            raise _no_such_job(store, prefix, manifest_dir, job)
        jobs = [j for j in found if layout is None or layout.same_scope(j.export.layout)]
        return cls(store, prefix, jobs) if jobs else None

    @property
    def _views(self) -> list[tuple[Layout, CatalogView]]:
        return [(j.export.layout, j.view) for j in self.jobs]

    def _caught_up(self, topic: str | None = None, partition: int = -1, offset: int | None = None):
        """Catch up the jobs whose head may miss what is asked (every job: ``topic`` None)."""
        for j in self.jobs:
            if topic is None or not j.covers(topic, partition, offset):
                j.catch_up()

    def partitions(self) -> set[tuple[str, int]]:
        """Every topic-partition an export committed something for."""
        self._caught_up()
        return {tp for _, view in self._views for tp in view.partitions()}

    def has(self, topic: str, partition: int) -> bool:
        if any(partition in view.offsets.get(topic, {}) for _, view in self._views):
            return True
        self._caught_up()
        return any(partition in view.offsets.get(topic, {}) for _, view in self._views)

    def first_offset(self, topic: str, partition: int) -> int | None:
        """The first offset any export committed for the topic-partition."""
        firsts = [view.first_offset(topic, partition) for _, view in self._views]
        return min((f for f in firsts if f is not None), default=None)

    def refs(
        self, topic: str, partition: int, from_offset: int | None = None, *, upto: int | None = None
    ) -> list[ObjectRef]:
        """The topic-partition's value objects (with their keys/headers objects), by first
        offset; with ``from_offset``, only those holding it or a later offset. ``upto``: the
        last offset the caller needs (:data:`TO_THE_END`: every one; default ``from_offset``):
        a head that may not reach it is caught up first."""
        needed = from_offset if upto is None or from_offset is None else max(upto, from_offset)
        self._caught_up(topic, partition, needed)
        refs: dict[str, ObjectRef] = {}
        for layout, view in self._views:
            files = view.files(topic, partition, from_offset=from_offset)
            root = layout.topics_root(self._prefix)
            for ref in refs_of([f for f in files if f.key.startswith(root)], layout):
                refs.setdefault(ref.key, ref)
        return sorted(refs.values(), key=lambda r: (r.start_offset, r.key))

    def keys_only_refs(self, topic: str, partition: int) -> list[ObjectRef]:
        """The topic-partition's committed keys files with no value object beside them (the
        tombstones of ``behavior.on.null.values=write`` with ``store.kafka.keys``), each as a
        ref with the files beside it (keys, headers, timestamps) as its companions."""
        self._caught_up(topic, partition)
        refs: dict[str, ObjectRef] = {}
        for layout, view in self._views:
            root = layout.topics_root(self._prefix)
            files = [f for f in view.files(topic, partition) if f.key.startswith(root)]
            for ref in keys_only_of(files, layout):
                refs.setdefault(ref.key, ref)
        return sorted(refs.values(), key=lambda r: (r.start_offset, r.key))


def keys_only_of(files: list[WrittenFile], layout: Layout) -> list[ObjectRef]:
    """:meth:`CatalogSource.keys_only_refs` of committed ``files``."""
    groups: dict[tuple[str, int], list[ObjectRef]] = {}
    for f in files:
        ref = parse_archive_key(layout, f.key, size=f.size, any_extension=True)
        if ref is None:
            continue
        ref = replace(ref, has_index=f.index_key is not None, index_key=f.index_key,
                      last_offset=f.last_offset)  # fmt: skip
        groups.setdefault((ref.directory, f.first_offset), []).append(ref)
    out = []
    for found in groups.values():
        keys = next((r for r in found if r.role == "keys"), None)
        if keys is not None and all(r.role != "value" for r in found):
            out.append(replace(keys, companions=tuple(sorted(found, key=lambda c: c.role))))
    return out


def refs_of(files: list[WrittenFile], layout: Layout) -> list[ObjectRef]:
    """Reader refs of committed files: value objects, each with the companions beside it."""
    values: list[ObjectRef] = []
    beside: dict[tuple[str, int], list[ObjectRef]] = {}
    for f in files:
        # the manifest's word; a hidden timestamps file too
        ref = parse_archive_key(layout, f.key, size=f.size, any_extension=True)
        if ref is None:
            continue
        ref = replace(
            ref,
            has_index=f.index_key is not None or ref.indexes_itself,
            index_key=f.index_key,
            last_offset=f.last_offset,
            min_timestamp=f.min_timestamp,
            max_timestamp=f.max_timestamp,
            converter=f.converter,
            committed=f,  # what readers check the sidecar and the bytes they fetch against
        )
        if f.role == "value":
            values.append(ref)
        else:
            beside.setdefault((ref.directory, f.first_offset), []).append(ref)
    return [
        replace(r, companions=tuple(sorted(found, key=lambda c: c.role)))
        if (found := beside.get((r.directory, r.start_offset)))
        else r
        for r in values
    ]


def overlapping(refs: list[ObjectRef]) -> bool:
    """Whether some object starts before the one before it ends (a time or field
    partitioner wrote one partition's records into several open files at once)."""
    return any(
        a.last_offset is not None and a.last_offset >= b.start_offset for a, b in pairwise(refs)
    )


def merged_by_offset(
    refs: list[ObjectRef],
    records_from: Callable[[ObjectRef], Iterator[Record]],
    on_duplicate: Callable[[ObjectRef, Record], None] | None = None,
) -> Iterator[Record]:
    """Records of objects whose offsets interleave, in offset order. An object is opened only
    once the merge reaches its first offset (none of its records can come earlier), so a seek
    fetches the blocks it returns, not the first block of every later object.

    An offset held by several objects (two writers) is returned once, from the object with
    the lowest first offset, then the lowest key (:mod:`blockgz.reader.reading.overlaps`);
    ``on_duplicate``
    hears of each copy left out.

    >>> from blockgz.blocks.decode import Record
    >>> a = ObjectRef("a", "t", 0, 0, "json", last_offset=4)
    >>> b = ObjectRef("b", "t", 0, 1, "json", last_offset=3)
    >>> c = ObjectRef("c", "t", 0, 2, "json", last_offset=4)
    >>> held = {"a": [0, 2, 4], "b": [1, 3], "c": [2, 3, 4]}
    >>> opened = lambda ref: iter(Record(o, ref.key.encode()) for o in held[ref.key])
    >>> [(r.offset, r.value) for r in merged_by_offset([a, b], opened)]
    [(0, b'a'), (1, b'b'), (2, b'a'), (3, b'b'), (4, b'a')]
    >>> [(r.offset, r.value) for r in merged_by_offset([c, a, b], opened)]
    [(0, b'a'), (1, b'b'), (2, b'a'), (3, b'b'), (4, b'a')]
    """
    ordered = sorted(refs, key=lambda r: (r.start_offset, r.key))
    pending = iter(enumerate(ordered))
    upcoming = next(pending, None)
    # (offset, rank of the object, record, rest): the rank breaks ties, so the same offset
    # in two objects always comes from the one ordered first.
    heap: list[tuple[int, int, Record, Iterator[Record]]] = []
    last: int | None = None
    while heap or upcoming is not None:
        while upcoming is not None and (not heap or upcoming[1].start_offset <= heap[0][0]):
            rank, ref = upcoming
            records = records_from(ref)
            first = next(records, None)
            if first is not None:
                heapq.heappush(heap, (first.offset, rank, first, records))
            upcoming = next(pending, None)
        if not heap:
            continue
        offset, rank, record, records = heapq.heappop(heap)
        if last is not None and offset <= last:
            if on_duplicate is not None:
                on_duplicate(ordered[rank], record)
        else:
            last = offset
            yield record
        following = next(records, None)
        if following is not None:
            heapq.heappush(heap, (following.offset, rank, following, records))
