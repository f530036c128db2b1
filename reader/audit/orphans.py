"""Objects no manifest commits while a manifest of the job is missing ("orphans"), and their
re-commit by ``blockgz audit --repair``.

When a manifest is deleted, the objects it committed stay in the bucket but no manifest commits
them: readers skip them. The audit then does not name each one (it names the missing manifest,
:mod:`blockgz.reader.audit.manifest_findings`); it counts them and lets them fill the offsets they
hold
when it looks for gaps.

``--repair`` re-commits the orphans that prove themselves, and never guesses: an object is
re-committed only when its sidecar names it (the ``"object"`` member: key, size, CRC-32,
topic, partition, offsets, records) and its bytes, read whole, have that size and CRC-32; a
value object only together with every companion (keys, headers, timestamps file) that sits
beside it, each proven the same way. They are written as the missing manifest itself (its key:
the sequence is whole again, and the catalog and readers take it in key order).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from blockgz.archive.layout import parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.index import BlockIndex
from blockgz.commits.catalog import Catalog
from blockgz.commits.manifest_log import ManifestLog
from blockgz.commits.manifests import Manifests
from blockgz.errors import BlockGzError
from blockgz.reader.audit.findings import AuditReport
from blockgz.reader.audit.integrity import object_member
from blockgz.store.base import ObjectInfo, ObjectStore
from blockgz.written.files import WrittenFile
from blockgz.written.sidecars import is_sidecar, sidecar_keys


@dataclass
class Orphan:
    """A data object (or companion) of the topic that no manifest commits."""

    ref: ObjectRef
    info: ObjectInfo
    sidecar: str | None = None
    sidecar_bytes: bytes | None = None
    index: BlockIndex | None = None
    member: Mapping[str, Any] | None = None

    @property
    def span(self) -> tuple[int, int] | None:
        """The offsets it holds (from its sidecar), ``None`` when unknown."""
        if self.member is not None and "last_offset" in self.member:
            return int(self.member.get("first_offset", self.ref.start_offset)), int(
                self.member["last_offset"]
            )
        if self.index is not None and self.index.last_offset is not None:
            return self.ref.start_offset, self.index.last_offset
        return None

    def stored_keys(self) -> list[str]:
        return [k for k in (self.ref.key, self.sidecar) if k]


def find_orphans(
    store: ObjectStore,
    manifests: Manifests,
    topic: str,
    listed: Mapping[str, ObjectInfo],
    committed: set[str],
    threads: int,
) -> list[Orphan]:
    """The topic's data objects in ``listed`` that are not in ``committed``, their sidecars
    loaded."""
    found = []
    for key, info in sorted(listed.items()):
        if key in committed or is_sidecar(key):
            continue
        ref = parse_archive_key(manifests.layout, key, size=info.size)
        if ref is not None and ref.topic == topic:
            found.append(Orphan(ref, info))
    with ThreadPoolExecutor(max(1, threads)) as pool:
        list(pool.map(lambda o: _load(store, o, listed), found))
    return found


def _load(store: ObjectStore, orphan: Orphan, listed: Mapping[str, ObjectInfo]) -> None:
    orphan.sidecar = next((k for k in sidecar_keys(orphan.ref.key) if k in listed), None)
    if orphan.sidecar is None:
        return
    try:
        orphan.sidecar_bytes = store.get(orphan.sidecar)
        orphan.index = BlockIndex.from_json(orphan.sidecar_bytes, source=orphan.sidecar)
    except BlockGzError:
        return
    orphan.member = object_member(orphan.sidecar_bytes)


def describe(orphans: list[Orphan]) -> str:
    """``3 objects (ev-0 offsets 0..20, ev-1 offsets 0..20)``: what the orphans hold."""
    if not orphans:
        return ""
    spans: dict[tuple[str, int], list[int]] = {}
    for o in orphans:
        span = o.span
        if span is not None:
            spans.setdefault((o.ref.topic, o.ref.partition), []).extend(span)
    parts = ", ".join(f"{t}-{p} offsets {min(s)}..{max(s)}" for (t, p), s in sorted(spans.items()))
    noun = "object" if len(orphans) == 1 else "objects"
    return f"{len(orphans)} {noun}" + (f" ({parts})" if parts else "")


@dataclass(frozen=True)
class Recommit:
    """Write ``manifest_key`` (a missing manifest of ``manifests``' job) committing the
    orphans that prove themselves."""

    manifests: Manifests
    manifest_key: str
    orphans: tuple[Orphan, ...]

    def carry_out(self, store: ObjectStore, report: AuditReport) -> str:
        groups: dict[tuple[str, int, int], list[Orphan]] = {}
        for o in self.orphans:
            groups.setdefault((o.ref.topic, o.ref.partition, o.ref.start_offset), []).append(o)
        files: list[WrittenFile] = []
        refused: list[str] = []
        for group in groups.values():
            proven = [self._proven(store, o) for o in group]
            reasons = [why for _, why in proven if why]
            if reasons:
                refused.append(f"{group[0].ref.key} ({reasons[0]})")
                continue
            files.extend(f for f, _ in proven if f is not None)
        if not files:
            return "not repaired: no object proves itself: " + "; ".join(refused[:3])
        self._write(files)
        report.repaired.append(f"re-committed {len(files)} files in {store.url(self.manifest_key)}")
        text = f"repaired: re-committed {len(files)} files that prove themselves"
        text += f"; left out {'; '.join(refused[:3])}" if refused else ""
        root = Catalog(self.manifests).latest_root()
        if root is not None and root.through >= self.manifest_key:
            text += (
                f"; the catalog (root {root.seq}) folded past it: readers see them once it is "
                "rebuilt (remove the job's catalog roots while no export runs)"
            )
        return text

    def _proven(self, store: ObjectStore, o: Orphan) -> tuple[WrittenFile | None, str]:
        """The orphan's manifest entry, or why it does not prove itself."""
        m = o.member
        if m is None or o.sidecar_bytes is None:
            return None, "its sidecar does not name it (written before sidecars named objects)"
        named = (m.get("key"), m.get("topic"), m.get("partition"), m.get("first_offset"))
        if named != (o.ref.key, o.ref.topic, o.ref.partition, o.ref.start_offset):
            return None, f"its sidecar names {named[0]} of {named[1]}-{named[2]}"
        data = store.get(o.ref.key)
        crc = block_crc32(data)
        if (len(data), crc) != (m.get("size"), m.get("crc32")):
            return None, f"{len(data)} bytes with CRC-32 {crc:#010x}, its sidecar says otherwise"
        return self._entry(o, len(data), crc), ""

    def _entry(self, o: Orphan, size: int, crc: int) -> WrittenFile:
        m, index, ref = o.member or {}, o.index, o.ref
        chunks = index.chunks if index is not None else []
        stamps = [c.min_timestamp for c in chunks] + [c.max_timestamp for c in chunks]
        timed = bool(chunks) and None not in stamps
        topic_dir = self.manifests.layout.topic_prefix(self.manifests.prefix, ref.topic)
        encoded = (ref.directory + "/").removeprefix(topic_dir).rstrip("/")
        return WrittenFile(
            ref.key, ref.topic, ref.partition, encoded, int(m["first_offset"]),
            int(m["last_offset"]), int(m["records"]), size,
            index.byte_length_uncompressed if index is not None else 0, o.sidecar, ref.role,
            min(stamps) if timed else None, max(stamps) if timed else None,  # type: ignore[type-var]
            crc32=crc, index_size=len(o.sidecar_bytes or b""),
            index_crc32=block_crc32(o.sidecar_bytes or b""),
        )  # fmt: skip

    def _write(self, files: list[WrittenFile]) -> None:
        m = self.manifests
        epoch, batch = m.layout.parse_manifest_key(self.manifest_key)  # type: ignore[misc]
        offsets: dict[str, dict[int, int]] = {}
        for f in files:
            parts = offsets.setdefault(f.topic, {})
            parts[f.partition] = max(parts.get(f.partition, 0), f.last_offset + 1)
        log = ManifestLog(m.store, m.prefix, m.layout, m.name, epoch=epoch)
        log.write(batch, files=files, offsets=offsets)
