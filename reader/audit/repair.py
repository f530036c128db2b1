"""``blockgz audit --repair``: what is safe to mend, mended; what is not, said.

Safe:

* a missing, stale or unreadable sidecar of an intact block-GZIP object is rebuilt from the
  object (:func:`blockgz.blocks.rebuild.scan_members`: its gzip members, with checksums), when
  the rebuilt index agrees with what the manifest committed (first and last offset, records):
  an object whose offsets have gaps cannot be re-indexed from its bytes alone (only the lost
  index recorded where the gaps were), and an Avro object's index is not rebuilt. The record
  timestamps a sidecar kept (issue 44) are not in the object: where no timestamps file sits
  beside it, the repair's line says they now read as not recorded;
* an object no manifest committed (and its sidecar) is removed when that loses nothing: from
  the committed offset on (what a restart of the export removes too), or below it when its
  index shows that committed objects hold every offset it holds (a second writer's copy);
  a sidecar whose object is gone is removed too. Never while an export holds the job's lease
  and the object is not older than the lease: that export may be writing it (its batch in
  flight), so it is left alone.

* objects a deleted manifest committed (no manifest commits them now) are re-committed, in
  the missing manifest's place, when they prove themselves (:mod:`blockgz.reader.audit.orphans`).

Not safe, and so only said: committed records that are gone, truncated or corrupted (re-export
those offsets from Kafka while it still holds them), overlaps (both copies are committed; which
to keep is a person's call), gaps, strays whose names are no data object's (someone may have
put them there on purpose), and uncommitted objects that may hold the only copy of some
offsets.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, replace
from typing import Protocol

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.rebuild import scan_members
from blockgz.errors import BlockGzError, ObjectNotFoundError
from blockgz.reader.audit.findings import AuditReport, Finding
from blockgz.store.base import ObjectStore
from blockgz.written.sidecars import sidecar_key

#: A data object's name up to its start offset (``<topic>+<partition>+<start>``).
_STEM = re.compile(r"^(.*\+\d+\+\d+)\.")


@dataclass(frozen=True)
class RebuildSidecar:
    """Index ``data_key`` again and write it at ``sidecar``; ``remove``: stale copies elsewhere."""

    data_key: str
    sidecar: str
    first_offset: int
    last_offset: int
    records: int
    remove: tuple[str, ...] = ()
    #: What the manifest committed of the object: the rebuilt sidecar names it (its
    #: ``"object"`` member, marked ``rebuilt``), once its bytes proved to be those (CRC-32).
    topic: str = ""
    partition: int = 0
    size: int = -1
    crc32: int | None = None

    def sidecar_json(self, index: BlockIndex, data: bytes) -> bytes:
        """The rebuilt index, naming its object (``data``, which proved to be the committed
        bytes where the manifest recorded their CRC-32)."""
        doc = json.loads(index.to_json())
        doc["object"] = {
            "key": self.data_key, "size": len(data), "crc32": block_crc32(data),
            "topic": self.topic,
            "partition": self.partition, "first_offset": self.first_offset,
            "last_offset": self.last_offset, "records": self.records, "rebuilt": True,
        }  # fmt: skip
        return json.dumps(doc, sort_keys=True).encode()


@dataclass(frozen=True)
class RemoveKeys:
    """Delete ``keys`` (an uncommitted object and its sidecar, or an orphan sidecar)."""

    keys: tuple[str, ...]


class CarriesOut(Protocol):
    """A plan that carries itself out (:class:`blockgz.reader.audit.orphans.Recommit`): the
    line the finding gets."""

    def carry_out(self, store: ObjectStore, report: AuditReport) -> str: ...


@dataclass(frozen=True)
class Said:
    """Nothing done; the finding's line says ``text`` (why not)."""

    text: str

    def carry_out(self, store: ObjectStore, report: AuditReport) -> str:
        return self.text


Plan = RebuildSidecar | RemoveKeys | CarriesOut


def repair(store: ObjectStore, report: AuditReport, plans: dict[int, Plan]) -> None:
    """Carry out the safe plans; give every finding its ``repair`` line (done, or why not)."""
    for n, finding in enumerate(report.findings):
        plan = plans.get(n)
        if plan is None:
            text = finding.repair or _cannot(finding)
        else:
            try:
                text = _carry_out(store, plan, report)
            except (BlockGzError, OSError) as exc:
                text = f"repair failed: {exc}"
        report.findings[n] = replace(finding, repair=text)


def _carry_out(store: ObjectStore, plan: Plan, report: AuditReport) -> str:
    if not isinstance(plan, (RemoveKeys, RebuildSidecar)):
        return plan.carry_out(store, report)
    if isinstance(plan, RemoveKeys):
        for key in plan.keys:
            try:
                store.delete(key)
            except ObjectNotFoundError:
                continue
            report.repaired.append(f"removed {store.url(key)}")
        return "repaired: removed " + ", ".join(plan.keys)
    data = store.get(plan.data_key)
    if plan.crc32 is not None and block_crc32(data) != plan.crc32:
        return (
            f"not repaired: the object's bytes are not those committed (CRC-32 "
            f"{block_crc32(data):#010x}, committed {plan.crc32:#010x}): no index is rebuilt "
            "from them"
        )
    index = scan_members(io.BytesIO(data), first_offset=plan.first_offset)
    got = (index.first_offset, index.last_offset, index.record_count)
    wanted = (plan.first_offset, plan.last_offset, plan.records)
    if got != wanted:
        return (
            f"not repaired: indexing the object gives offsets {got[0]}..{got[1]} ({got[2]} "
            f"records), the manifest committed {wanted[0]}..{wanted[1]} ({wanted[2]} records); "
            "its gaps were recorded only in the index: re-export these offsets to index them"
        )
    lost = _stamps_lost(store, plan)
    store.put(plan.sidecar, plan.sidecar_json(index, data))
    report.repaired.append(f"rebuilt {store.url(plan.sidecar)}")
    for key in plan.remove:
        store.delete(key)
        report.repaired.append(f"removed {store.url(key)}")
    text = f"repaired: rebuilt {plan.sidecar} from the object ({len(index.chunks)} blocks)"
    if lost:
        text += "; the record timestamps its sidecar kept are not in the object: not recorded now"
    return text


def _stamps_lost(store: ObjectStore, plan: RebuildSidecar) -> bool:
    """Whether rebuilding ``plan``'s sidecar loses record timestamps: no timestamps file sits
    beside the object (hidden or visible name), and the sidecar it replaces kept them or is
    gone or unreadable (then nothing tells, and a blockgz since issue 44 kept them there)."""
    directory, _, name = plan.data_key.rpartition("/")
    stem = _STEM.match(name)
    if stem is None:
        return False
    folder = f"{directory}/" if directory else ""
    for prefix in (f"{folder}.{stem[1]}.timestamps.", f"{folder}{stem[1]}.timestamps."):
        if next(iter(store.list(prefix, limit=1)), None) is not None:
            return False
    try:
        doc = json.loads(store.get(plan.sidecar))
        return any("timestamps" in chunk for chunk in doc["chunks"])
    except (ObjectNotFoundError, ValueError, TypeError, KeyError):
        return True


def _cannot(finding: Finding) -> str:
    """Why a finding without a plan is left as it is."""
    span = f"offsets {finding.first}..{finding.last} of {finding.topic}-{finding.partition}"
    return {
        "missing_object": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "truncated_object": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "resized_object": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "corrupt_block": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "unreadable_object": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "not_archived": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "overlap": "not repaired: both objects are committed; remove one by hand if you must",
        "unexplained_gap": "not repaired: nothing to rebuild it from",
        "stray": "not repaired: not a data object's name (it may be there on purpose)",
        "in_flight": "left alone: the export holding the lease may be writing it",
        "uncommitted": "not removed: it may hold the only copy of these offsets; check by hand",
        "past_commit": "not repaired: the manifests disagree with the object; check by hand",
        "checksum_mismatch": f"cannot repair: re-export {span} from Kafka if it still holds them",
        "sidecar_mismatch": "not repaired: the committed sidecar's bytes are gone; re-export "
        f"{span} from Kafka if it still holds them",
        "foreign_object": "not repaired: it belongs elsewhere; move or remove it by hand",
        "topic_lives": "not repaired: offsets cannot tell the two lives apart; archive each "
        "life apart, or delete this archive and export again",
        "missing_manifest": "not repaired: no object no manifest commits proves itself",
        "gap": "nothing to repair",
        "catalog": "not repaired: removing the job's catalog roots (with no export running) "
        "makes the next compaction rebuild the catalog from the manifests",
    }.get(finding.kind, "not repaired")


def sidecar_target(data_key: str, named: str | None) -> str:
    """Where a rebuilt sidecar goes: where the manifest said it is, else the hidden name.

    >>> sidecar_target("d/t+0+0000000000.json.gz", None)
    'd/.t+0+0000000000.json.index.json'
    """
    return named or sidecar_key(data_key)
