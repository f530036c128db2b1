"""The catalog's head: one small document per job that says, in one GET, what is committed.

Reading the catalog (:mod:`blockgz.commits.catalog`) costs a LIST of the roots and a LIST of
the manifests after the newest one; finding the job costs a LIST more. A cold seek is a few
requests for the data and all of those for the commit log. So every manifest write also
rewrites ``_blockgz/<job>/catalog/head.json``: the newest root's key (and the root itself,
when small), the manifests after it (each inline, while the head stays under
:data:`INLINE_BYTES`; else by key) and ``through``, the newest manifest key it covers (the
manifest sequence's last number, where a reader takes the gap check up). A reader GETs it
instead of listing.

What a head says is committed was committed: it is written after the manifest it adds, and
names only manifests and roots. It may be behind (a process killed between the manifest and
the head, or a head write that failed): a reader that needs what lies past it (an offset past
the head's end, a whole partition) lists the manifests after ``through``, as without a head.
An archive without a head (written before heads existed) is read by listing, as before.

Readers of :mod:`blockgz.reader.reading.catalog_source` use it two ways: told the job's name,
they trust the head as the record of the manifests it names (3 requests for a cold seek; a
manifest deleted after its head was written goes unnoticed there, its records still read from
the head's copy: ``blockgz audit`` names the hole); not told, they also list the manifests
after the head's root, so a manifest missing from the sequence stays a
:class:`~blockgz.errors.MissingCommitError` and a newer one is read.

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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blockgz.archive.versions import check_major
from blockgz.errors import BlockGzError, CorruptManifestError, ObjectNotFoundError

if TYPE_CHECKING:
    from blockgz.commits.manifests import Manifest, Manifests
    from blockgz.store.base import ObjectInfo

log = logging.getLogger("blockgz.catalog")

HEAD_VERSION = 1
HEAD_NAME = "head.json"
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
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> CatalogHead:
        """Read a head; a newer major version is refused (:mod:`blockgz.archive.versions`)."""
        try:
            doc = json.loads(data)
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


def head_key(manifests: Manifests) -> str:
    """``<prefix><manifest dir>/<job>/catalog/head.json``."""
    m = manifests
    return m.layout.catalog_prefix(m.prefix, m.name) + HEAD_NAME


def read_head(manifests: Manifests) -> CatalogHead | None:
    """The job's head, or ``None`` when it has none (1 GET)."""
    key = head_key(manifests)
    try:
        data = manifests.store.get(key)
    except ObjectNotFoundError:
        return None
    return CatalogHead.from_json(data, source=manifests.store.url(key))


def rooted_head(root_key: str, root_json: bytes, through: str) -> CatalogHead:
    """The head right after a compaction: the new root (folded through ``through``), no
    manifest after it."""
    return CatalogHead(through, root_key, root_json, (), through)


def write_head(manifests: Manifests, head: CatalogHead) -> None:
    manifests.store.put(head_key(manifests), head.to_json())


def add_to_head(manifests: Manifests, key: str, body: bytes) -> None:
    """After the manifest ``key`` (bytes ``body``) was written: the head with it (1 GET and
    1 PUT; where there is no head yet, or the head does not end with the batch before, it is
    built from the catalog first). A failure is
    logged, not raised: the manifest is the commit, and a head that is behind is caught up
    by its readers."""
    try:
        head = read_head(manifests)
        if head is None or not _follows(manifests, head, key):
            head = _built(manifests)  # none yet, behind (it missed a manifest), a new epoch
        if head is not None:
            write_head(manifests, head.with_manifest(key, body))
    except (BlockGzError, OSError) as exc:
        log.warning(
            "catalog head of %s not updated after %s (%s); readers list the manifests after "
            "the head until the next batch updates it",
            manifests.name,
            key.rsplit("/", 1)[-1],
            exc,
        )


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
