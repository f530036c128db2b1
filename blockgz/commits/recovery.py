"""Recovery of uncommitted objects: what a batch that never committed left in the archive.

A batch that dies before its manifest leaves data objects (and sidecars) nobody committed; its
checkpoint is lost with it, so a restart from the manifests removes them before writing again:
every object of the restarted topic-partitions that starts at or after the committed offset,
with the hidden timestamps file beside each value object.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.commits.manifests import Manifests
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> manifests = Manifests(store, "", Layout(), "job")
>>> _ = manifests.write(0, files=[], offsets={"t": {0: 10}})
>>> store.put("topics/t/partition=0/t+0+0000000010.json", b"{}")
>>> store.put("topics/t/partition=0/.t+0+0000000010.timestamps.json", b"[1,0]")
>>> remove_uncommitted(manifests, {"t": {0: 10}}, partition_directories=True)
['topics/t/partition=0/t+0+0000000010.json', 'topics/t/partition=0/.t+0+0000000010.timestamps.json']
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from blockgz.archive.layout import parse_archive_key
from blockgz.archive.object_ref import ObjectRef
from blockgz.archive.partition_offsets import Offsets
from blockgz.commits.catalog import Catalog, CatalogView
from blockgz.commits.intents import intended_directories
from blockgz.commits.manifests import Manifests
from blockgz.errors import ObjectNotFoundError
from blockgz.store.base import ObjectInfo
from blockgz.written.sidecars import data_key_for, hidden_key, is_sidecar, sidecar_key

log = logging.getLogger("blockgz.manifests")

#: Partition listings at once (:func:`find_uncommitted`), and the keys of one LIST page.
_LIST_THREADS = 8
_PAGE = 1000


def remove_uncommitted(
    manifests: Manifests, offsets: Offsets, *, partition_directories: bool = False
) -> list[str]:
    """Delete objects of the given topic-partitions that start at or after ``offsets``.

    They come from a batch that never committed (its checkpoint was lost with it). Only the
    topic-partitions in ``offsets`` are touched; each deletion is logged. What is listed is
    what :func:`find_uncommitted` lists.
    """
    deleted: list[str] = []
    for info in find_uncommitted(manifests, offsets, partition_directories=partition_directories):
        ref = parse_archive_key(manifests.layout, data_key_for(info.key))
        if ref is None:  # find_uncommitted parsed it: never
            continue
        for key in _with_sidecar(manifests, info.key, ref):
            if key in deleted:
                continue
            manifests.store.delete(key)
            deleted.append(key)
            log.warning(
                "%s-%d: removed %s, written by a batch that never committed",
                ref.topic,
                ref.partition,
                key,
            )
    return deleted


def find_uncommitted(
    manifests: Manifests,
    offsets: Offsets,
    *,
    partition_directories: bool = False,
    view: CatalogView | None = None,
    threads: int = _LIST_THREADS,
) -> list[ObjectInfo]:
    """The objects (and listed sidecars) of the given topic-partitions that start at or after
    ``offsets``: no manifest committed them. Nothing is deleted. ``view``: the job's catalog
    view, when the caller has read it already.

    What is listed does not grow with the history:

    * when the newest manifest says its tasks record intents (:mod:`blockgz.commits.intents`;
      the batch that died ran with the same settings): the intents from the committed offset
      on, then only the directories they name, each from the committed offset on;
    * ``partition_directories`` (the default partitioner: one directory per partition): each
      partition's directory, from its committed offset on (S3 ``StartAfter``; ``threads``
      listings at once) — or, when the topic's committed files are fewer than two listings
      per partition would be pages of, the topic's prefix once, keeping only what those
      listings would list (many partitions with a short history: 20 pages, not 20,000 LISTs);
    * otherwise (archives written before intents): the topic's whole prefix.

    Topics are looked at side by side, ``threads`` at once.

    >>> import tempfile
    >>> from blockgz.archive.layout import Layout
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> manifests = Manifests(store, "", Layout(), "job")
    >>> store.put("topics/t/partition=0/t+0+0000000010.json", b"{}")
    >>> [i.key for i in find_uncommitted(manifests, {"t": {0: 10}})]
    ['topics/t/partition=0/t+0+0000000010.json']
    """
    found: dict[str, ObjectInfo] = {}
    if offsets and view is None:
        view = Catalog(manifests).view()
    topics = list(offsets.items())
    at_once = max(1, min(threads, len(topics)))  # topics side by side, their listings too

    def of_topic(item: tuple[str, dict[int, int]]) -> list[ObjectInfo]:
        topic, parts = item
        return _topic_uncommitted(
            manifests, topic, parts, view, partition_directories, max(1, threads // at_once)
        )

    if at_once == 1:
        per_topic = [of_topic(item) for item in topics]
    else:
        with ThreadPoolExecutor(at_once) as pool:
            per_topic = list(pool.map(of_topic, topics))
    for infos in per_topic:
        for info in infos:
            found.setdefault(info.key, info)
    return list(found.values())


def _topic_uncommitted(
    manifests: Manifests,
    topic: str,
    parts: dict[int, int],
    view: CatalogView | None,
    partition_directories: bool,
    threads: int,
) -> list[ObjectInfo]:
    """:func:`find_uncommitted` of one topic."""
    store, layout = manifests.store, manifests.layout
    listings: Sequence[Iterable[ObjectInfo]]
    if view is not None and view.intents:
        listings = [
            _listed_from(manifests, topic, p, nxt, directory=d)
            for p, nxt in sorted(parts.items())
            for d in sorted(_intended(manifests, topic, p, nxt))
        ]
    elif partition_directories:
        ranges = [r for p, nxt in sorted(parts.items()) for r in _ranges(manifests, topic, p, nxt)]
        if _one_listing_cheaper(view, topic, parts):
            whole = store.list(layout.topic_prefix(manifests.prefix, topic))
            listings = _within(whole, manifests, ranges)
        else:
            listings = _listed_at_once(manifests, ranges, threads)
    else:
        listings = [store.list(layout.topic_prefix(manifests.prefix, topic))]
    found: dict[str, ObjectInfo] = {}
    for listing in listings:
        for info in listing:
            ref = parse_archive_key(layout, data_key_for(info.key))  # sidecars too
            if ref is None or ref.topic != topic or ref.partition not in parts:
                continue
            if ref.start_offset >= parts[ref.partition]:
                found.setdefault(info.key, info)
    return list(found.values())


def _one_listing_cheaper(view: CatalogView | None, topic: str, parts: dict[int, int]) -> bool:
    """Whether the topic's prefix listed once costs fewer LISTs than two per partition: its
    committed files (each counted twice, for a sidecar or companion beside it, plus the
    uncommitted ones that may wait) fit in fewer pages."""
    if view is None:
        return False
    segments = view.root.segments.get(topic, {}) if view.root else {}
    files = sum(s.files for refs in segments.values() for s in refs)
    files += view.tail_file_count(topic)
    pages = (2 * files) // _PAGE + 1
    return pages < 2 * len(parts)


def _ranges(
    manifests: Manifests, topic: str, partition: int, next_offset: int, *, directory: str = ""
) -> list[tuple[str, str]]:
    """The ``(prefix, start_after)`` listings of the partition's directory (or of
    ``directory``, a key prefix ending with the delimiter) that hold the objects of
    ``topic``/``partition`` starting at ``next_offset`` or later."""
    layout = manifests.layout
    prefix = layout.partition_prefix(manifests.prefix, topic, partition)
    if directory:  # other partitions' objects share it: list only this one's names
        prefix = directory + layout.file_name_prefix(topic, partition)
    # The hidden timestamps files (.<topic>+<partition>+<start>.timestamps.<ext>) sort before
    # the objects: listed apart, from the same offset on.
    where = layout.directory_of(prefix)
    hidden = hidden_key(where + layout.file_name_prefix(topic, partition))
    start_after = hidden_after = ""
    # Zero-padded start offsets sort as numbers (while they fit the padding: a batch
    # crossing into one more digit is listed whole); "/" sorts after any extension's ".".
    if next_offset > 0 and len(str(next_offset)) < layout.offset_pad_width:
        name = layout.file_name(topic, partition, next_offset - 1, "")
        start_after = f"{where}{name}/"
        hidden_after = f"{hidden_key(where + name)}/"
    return [(prefix, start_after), (hidden, hidden_after)]


def _within(
    listing: Iterable[ObjectInfo], manifests: Manifests, ranges: list[tuple[str, str]]
) -> list[list[ObjectInfo]]:
    """What each of ``ranges`` (``(prefix, start_after)``, :func:`_ranges`) would list, taken
    from ``listing`` (the topic's prefix): the same answer, in the same order, from one
    listing."""
    layout = manifests.layout
    by_directory: dict[str, list[tuple[int, str, str]]] = {}
    for n, (prefix, after) in enumerate(ranges):
        by_directory.setdefault(layout.directory_of(prefix), []).append((n, prefix, after))
    found: list[list[ObjectInfo]] = [[] for _ in ranges]
    for info in listing:
        for n, prefix, after in by_directory.get(layout.directory_of(info.key), ()):
            if info.key.startswith(prefix) and info.key > after:
                found[n].append(info)
                break
    return found


def _listed_at_once(
    manifests: Manifests, ranges: list[tuple[str, str]], threads: int
) -> list[list[ObjectInfo]]:
    """Each ``(prefix, start_after)`` listed, ``threads`` at once, in order."""
    store = manifests.store

    def listed(where: tuple[str, str]) -> list[ObjectInfo]:
        return list(store.list(where[0], start_after=where[1]))

    if len(ranges) <= 2:
        return [listed(r) for r in ranges]
    with ThreadPoolExecutor(min(threads, len(ranges))) as pool:
        return list(pool.map(listed, ranges))


def _intended(manifests: Manifests, topic: str, partition: int, next_offset: int) -> set[str]:
    m = manifests
    found = intended_directories(
        m.store, m.prefix, m.layout, m.name, topic, partition, from_offset=next_offset
    )
    log.info(
        "%s-%d: intents from offset %d on name %d directories to look in",
        topic, partition, next_offset, len(found),
    )  # fmt: skip
    return found


def _listed_from(
    manifests: Manifests, topic: str, partition: int, next_offset: int, *, directory: str = ""
) -> Iterator[ObjectInfo]:
    """The objects of the partition's directory (or of ``directory``, a key prefix ending
    with the delimiter) from those of ``topic``/``partition`` starting at ``next_offset`` on."""
    ranges = _ranges(manifests, topic, partition, next_offset, directory=directory)
    listings = (manifests.store.list(prefix, start_after=after) for prefix, after in ranges)
    return itertools.chain.from_iterable(listings)


def _with_sidecar(manifests: Manifests, key: str, ref: ObjectRef) -> list[str]:
    """``key``, and after a data object its hidden sidecar if there is one: that name sorts
    before the objects' names, so a listing from an offset on never meets it."""
    if is_sidecar(key) or not ref.seekable:
        return [key]
    hidden = sidecar_key(key)
    try:
        manifests.store.head(hidden)
    except ObjectNotFoundError:
        return [key]
    return [key, hidden]
