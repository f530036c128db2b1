"""The keys of what an export keeps beside its data: manifests, catalog, intents, dead letters,
its lease. All sit under ``<prefix><blockgz.manifest.dir>/<job name>/``::

    manifests/[<epoch>-]<batch, 20 digits>.json
    catalog/roots/<seq, 20 digits>.json.gz
    catalog/segments/<topic>/<partition>/<seq, 20 digits>-<part>.json.gz
    intents/<topic>/<partition>/<first offset, 20 digits>-<id>.json
    deadletters/<topic>/<partition>/<data file name of the first offset, extension .jsonl>
    snapshots/<yyyy-MM-dd>/<epoch ms, 20 digits>.json
    lease.json

:class:`JobKeys` builds and parses them; :class:`~blockgz.archive.layout.Layout` has its methods
(the dead-letter names follow ``file.delim`` and ``filename.offset.zero.pad.width`` as the data
objects' names do).

>>> from blockgz.archive.layout import Layout
>>> layout = Layout(file_delim="-", offset_pad_width=4)
>>> layout.manifest_key("", "s3-sink", 7, epoch="20261123T180000Zab12cd")
'_blockgz/s3-sink/manifests/20261123T180000Zab12cd-00000000000000000007.json'
>>> layout.deadletter_key("", "job", "t", 0, 7)
'_blockgz/job/deadletters/t/0/t-0-0007.jsonl'
>>> key = layout.intent_key("", "job", "t", 3, 500, "ab12")
>>> key
'_blockgz/job/intents/t/3/00000000000000000500-ab12.json'
>>> layout.parse_intent_key("", "job", key)
('t', 3, 500)
>>> layout.catalog_segment_key("", "job", "t", 3, 2, 0)
'_blockgz/job/catalog/segments/t/3/00000000000000000002-0.json.gz'
>>> layout.snapshot_key("", "job", 1795305600000)
'_blockgz/job/snapshots/2026-11-22/00000001795305600000.json'
"""

from __future__ import annotations

import datetime as dt
import re

MANIFEST_SUFFIX = ".json"
DEADLETTER_EXTENSION = ".jsonl"
LEASE_NAME = "lease.json"
#: Digits of batch ids, catalog sequence numbers and intents' first offsets: keys sort as numbers.
_DIGITS = 20
_MANIFEST_NAME = re.compile(
    r"^(?:(?P<epoch>[0-9A-Za-z]+)-)?(?P<batch>\d{20}|batch-[0-9a-f]+)\.json$"
)
_INTENT_NAME = re.compile(r"^(?P<first>\d+)-[^/]*\.json$")


class JobKeys:
    """Keys of an export job's own objects; mixed into :class:`~blockgz.archive.layout.Layout`,
    which supplies ``manifest_dir`` and ``file_name``."""

    manifest_dir: str

    def file_name(self, topic: str, partition: int, start_offset: int, extension: str) -> str:
        raise NotImplementedError

    def exports_prefix(self, prefix: str) -> str:
        """``<prefix><manifest dir>/``: one directory per export job under it."""
        return f"{prefix}{self.manifest_dir}/"

    def job_prefix(self, prefix: str, job_name: str) -> str:
        """``<prefix><manifest dir>/<job name>/``: everything the job keeps besides the data."""
        return f"{self.exports_prefix(prefix)}{job_name}/"

    def lease_key(self, prefix: str, job_name: str) -> str:
        """``…/<job name>/lease.json``: see :mod:`blockgz.commits.writer_lease`."""
        return self.job_prefix(prefix, job_name) + LEASE_NAME

    # -- manifests ----------------------------------------------------------------------------
    def manifest_prefix(self, prefix: str, job_name: str) -> str:
        """``<prefix><manifest dir>/<job name>/manifests/``."""
        return f"{self.job_prefix(prefix, job_name)}manifests/"

    def manifest_key(
        self, prefix: str, job_name: str, batch_id: int | str, *, epoch: str = ""
    ) -> str:
        """``…/manifests/[<epoch>-]<batch>.json``: a streaming batch id is zero-padded to 20
        digits, so keys sort by epoch, then batch."""
        batch = str(batch_id)
        if batch.isdigit():
            batch = batch.zfill(_DIGITS)
        head = f"{epoch}-" if epoch else ""
        return f"{self.manifest_prefix(prefix, job_name)}{head}{batch}{MANIFEST_SUFFIX}"

    @staticmethod
    def parse_manifest_key(key: str) -> tuple[str, int | str] | None:
        """``(epoch, batch)`` of a manifest key (a streaming batch id comes back as ``int``).

        >>> JobKeys.parse_manifest_key("_blockgz/j/manifests/e1-00000000000000000042.json")
        ('e1', 42)
        """
        match = _MANIFEST_NAME.match(key.rsplit("/", 1)[-1])
        if match is None:
            return None
        batch = match["batch"]
        return match["epoch"] or "", int(batch) if batch.isdigit() else batch

    @staticmethod
    def job_of_directory(directory: str) -> str:
        """The job name of a job directory listed under the manifest directory.

        >>> JobKeys.job_of_directory("exports/_blockgz/s3-sink/")
        's3-sink'
        """
        return directory.rstrip("/").rsplit("/", 1)[-1]

    # -- catalog ------------------------------------------------------------------------------
    def catalog_prefix(self, prefix: str, job_name: str) -> str:
        """``<prefix><manifest dir>/<job name>/catalog/``: roots and segments."""
        return f"{self.job_prefix(prefix, job_name)}catalog/"

    def catalog_roots_prefix(self, prefix: str, job_name: str) -> str:
        return f"{self.catalog_prefix(prefix, job_name)}roots/"

    def catalog_root_key(self, prefix: str, job_name: str, seq: int) -> str:
        return f"{self.catalog_roots_prefix(prefix, job_name)}{seq:0{_DIGITS}d}.json.gz"

    @staticmethod
    def is_catalog_root(key: str) -> bool:
        return key.endswith(".json.gz")

    def catalog_segments_prefix(self, prefix: str, job_name: str) -> str:
        return f"{self.catalog_prefix(prefix, job_name)}segments/"

    def catalog_segment_key(
        self, prefix: str, job_name: str, topic: str, partition: int, seq: int, part: int
    ) -> str:
        where = f"{self.catalog_segments_prefix(prefix, job_name)}{topic}/{partition}/"
        return f"{where}{seq:0{_DIGITS}d}-{part}.json.gz"

    # -- cluster snapshots --------------------------------------------------------------------
    def snapshots_prefix(self, prefix: str, job_name: str) -> str:
        """``<prefix><manifest dir>/<job name>/snapshots/``
        (:mod:`blockgz.commits.cluster_snapshots`)."""
        return f"{self.job_prefix(prefix, job_name)}snapshots/"

    def snapshot_key(self, prefix: str, job_name: str, at_ms: int) -> str:
        """``…/snapshots/<UTC day>/<epoch ms, 20 digits>.json``: one directory per day, so the
        snapshot at or before a time is found by listing one day (and the list of days)."""
        day = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).strftime("%Y-%m-%d")
        return f"{self.snapshots_prefix(prefix, job_name)}{day}/{at_ms:0{_DIGITS}d}.json"

    @staticmethod
    def snapshot_time(key: str) -> int | None:
        """The epoch ms a snapshot key names (``None``: not a snapshot key)."""
        name = key.rsplit("/", 1)[-1]
        digits = name[: -len(MANIFEST_SUFFIX)] if name.endswith(MANIFEST_SUFFIX) else ""
        return int(digits) if len(digits) == _DIGITS and digits.isdigit() else None

    # -- intents ------------------------------------------------------------------------------
    def intents_prefix(
        self, prefix: str, job_name: str, topic: str | None = None, partition: int | None = None
    ) -> str:
        """``<prefix><manifest dir>/<job name>/intents/`` (and ``<topic>/<partition>/``):
        see :mod:`blockgz.commits.intents`."""
        where = f"{self.job_prefix(prefix, job_name)}intents/"
        return where if topic is None else f"{where}{topic}/{partition}/"

    def intent_key(
        self, prefix: str, job_name: str, topic: str, partition: int, first: int, token: str
    ) -> str:
        """``…/intents/<topic>/<partition>/<first offset, 20 digits>-<token>.json``."""
        where = self.intents_prefix(prefix, job_name, topic, partition)
        return f"{where}{first:0{_DIGITS}d}-{token}.json"

    def intents_start_after(
        self, prefix: str, job_name: str, topic: str, partition: int, from_offset: int
    ) -> str:
        """A listing of the partition's intents that starts after this key holds those whose
        first offset is ``from_offset`` or more (``~`` sorts after any token)."""
        if from_offset <= 0:
            return ""
        where = self.intents_prefix(prefix, job_name, topic, partition)
        return f"{where}{from_offset - 1:0{_DIGITS}d}-~"

    def parse_intent_key(self, prefix: str, job_name: str, key: str) -> tuple[str, int, int] | None:
        """``(topic, partition, first offset)`` of an intent's key, ``None`` for other keys."""
        where = self.intents_prefix(prefix, job_name)
        if not key.startswith(where):
            return None
        parts = key[len(where) :].split("/")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        match = _INTENT_NAME.match(parts[2])
        if match is None:
            return None
        return parts[0], int(parts[1]), int(match["first"])

    # -- dead letters -------------------------------------------------------------------------
    def deadletter_prefix(self, prefix: str, job_name: str) -> str:
        """``<prefix><manifest dir>/<job name>/deadletters/``: the store's dead-letter queue."""
        return f"{self.job_prefix(prefix, job_name)}deadletters/"

    def deadletter_key(
        self, prefix: str, job_name: str, topic: str, partition: int, first_offset: int
    ) -> str:
        """``…/deadletters/<topic>/<partition>/<name>.jsonl``, the name as a data object of
        that first offset would have it (``file.delim``, ``filename.offset.zero.pad.width``)."""
        name = self.file_name(topic, partition, first_offset, DEADLETTER_EXTENSION)
        return f"{self.deadletter_prefix(prefix, job_name)}{topic}/{partition}/{name}"
