"""The audit's checks of a job's manifests themselves: a deleted manifest is one finding.

The whole manifest directory is listed once (one LIST per 1,000 manifests, none more before the
first compaction: the catalog listed them all; no manifest is read that the catalog does not
read anyway) and its keys checked for holes
(:func:`blockgz.commits.manifest_sequence.missing_manifests`). A hole the newest catalog root
had folded before the manifest went (the root counts more manifests than are left up to its
``through``) loses nothing yet: the catalog still commits its files, so it is a warning. Any
other hole is damage: what that manifest committed is committed no more, and readers skip it.
Its objects are then still in the bucket, as objects no manifest commits ("orphans",
:mod:`blockgz.reader.audit.orphans`): they are summed up in the finding, not named one by
one, and ``--repair`` re-commits those that prove themselves.

A check of the whole job (not of one topic-partition) is a function of the context and the
catalog view, listed in :data:`blockgz.reader.audit.auditor.JOB_CHECKS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blockgz.commits.catalog import CatalogView
from blockgz.commits.manifest_sequence import missing_manifests, runs
from blockgz.reader.audit.context import AuditContext
from blockgz.reader.audit.findings import DAMAGE, WARNING, Finding
from blockgz.reader.audit.repair import Plan


@dataclass
class ManifestGaps:
    """The job's missing manifests: ``lost`` (their files committed no more) and ``folded``
    (gone after the catalog folded them: still committed through it)."""

    lost: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)


def find_manifest_gaps(ctx: AuditContext, view: CatalogView) -> ManifestGaps:
    """List the job's manifests once and find the holes in their sequence."""
    m = ctx.manifests
    root = view.root
    # Before the first compaction the view listed every manifest already.
    keys = [info.key for info in view.tail_listed] if root is None else m.keys()
    missing = missing_manifests(keys, m.layout, m.prefix, m.name)
    gaps = ManifestGaps()
    if root is None:
        gaps.lost = missing
        return gaps
    folded = [k for k in missing if k <= root.through]
    left = sum(1 for k in keys if k <= root.through)
    if folded and root.manifests - left >= len(folded):
        gaps.folded = folded  # gone after the root counted them: the catalog holds their files
        gaps.lost = [k for k in missing if k > root.through]
    else:
        gaps.lost = missing
    return gaps


def report_manifest_gaps(
    ctx: AuditContext, gaps: ManifestGaps, orphans: str, plan: Plan | None = None
) -> None:
    """One finding per run of consecutive missing manifests; ``orphans``: what the audit found
    of the files no manifest commits (a phrase, empty when none); ``plan``: the first lost
    manifest's repair (re-commit them in its place)."""
    layout = ctx.manifests.layout
    for n, run in enumerate(runs(gaps.lost, layout)):
        what = (
            f"{_named(run)} gone from the job's sequence: what it committed is committed no "
            "more, and readers skip it"
        )
        if orphans:
            what += (
                f"; {orphans} no manifest commits, likely its files: `blockgz audit --repair` "
                "re-commits those that prove themselves (sidecar and checksums)"
            )
        finding = Finding(DAMAGE, "missing_manifest", "", None, None, None, run[0], what)
        ctx.add(finding, plan if n == 0 else None)
    for run in runs(gaps.folded, layout):
        what = (
            f"{_named(run)} gone, after the catalog folded it: its files are still committed "
            "through the catalog (a catalog rebuilt from the manifests would lose them)"
        )
        ctx.add(Finding(WARNING, "missing_manifest", "", None, None, None, run[0], what))


def _named(run: list[str]) -> str:
    """``the manifest`` / ``this and the next N manifests (to <last>) are``."""
    if len(run) == 1:
        return "the manifest is"
    return f"this and the next {len(run) - 1} manifests (to {run[-1].rsplit('/', 1)[-1]}) are"
