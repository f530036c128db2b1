"""The audit's question about keys no manifest of the job committed: strays, a second writer's
copies, the batch in flight of a running export, and what ``--repair`` may remove of them.

An object no manifest committed is left alone while an export holding the lease may be writing
it; removed by ``--repair`` only when that loses nothing (from the committed offset on, or a
duplicate of committed offsets); otherwise a warning. A key that is not a data object under the
layout is named for the operator to rename or remove. Keys committed by *other* exports under
the same prefix are not strays (:func:`committed_by_other_jobs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from blockgz.archive.layout import parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.index import BlockIndex
from blockgz.commits.catalog import Catalog
from blockgz.commits.manifests import Manifests, find_exports
from blockgz.commits.writer_lease import Holder
from blockgz.errors import BlockGzError, CorruptManifestError, ObjectNotFoundError
from blockgz.reader.audit.context import AuditContext
from blockgz.reader.audit.findings import DAMAGE, NOTE, WARNING, Finding
from blockgz.reader.audit.gaps import gaps_between
from blockgz.reader.audit.repair import Plan, RemoveKeys
from blockgz.reader.reading.strays import is_stray
from blockgz.store.base import ObjectInfo
from blockgz.written.sidecars import data_key_for, is_sidecar, sidecar_keys

#: The directory of a partition under the default partitioner: ``…/partition=3``.
_PARTITION_DIR = re.compile(r"(?:^|/)partition=(\d+)$")


def check_strays(
    ctx: AuditContext,
    topic: str,
    offsets: dict[int, int],
    spans: dict[int, list[tuple[int, int]]],
    listed: dict[str, ObjectInfo],
    committed: set[str],
) -> None:
    layout, prefix = ctx.manifests.layout, ctx.manifests.prefix
    for key, info in sorted(listed.items()):
        if key in committed:
            continue
        if is_sidecar(key):
            data = data_key_for(key)
            if data in committed or data in listed:
                continue  # its object's business
            if parse_archive_key(layout, data) is None:
                if is_stray(layout, prefix, key):
                    _stray_name(ctx, topic, key)
                continue
            what = "a sidecar whose object is gone and was never committed"
            ctx.add(Finding(WARNING, "stray", topic, None, None, None, key, what),
                    RemoveKeys((key,)))  # fmt: skip
            continue
        ref = parse_archive_key(layout, key, size=info.size)
        if ref is None:
            if is_stray(layout, prefix, key):
                _stray_name(ctx, topic, key)
            continue
        if _foreign(ctx, topic, ref):
            continue
        held = spans.get(ref.partition, [])
        _uncommitted(ctx, ref, info, offsets.get(ref.partition), held, listed)


def _foreign(ctx: AuditContext, topic: str, ref: ObjectRef) -> bool:
    """Whether ``ref`` (in ``topic``'s folder, committed by no export) is another topic's or
    another partition's object (its name says so): damage, since engines that read the
    folder (Spark's, pyarrow's) count its records as this topic's, or this partition's."""
    folder = _PARTITION_DIR.search(ref.directory)
    if ref.topic == topic and (folder is None or int(folder[1]) == ref.partition):
        return False
    what = (
        f"is {ref.topic}-{ref.partition}'s object (by its name) in {ref.directory}/, and no "
        "export committed it: engines that read the folder count its records as "
        f"{topic}{'' if folder is None else '-' + folder[1]}'s; move or remove it"
    )
    ctx.add(Finding(DAMAGE, "foreign_object", topic, None if folder is None else int(folder[1]),
                    None, None, ref.key, what))  # fmt: skip
    return True


def _stray_name(ctx: AuditContext, topic: str, key: str) -> None:
    what = "not a data object under this layout (readers ignore it); rename or remove it"
    ctx.add(Finding(WARNING, "stray", topic, None, None, None, key, what))


def _uncommitted(
    ctx: AuditContext,
    ref: ObjectRef,
    info: ObjectInfo,
    committed: int | None,
    held: list[tuple[int, int]],
    listed: dict[str, ObjectInfo],
) -> None:
    """An object no manifest committed. It is removed by ``--repair`` only when that loses
    nothing: from the committed offset on (what a restart of the export removes too), or below
    it when its index shows every offset it holds is in committed objects (a duplicate). One
    that may hold the only copy of some offsets (written before the export kept manifests, by
    another tool) is left, and so is the batch in flight of a running export."""
    keys = (ref.key, *(k for k in sidecar_keys(ref.key) if k in listed))
    lease = ctx.lease
    in_flight = lease is not None and (info.modified is None or info.modified >= lease.since)
    ahead = committed is not None and ref.start_offset >= committed
    at = f"from offset {ref.start_offset}"
    if committed is None:
        where = f"{at}; no export here committed anything for {ref.topic}-{ref.partition}"
    elif ahead:
        where = f"{at}, at or after the committed offset {committed}"
    else:
        where = f"{at}, below the committed offset {committed}"
    if in_flight:
        what = (
            f"no manifest committed it yet ({where}): the export holding the lease "
            f"({lease.describe()}) may be writing it"  # type: ignore[union-attr]
        )
        level = NOTE if ahead else WARNING
        ctx.add(Finding(level, "in_flight", ref.topic, ref.partition, ref.start_offset, None,
                        ref.key, what))  # fmt: skip
        return
    if ahead:
        what = (
            f"no manifest committed it ({where}: a batch that never committed); readers ignore it"
        )
        plan: Plan | None = RemoveKeys(keys)
        last = None
    else:
        last, duplicate = _duplicate(ctx, ref, held, listed)
        plan = RemoveKeys(keys) if duplicate else None
        why = (
            "a second writer's copy: committed objects hold all of its offsets"
            if duplicate
            else "it may hold the only copy of some of its offsets (written before the export "
            "kept manifests, or by another tool)"
        )
        what = f"no manifest committed it ({where}); {why}; readers ignore it"
    ctx.add(Finding(WARNING, "uncommitted", ref.topic, ref.partition, ref.start_offset, last,
                    ref.key, what), plan)  # fmt: skip


def _duplicate(
    ctx: AuditContext, ref: ObjectRef, held: list[tuple[int, int]], listed: dict[str, ObjectInfo]
) -> tuple[int | None, bool]:
    """The stray's last offset (from its sidecar), and whether committed objects hold every
    offset from its first to its last; ``(None, False)`` without a readable sidecar."""
    at = next((k for k in sidecar_keys(ref.key) if k in listed), None)
    if at is None:
        return None, False
    try:
        index = BlockIndex.from_json(ctx.store.get(at), source=at)
    except (BlockGzError, ObjectNotFoundError):
        return None, False
    first, last = index.first_offset, index.last_offset
    if first is None or last is None:
        return None, False
    return last, not gaps_between(held, first=first, committed=last + 1)


def live_lease(manifests: Manifests, now: float) -> Holder | None:
    """The job's lease holder, if one holds it now (not released, not expired)."""
    key = manifests.layout.lease_key(manifests.prefix, manifests.name)
    try:
        holder = Holder.from_json(manifests.store.get(key), source=manifests.store.url(key))
    except (ObjectNotFoundError, CorruptManifestError):
        return None
    return None if holder.released or now >= holder.expires else holder


def committed_by_other_jobs(manifests: Manifests, topics: Iterable[str]) -> set[str]:
    """Keys (objects and sidecars) of ``topics`` that other exports under the same prefix
    committed: not strays of this one."""
    found: set[str] = set()
    wanted = set(topics)
    layout = manifests.layout
    for export in find_exports(manifests.store, manifests.prefix, manifest_dir=layout.manifest_dir):
        if export.name == manifests.name:
            continue
        other = Manifests(manifests.store, manifests.prefix, export.layout, export.name)
        view = Catalog(other).view()
        for topic, partition in view.partitions():
            if topic in wanted:
                for f in view.files(topic, partition):
                    found.update(k for k in (f.key, f.index_key) if k)
    return found
