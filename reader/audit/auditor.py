"""``blockgz audit``: is an export's archive complete and intact?

For each topic-partition the job committed, from its catalog (:class:`~blockgz.commits.catalog.
Catalog`: the manifests, compacted) and **one listing** of each topic's prefix:

* every committed file (value objects and their keys/headers/timestamps companions) is there,
  at the size its manifest recorded and, where the server keeps each object's CRC-32 (one HEAD;
  :mod:`blockgz.reader.audit.integrity`), with the committed CRC-32 (else: *damage*, gone,
  truncated or not the bytes committed);
* every sidecar the manifest names is there and matches its object: the blocks tile the
  object's size exactly, and say the manifest's first and last offsets and record count (else:
  a *warning*, missing or stale sidecar: readers cannot seek it, ``--repair`` rebuilds it); its
  bytes are the committed ones (``index_size``/``index_crc32``) and the object it names is the
  entry's (else: *damage*, a tampered or swapped sidecar);
* the job's manifests have no hole (:mod:`blockgz.reader.audit.manifest_findings`: a deleted
manifest
  is one *damage* line; the objects it committed are counted in it, and ``--repair``
  re-commits those that prove themselves, :mod:`blockgz.reader.audit.orphans`);
* every offset from the first archived to the committed one is in a committed object, or in a
  gap that the writer recorded (inside an object: the index's ``offset_deltas``) or that Kafka
  explains (between objects: :mod:`blockgz.reader.audit.gaps`);
* no two committed objects hold the same offset (:mod:`blockgz.reader.reading.overlaps`);
* every object under the topic's prefix is committed by some export's manifests (else a stray:
  below the committed offset, a second writer's or a failed batch's; from it on, the batch in
  flight of a running export — left alone while it holds the lease — or of one that died);
  another topic's or partition's object in the folder is *damage*;
* the checks of the whole job in :data:`JOB_CHECKS` (two lives of a topic meeting).

It costs the catalog's reads, one LIST per topic (per 1000 keys), one GET per sidecar and,
where the server keeps CRC-32s, one HEAD per file whose listed ETag is not the one its manifest
recorded (:mod:`blockgz.reader.audit.object_checks`): no object is read. ``deep=True`` also
reads every object once (:mod:`blockgz.reader.audit.deep`: the blocks' checksums, or their gzip CRCs
where an index has none, and the CRC-32 of all its bytes; Parquet objects' row groups against
their footers, :mod:`blockgz.reader.audit.parquet_check`). Findings are one line each
(:mod:`blockgz.reader.audit.findings`); ``--repair`` mends what is safe
(:mod:`blockgz.reader.audit.repair`).

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.commits.manifest_log import ManifestLog
>>> from blockgz.written.files import WrittenFile
>>> from blockgz.written.upload import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> key = "topics/t/partition=0/t+0+0000000000.json.gz"
>>> with BlockGzipUpload(store, key) as out:
...     for n in range(10):
...         out.write(b'{"n":%d}' % n, n)
>>> f = WrittenFile(key, "t", 0, "partition=0", 0, 9, 10, out.bytes_written, 90,
...                 out.index_key)
>>> log = ManifestLog(store, "", Layout(), "job")
>>> _ = log.write(0, files=[f], offsets={"t": {0: 10}})
>>> audit_job(log).exit_code
0
>>> store.delete(key)
>>> print(audit_job(log).findings[0].line())  # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
damage: t-0 offsets 0..9 topics/t/partition=0/t+0+0000000000.json.gz: a manifest committed it
(10 records, ... bytes) but it is gone
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from blockgz.archive.layout import parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.framing import NEWLINE
from blockgz.commits.catalog import Catalog, CatalogView
from blockgz.commits.manifests import Manifests
from blockgz.errors import CorruptManifestError, ObjectNotFoundError
from blockgz.formats.by_name import format_indexing_itself, stream_decoder_of
from blockgz.reader.audit.context import (
    DEFAULT_THREADS,
    AuditContext,
    AuditedObject,
    file_finding,
)
from blockgz.reader.audit.deep import check_blocks
from blockgz.reader.audit.findings import DAMAGE, WARNING, AuditReport, Finding, PartitionSummary
from blockgz.reader.audit.gaps import GapCheck, KafkaFacts, gaps_between
from blockgz.reader.audit.integrity import (
    crc_problem,
    whole_crc,
)
from blockgz.reader.audit.manifest_findings import (
    ManifestGaps,
    find_manifest_gaps,
    report_manifest_gaps,
)
from blockgz.reader.audit.object_checks import check_objects, fetch_object_facts
from blockgz.reader.audit.orphans import Orphan, Recommit, describe, find_orphans
from blockgz.reader.audit.parquet_check import check_parquet
from blockgz.reader.audit.repair import Plan, Said, repair
from blockgz.reader.audit.stray_findings import check_strays, committed_by_other_jobs, live_lease
from blockgz.reader.audit.topic_lives import check_topic_lives
from blockgz.reader.reading.overlaps import find_overlaps
from blockgz.reader.reading.whole_read import read_whole
from blockgz.store.base import ObjectInfo, ObjectStore
from blockgz.written.files import WrittenFile

__all__ = ["DEFAULT_THREADS", "JOB_CHECKS", "audit_job"]

#: Checks of the whole job, run once after the topic-partitions: each adds its findings
#: (:meth:`AuditContext.add`; a new kind goes into :data:`~blockgz.reader.audit.findings.KINDS`).
#: The deleted-manifest check runs apart (its orphans are counted per topic).
JOB_CHECKS: list[Callable[[AuditContext, CatalogView], None]] = [check_topic_lives]
#: Committed files whose sidecars (and HEADs) are fetched on one pool, at least: partitions
#: are grouped up to this many (:func:`_groups`).
_GROUP_OBJECTS = 256
#: Topics listed ahead of the one audited (:func:`_listings`).
_LIST_AHEAD = 4


def audit_job(
    manifests: Manifests,
    *,
    topics: Sequence[str] = (),
    deep: bool = False,
    do_repair: bool = False,
    kafka: KafkaFacts | None = None,
    threads: int = DEFAULT_THREADS,
    now: float | None = None,
    unasked_gaps: int = WARNING,
) -> AuditReport:
    """Audit one export job's archive (see the module docstring); ``topics``: only these;
    ``unasked_gaps``: the level of a gap between objects when no broker is asked."""
    store = manifests.store
    started = time.monotonic()
    before = _counts(store)
    report = AuditReport(
        manifests.name,
        store.url(manifests.prefix),
        deep=deep,
        kafka=kafka.brokers if kafka is not None else "",
    )
    ctx = AuditContext(store, manifests, report, threads=max(1, threads), deep=deep)
    ctx.lease = live_lease(manifests, time.time() if now is None else now)
    view = Catalog(manifests).view()
    gaps_found = find_manifest_gaps(ctx, view)
    orphans: list[Orphan] = []
    wanted = set(topics)
    report.topics = sorted({topic for topic, _ in view.partitions()})
    by_topic: dict[str, list[int]] = {}
    for topic, partition in view.partitions():
        if not wanted or topic in wanted:
            by_topic.setdefault(topic, []).append(partition)
    elsewhere = committed_by_other_jobs(manifests, sorted(by_topic))
    topics_in_order = sorted(by_topic.items())
    listings = _listings(ctx, [topic for topic, _ in topics_in_order])
    for (topic, partitions), listed in zip(topics_in_order, listings, strict=True):
        orphans += _audit_topic(ctx, view, topic, partitions, listed, elsewhere, gaps_found,
                                kafka, unasked_gaps)  # fmt: skip
    for check in JOB_CHECKS:
        check(ctx, view)
    plan = _recommit_plan(manifests, gaps_found.lost, orphans, bool(topics))
    report_manifest_gaps(ctx, gaps_found, describe(orphans), plan)
    _sort(ctx)
    if do_repair:
        repair(store, report, ctx.plans)
    report.requests = _spent(store, before)
    report.seconds = time.monotonic() - started
    return report


def _audit_topic(
    ctx: AuditContext,
    view: CatalogView,
    topic: str,
    partitions: list[int],
    listed: dict[str, ObjectInfo],
    elsewhere: set[str],
    gaps_found: ManifestGaps,
    kafka: KafkaFacts | None,
    unasked_gaps: int,
) -> list[Orphan]:
    """One topic: its one listing (``listed``), each partition's committed files, offsets and
    overlaps, then the keys no manifest committed; the objects a deleted manifest committed,
    returned (they are counted in its line, not named one by one)."""
    store, manifests = ctx.store, ctx.manifests
    files = {p: _committed_files(ctx, view, topic, p) for p in partitions}
    committed = {f.key for fs in files.values() for f in fs}
    committed |= {f.index_key for fs in files.values() for f in fs if f.index_key}
    mine = (
        find_orphans(store, manifests, topic, listed, committed | elsewhere, ctx.threads)
        if gaps_found.lost
        else []
    )
    dead = view.dead_letters.get(topic, {})
    for group in _groups(partitions, files):
        found = {p: [AuditedObject(f, listed.get(f.key)) for f in files[p]] for p in group}
        loaded = fetch_object_facts(ctx, [o for p in group for o in found[p]], listed)
        for partition in group:
            _audit_partition(ctx, view, topic, partition, found[partition], loaded,
                             GapCheck(topic, partition, kafka, dead.get(partition, 0),
                                      unasked=unasked_gaps), mine)  # fmt: skip
    offsets = {p: view.offsets[topic][p] for p in partitions}
    spans = {
        p: [(f.first_offset, f.last_offset) for f in files[p] if f.role == "value"]
        for p in partitions
    }
    named = {k for o in mine for k in o.stored_keys()}
    check_strays(ctx, topic, offsets, spans, listed, committed | elsewhere | named)
    return mine


def _listings(ctx: AuditContext, topics: list[str]) -> Iterator[dict[str, ObjectInfo]]:
    """Each topic's one listing, in order; the next :data:`_LIST_AHEAD` topics are listed
    while one is audited (a LIST page of 1,000 keys waits ~40 ms on the server)."""

    def listed(topic: str) -> dict[str, ObjectInfo]:
        return {info.key: info for info in ctx.store.list(_topic_prefix(ctx.manifests, topic))}

    ahead: deque[Future[dict[str, ObjectInfo]]] = deque()
    names = iter(topics)
    with ThreadPoolExecutor(_LIST_AHEAD) as pool:
        for topic in itertools.islice(names, _LIST_AHEAD):
            ahead.append(pool.submit(listed, topic))
        while ahead:
            done = ahead.popleft().result()
            following = next(names, None)
            if following is not None:
                ahead.append(pool.submit(listed, following))
            yield done


def _groups(partitions: list[int], files: dict[int, list[WrittenFile]]) -> Iterator[list[int]]:
    """The partitions in order, in groups of at least :data:`_GROUP_OBJECTS` committed files
    (or what is left): a group's sidecars and HEADs are fetched on one pool, so that many
    partitions of one object each are fetched side by side, while memory stays bounded."""
    group: list[int] = []
    count = 0
    for partition in partitions:
        group.append(partition)
        count += len(files[partition])
        if count >= _GROUP_OBJECTS:
            yield group
            group, count = [], 0
    if group:
        yield group


def _audit_partition(
    ctx: AuditContext,
    view: CatalogView,
    topic: str,
    partition: int,
    objects: list[AuditedObject],
    loaded: dict[int, str | None],
    gaps: GapCheck,
    mine: list[Orphan],
) -> None:
    """One partition's committed files (fetched already: ``loaded``), offsets and overlaps."""
    summary = PartitionSummary(topic, partition, committed=view.offsets[topic][partition])
    ctx.report.partitions.append(summary)
    check_objects(ctx, objects, loaded)
    values = [o for o in objects if o.file.role == "value"]
    summary.objects = len(objects)
    summary.records = sum(o.file.records for o in values)
    summary.bytes = sum(o.file.size for o in objects)
    summary.first_offset = min((o.file.first_offset for o in values), default=None)
    held = [o.span for o in mine if o.ref.partition == partition and o.span]
    _check_coverage(ctx, summary, values, gaps, held)
    summary.gaps_explained = gaps.explained
    _check_overlaps(ctx, topic, partition, values)
    if ctx.deep:
        _check_deep(ctx, objects)


def _recommit_plan(
    manifests: Manifests, lost: list[str], orphans: list[Orphan], narrowed: bool
) -> Plan | None:
    """How ``--repair`` re-commits a deleted manifest's objects: only in an audit of every
    topic (the manifest rewritten for one topic would leave the others' objects no gap to be
    re-committed in)."""
    if not orphans:
        return None
    if narrowed:
        return Said("not repaired: --topic audits part of the job; run without it to re-commit")
    return Recommit(manifests, lost[0], tuple(orphans))


# -- committed files (their checks are in blockgz.reader.audit.object_checks) -----------------
def _committed_files(
    ctx: AuditContext, view: CatalogView, topic: str, partition: int
) -> list[WrittenFile]:
    """The partition's committed files, through the catalog; if a segment of it is gone or
    unreadable, from the manifests themselves (every one is read: the catalog exists to avoid
    that), so that no committed object is taken for a stray."""
    try:
        return view.files(topic, partition)
    except (ObjectNotFoundError, CorruptManifestError) as exc:
        what = (
            f"the catalog cannot be read ({exc}): readers that go through it fail on this "
            "partition; its files were taken from the manifests"
        )
        ctx.add(Finding(DAMAGE, "catalog", topic, partition, None, None, None, what))
    if ctx.all_files is None:
        ctx.all_files = ctx.manifests.committed_files()
    mine = {f.key: f for f in ctx.all_files if (f.topic, f.partition) == (topic, partition)}
    return sorted(mine.values(), key=lambda f: (f.first_offset, f.key))


def _check_coverage(
    ctx: AuditContext,
    summary: PartitionSummary,
    values: list[AuditedObject],
    gaps: GapCheck,
    held: list[tuple[int, int]] = (),  # type: ignore[assignment]
) -> None:
    """Offsets past the commit, and gaps between objects (``held``: spans of objects a missing
    manifest committed, reported with it)."""
    committed = summary.committed
    if summary.first_offset is None or committed is None:
        return
    for obj in values:
        if obj.file.last_offset >= committed:
            what = (
                f"holds offsets up to {obj.file.last_offset}, past the committed offset "
                f"{committed} (the manifests and the catalog disagree)"
            )
            ctx.add(file_finding(WARNING, "past_commit", obj.file, what))
    spans = [(o.file.first_offset, o.file.last_offset) for o in values] + list(held)
    first = min([summary.first_offset, *(low for low, _ in held)])
    for low, high in gaps_between(spans, first=first, committed=committed):
        for finding in gaps.check(low, high):
            ctx.add(finding)


def _check_overlaps(
    ctx: AuditContext, topic: str, partition: int, values: list[AuditedObject]
) -> None:
    indexes = {o.file.key: o.index for o in values if o.index_ok}
    refs = [
        ObjectRef(o.file.key, topic, partition, o.file.first_offset, "", size=o.file.size,
                  has_index=o.file.key in indexes, last_offset=o.file.last_offset)
        for o in values
    ]  # fmt: skip
    for overlap in find_overlaps(refs, lambda r: indexes.get(r.key)):
        what = (
            f"holds {overlap.count} of these offsets that {overlap.first.key} holds too (two "
            f"writers?); readers take them from {overlap.first.key}"
        )
        ctx.add(Finding(WARNING, "overlap", topic, partition, overlap.low, overlap.high,
                        overlap.second.key, what))  # fmt: skip


# -- every block, read once ------------------------------------------------------------------
def _check_deep(ctx: AuditContext, objects: list[AuditedObject]) -> None:
    """Read every intact object once: its blocks (or its format's own checks) and, where the
    manifest recorded it, the CRC-32 of all its bytes."""
    todo = [o for o in objects if o.intact]
    # Objects on one pool, their blocks on another (a task never waits on its own pool).
    with ThreadPoolExecutor(ctx.threads) as pool, ThreadPoolExecutor(ctx.threads) as blocks:
        results = list(pool.map(lambda o: _read_blocks(ctx, o, blocks), todo))
    for obj, problems in zip(todo, results, strict=True):
        ctx.report.bytes_read += obj.info.size  # type: ignore[union-attr]
        for chunk, problem in problems:
            f = obj.file
            if chunk == "crc32":
                ctx.add(file_finding(DAMAGE, "checksum_mismatch", f, problem))
                continue
            if chunk is None:
                ctx.add(file_finding(DAMAGE, "unreadable_object", f, problem))
                continue
            ctx.add(
                Finding(DAMAGE, "corrupt_block", f.topic, f.partition, chunk.first_record_offset,
                        chunk.last_record_offset, f.key, problem)
            )  # fmt: skip


def _read_blocks(ctx: AuditContext, obj: AuditedObject, blocks: ThreadPoolExecutor):
    """Bad blocks of one object (``(chunk, problem)``; ``(None, problem)``: unreadable whole;
    ``("crc32", problem)``: its bytes are not those committed)."""
    f, size = obj.file, obj.info.size  # type: ignore[union-attr]
    if obj.index_ok and obj.index is not None:
        crcs: dict[int, int] = {}
        problems: list = check_blocks(ctx.store, f.key, obj.index, blocks, crcs=crcs)
        if f.crc32 is not None and not problems:  # a bad block's line says it already
            got = whole_crc(ctx.store, f.key, obj.index, size, crcs)
            problem = crc_problem(got, f, "its bytes have")
            problems += [("crc32", problem)] if problem else []
        return problems
    if f.crc32 is not None:  # one pass: the bytes are those committed, or they are not
        problem = crc_problem(streamed_crc32(ctx.store, f.key), f, "its bytes have")
        if problem is None:
            return []
        found = _read_unindexed(ctx, obj, blocks)  # read again only to say where it is bad
        return found or [("crc32", problem)]
    return _read_unindexed(ctx, obj, blocks)


def streamed_crc32(store: ObjectStore, key: str) -> int:
    """CRC-32 of an object's bytes, streamed in ranged pieces (memory stays bounded however
    large the object)."""
    crc = 0
    for chunk in store.iter_chunks(key):
        crc = block_crc32(chunk, crc)
    return crc


def _read_unindexed(ctx: AuditContext, obj: AuditedObject, blocks: ThreadPoolExecutor):
    """An object without a usable index read by its format's own checks."""
    if format_indexing_itself(obj.file.key) is not None:  # Parquet: the footer is the index
        return check_parquet(ctx.store, obj.file, obj.info.size, blocks)  # type: ignore[union-attr]
    ref = parse_archive_key(ctx.manifests.layout, obj.file.key, any_extension=True)
    decode = None if ref is None else stream_decoder_of(ref.extension, ref.bytearray_extension)
    _, problem = read_whole(ctx.store, obj.file.key, obj.file.first_offset, NEWLINE, decode=decode)
    return (
        []
        if problem is None
        else [(None, problem.removeprefix(ctx.store.url(obj.file.key) + ": "))]
    )


# -- helpers ------------------------------------------------------------------------------------
def _sort(ctx: AuditContext) -> None:
    """Findings in topic, partition, offset order (their plans follow them)."""
    found = ctx.report.findings
    order = sorted(
        range(len(found)),
        key=lambda n: (found[n].topic, _or(found[n].partition), _or(found[n].first), n),
    )
    ctx.report.findings = [found[n] for n in order]
    ctx.plans = {new: ctx.plans[old] for new, old in enumerate(order) if old in ctx.plans}


def _or(value: int | None) -> int:
    return -1 if value is None else value


def _topic_prefix(manifests: Manifests, topic: str) -> str:
    return manifests.layout.topic_prefix(manifests.prefix, topic)


def _counts(store: ObjectStore) -> tuple[int, int, int, int, int]:
    r = store.requests
    return r.lists, r.heads, r.gets, r.ranged_gets, r.bytes_read


def _spent(store: ObjectStore, before: tuple[int, int, int, int, int]) -> str:
    from blockgz.store.base import RequestCounts

    now = _counts(store)
    lists, heads, gets, ranged, nbytes = (a - b for a, b in zip(now, before, strict=True))
    return RequestCounts(gets=gets, ranged_gets=ranged, heads=heads, lists=lists,
                         bytes_read=nbytes).summary()  # fmt: skip
