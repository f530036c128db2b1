"""Batch manifests: what each committed micro-batch of an export wrote, and where to resume.

The sink writes one manifest per batch after every data object and index of the batch
(DESIGN.md's commit order). A manifest lists the files and, per topic-partition, the next
offset to read. The export job, the Kafka source (``startingOffsets=s3``) and the readers all
go through :class:`ManifestLog`, so "what is committed" has one answer.

Writing is idempotent: a manifest's key is a function of the job name, the checkpoint epoch
and the batch id, and its bytes of the files it lists, so a replayed commit rewrites the same
object.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> log = ManifestLog(LocalStore(tempfile.mkdtemp()), "", Layout(), "s3-sink")
>>> log.write(0, files=[], offsets={"t": {0: 10, 1: 4}})
'_blockgz/s3-sink/manifests/00000000000000000000.json'
>>> log.committed_offsets()
{'t': {0: 10, 1: 4}}
>>> log.resume_point([("t", 0), ("t", 2)])
{('t', 0): 10, ('t', 2): -2}
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from blockgz.errors import CorruptManifestError, ObjectNotFoundError
from blockgz.layout import (
    DEFAULT_MANIFEST_DIR,
    Layout,
    ObjectRef,
    data_key_for,
    is_sidecar,
    sidecar_key,
)
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.options import Options
from blockgz.store.base import ObjectInfo, ObjectStore

log = logging.getLogger("blockgz.manifests")
#: What names a job's manifests (the sink writes them; ``startingOffsets=s3`` reads them).
JOB_NAME_OPTIONS = OptionSet(
    OptionDef(
        "name",
        "text",
        "blockgz",
        "names the job's manifests (Connect's connector name)",
        "sink",
        origin="connect",
        also=("source",),
    ),
    OptionDef(
        "blockgz.epoch",
        "text",
        "",
        "set by `blockgz export`, not by users: the epoch of the job's manifests",
        "sink",
        also=("source",),
        internal=True,
    ),
)

MANIFEST_VERSION = 1
#: ``startingOffsets`` JSON's "earliest", for partitions no manifest mentions.
EARLIEST = -2
_READ_THREADS = 8

#: Per topic, per partition: the next offset to read.
Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A finished data object: where it is and which records it holds (offsets may have gaps)."""

    key: str
    topic: str
    partition: int
    encoded_partition: str
    first_offset: int
    last_offset: int
    records: int
    size: int
    uncompressed_size: int
    index_key: str | None = None
    #: ``value``, or ``keys`` / ``headers`` for the files beside a value file
    #: (``store.kafka.keys``, ``store.kafka.headers``), one entry per value record.
    role: str = "value"
    #: The smallest and largest Kafka record timestamp in the file (epoch ms), when the
    #: records had timestamps: readers skip files outside a time window without opening them.
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        if self.role == "value":
            del doc["role"]  # manifests of value files read the same as before
        for name in ("min_timestamp", "max_timestamp"):
            if doc[name] is None:
                del doc[name]  # written before blockgz kept them, or no timestamps
        return doc

    def holds_times(self, low: int | None, high: int | None) -> bool:
        """Whether the file may hold a record stamped in ``low..high`` (epoch ms, inclusive;
        ``None``: open); ``True`` when its times are unknown.

        >>> f = WrittenFile("k", "t", 0, "", 0, 9, 10, 1, 1, min_timestamp=100, max_timestamp=200)
        >>> f.holds_times(150, None), f.holds_times(201, None), f.holds_times(None, 99)
        (True, False, False)
        """
        return times_overlap(self.min_timestamp, self.max_timestamp, low, high)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> WrittenFile:
        return cls(**doc)


def times_overlap(first: int | None, last: int | None, low: int | None, high: int | None) -> bool:
    """Whether ``first..last`` (unknown: ``None``, so anything) meets ``low..high``.

    >>> times_overlap(100, 200, 201, None), times_overlap(None, None, 5, 6)
    (False, True)
    """
    if first is None or last is None:
        return True
    return (low is None or last >= low) and (high is None or first <= high)


def merge_offsets(target: Offsets, more: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    """Fold ``more`` into ``target`` keeping the highest next offset per topic-partition.

    >>> merge_offsets({"t": {0: 5}}, {"t": {"0": 3, "1": 9}})
    {'t': {0: 5, 1: 9}}
    """
    for topic, parts in more.items():
        mine = target.setdefault(topic, {})
        for part, nxt in parts.items():
            mine[int(part)] = max(mine.get(int(part), 0), int(nxt))
    return target


@dataclass(frozen=True)
class Manifest:
    """One committed batch: its files, the next offsets, and the nulls it skipped."""

    name: str
    epoch: str
    batch: str
    offsets: Offsets = field(default_factory=dict)
    files: tuple[WrittenFile, ...] = ()
    skipped_nulls: int = 0
    #: The key layout the batch was written with (option names to values), so readers can
    #: find the objects without being told ``topics.dir`` and the delimiters.
    layout: Mapping[str, str] = field(default_factory=dict)
    #: Records sent to the dead-letter queue, per topic and partition (``errors.tolerance=all``).
    dead_letters: Offsets = field(default_factory=dict)
    #: Whether the batch's tasks recorded their directories ahead (:mod:`blockgz.intents`), so
    #: that a restart finds what the next, uncommitted batch wrote without listing the topic.
    intents: bool = False

    def to_json(self) -> bytes:
        """Deterministic bytes: files sorted, keys sorted."""
        files = sorted(self.files, key=lambda f: (f.topic, f.partition, f.first_offset, f.key))
        doc = {
            "version": MANIFEST_VERSION,
            "name": self.name,
            "epoch": self.epoch,
            "batch": self.batch,
            "offsets": {
                t: {str(p): n for p, n in sorted(ps.items())}
                for t, ps in sorted(self.offsets.items())
            },
            "files": [f.to_dict() for f in files],
            "skipped_nulls": self.skipped_nulls,
            "layout": dict(self.layout),
        }
        if self.intents:
            doc["intents"] = True
        if self.dead_letters:
            doc["dead_letters"] = {
                t: {str(p): n for p, n in sorted(ps.items())}
                for t, ps in sorted(self.dead_letters.items())
            }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str = "manifest") -> Manifest:
        try:
            doc = json.loads(data)
            return cls(
                name=str(doc["name"]),
                epoch=str(doc.get("epoch", "")),
                batch=str(doc["batch"]),
                offsets=merge_offsets({}, doc["offsets"]),
                files=tuple(WrittenFile.from_dict(f) for f in doc["files"]),
                skipped_nulls=int(doc.get("skipped_nulls", 0)),
                layout={str(k): str(v) for k, v in doc.get("layout", {}).items()},
                dead_letters=merge_offsets({}, doc.get("dead_letters", {})),
                intents=bool(doc.get("intents", False)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz manifest ({exc})") from exc

    @property
    def dead_lettered(self) -> int:
        """Records of the batch that went to the dead-letter queue."""
        return sum(n for parts in self.dead_letters.values() for n in parts.values())

    @property
    def records(self) -> int:
        """Records the batch consumed: written, skipped nulls and dead-lettered."""
        written = sum(f.records for f in self.files if f.role == "value")
        return self.skipped_nulls + self.dead_lettered + written


class ManifestLog:
    """The manifests of one export job (``name``) under a store prefix.

    ``epoch`` names the checkpoint the job runs with; it is part of each new manifest's key so
    that batch ids restarting from 0 after a lost checkpoint never overwrite older manifests.
    Reading covers every epoch.
    """

    def __init__(
        self,
        store: ObjectStore,
        prefix: str,
        layout: Layout,
        name: str,
        *,
        epoch: str = "",
        intents: bool = False,
    ):
        self.store = store
        self.prefix = prefix
        self.layout = layout
        self.name = name
        self.epoch = epoch
        #: Whether this job's tasks record intents (a field or time partitioner): its manifests
        #: say so, which tells a restart it may rely on them.
        self.intents = intents

    @classmethod
    def from_options(cls, options: Options) -> ManifestLog:
        """The log an export with these (Confluent-named) options writes."""
        from blockgz.store import StoreTarget

        store, prefix = StoreTarget.from_options(options).open()
        return cls(
            store,
            prefix,
            Layout.from_options(options),
            JOB_NAME_OPTIONS.read(options, "name"),
            epoch=JOB_NAME_OPTIONS.read(options, "blockgz.epoch"),
        )

    # -- writing ------------------------------------------------------------------------------
    def key(self, batch_id: int | str) -> str:
        return self.layout.manifest_key(self.prefix, self.name, batch_id, epoch=self.epoch)

    def write(
        self,
        batch_id: int | str,
        *,
        files: Iterable[WrittenFile],
        offsets: Offsets,
        skipped_nulls: int = 0,
        dead_letters: Offsets | None = None,
    ) -> str:
        """Write the batch's manifest (idempotent: same input, same bytes) and return its key."""
        manifest = Manifest(
            self.name,
            self.epoch,
            str(batch_id),
            offsets,
            tuple(files),
            skipped_nulls,
            self.layout.to_dict(),
            dead_letters or {},
            self.intents,
        )
        key = self.key(batch_id)
        self.store.put(key, manifest.to_json())
        return key

    # -- reading ------------------------------------------------------------------------------
    def keys(self, *, after: str = "") -> list[str]:
        """Every manifest of this job (all epochs), oldest epoch first, then by batch; only
        those after the key ``after`` when given (the listing starts there)."""
        prefix = self.layout.manifest_prefix(self.prefix, self.name)
        return sorted(
            info.key
            for info in self.store.list(prefix, start_after=after)
            if self.layout.parse_manifest_key(info.key) is not None
        )

    def read(self, key: str) -> Manifest:
        return Manifest.from_json(self.store.get(key), source=self.store.url(key))

    def read_batch(self, batch_id: int | str) -> Manifest | None:
        """This epoch's manifest of ``batch_id``, or ``None`` if the batch has not committed."""
        try:
            return self.read(self.key(batch_id))
        except ObjectNotFoundError:
            return None

    def manifests(self, keys: Sequence[str] | None = None) -> Iterator[Manifest]:
        """Every manifest (or those of ``keys``), read in parallel, in key order."""
        keys = self.keys() if keys is None else keys
        with ThreadPoolExecutor(_READ_THREADS) as pool:
            yield from pool.map(self.read, keys)

    def committed_offsets(self) -> Offsets:
        """Per topic-partition, the next offset after everything any manifest committed
        (read through the catalog: its newest root and the manifests after it)."""
        from blockgz.catalog import Catalog

        return Catalog(self).view().offsets

    def committed_files(self) -> list[WrittenFile]:
        """Every file listed by any manifest (for audits and tests): reads every one."""
        return [f for manifest in self.manifests() for f in manifest.files]

    def resume_point(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Where each of ``partitions`` resumes: the committed next offset, or ``EARLIEST``."""
        committed = self.committed_offsets()
        return {(t, p): committed.get(t, {}).get(p, EARLIEST) for t, p in partitions}

    # -- cleaning up --------------------------------------------------------------------------
    def remove_uncommitted(
        self, offsets: Offsets, *, partition_directories: bool = False
    ) -> list[str]:
        """Delete objects of the given topic-partitions that start at or after ``offsets``.

        They come from a batch that never committed (its checkpoint was lost with it). Only the
        topic-partitions in ``offsets`` are touched; each deletion is logged. What is listed
        does not grow with the history:

        * when the newest manifest says its tasks record intents (:mod:`blockgz.intents`; the
          batch that died ran with the same settings): the intents from the committed offset
          on, then only the directories they name, each from the committed offset on;
        * ``partition_directories`` (the default partitioner: one directory per partition):
          each partition's directory, from its committed offset on (S3 ``StartAfter``);
        * otherwise (archives written before intents): the topic's whole prefix.
        """
        deleted: list[str] = []
        by_intents = bool(offsets) and self._newest_records_intents()
        for topic, parts in offsets.items():
            if by_intents:
                listings = [
                    self._listed_from(topic, p, nxt, directory=d)
                    for p, nxt in sorted(parts.items())
                    for d in sorted(self._intended(topic, p, nxt))
                ]
            elif partition_directories:
                listings = [self._listed_from(topic, p, nxt) for p, nxt in sorted(parts.items())]
            else:
                listings = [self.store.list(self.layout.topic_prefix(self.prefix, topic))]
            for listing in listings:
                for info in listing:
                    ref = self.layout.parse_data_key(data_key_for(info.key))  # sidecars too
                    if ref is None or ref.topic != topic or ref.partition not in parts:
                        continue
                    if ref.start_offset < parts[ref.partition] or info.key in deleted:
                        continue
                    for key in self._with_sidecar(info.key, ref):
                        if key in deleted:
                            continue
                        self.store.delete(key)
                        deleted.append(key)
                        log.warning(
                            "%s-%d: removed %s, written by a batch that never committed",
                            topic,
                            ref.partition,
                            key,
                        )
        return deleted

    def _newest_records_intents(self) -> bool:
        from blockgz.catalog import Catalog

        return Catalog(self).view().intents

    def _intended(self, topic: str, partition: int, next_offset: int) -> set[str]:
        from blockgz.intents import intended_directories

        found = intended_directories(
            self.store, self.prefix, self.layout, self.name, topic, partition,
            from_offset=next_offset,
        )  # fmt: skip
        log.info(
            "%s-%d: intents from offset %d on name %d directories to look in",
            topic, partition, next_offset, len(found),
        )  # fmt: skip
        return found

    def _listed_from(
        self, topic: str, partition: int, next_offset: int, *, directory: str = ""
    ) -> Iterator[ObjectInfo]:
        """The objects of the partition's directory (or of ``directory``, a key prefix ending
        with the delimiter) from those of ``topic``/``partition`` starting at ``next_offset`` on."""
        prefix = self.layout.partition_prefix(self.prefix, topic, partition)
        if directory:  # other partitions' objects share it: list only this one's names
            prefix = directory + self.layout.file_delim.join((topic, str(partition), ""))
        start_after = ""
        # Zero-padded start offsets sort as numbers (while they fit the padding: a batch
        # crossing into one more digit is listed whole); "/" sorts after any extension's ".".
        if next_offset > 0 and len(str(next_offset)) < self.layout.offset_pad_width:
            name = self.layout.file_name(topic, partition, next_offset - 1, "/")
            start_after = prefix[: prefix.rfind(self.layout.directory_delim) + 1] + name
        return self.store.list(prefix, start_after=start_after)

    def _with_sidecar(self, key: str, ref: ObjectRef) -> list[str]:
        """``key``, and after a data object its hidden sidecar if there is one: that name
        sorts before the objects' names, so a listing from an offset on never meets it."""
        if is_sidecar(key) or not ref.seekable:
            return [key]
        hidden = sidecar_key(key)
        try:
            self.store.head(hidden)
        except ObjectNotFoundError:
            return [key]
        return [key, hidden]


@dataclass(frozen=True)
class ExportFound:
    """An export found under a prefix by its manifests: the job's name and its key layout."""

    prefix: str
    name: str
    layout: Layout


def find_exports(
    store: ObjectStore, prefix: str, *, manifest_dir: str = DEFAULT_MANIFEST_DIR
) -> list[ExportFound]:
    """The exports whose manifests sit under ``prefix`` (in ``manifest_dir``, by default the
    default manifest directory).

    Costs one directory listing plus, per job, one listing page and one manifest read.

    >>> import tempfile
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> _ = ManifestLog(store, "", Layout(topics_dir="bgz"), "job").write(0, files=[], offsets={})
    >>> [(e.name, e.layout.topics_dir) for e in find_exports(store, "")]
    [('job', 'bgz')]
    """
    found = []
    for job_dir in store.list_prefixes(f"{prefix}{manifest_dir}/"):
        name = job_dir.rstrip("/").rsplit("/", 1)[-1]
        log = ManifestLog(store, prefix, Layout(manifest_dir=manifest_dir), name)
        first = next(iter(store.list(log.layout.manifest_prefix(prefix, name))), None)
        if first is None or Layout.parse_manifest_key(first.key) is None:
            continue
        recorded = log.read(first.key).layout
        found.append(ExportFound(prefix, name, Layout.from_options(Options(recorded))))
    return found


def delete_written(store: ObjectStore, files: Iterable[WrittenFile]) -> int:
    """Delete data objects and their indexes (a failed batch's); missing ones are fine."""
    count = 0
    for f in files:
        for key in (f.index_key, f.key):
            if not key:
                continue
            try:
                store.delete(key)
                count += 1
            except ObjectNotFoundError:
                pass
    return count


def new_epoch() -> str:
    """A sortable id for a new checkpoint: UTC time plus a few random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + secrets.token_hex(3)
