"""The archive's catalog: the manifest log, compacted, so reading it costs the same in year two.

An export writes one manifest per micro-batch (:mod:`blockgz.commits.manifests`); a job with
a 5-second trigger writes ~6 million a year. Reading them all to resume, or to find which
object holds an offset, would cost millions of requests. So every few batches the job
*compacts* the log, as table formats checkpoint theirs: a **root** records what every
manifest up to one key said (committed offsets, dead-letter and null counts, the key layout)
and, per topic-partition, a table of **segments** — gzipped JSON lists of the files written,
each with its offset range (at most :data:`SEGMENT_FILES` files per segment).

Reading the catalog (:meth:`Catalog.view`) costs, however long the history:

* 1 LIST of the roots (only the latest :data:`KEEP_ROOTS` are kept) and 1 GET of the newest;
* 1 LIST of the manifests written after it (S3 ``StartAfter``: the page holds only those) and
  1 GET per such manifest — at most the compaction interval, ``blockgz.catalog.every`` batches;
* to find one offset's files: 1 GET of each segment whose range holds it (one, unless a time
  or field partitioner spread that offset's neighbours over overlapping segments).

Without any root (archives written before the catalog existed, or a job younger than one
interval), the view is the manifests themselves, as before. A reader that has the job's head
(:mod:`blockgz.commits.head`) skips the LIST of the roots and the GETs of the manifests: the
head names the root and holds the manifests after it.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.commits.manifests import Manifests
>>> from blockgz.written.files import WrittenFile
>>> from blockgz.store import LocalStore
>>> log = Manifests(LocalStore(tempfile.mkdtemp()), "", Layout(), "job")
>>> for batch in range(3):
...     f = WrittenFile(f"topics/t/partition=0/t+0+{batch * 10:010d}.json", "t", 0,
...                     "partition=0", batch * 10, batch * 10 + 9, 10, 100, 100)
...     _ = log.write(batch, files=[f], offsets={"t": {0: batch * 10 + 10}})
>>> catalog = Catalog(log)
>>> catalog.compact().manifests
3
>>> view = catalog.view()
>>> view.offsets, [f.first_offset for f in view.files("t", 0, from_offset=15)]
({'t': {0: 30}}, [10, 20])
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.partition_offsets import Offsets, merge_offsets, offsets_doc
from blockgz.archive.versions import check_major
from blockgz.commits.head import rooted_head, write_head
from blockgz.commits.intents import expire_intents
from blockgz.commits.manifests import Manifest, Manifests, fold_lives
from blockgz.errors import BlockGzError, CorruptManifestError, ObjectNotFoundError
from blockgz.store.base import ObjectInfo
from blockgz.written.files import WrittenFile

log = logging.getLogger("blockgz.catalog")

CATALOG_VERSION = 1
#: Files (value objects and the keys/headers beside them) per segment, at most.
SEGMENT_FILES = 4096
#: Roots kept; older ones (and the segments only they used) are deleted by compaction.
KEEP_ROOTS = 3
#: Compact after every this many batches, by default (``blockgz.catalog.every``).
DEFAULT_EVERY = 100
_READ_THREADS = 8


@dataclass(frozen=True)
class SegmentRef:
    """One segment of a topic-partition: where it is and the offsets its files span."""

    key: str
    first_offset: int
    last_offset: int
    files: int

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "first": self.first_offset, "last": self.last_offset,
                "files": self.files}  # fmt: skip

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SegmentRef:
        return cls(str(doc["key"]), int(doc["first"]), int(doc["last"]), int(doc["files"]))


Segments = dict[str, dict[int, list[SegmentRef]]]


@dataclass(frozen=True)
class CatalogRoot:
    """What every manifest up to ``through`` (a manifest key) said, and where its files are."""

    seq: int
    through: str
    manifests: int
    records: int = 0
    skipped_nulls: int = 0
    offsets: Offsets = field(default_factory=dict)
    dead_letters: Offsets = field(default_factory=dict)
    layout: Mapping[str, str] = field(default_factory=dict)
    segments: Segments = field(default_factory=dict)
    #: The newest folded manifest's :attr:`~blockgz.commits.manifests.Manifest.intents`.
    intents: bool = False
    #: Per topic, the Kafka topic ids its manifests recorded, oldest first
    #: (:func:`~blockgz.commits.manifests.fold_lives`; two or more: lives of a recreated topic).
    lives: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        doc = {
            "version": CATALOG_VERSION,
            "seq": self.seq,
            "through": self.through,
            "manifests": self.manifests,
            "offsets": offsets_doc(self.offsets),
            "dead_letters": offsets_doc(self.dead_letters),
            "skipped_nulls": self.skipped_nulls,
            "records": self.records,
            "layout": dict(self.layout),
            "intents": self.intents,
            **(
                {"lives": {t: list(ids) for t, ids in sorted(self.lives.items())}}
                if self.lives
                else {}
            ),
            "segments": {
                t: {str(p): [s.to_dict() for s in refs] for p, refs in sorted(parts.items())}
                for t, parts in sorted(self.segments.items())
            },
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> CatalogRoot:
        """Read a root: fields this blockgz does not know are ignored (compaction recomputes
        a root), a newer major version is refused (:mod:`blockgz.archive.versions`)."""
        try:
            doc = json.loads(data)
            check_major(doc, CATALOG_VERSION, what="catalog root", source=source)
            return cls(
                seq=int(doc["seq"]),
                through=str(doc["through"]),
                manifests=int(doc["manifests"]),
                offsets=merge_offsets({}, doc["offsets"]),
                dead_letters=merge_offsets({}, doc.get("dead_letters", {})),
                skipped_nulls=int(doc.get("skipped_nulls", 0)),
                records=int(doc.get("records", 0)),
                layout={str(k): str(v) for k, v in doc.get("layout", {}).items()},
                intents=bool(doc.get("intents", False)),
                lives={str(t): tuple(map(str, ids)) for t, ids in doc.get("lives", {}).items()},
                segments={
                    str(t): {
                        int(p): [SegmentRef.from_dict(s) for s in refs] for p, refs in parts.items()
                    }
                    for t, parts in doc.get("segments", {}).items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz catalog root ({exc})") from exc

    def segment_keys(self) -> set[str]:
        return {s.key for parts in self.segments.values() for refs in parts.values() for s in refs}


class CatalogView:
    """The committed state of an export: a root (if any) plus the manifests after it."""

    def __init__(
        self,
        catalog: Catalog,
        root: CatalogRoot | None,
        tail: list[Manifest],
        tail_listed: list[ObjectInfo] | None = None,
    ):
        self.catalog = catalog
        self.root = root
        self.tail = tail
        #: The tail's manifests as listed (key, size, the time each committed), in order.
        self.tail_listed = tail_listed or []
        self.offsets: Offsets = merge_offsets({}, root.offsets) if root else {}
        for manifest in tail:
            merge_offsets(self.offsets, manifest.offsets)
        self._tail_files: dict[tuple[str, int], list[WrittenFile]] | None = None

    def tail_files(self, topic: str, partition: int) -> list[WrittenFile]:
        """The tail's files of one topic-partition, in manifest order (indexed on first use:
        one pass over the tail for all partitions, not one per partition)."""
        if self._tail_files is None:
            by_partition: dict[tuple[str, int], list[WrittenFile]] = {}
            for manifest in self.tail:
                for f in manifest.files:
                    by_partition.setdefault((f.topic, f.partition), []).append(f)
            self._tail_files = by_partition
        return self._tail_files.get((topic, partition), [])

    def tail_file_count(self, topic: str) -> int:
        """How many files the tail's manifests name for ``topic`` (replays counted again)."""
        return sum(len(self.tail_files(t, p)) for t, p in self._tail_keys() if t == topic)

    def _tail_keys(self) -> list[tuple[str, int]]:
        self.tail_files("", 0)  # builds the index
        return list(self._tail_files or {})

    @property
    def dead_letters(self) -> Offsets:
        """Records sent to the dead-letter queue, per topic and partition, in all batches."""
        dead: Offsets = {t: dict(p) for t, p in self.root.dead_letters.items()} if self.root else {}
        for manifest in self.tail:
            for topic, parts in manifest.dead_letters.items():
                for part, n in parts.items():
                    dead.setdefault(topic, {})[part] = dead.get(topic, {}).get(part, 0) + n
        return dead

    @property
    def records(self) -> int:
        """Records every batch consumed: written, skipped nulls and dead-lettered."""
        return (self.root.records if self.root else 0) + sum(m.records for m in self.tail)

    @property
    def layout(self) -> Mapping[str, str] | None:
        """The key layout the export recorded (the newest manifest's, else the root's)."""
        if self.tail:
            return self.tail[-1].layout
        return self.root.layout if self.root else None

    @property
    def intents(self) -> bool:
        """Whether the newest committed batch's tasks recorded intents
        (:mod:`blockgz.commits.intents`)."""
        if self.tail:
            return self.tail[-1].intents
        return self.root.intents if self.root else False

    @property
    def lives(self) -> dict[str, tuple[str, ...]]:
        """Per topic, the Kafka topic ids the committed manifests recorded, oldest first (two or
        more: a recreated topic's lives meet in this archive; none: not recorded)."""
        return fold_lives(self.root.lives if self.root else {}, self.tail)

    def partitions(self) -> list[tuple[str, int]]:
        """Every topic-partition the export committed something for."""
        return sorted((t, p) for t, parts in self.offsets.items() for p in parts)

    def first_offset(self, topic: str, partition: int) -> int | None:
        """The first offset committed for the topic-partition (no segment is read)."""
        return min((first for first, _ in self._spans(topic, partition)), default=None)

    def last_offset(self, topic: str, partition: int) -> int | None:
        """The last offset a committed file of the topic-partition holds (no segment is read)."""
        return max((last for _, last in self._spans(topic, partition)), default=None)

    def _spans(self, topic: str, partition: int) -> Iterator[tuple[int, int]]:
        """``(first, last)`` offsets of the partition's segments and of its newer files."""
        for s in self.root.segments.get(topic, {}).get(partition, []) if self.root else []:
            yield s.first_offset, s.last_offset
        for f in self.tail_files(topic, partition):
            yield f.first_offset, f.last_offset

    def files(
        self, topic: str, partition: int, *, from_offset: int | None = None
    ) -> list[WrittenFile]:
        """The topic-partition's committed files (values and the keys/headers beside them),
        sorted by first offset; with ``from_offset`` only those holding it or later offsets,
        reading only the segments whose range reaches it."""
        found: list[WrittenFile] = []
        if self.root is not None:
            refs = self.root.segments.get(topic, {}).get(partition, [])
            if from_offset is not None:
                refs = [s for s in refs if s.last_offset >= from_offset]
            for files in self.catalog.read_segments([s.key for s in refs]):
                found.extend(files)
        found.extend(self.tail_files(topic, partition))
        if from_offset is not None:
            found = [f for f in found if f.last_offset >= from_offset]
        # A replayed batch lists the same files again: keep one of each.
        unique = {f.key: f for f in found}
        return sorted(unique.values(), key=lambda f: (f.first_offset, f.key))


class Catalog:
    """Compacts and reads one export job's catalog, beside its manifests."""

    def __init__(self, manifests: Manifests):
        self.log = manifests
        self.store = manifests.store
        self.layout = manifests.layout
        self.roots_prefix = self.layout.catalog_roots_prefix(manifests.prefix, manifests.name)
        self.segments_prefix = self.layout.catalog_segments_prefix(manifests.prefix, manifests.name)
        self._segments: dict[str, list[WrittenFile]] = {}  # read by key (read_segments)

    # -- reading ------------------------------------------------------------------------------
    def root_keys(self) -> list[str]:
        return sorted(
            info.key
            for info in self.store.list(self.roots_prefix)
            if self.layout.is_catalog_root(info.key)
        )

    def latest_root(self) -> CatalogRoot | None:
        """The newest root (1 LIST, 1 GET), or ``None`` before the first compaction."""
        keys = self.root_keys()
        return self._read_root(keys[-1]) if keys else None

    def _read_root(self, key: str) -> CatalogRoot:
        return CatalogRoot.from_json(_gunzip(self.store.get(key)), source=self.store.url(key))

    def view(self) -> CatalogView:
        """The committed state: the newest root and the manifests after it."""
        root = self.latest_root()
        listed = self.log.listed(after=root.through if root else "")
        tail = list(self.log.manifests([info.key for info in listed]))
        return CatalogView(self, root, tail, listed)

    def read_segments(self, keys: list[str]) -> list[list[WrittenFile]]:
        """The files of each segment, read in parallel, in order; a segment read once is not
        read again (a segment key is written once: a new root writes new keys)."""
        wanted = [k for k in dict.fromkeys(keys) if k not in self._segments]
        if len(wanted) <= 1:
            read = [self._read_segment(k) for k in wanted]
        else:
            with ThreadPoolExecutor(min(_READ_THREADS, len(wanted))) as pool:
                read = list(pool.map(self._read_segment, wanted))
        self._segments.update(zip(wanted, read, strict=True))
        return [self._segments[k] for k in keys]

    def _read_segment(self, key: str) -> list[WrittenFile]:
        try:
            doc = json.loads(_gunzip(self.store.get(key)))
            return [WrittenFile.from_dict(f) for f in doc["files"]]
        except ObjectNotFoundError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            url = self.store.url(key)
            raise CorruptManifestError(f"{url}: not a blockgz catalog segment ({exc})") from exc

    # -- compacting ---------------------------------------------------------------------------
    def compact(self) -> CatalogRoot | None:
        """Fold the manifests written since the newest root into a new root (idempotent: with
        nothing new, the newest root is returned as it is). ``None``: no manifest yet."""
        root = self.latest_root()
        keys = self.log.keys(after=root.through if root else "")
        if not keys:
            return root
        manifests = list(self.log.manifests(keys))
        seq = root.seq + 1 if root else 0
        new = self._folded(root, manifests, keys[-1], seq)
        root_json = new.to_json()
        self.store.put(self._root_key(seq), gzip.compress(root_json, mtime=0))
        try:  # the head names the new root; one that stays behind is caught up by readers
            write_head(self.log, rooted_head(self._root_key(seq), root_json, keys[-1]))
        except (BlockGzError, OSError) as exc:
            log.warning("catalog of %s: head not updated to root %d (%s)", self.log.name, seq, exc)
        log.info(
            "catalog of %s: root %d folds %d more manifests (%d in all), through %s",
            self.log.name,
            seq,
            len(manifests),
            new.manifests,
            keys[-1].rsplit("/", 1)[-1],
        )
        self._expire(new)
        self._expire_intents(new)
        return new

    def _root_key(self, seq: int) -> str:
        return self.layout.catalog_root_key(self.log.prefix, self.log.name, seq)

    def _folded(
        self, root: CatalogRoot | None, manifests: list[Manifest], through: str, seq: int
    ) -> CatalogRoot:
        offsets = merge_offsets({}, root.offsets) if root else {}
        dead: Offsets = {t: dict(p) for t, p in root.dead_letters.items()} if root else {}
        skipped = root.skipped_nulls if root else 0
        records = root.records if root else 0
        new_files: dict[tuple[str, int], list[WrittenFile]] = {}
        for manifest in manifests:
            merge_offsets(offsets, manifest.offsets)
            for topic, parts in manifest.dead_letters.items():
                for part, n in parts.items():
                    dead.setdefault(topic, {})[part] = dead.get(topic, {}).get(part, 0) + n
            skipped += manifest.skipped_nulls
            records += manifest.records
            for f in manifest.files:
                new_files.setdefault((f.topic, f.partition), []).append(f)
        segments: Segments = {
            t: {p: list(refs) for p, refs in parts.items()}
            for t, parts in (root.segments if root else {}).items()
        }
        for (topic, partition), files in sorted(new_files.items()):
            refs = segments.setdefault(topic, {}).setdefault(partition, [])
            self._append(refs, files, topic, partition, seq)
        return CatalogRoot(
            seq=seq,
            through=through,
            manifests=(root.manifests if root else 0) + len(manifests),
            offsets=offsets,
            dead_letters=dead,
            skipped_nulls=skipped,
            records=records,
            layout=manifests[-1].layout,
            segments=segments,
            intents=manifests[-1].intents,
            lives=fold_lives(root.lives if root else {}, manifests),
        )

    def _append(
        self, refs: list[SegmentRef], files: list[WrittenFile], topic: str, partition: int, seq: int
    ) -> None:
        """Add ``files`` to the topic-partition's segments: the last one is rewritten while
        it has room, then new ones follow."""
        pending = list(files)
        if refs and refs[-1].files < SEGMENT_FILES:
            pending = self._read_segment(refs.pop().key) + pending
        part = 0
        while pending:
            chunk, pending = pending[:SEGMENT_FILES], pending[SEGMENT_FILES:]
            key = self.layout.catalog_segment_key(
                self.log.prefix, self.log.name, topic, partition, seq, part
            )
            doc = {"files": [f.to_dict() for f in chunk]}
            body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
            self.store.put(key, gzip.compress(body, mtime=0))
            refs.append(
                SegmentRef(
                    key,
                    min(f.first_offset for f in chunk),
                    max(f.last_offset for f in chunk),
                    len(chunk),
                )
            )
            part += 1

    def _expire_intents(self, newest: CatalogRoot) -> None:
        """Delete the intents of the batches the new root covers (they are all committed)."""
        if newest.intents:
            m = self.log
            expire_intents(m.store, m.prefix, m.layout, m.name, newest.offsets)

    def _expire(self, newest: CatalogRoot) -> None:
        """Delete roots beyond the newest :data:`KEEP_ROOTS`, and segments no kept root uses."""
        keys = self.root_keys()
        old, kept = keys[:-KEEP_ROOTS], keys[-KEEP_ROOTS:]
        if not old:
            return
        in_use = newest.segment_keys()
        for key in kept:
            if key != self._root_key(newest.seq):
                in_use |= self._read_root(key).segment_keys()
        for key in old:
            for segment in self._read_root(key).segment_keys() - in_use:
                self.store.delete(segment)
            self.store.delete(key)


def compact_every(manifests: Manifests, batch_id: int | str, every: int) -> CatalogRoot | None:
    """After committing ``batch_id``: compact when it closes an interval of ``every`` batches
    (0 turns compaction off). A failure is logged, not raised: the manifests are the truth and
    readers fall back to them; the next interval tries again."""
    if every <= 0 or not str(batch_id).isdigit() or (int(batch_id) + 1) % every:
        return None
    try:
        return Catalog(manifests).compact()
    except Exception as exc:  # an optimisation failing must not fail a committed batch
        log.warning(
            "catalog of %s: compaction after batch %s failed (%s); readers use the manifests "
            "until the next one",
            manifests.name,
            batch_id,
            exc,
        )
        return None


def _gunzip(data: bytes) -> bytes:
    return gzip.decompress(data)
