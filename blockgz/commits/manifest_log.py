"""The commit log of an export: its manifests, read through the catalog.

:class:`ManifestLog` is what the export job, the Kafka source (``startingOffsets=s3``) and the
readers ask "what is committed, and where does each partition resume", so that question has
one answer: the catalog's newest root plus the manifests after it
(:class:`~blockgz.commits.catalog.Catalog`). It also removes what a batch that never committed
left behind (:mod:`blockgz.commits.recovery`).

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.store import LocalStore
>>> log = ManifestLog(LocalStore(tempfile.mkdtemp()), "", Layout(), "s3-sink")
>>> log.write(0, files=[], offsets={"t": {0: 10, 1: 4}})
'_blockgz/s3-sink/manifests/00000000000000000000.json'
>>> log.committed_offsets()
{'t': {0: 10, 1: 4}}
>>> log.resume_point([("t", 0), ("t", 2)])
{('t', 0): 10, ('t', 2): -2}
"""

from __future__ import annotations

from collections.abc import Iterable

from blockgz.archive.layout import Layout
from blockgz.archive.partition_offsets import EARLIEST, Offsets
from blockgz.commits.catalog import Catalog
from blockgz.commits.head import add_to_head, register
from blockgz.commits.manifests import JOB_NAME_OPTIONS, Manifests
from blockgz.commits.recovery import remove_uncommitted
from blockgz.options import Options
from blockgz.store import StoreTarget


class ManifestLog(Manifests):
    """One export job's manifests, with what they commit (see the module docstring)."""

    @classmethod
    def from_options(cls, options: Options) -> ManifestLog:
        """The log an export with these (Confluent-named) options writes."""
        store, prefix = StoreTarget.from_options(options).open()
        return cls(
            store,
            prefix,
            Layout.from_options(options),
            JOB_NAME_OPTIONS.read(options, "name"),
            epoch=JOB_NAME_OPTIONS.read(options, "blockgz.epoch"),
        )

    def committing(self) -> None:
        """Before each manifest: the job named in the prefix's heads document, so a reader
        that takes the jobs from it finds this one (:func:`blockgz.commits.head.register`:
        no request once this process has seen it there)."""
        register(self)

    def committed(self, key: str, body: bytes) -> None:
        """After each manifest: the catalog head with it (what a reader GETs instead of
        listing; :func:`blockgz.commits.head.add_to_head`)."""
        add_to_head(self, key, body)

    def committed_offsets(self) -> Offsets:
        """Per topic-partition, the next offset after everything any manifest committed
        (read through the catalog: its newest root and the manifests after it)."""
        return Catalog(self).view().offsets

    def resume_point(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Where each of ``partitions`` resumes: the committed next offset, or ``EARLIEST``."""
        committed = self.committed_offsets()
        return {(t, p): committed.get(t, {}).get(p, EARLIEST) for t, p in partitions}

    def remove_uncommitted(
        self, offsets: Offsets, *, partition_directories: bool = False
    ) -> list[str]:
        """:func:`blockgz.commits.recovery.remove_uncommitted` for this job."""
        return remove_uncommitted(self, offsets, partition_directories=partition_directories)
