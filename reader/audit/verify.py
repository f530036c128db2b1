"""``blockgz verify --topic``: every problem is collected, one line each; exit 2 for damage.

Where exports' manifests commit the topic, ``verify`` is the audit's engine
(:func:`blockgz.reader.audit.auditor.audit_job`, ``--deep``, no broker asked): every committed file
(value objects and their keys/headers/timestamps companions, and the sidecars) is checked
against what its manifest committed and read once, every bad sidecar is its own line, a
deleted object or manifest is damage, keys no manifest committed (strays, another topic's
object) are named, and every gap between objects is a line (a note: no broker is asked, so
nothing can tell compaction or transaction markers from lost records; ``blockgz audit`` asks
one) (:func:`verify_topic`).

An archive without manifests (another writer's, DeviantArt's) is checked object by object, as
listed (:func:`check_topic`): an indexed object has each block checked against its index. An
object that could have an index but has none is a problem unless ``scan`` is asked for: then
it is read whole (decompressed to the end, records counted). A plain ``.json``/``.bin``
object has no index by design and is always read whole. Strays (keys that are no data object)
are problems too, and so are objects that hold the same offsets as another (two writers;
:mod:`blockgz.reader.reading.overlaps`). A new kind of problem is one more function calling
:meth:`TopicCheck.problem`.

>>> import tempfile
>>> from blockgz import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> from blockgz.reader.reading.archive import Archive
>>> store = LocalStore(tempfile.mkdtemp())
>>> key = "topics/t/partition=0/t+0+0000000000.json.gz"
>>> with BlockGzipUpload(store, key, first_offset=0) as out:
...     out.write(b"v0")
>>> store.put(key + ".bak", b"vm")
>>> check = check_topic(Archive(store), "t")
>>> [line.split(": ")[1] for line in check.lines], len(check.problems)
(['ok, 1 blocks, 1 records'], 1)
>>> check.problems[0].startswith("stray: ")
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from blockgz.archive.layout import parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.commits.manifests import Manifests, find_exports
from blockgz.errors import BlockGzError, UnknownFormatError
from blockgz.formats.by_name import format_of, stream_decoder_of
from blockgz.objects.indexed import IndexedReader, VerifyReport
from blockgz.reader.audit.deep import stamp_problems
from blockgz.reader.audit.findings import NOTE
from blockgz.reader.reading.archive import Archive, ObjectSummary
from blockgz.reader.reading.strays import stray_line
from blockgz.reader.reading.whole_read import read_whole

__all__ = ["TopicCheck", "check_object", "check_topic", "read_whole", "verify_topic"]


@dataclass
class TopicCheck:
    """What ``verify --topic`` found: one line per object (or, audited, per partition) that
    passed, and the problems; ``level``: 0 intact, 1 warnings, 2 damage (the exit code)."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    objects: int = 0
    level: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, line: str, level: int = 1) -> None:
        """Add one problem line; ``level`` 2 for damage (records gone or unreadable)."""
        self.problems.append(line)
        self.level = max(self.level, level)


def verify_topic(
    archive: Archive,
    topic: str,
    *,
    scan: bool = False,
    check_indexed: IndexedCheck | None = None,
) -> TopicCheck:
    """``verify --topic``: the deep audit of every export under the archive's prefix that
    committed ``topic`` (see the module docstring); :func:`check_topic` where none did."""
    from blockgz.reader.audit.auditor import (
        audit_job,  # the audit reads objects whole through this module
    )

    check = TopicCheck()
    audited = False
    for manifests in _exports(archive):
        report = audit_job(manifests, topics=[topic], deep=True, unasked_gaps=NOTE)
        if topic not in {p.topic for p in report.partitions}:
            continue
        audited = True
        check.objects += report.objects
        for p in report.partitions:
            span = "-" if p.first_offset is None else f"{p.first_offset}..{(p.committed or 0) - 1}"
            check.lines.append(
                f"{p.topic}-{p.partition} (export {manifests.name}): offsets {span}, "
                f"{p.objects} files, {p.records} records, read whole"
            )
        for finding in report.findings:
            if finding.level == NOTE:
                check.lines.append(finding.line())
            else:
                check.problem(finding.line(), finding.level)
    if not audited:
        return check_topic(archive, topic, scan=scan, check_indexed=check_indexed)
    return check


def _exports(archive: Archive) -> list[Manifests]:
    """The manifests of every export under the archive's prefix with its key layout."""
    store, prefix, layout = archive.store, archive.prefix, archive.layout
    if not getattr(layout, "has_exports", False):
        return []
    found = [e for e in find_exports(store, prefix) if layout.same_scope(e.layout)]  # type: ignore[attr-defined]
    return [Manifests(store, prefix, e.layout, e.name) for e in found]


#: Checks an indexed object and reports (``blockgz verify`` shows a progress bar around it).
IndexedCheck = Callable[[IndexedReader], VerifyReport]


def check_topic(
    archive: Archive,
    topic: str,
    *,
    scan: bool = False,
    check_indexed: IndexedCheck | None = None,
) -> TopicCheck:
    """Check every object of ``topic`` and name every stray; raises the archive's
    "nothing found" error when the topic has no object."""
    listing = archive.ls(topic)
    if not listing:
        raise archive.nothing_found(topic)
    check = TopicCheck(objects=len(listing))
    for row in listing:
        check_object(archive, row, check, scan=scan, check_indexed=check_indexed)
    for key in listing.strays:
        check.problem(stray_line(archive.store.url(key)))
    for line in overlap_lines(archive, topic):
        check.problem(line)
    return check


def overlap_lines(archive: Archive, topic: str) -> list[str]:
    """One ``overlap:`` line per pair of objects (as the readers see the topic: committed
    ones where manifests exist) that hold the same offsets."""
    return [f"overlap: {overlap.describe()}" for overlap in archive.overlaps(topic)]


def check_object(
    archive: Archive,
    row: ObjectSummary,
    check: TopicCheck,
    *,
    scan: bool,
    check_indexed: IndexedCheck | None = None,
) -> None:
    """Add ``row``'s line to ``check``: an ok line, or its problems."""
    url = archive.store.url(row.key)
    ref = parse_archive_key(archive.layout, row.key, size=row.size, any_extension=True)
    if ref is not None and _unknown_format(archive, ref, check):
        return
    if row.indexed and ref is not None:
        try:
            index = archive.index(ref)
        except BlockGzError as exc:  # one bad sidecar is one line; the others are checked
            check.problem(f"{url}: its sidecar cannot be used: {exc}")
            return
        with IndexedReader.open_object(archive.store, row.key, index) as obj:
            report = (check_indexed or IndexedReader.verify)(obj)
        report.problems.extend(problem for _, problem in stamp_problems(index, url))
        if report.ok:
            check.lines.append(f"{url}: ok, {report.blocks} blocks, {report.records} records")
        else:
            for bad in report.problems:
                check.problem(f"bad: {bad}", 2)
            check.problem(f"{url}: {len(report.problems)} problem(s) in {report.blocks} blocks", 2)
        return
    indexable = ref is None or ref.seekable
    if indexable and not scan:
        check.problem(
            f"{url}: no index sidecar, so it was not checked; build one with `blockgz index`, "
            "or pass --scan to check it by reading it whole"
        )
        return
    why = "no index" if indexable else "plain, no index by design"
    decode = None if ref is None else stream_decoder_of(ref.extension, ref.bytearray_extension)
    line, problem = read_whole(
        archive.store, row.key, row.first_offset, archive.framing, why, decode=decode
    )
    if problem is not None:
        check.problem(problem, 2)
    else:
        check.lines.append(line)


def _unknown_format(archive: Archive, ref: ObjectRef, check: TopicCheck) -> bool:
    """Report an object whose extension names no format (it is not read as any)."""
    try:
        format_of(ref)
    except UnknownFormatError as exc:
        check.problem(f"unknown format: {exc}")
        return True
    return False
