"""The audit's checks of one partition's committed files, against the listing: each is there
at its committed size, with its committed CRC-32 where the server keeps one (a HEAD, skipped
when the listed ETag is the one the export recorded), and its sidecar is the committed one and
matches its object. :mod:`blockgz.reader.audit.auditor` runs them per partition.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from blockgz.blocks.index import BlockIndex
from blockgz.errors import BlockGzError, ObjectNotFoundError
from blockgz.reader.audit.context import (
    AuditContext,
    AuditedObject,
    file_finding,
)
from blockgz.reader.audit.findings import DAMAGE, WARNING
from blockgz.reader.audit.integrity import (
    IDENTITY,
    crc_problem,
    member_problems,
    object_member,
    rebuilt_for,
    sidecar_problems,
)
from blockgz.reader.audit.repair import RebuildSidecar, sidecar_target
from blockgz.store.base import ObjectInfo, ObjectStore
from blockgz.written.files import WrittenFile
from blockgz.written.sidecars import sidecar_keys

__all__ = ["check_objects", "fetch_object_facts", "needs_stored_crc"]


def fetch_object_facts(
    ctx: AuditContext, objects: list[AuditedObject], listed: dict[str, ObjectInfo]
) -> dict[int, str | None]:
    """Each listed object's sidecar (a GET) and, where the server keeps CRC-32s, the intact
    ones' stored CRC-32 (a HEAD; not with ``deep``), all on one pool of ``ctx.threads``;
    returns the problem loading each sidecar by ``id`` of its object. While it is not known
    whether the server keeps CRC-32s, one HEAD asks first: a server that keeps none costs one
    HEAD, not one per object."""
    todo = [o for o in objects if o.info is not None]
    for obj in todo:
        obj.intact = _size_problem(obj.file, obj.info) is None  # type: ignore[arg-type]
    asked = [] if ctx.deep else [o for o in todo if needs_stored_crc(o)]
    if asked and ctx.server_crc is None:
        _ask_stored_crc(ctx, asked.pop(0))
    if not ctx.server_crc:
        asked = []
    indexed = [o for o in todo if _find_sidecar(o, listed)]  # the others have none to GET
    with ThreadPoolExecutor(ctx.threads) as pool:  # HEADs and sidecar GETs side by side
        heads = [pool.submit(_ask_stored_crc, ctx, o) for o in asked]
        found = list(pool.map(lambda o: _load_sidecar(ctx.store, o), indexed))
        for head in heads:
            head.result()
    return {id(o): problem for o, problem in zip(indexed, found, strict=True)}


def needs_stored_crc(obj: AuditedObject) -> bool:
    """Whether the audit asks the server for the object's CRC-32 (a HEAD): an intact object
    whose manifest recorded a CRC-32, unless the listing shows the very ETag the export
    recorded (the version it wrote, so unchanged; issue 44). An ETag not recorded (older
    manifests) or listed differently is asked as before.

    >>> from blockgz.store.base import ObjectInfo
    >>> f = WrittenFile("k", "t", 0, "", 0, 9, 10, 5, 5, crc32=7, etag="e1")
    >>> same = AuditedObject(f, ObjectInfo("k", 5, etag="e1"), intact=True)
    >>> moved = AuditedObject(f, ObjectInfo("k", 5, etag="e2"), intact=True)
    >>> needs_stored_crc(same), needs_stored_crc(moved)
    (False, True)
    """
    if not obj.intact or obj.file.crc32 is None:
        return False
    listed = obj.info.etag if obj.info is not None else None
    return obj.file.etag is None or listed != obj.file.etag


def check_objects(
    ctx: AuditContext, objects: list[AuditedObject], loaded: dict[int, str | None]
) -> None:
    """One partition's committed files: present at their size, their CRC-32s and sidecars
    (fetched by :func:`fetch_object_facts`)."""
    for obj in objects:
        _check_present(ctx, obj)
    for obj in objects:
        if obj.info is not None:
            _check_stored_crc(ctx, obj)
            _check_sidecar(ctx, obj, loaded.get(id(obj)))


def _ask_stored_crc(ctx: AuditContext, obj: AuditedObject) -> None:
    """Where the server keeps one, the object's CRC-32 (a HEAD; not with ``deep``, which reads
    every byte and says which block is bad). The first answer without one stops the asking."""
    if needs_stored_crc(obj) and ctx.server_crc is not False:
        obj.stored_crc = ctx.store.stored_crc32(obj.file.key)
        if ctx.server_crc is None:
            ctx.server_crc = obj.stored_crc is not None


def _check_stored_crc(ctx: AuditContext, obj: AuditedObject) -> None:
    """The server's CRC-32 of the object against the committed one."""
    problem = crc_problem(obj.stored_crc, obj.file, "the server keeps")
    if problem is not None:
        ctx.add(file_finding(DAMAGE, "checksum_mismatch", obj.file, problem))
        obj.intact = False


def _check_present(ctx: AuditContext, obj: AuditedObject) -> None:
    f, info = obj.file, obj.info
    if info is None:
        what = f"a manifest committed it ({f.records} records, {f.size} bytes) but it is gone"
        ctx.add(file_finding(DAMAGE, "missing_object", f, what))
        return
    problem = _size_problem(f, info)
    if problem is not None:
        ctx.add(file_finding(DAMAGE, *problem))
        return
    obj.intact = True


def _size_problem(f: WrittenFile, info: ObjectInfo) -> tuple[str, WrittenFile, str] | None:
    """The finding's kind, file and line when the listed size is not the committed one."""
    if f.size < 0 or info.size == f.size:
        return None
    kind = "truncated_object" if info.size < f.size else "resized_object"
    why = "truncated" if info.size < f.size else "rewritten since it was committed?"
    return kind, f, f"is {info.size} bytes, the manifest committed {f.size} ({why})"


def _find_sidecar(obj: AuditedObject, listed: dict[str, ObjectInfo]) -> bool:
    """Whether the object's sidecar is listed (its key set as ``obj.index_at``)."""
    f = obj.file
    candidates = dict.fromkeys(k for k in (f.index_key, *sidecar_keys(f.key)) if k)
    obj.index_at = next((k for k in candidates if k in listed), None)
    return obj.index_at is not None


def _load_sidecar(store: ObjectStore, obj: AuditedObject) -> str | None:
    """Fetch and parse the object's sidecar (found by :func:`_find_sidecar`); a problem
    loading it, or ``None``."""
    assert obj.index_at is not None
    try:
        obj.sidecar_bytes = store.get(obj.index_at)
        obj.index = BlockIndex.from_json(obj.sidecar_bytes, source=obj.index_at)
    except ObjectNotFoundError:
        obj.index_at = None
    except BlockGzError as exc:
        return str(exc).removeprefix(f"{obj.index_at}: ")
    return None


def _check_sidecar(ctx: AuditContext, obj: AuditedObject, problem: str | None) -> None:
    f = obj.file
    target = sidecar_target(f.key, f.index_key)
    rebuild = RebuildSidecar(
        f.key, target, f.first_offset, f.last_offset, f.records,
        tuple(k for k in (obj.index_at,) if k and k != target),
        f.topic, f.partition, f.size, f.crc32,
    )  # fmt: skip
    safe = rebuild if obj.intact and _rebuildable(f) else None
    if obj.index_at is None:
        if f.index_key is not None:  # the writer wrote one: readers cannot seek without it
            what = f"its sidecar {f.index_key} is missing"
            ctx.add(file_finding(WARNING, "missing_sidecar", f, what), safe)
        return
    member = object_member(obj.sidecar_bytes or b"")
    named = member_problems(f, member, IDENTITY)
    if named:  # it says it is another object's sidecar
        _sidecar_mismatch(ctx, obj, named, safe)
        return
    if problem is not None:
        ctx.add(
            file_finding(WARNING, "stale_sidecar", f, f"its sidecar {obj.index_at}: {problem}"),
            safe,
        )
        return
    if not obj.intact:
        return  # the object itself is reported; its index is no longer the question
    index, size = obj.index, obj.info.size  # type: ignore[union-attr]
    assert index is not None
    said = (index.first_offset, index.last_offset, index.record_count, index.byte_length)
    truth = (f.first_offset, f.last_offset, f.records, size)
    if said != truth:
        what = (
            f"its sidecar {obj.index_at} describes offsets {said[0]}..{said[1]} ({said[2]} "
            f"records) in {said[3]} bytes, but the object is {size} bytes and the manifest "
            f"committed offsets {truth[0]}..{truth[1]} ({truth[2]} records): stale (from an "
            "older write of the key?)"
        )
        ctx.add(file_finding(WARNING, "stale_sidecar", f, what), safe)
        return
    committed_here = obj.index_at == f.index_key and not rebuilt_for(member, f)
    changed = sidecar_problems(f, obj.sidecar_bytes or b"") if committed_here else []
    changed += [] if rebuilt_for(member, f) else member_problems(f, member)
    if changed:  # describes the object, but not as committed (a timestamp or a block changed)
        _sidecar_mismatch(ctx, obj, changed, safe)
        return
    obj.index_ok = True


def _sidecar_mismatch(
    ctx: AuditContext, obj: AuditedObject, problems: list[str], plan: RebuildSidecar | None
) -> None:
    """The sidecar is not the one committed (the object it names, or its bytes' size or
    CRC-32): damage, one line; readers that check it refuse it."""
    what = (
        f"its sidecar {obj.index_at} is not the one committed: it {'; '.join(problems)} "
        "(tampered with, or swapped with another object's?)"
    )
    ctx.add(file_finding(DAMAGE, "sidecar_mismatch", obj.file, what), plan)


def _rebuildable(f: WrittenFile) -> bool:
    """Whether a rebuilt index can be exact: block-GZIP, offsets without gaps."""
    return f.key.endswith(".gz") and f.records == f.last_offset - f.first_offset + 1


# -- offsets --------------------------------------------------------------------------------
