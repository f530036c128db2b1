"""The catalog's heads: one small document per archive prefix that says, in one GET, which
export jobs commit there and what each committed.

Reading the catalog (:mod:`blockgz.commits.catalog`) costs a LIST of the roots and a LIST of
the manifests after the newest one; finding the jobs costs a LIST more. A cold seek is a few
requests for the data and all of those for the commit log. So every manifest write also
rewrites the job's entry (its *head*) in ``<prefix>_blockgz/heads.json`` (:class:`Heads`): the
newest root's key (and the root itself, when small), the manifests after it (each inline,
while the head stays under :data:`INLINE_BYTES`; else by key) and ``through``, the newest
manifest key it covers (the manifest sequence's last number, where a reader takes the gap
check up). A reader GETs it instead of listing.

Several jobs under one prefix share the document: each writes it with a conditional PUT
(``If-Match`` the version it read, ``If-None-Match`` to create) and, refused, reads it again
and re-applies its own entry, so no job's entry is lost to another's write. A job is named in
it before its first manifest (:func:`register`), so a reader that takes the jobs from it
misses none; the document's first writer names every job directory already there (with no
head: those are read by listing). A process keeps the version it last wrote, so a running
export's head costs one PUT per batch, the GET only when another writer moved it on.

What a head says is committed was committed: it is written after the manifest it adds, and
names only manifests and roots. It may be behind (a process killed between the manifest and
the head, or a head write that failed): a reader that needs what lies past it (an offset past
the head's end, a partition the head does not name, a read to a partition's end) lists the
manifests after the head's root, as without a head, and a manifest the head names that is no
longer listed, or a hole in the sequence, is a :class:`~blockgz.errors.MissingCommitError`.
An archive without the document (written before it existed) is read by listing, as before.

Readers (:mod:`blockgz.reader.reading.catalog_source`) trust a head as the record of the
manifests it names, with the job named or not: a cold seek inside it is 3 requests (the
document, the sidecar, the ranged GET). A manifest deleted after its head was written goes
unnoticed by such a seek, its records still read from the head's copy (checked against the
objects as before); a read to the partition's end and ``blockgz audit`` name the hole. Not
noticed either: a job directory that a blockgz version without this document starts writing
after the document exists (mixed versions on one prefix); ``-O name=<job>`` reads it.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.commits.manifest_log import ManifestLog
>>> from blockgz.store import LocalStore
>>> log = ManifestLog(LocalStore(tempfile.mkdtemp()), "", Layout(), "job")
>>> _ = log.write(0, files=[], offsets={"t": {0: 5}})
>>> _ = log.write(1, files=[], offsets={"t": {0: 9}})
>>> head = read_head(log)
>>> head.through.rsplit("/", 1)[1], [m.batch for m in head.manifests(log)]
('00000000000000000001.json', ['0', '1'])
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blockgz.archive.versions import check_major
from blockgz.errors import (
    BlockGzError,
    CorruptManifestError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)

if TYPE_CHECKING:
    from blockgz.archive.job_keys import JobKeys
    from blockgz.commits.manifests import Manifest, Manifests
    from blockgz.store.base import ObjectInfo, ObjectStore

log = logging.getLogger("blockgz.catalog")

HEAD_VERSION = 1
HEADS_VERSION = 1
#: The heads document's name, in the manifest directory beside the job directories.
HEADS_NAME = "heads.json"
#: Manifests and a root are kept inline in the head while it stays under this many bytes.
INLINE_BYTES = 256 * 1024
_READ_THREADS = 8
#: A head is built from at most this many manifests after the newest root (the first write
#: of a job whose archive has no head); a job with more (compaction off) keeps none.
BUILD_LIMIT = 1000


@dataclass(frozen=True)
class CatalogHead:
    """What a job's head says: the newest root, the manifests after it, and ``through``."""

    through: str
    root_key: str = ""
    #: The root's JSON, when it was small enough to keep inline (else it is read by key).
    root_json: bytes | None = None
    #: ``(manifest key, its JSON or None when read by key)``, in key order.
    tail: tuple[tuple[str, bytes | None], ...] = ()
    #: The newest manifest key the root folded (``""``: no root).
    root_through: str = ""
    #: Each tail manifest's size as written, so a reader that lists them can tell a manifest
    #: rewritten since (another size) and read it rather than the head's copy.
    sizes: Mapping[str, int] = field(default_factory=dict)

    @property
    def tail_keys(self) -> list[str]:
        return [key for key, _ in self.tail]

    def to_json(self) -> bytes:
        return _compact(self.to_doc())

    def to_doc(self) -> dict[str, Any]:
        """The head as a JSON document (inside :class:`Heads`)."""
        doc: dict[str, Any] = {
            "version": HEAD_VERSION,
            "through": self.through,
            "root": self.root_key,
            "root_through": self.root_through,
            "tail": [],
        }
        size = len(self.root_json or b"")
        if self.root_json is not None and size <= INLINE_BYTES // 2:
            doc["root_inline"] = json.loads(self.root_json)
        else:
            size = 0
        for key, body in self.tail:
            entry: dict[str, Any] = {"key": key}
            if key in self.sizes:
                entry["size"] = self.sizes[key]
            if body is not None and size + len(body) <= INLINE_BYTES:
                entry["manifest"] = json.loads(body)
                size += len(body)
            doc["tail"].append(entry)
        return doc

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> CatalogHead:
        """Read a head; a newer major version is refused (:mod:`blockgz.archive.versions`)."""
        try:
            return cls.from_doc(json.loads(data), source=source)
        except ValueError as exc:
            raise CorruptManifestError(f"{source}: not a blockgz catalog head ({exc})") from exc

    @classmethod
    def from_doc(cls, doc: Any, *, source: str) -> CatalogHead:
        """:meth:`from_json` of a parsed document."""
        try:
            check_major(doc, HEAD_VERSION, what="catalog head", source=source)
            root = doc.get("root_inline")
            return cls(
                through=str(doc["through"]),
                root_key=str(doc.get("root", "")),
                root_json=None if root is None else _compact(root),
                root_through=str(doc.get("root_through", "")),
                tail=tuple(
                    (str(e["key"]), None if "manifest" not in e else _compact(e["manifest"]))
                    for e in doc["tail"]
                ),
                sizes={str(e["key"]): int(e["size"]) for e in doc["tail"] if "size" in e},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz catalog head ({exc})") from exc

    def manifests(
        self, manifests: Manifests, listed: Sequence[ObjectInfo] | None = None
    ) -> list[Manifest]:
        """The tail's manifests (or the ``listed`` ones): those inline parsed, the others read
        (in parallel); a listed manifest whose size is not the one the head recorded was
        rewritten since, and is read."""
        from blockgz.commits.manifests import Manifest

        inline = dict(self.tail)
        if listed is None:
            entries = list(self.tail)
        else:
            entries = [
                (i.key, inline.get(i.key) if self.sizes.get(i.key) == i.size else None)
                for i in listed
            ]

        def one(entry: tuple[str, bytes | None]) -> Manifest:
            key, body = entry
            if body is None:
                return manifests.read(key)
            return Manifest.from_json(body, source=manifests.store.url(key))

        if sum(body is None for _, body in entries) <= 1:
            return [one(e) for e in entries]
        with ThreadPoolExecutor(_READ_THREADS) as pool:
            return list(pool.map(one, entries))

    def with_manifest(self, key: str, body: bytes) -> CatalogHead:
        """This head with the manifest ``key`` added (or replaced: a replayed batch); one the
        root already folded changes nothing."""
        if self.root_through and key <= self.root_through:
            return self
        tail = dict(self.tail)
        tail[key] = body
        return CatalogHead(
            max(self.through, key),
            self.root_key,
            self.root_json,
            tuple(sorted(tail.items())),
            self.root_through,
            {**self.sizes, key: len(body)},
        )


@dataclass(frozen=True)
class Heads:
    """The heads document of an archive prefix, ``<prefix><manifest dir>/heads.json``: every
    export job that commits under the prefix, each with its head (``None``: registered, but
    its readers list its manifests: a history too long to build a head from, or a job found
    there when the document was first written). One GET tells a reader both which jobs there
    are and what each committed; every job writes its own entry with conditional puts
    (``If-Match``), so two jobs writing to one prefix never lose each other's."""

    jobs: Mapping[str, CatalogHead | None]
    #: The version tag it was read or written with (``None``: not in the store).
    tag: str | None = None

    def to_json(self) -> bytes:
        jobs = {name: None if h is None else h.to_doc() for name, h in self.jobs.items()}
        return _compact({"version": HEADS_VERSION, "jobs": jobs})

    @classmethod
    def from_json(cls, data: bytes, *, source: str, tag: str | None = None) -> Heads:
        """Read a heads document; a newer major version is refused."""
        try:
            doc = json.loads(data)
            check_major(doc, HEADS_VERSION, what="catalog heads", source=source)
            jobs = {
                str(name): None if h is None else CatalogHead.from_doc(h, source=source)
                for name, h in doc["jobs"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz heads document ({exc})") from exc
        return cls(jobs, tag)

    def with_job(self, name: str, head: CatalogHead | None) -> Heads:
        return Heads({**self.jobs, name: head}, self.tag)


#: Versions of the heads document seen or written by this process, by its URL: a job's next
#: write is one conditional PUT against it (no GET), re-read when another writer moved it on.
_SEEN: dict[str, Heads] = {}
#: Conditional writes tried before a head update gives up (other jobs keep writing).
_TRIES = 8


def heads_key(store_prefix: str, layout: JobKeys) -> str:
    """``<prefix><manifest dir>/heads.json``."""
    return layout.exports_prefix(store_prefix) + HEADS_NAME


def head_key(manifests: Manifests) -> str:
    """Where the job's head is kept: the prefix's heads document (:class:`Heads`)."""
    return heads_key(manifests.prefix, manifests.layout)


def read_heads(store: ObjectStore, store_prefix: str, layout: JobKeys) -> Heads | None:
    """The prefix's heads document, or ``None`` when it has none (1 GET)."""
    key = heads_key(store_prefix, layout)
    try:
        data, tag = store.get_versioned(key)
    except ObjectNotFoundError:
        return None
    return Heads.from_json(data, source=store.url(key), tag=tag)


def read_head(manifests: Manifests) -> CatalogHead | None:
    """The job's head, or ``None`` when it has none (1 GET)."""
    heads = read_heads(manifests.store, manifests.prefix, manifests.layout)
    return None if heads is None else heads.jobs.get(manifests.name)


def recent_manifest(manifests: Manifests, key: str) -> Manifest | None:
    """The manifest ``key`` as this process last wrote it into the job's head (no request;
    ``None`` when not at hand: another process wrote it, or a compaction folded it)."""
    from blockgz.commits.manifests import Manifest

    heads = _SEEN.get(manifests.store.url(head_key(manifests)))
    head = None if heads is None else heads.jobs.get(manifests.name)
    body = None if head is None else dict(head.tail).get(key)
    return None if body is None else Manifest.from_json(body, source=manifests.store.url(key))


def rooted_head(root_key: str, root_json: bytes, through: str) -> CatalogHead:
    """The head right after a compaction: the new root (folded through ``through``), no
    manifest after it."""
    return CatalogHead(through, root_key, root_json, (), through)


def write_head(manifests: Manifests, head: CatalogHead | None) -> None:
    """Make ``head`` the job's entry in the heads document (whatever it held)."""
    _update(manifests, lambda _: head)


def register(manifests: Manifests) -> None:
    """Name the job in the heads document before its first manifest (1 GET; 1 PUT the first
    time): a reader that trusts the document to name every job never misses it. Where there
    is no document yet, nothing is written (readers list the job directories then; the head
    written after the manifest creates it, naming every job directory there). Raises when
    the document cannot be written (the job must not commit unseen)."""
    _update(manifests, lambda head: head, known=True)


def add_to_head(manifests: Manifests, key: str, body: bytes) -> None:
    """After the manifest ``key`` (bytes ``body``) was written: the head with it (1 PUT, the
    GET before it only when this process has not seen the document's current version; where
    there is no head yet, or the head does not end with the batch before, it is built from
    the catalog first). A failure is logged, not raised: the manifest is the commit, and a
    head that is behind is caught up by its readers."""

    def added(head: CatalogHead | None) -> CatalogHead | None:
        if head is None or not _follows(manifests, head, key):
            head = _built(manifests)  # none yet, behind (it missed a manifest), a new epoch
        return None if head is None else head.with_manifest(key, body)

    try:
        _update(manifests, added)
    except (BlockGzError, OSError) as exc:
        log.warning(
            "catalog head of %s not updated after %s (%s); readers list the manifests after "
            "the head until the next batch updates it",
            manifests.name,
            key.rsplit("/", 1)[-1],
            exc,
        )


def _update(
    manifests: Manifests,
    change: Callable[[CatalogHead | None], CatalogHead | None],
    *,
    known: bool = False,
) -> None:
    """Write ``change(the job's head)`` into the heads document with a conditional PUT,
    re-reading it and applying ``change`` again when another writer got there first.
    ``known``: nothing is written when the job is already named and its head unchanged."""
    m = manifests
    url = m.store.url(head_key(m))
    heads = _SEEN.get(url)
    for _ in range(_TRIES):
        if heads is None:
            heads = _current(m)
        head = change(heads.jobs.get(m.name))
        if known and (heads.tag is None or m.name in heads.jobs) and head is heads.jobs.get(m.name):
            _SEEN[url] = heads
            return
        new = heads.with_job(m.name, head)
        try:
            _SEEN[url] = Heads(new.jobs, _put(m, new))
            return
        except PreconditionFailedError:
            _SEEN.pop(url, None)
            heads = None  # another job (or this one's compaction) wrote it: read it again
    raise StoreError(f"{url}: still changing after {_TRIES} conditional writes")


def _current(manifests: Manifests) -> Heads:
    """The heads document as stored; where there is none (or it is unreadable), one naming
    every job directory under the prefix (1 LIST), each to be read by listing until it
    writes its own head."""
    m = manifests
    try:
        found = read_heads(m.store, m.prefix, m.layout)
        if found is not None:
            return found
        tag = None
    except CorruptManifestError as exc:
        log.warning("%s; it is written again", exc)
        tag = m.store.get_versioned(head_key(m))[1]
    where = m.layout.exports_prefix(m.prefix)
    names = [m.layout.job_of_directory(d) for d in m.store.list_prefixes(where)]
    return Heads(dict.fromkeys(names), tag)


def _put(manifests: Manifests, heads: Heads) -> str:
    """One conditional PUT of the document: created, or replacing the version ``heads.tag``."""
    key, data = head_key(manifests), heads.to_json()
    if heads.tag is None:
        return manifests.store.put_if(key, data, if_none_match=True)
    return manifests.store.put_if(key, data, if_match=heads.tag)


def _follows(manifests: Manifests, head: CatalogHead, key: str) -> bool:
    """Whether ``key`` can join ``head`` as it is: the batch right after its newest manifest
    in the same epoch, or one it already covers (a replay, a repair); a head that missed a
    manifest would otherwise name a hole that is not there."""
    if key <= head.through:
        return True
    parse = manifests.layout.parse_manifest_key
    new, last = parse(key), parse(head.through)
    if new is None or last is None or new[0] != last[0]:
        return False
    return isinstance(new[1], int) and isinstance(last[1], int) and new[1] == last[1] + 1


def _built(manifests: Manifests) -> CatalogHead | None:
    """A head of what is committed now, built from the catalog (the first write of a job, or
    of a job written before heads existed); ``None`` past :data:`BUILD_LIMIT` manifests."""
    layout = manifests.layout
    roots = manifests.store.list(layout.catalog_roots_prefix(manifests.prefix, manifests.name))
    keys = sorted(info.key for info in roots if layout.is_catalog_root(info.key))
    root_key = keys[-1] if keys else ""
    root_json = gzip.decompress(manifests.store.get(root_key)) if root_key else None
    through = str(json.loads(root_json)["through"]) if root_json else ""
    prefix = manifests.layout.manifest_prefix(manifests.prefix, manifests.name)
    page = manifests.store.list(prefix, start_after=through, limit=BUILD_LIMIT + 1)
    listed = sorted(i.key for i in page if manifests.layout.parse_manifest_key(i.key))
    if len(listed) > BUILD_LIMIT:  # compaction off and a long history: no head, readers list
        return None
    with ThreadPoolExecutor(_READ_THREADS) as pool:
        bodies = list(pool.map(manifests.store.get, listed))
    tail = tuple(zip(listed, bodies, strict=True))
    sizes = {key: len(body) for key, body in tail}
    return CatalogHead(listed[-1] if listed else through, root_key, root_json, tail, through, sizes)


def _compact(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
