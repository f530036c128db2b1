"""Gaps in an export's manifest sequence: a commit record that is gone.

A streaming export names each manifest ``[<epoch>-]<batch, 20 digits>.json``
(:mod:`blockgz.archive.job_keys`). Within one epoch (one checkpoint) Spark numbers its batches
0, 1, 2, ... and every batch writes one manifest, so the keys of an epoch run without a hole; a
replayed batch rewrites its own key. Legitimately:

* a new epoch (a lost checkpoint, or a second checkpoint) starts again at batch 0;
* an epoch may continue where the previous one (in key order) stopped (a checkpoint written
  before it had an epoch file, given one on its next start): its first batch is then the
  previous epoch's last + 1;
* batch ids that are not numbers (``batch-<hex>``, one-off batch writes) form no sequence;
* catalog compaction deletes no manifest: it folds them into a root (``through``, the newest
  key folded; ``manifests``, how many it folded), so a gap is a gap whether or not a root
  folded its neighbours.

Anything else missing between an epoch's first and last batch is a manifest that was deleted:
the objects it committed are no longer committed, and readers would silently skip them.

>>> from blockgz.archive.layout import Layout
>>> keys = [Layout().manifest_key("", "j", b, epoch="e1") for b in (0, 1, 3, 4, 7)]
>>> [k.rsplit("/", 1)[1] for k in missing_manifests(keys, Layout(), "", "j")]
['e1-00000000000000000002.json', 'e1-00000000000000000005.json', 'e1-00000000000000000006.json']
>>> [k.rsplit("/", 1)[1] for k in missing_manifests(keys[2:], Layout(), "", "j", after=keys[1])]
['e1-00000000000000000002.json', 'e1-00000000000000000005.json', 'e1-00000000000000000006.json']
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from blockgz.archive.job_keys import JobKeys
from blockgz.commits.catalog import CatalogView
from blockgz.commits.manifests import Manifests
from blockgz.errors import MissingCommitError


def missing_manifests(
    keys: Sequence[str], layout: JobKeys, prefix: str, name: str, *, after: str = ""
) -> list[str]:
    """The keys of the manifests missing from ``keys`` (one job's, sorted, as listed): every
    batch id absent between an epoch's start and its last listed batch. ``after``: ``keys``
    are those listed after this key (the catalog root's ``through``); its epoch's sequence
    is taken up from it, earlier batches are not asked about."""
    missing: list[str] = []
    previous_last: int | None = None
    anchor = layout.parse_manifest_key(after) if after else None
    numbered = [
        parsed
        for parsed in map(layout.parse_manifest_key, keys)
        if parsed is not None and isinstance(parsed[1], int)
    ]
    if anchor is not None and isinstance(anchor[1], int):
        numbered.insert(0, anchor)
    for n, (epoch, group) in enumerate(groupby(numbered, key=lambda parsed: parsed[0])):
        batches = sorted({int(b) for _, b in group})
        start = batches[0] if n == 0 and after else _start(batches[0], previous_last)
        have = set(batches)
        missing += [
            layout.manifest_key(prefix, name, b, epoch=epoch)
            for b in range(start, batches[-1])
            if b not in have
        ]
        previous_last = batches[-1]
    return missing


def check_commits(view: CatalogView, manifests: Manifests) -> None:
    """Raise :class:`~blockgz.errors.MissingCommitError` naming a manifest missing from the
    catalog view's tail (the manifests after its root, already listed: no request)."""
    after = view.root.through if view.root is not None else ""
    check_sequence([info.key for info in view.tail_listed], manifests, after=after)


def check_sequence(keys: Sequence[str], manifests: Manifests, *, after: str = "") -> None:
    """Raise :class:`~blockgz.errors.MissingCommitError` naming a manifest missing from
    ``keys`` (sorted; those after the key ``after``, whose epoch's sequence they take up)."""
    m = manifests
    _refuse(missing_manifests(keys, m.layout, m.prefix, m.name, after=after), m)


def check_present(expected: Sequence[str], keys: Sequence[str], manifests: Manifests) -> None:
    """Raise :class:`~blockgz.errors.MissingCommitError` naming a manifest of ``expected``
    (those a catalog head names) absent from ``keys`` (those listed)."""
    listed = set(keys)
    _refuse([key for key in expected if key not in listed], manifests)


def _refuse(missing: Sequence[str], m: Manifests) -> None:
    """The :class:`~blockgz.errors.MissingCommitError` of the ``missing`` manifests, if any."""
    if not missing:
        return
    url = m.store.url(missing[0])
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    raise MissingCommitError(
        f"{url}: this manifest of export {m.name!r} is gone{more}, though later ones are "
        "there: the archive has a missing commit, and the records it committed would be "
        f"missing from what is read; `blockgz audit {m.store.url(m.prefix) or '.'} --repair` "
        "re-commits its objects where they prove themselves",
        key=url,
    )


def _start(first: int, previous_last: int | None) -> int:
    """Where an epoch's batches begin: 0, or where the previous epoch stopped when it continues
    that one's numbering."""
    if previous_last is not None and first == previous_last + 1:
        return first
    return 0


def runs(keys: Sequence[str], layout: JobKeys) -> list[list[str]]:
    """``keys`` (missing manifests, sorted) in runs of consecutive batches of one epoch: one
    finding per run.

    >>> from blockgz.archive.layout import Layout
    >>> ks = [Layout().manifest_key("", "j", b) for b in (2, 5, 6)]
    >>> [len(r) for r in runs(ks, Layout())]
    [1, 2]
    """
    out: list[list[str]] = []
    last: tuple[str, int | str] | None = None
    for key in keys:
        parsed = layout.parse_manifest_key(key)
        assert parsed is not None
        follows = (
            last is not None
            and parsed[0] == last[0]
            and isinstance(parsed[1], int)
            and parsed[1] == last[1] + 1  # type: ignore[operator]
        )
        if follows:
            out[-1].append(key)
        else:
            out.append([key])
        last = parsed
    return out
