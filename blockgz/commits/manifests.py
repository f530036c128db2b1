"""Batch manifests: what each committed micro-batch of an export wrote.

The sink writes one manifest per batch after every data object and index of the batch
(the commit order of :mod:`blockgz.sink.write.commit`). A manifest lists the files and, per
topic-partition, the next offset to read. :class:`Manifests` writes and reads them;
:class:`blockgz.commits.manifest_log.ManifestLog` answers "what is committed" from them and the
catalog,
and the export job, the Kafka source (``startingOffsets=s3``) and the readers all go through it.

Writing is idempotent: a manifest's key is a function of the job name, the checkpoint epoch
and the batch id, and its bytes of the files it lists, so a replayed commit rewrites the same
object. A manifest written by a newer blockgz reads here as long as its major version is one
this blockgz knows: fields it does not know are kept with each file (and so survive catalog
compaction) or ignored at the top; a newer major version is refused with a message to upgrade.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> manifests = Manifests(LocalStore(tempfile.mkdtemp()), "", Layout(), "s3-sink")
>>> manifests.write(0, files=[], offsets={"t": {0: 10, 1: 4}})
'_blockgz/s3-sink/manifests/00000000000000000000.json'
>>> manifests.read_batch(0).offsets
{'t': {0: 10, 1: 4}}
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field

from blockgz.archive.layout import DEFAULT_MANIFEST_DIR, Layout
from blockgz.archive.partition_offsets import Offsets, merge_offsets, offsets_doc
from blockgz.archive.versions import check_major
from blockgz.errors import CorruptManifestError, ObjectNotFoundError
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.options import Options
from blockgz.store.base import ObjectInfo, ObjectStore
from blockgz.written.files import WrittenFile

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
_READ_THREADS = 8


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
    #: Whether the batch's tasks recorded their directories ahead
    #: (:mod:`blockgz.commits.intents`), so that a restart finds what the next, uncommitted
    #: batch wrote without listing the topic.
    intents: bool = False
    #: The S3 requests the batch's tasks made (:mod:`blockgz.store.request_stats`), for the
    #: export's metrics. Operational, not archive state: the one field a replayed batch may
    #: write differently, and the catalog does not keep it.
    requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: Each topic's Kafka topic id (topic name -> the id as Kafka prints it, base64) when the
    #: batch was read: a topic deleted and recreated under its name gets a new id, so two
    #: lives of one name are told apart. ``{}``: not recorded (older manifests, or unknown).
    topic_ids: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Deterministic bytes (files sorted, keys sorted), apart from :attr:`requests`."""
        files = sorted(self.files, key=lambda f: (f.topic, f.partition, f.first_offset, f.key))
        doc = {
            "version": MANIFEST_VERSION,
            "name": self.name,
            "epoch": self.epoch,
            "batch": self.batch,
            "offsets": offsets_doc(self.offsets),
            "files": [f.to_dict() for f in files],
            "skipped_nulls": self.skipped_nulls,
            "layout": dict(self.layout),
        }
        if self.intents:
            doc["intents"] = True
        if self.dead_letters:
            doc["dead_letters"] = offsets_doc(self.dead_letters)
        if self.topic_ids:
            doc["topic_ids"] = dict(sorted(self.topic_ids.items()))
        if self.requests:
            doc["requests"] = {op: dict(kinds) for op, kinds in self.requests.items()}
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str = "manifest") -> Manifest:
        """Read a manifest: fields this blockgz does not know are ignored (those of a file
        are kept with it), a newer major version is refused (:mod:`blockgz.archive.versions`)."""
        try:
            doc = json.loads(data)
            check_major(doc, MANIFEST_VERSION, what="manifest", source=source)
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
                requests={
                    str(op): {str(k): int(n) for k, n in kinds.items()}
                    for op, kinds in doc.get("requests", {}).items()
                },
                topic_ids={str(t): str(i) for t, i in doc.get("topic_ids", {}).items()},
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


@dataclass(eq=False)
class Manifests:
    """The manifests of one export job (``name``) under a store prefix: write and read them.

    ``epoch`` names the checkpoint the job runs with; it is part of each new manifest's key so
    that batch ids restarting from 0 after a lost checkpoint never overwrite older manifests.
    Reading covers every epoch.
    """

    store: ObjectStore
    prefix: str
    layout: Layout
    name: str
    _: KW_ONLY
    epoch: str = ""
    #: Whether this job's tasks record intents (a field or time partitioner): its manifests
    #: say so, which tells a restart it may rely on them.
    intents: bool = False

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
        requests: Mapping[str, Mapping[str, int]] | None = None,
        topic_ids: Mapping[str, str] | None = None,
    ) -> str:
        """Write the batch's manifest (idempotent: same input, same bytes) and return its key;
        ``topic_ids`` are the Kafka topic ids of the batch's topics, when known."""
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
            requests or {},
            dict(topic_ids or {}),
        )
        key = self.key(batch_id)
        body = manifest.to_json()
        self.committing()
        self.store.put(key, body)
        self.committed(key, body)
        return key

    def committing(self) -> None:
        """Called before a manifest is written; :class:`~blockgz.commits.manifest_log.
        ManifestLog` names the job in the prefix's heads document there."""

    def committed(self, key: str, body: bytes) -> None:
        """Called after the manifest ``key`` was written; :class:`~blockgz.commits.manifest_log.
        ManifestLog` (what an export and a repair write through) keeps the catalog head."""

    # -- reading ------------------------------------------------------------------------------
    def keys(self, *, after: str = "") -> list[str]:
        """Every manifest of this job (all epochs), oldest epoch first, then by batch; only
        those after the key ``after`` when given (the listing starts there)."""
        return [info.key for info in self.listed(after=after)]

    def listed(self, *, after: str = "") -> list[ObjectInfo]:
        """:meth:`keys` as the listing gave them (with sizes and, where the store says, the
        time each was written: the batch's commit time)."""
        prefix = self.layout.manifest_prefix(self.prefix, self.name)
        return sorted(
            (
                info
                for info in self.store.list(prefix, start_after=after)
                if self.layout.parse_manifest_key(info.key) is not None
            ),
            key=lambda info: info.key,
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

    def committed_files(self) -> list[WrittenFile]:
        """Every file listed by any manifest (for audits and tests): reads every one."""
        return [f for manifest in self.manifests() for f in manifest.files]

    def committed_values(self) -> list[WrittenFile]:
        """The value files among :meth:`committed_files`: the companions (``.timestamps``,
        ``.keys``, ``.headers``) hold the same records again."""
        return [f for f in self.committed_files() if f.role == "value"]


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
    >>> _ = Manifests(store, "", Layout(topics_dir="bgz"), "job").write(0, files=[], offsets={})
    >>> [(e.name, e.layout.topics_dir) for e in find_exports(store, "")]
    [('job', 'bgz')]
    """
    found = []
    keys = Layout(manifest_dir=manifest_dir)
    for job_dir in store.list_prefixes(keys.exports_prefix(prefix)):
        name = keys.job_of_directory(job_dir)
        manifests = Manifests(store, prefix, keys, name)
        first = next(iter(store.list(keys.manifest_prefix(prefix, name))), None)
        if first is None or Layout.parse_manifest_key(first.key) is None:
            continue
        recorded = manifests.read(first.key).layout
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


def fold_lives(
    lives: Mapping[str, Sequence[str]], manifests: Iterable[Manifest]
) -> dict[str, tuple[str, ...]]:
    """``lives`` (per topic, its topic ids, oldest first) with those ``manifests`` recorded
    added in order; a topic with two or more ids had lives that meet in one archive.

    >>> m = [Manifest("j", "", "0", topic_ids={"t": "A"}), Manifest("j", "", "1"),
    ...      Manifest("j", "", "2", topic_ids={"t": "B", "u": "C"})]
    >>> fold_lives({"t": ["A"]}, m)
    {'t': ('A', 'B'), 'u': ('C',)}
    """
    folded = {topic: list(ids) for topic, ids in lives.items()}
    for manifest in manifests:
        for topic, topic_id in sorted(manifest.topic_ids.items()):
            seen = folded.setdefault(topic, [])
            if not seen or seen[-1] != topic_id:
                seen.append(topic_id)
    return {topic: tuple(ids) for topic, ids in sorted(folded.items())}


def lives_message(job: str, topic: str, ids: Sequence[str]) -> str:
    """What two or more ``ids`` of ``topic`` in job ``job``'s manifests mean, in one line."""
    return (
        f"the manifests of job {job} record {len(ids)} lives of topic {topic} "
        f"(topic ids {', then '.join(ids)}): it was deleted and recreated, its offsets "
        "started again at 0, and readers and restore mix records of both lives; archive "
        "each life under its own topics.dir, or delete this archive and export again"
    )


def new_epoch() -> str:
    """A sortable id for a new checkpoint: UTC time plus a few random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + secrets.token_hex(3)
