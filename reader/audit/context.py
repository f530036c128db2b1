"""What one audit run carries from check to check: the store, the job's manifests, the report
being filled, the repair plans of its findings, and each committed object as found.

>>> from blockgz.written.files import WrittenFile
>>> from blockgz.reader.audit.findings import WARNING
>>> f = WrittenFile("t/t+0+0000000000.json.gz", "t", 0, "partition=0", 0, 9, 10, 100, 90, None)
>>> print(file_finding(WARNING, "stray", f, "is odd").line())
warning: t-0 offsets 0..9 t/t+0+0000000000.json.gz: is odd
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blockgz.blocks.index import BlockIndex
from blockgz.commits.manifests import Manifests
from blockgz.commits.writer_lease import Holder
from blockgz.reader.audit.findings import AuditReport, Finding
from blockgz.reader.audit.repair import Plan
from blockgz.store.base import ObjectInfo, ObjectStore
from blockgz.written.files import WrittenFile

#: Sidecars fetched (and, with ``deep``, objects read) at once.
DEFAULT_THREADS = 8


@dataclass
class AuditedObject:
    """One committed file as found: its listing entry and its loaded index."""

    file: WrittenFile
    info: ObjectInfo | None = None
    index: BlockIndex | None = None
    index_at: str | None = None
    #: The object's bytes are as committed (present, at the recorded size).
    intact: bool = False
    #: Its index matches it (and the manifest).
    index_ok: bool = False
    #: The sidecar's bytes as fetched, and the CRC-32 the server keeps of the object (``None``:
    #: not asked, or none kept).
    sidecar_bytes: bytes | None = None
    stored_crc: int | None = None


@dataclass
class AuditContext:
    store: ObjectStore
    manifests: Manifests
    report: AuditReport
    plans: dict[int, Plan] = field(default_factory=dict)
    lease: Holder | None = None
    threads: int = DEFAULT_THREADS
    #: ``--deep``: every object is read.
    deep: bool = False
    #: Every manifest's files, read only when the catalog fails (:func:`_committed_files`).
    all_files: list[WrittenFile] | None = None
    #: Whether the server keeps the objects' CRC-32s: ``None`` until a HEAD of an object whose
    #: manifest recorded one answered; ``False`` stops asking (one HEAD, not one per object).
    server_crc: bool | None = None

    def add(self, finding: Finding, plan: Plan | None = None) -> None:
        if plan is not None:
            self.plans[len(self.report.findings)] = plan
        self.report.add(finding)


def file_finding(level: int, kind: str, f: WrittenFile, message: str) -> Finding:
    return Finding(level, kind, f.topic, f.partition, f.first_offset, f.last_offset, f.key, message)
