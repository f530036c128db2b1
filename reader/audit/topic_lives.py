"""The audit's check of a topic's lives: an archive where two lives of one topic meet.

A topic deleted and recreated under its name gets a new Kafka topic id and starts again at
offset 0. Every batch manifest records each topic's id
(:attr:`~blockgz.commits.manifests.Manifest.topic_ids`), and the catalog keeps every id its
manifests recorded, oldest first (:attr:`~blockgz.commits.catalog.CatalogView.lives`). A topic
with two or more ids in one job's manifests holds records of several lives under the same
offsets: readers and restore mix them, so it is *damage*, one line naming the topic and the
ids. Manifests without ids (written before blockgz recorded them) say nothing.

It costs nothing more than the catalog read the audit already made.

>>> import tempfile
>>> from blockgz.commits.catalog import Catalog
>>> from blockgz.archive.layout import Layout
>>> from blockgz.commits.manifests import Manifests
>>> from blockgz.store import LocalStore
>>> log = Manifests(LocalStore(tempfile.mkdtemp()), "", Layout(), "job")
>>> _ = log.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "A"})
>>> _ = log.write(1, files=[], offsets={"t": {0: 9}}, topic_ids={"t": "B"})
>>> print(lives_findings("job", Catalog(log).view())[0].line())  # doctest: +ELLIPSIS
damage: t: the manifests of job job record 2 lives of topic t (topic ids A, then B): ...
"""

from __future__ import annotations

from blockgz.commits.catalog import CatalogView
from blockgz.commits.manifests import lives_message
from blockgz.reader.audit.context import AuditContext
from blockgz.reader.audit.findings import DAMAGE, Finding

KIND = "topic_lives"


def lives_findings(job: str, view: CatalogView) -> list[Finding]:
    """One damage finding per topic whose committed manifests record two or more topic ids."""
    found = []
    for topic, ids in sorted(view.lives.items()):
        if len(ids) < 2:
            continue
        message = lives_message(job, topic, ids)
        found.append(Finding(DAMAGE, KIND, topic, None, None, None, None, message))
    return found


def check_topic_lives(ctx: AuditContext, view: CatalogView) -> None:
    """The audit's job check (:data:`blockgz.reader.audit.auditor.JOB_CHECKS`): add the findings."""
    for finding in lives_findings(ctx.manifests.name, view):
        ctx.add(finding)
