"""The keys of DeviantArt's ``kafka-connect-s3`` connector, which the readers also read.

Its objects are ``<prefix><yyyy-MM-dd>/<topic>-<partition, 5 digits>-<first offset, 12
digits>.gz`` (the date is the upload day) with the index beside each as ``….index.json``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from blockgz.archive.object_ref import ObjectRef

#: The connector keeps its cursor in ``last_chunk_index.<topic>-<partition>.txt``.
_CURSOR = "last_chunk_index."

_DEVIANTART_NAME = re.compile(r"^(?P<topic>.+)-(?P<partition>\d{5,})-(?P<start>\d{12,})\.gz$")


@dataclass(frozen=True)
class DeviantArtLayout:
    """The keys of DeviantArt's ``kafka-connect-s3`` sink (read only; blockgz writes Confluent's).

    Each object is ``<prefix><yyyy-MM-dd>/<topic>-<partition>-<first offset>.gz`` (partition
    zero-padded to 5 digits, offset to 12) with its index beside it as ``….index.json``
    (:func:`~blockgz.written.sidecars.legacy_sidecar_key`). The date is the upload day and comes
    *before* the topic, so one partition's objects are spread over many date directories: both
    prefixes below are the whole ``prefix``, and the partition is told from the file name (any
    directory is accepted). Their ``last_chunk_index.<topic>-<partition>.txt`` cursor files
    are not data objects.

    >>> from blockgz.written.sidecars import legacy_sidecar_key
    >>> layout = DeviantArtLayout()
    >>> key = layout.data_key("systest/", "system-test", 0, 100, dt.date(2016, 2, 24))
    >>> key
    'systest/2016-02-24/system-test-00000-000000000100.gz'
    >>> legacy_sidecar_key(key)
    'systest/2016-02-24/system-test-00000-000000000100.index.json'
    >>> ref = layout.parse_data_key(key, size=275)
    >>> ref.topic, ref.partition, ref.start_offset, ref.directory
    ('system-test', 0, 100, 'systest/2016-02-24')
    >>> layout.parse_data_key("systest/last_chunk_index.system-test-00000.txt") is None
    True
    """

    kind: ClassVar[str] = "deviantart"
    has_exports: ClassVar[bool] = False
    topics_dir: ClassVar[str] = ""
    partition_pad_width: ClassVar[int] = 5
    offset_pad_width: ClassVar[int] = 12

    def file_name(self, topic: str, partition: int, start_offset: int) -> str:
        """``<topic>-<partition, 5 digits>-<first offset, 12 digits>.gz``."""
        return f"{topic}-{partition:05d}-{start_offset:012d}.gz"

    def data_key(
        self, prefix: str, topic: str, partition: int, start_offset: int, day: dt.date
    ) -> str:
        """``<prefix><yyyy-MM-dd>/<file name>``; ``prefix`` is ``""`` or ends with ``/``."""
        return f"{prefix}{day:%Y-%m-%d}/{self.file_name(topic, partition, start_offset)}"

    def topic_prefix(self, prefix: str = "", topic: str | None = None) -> str:
        """Where a topic's objects are listed: the whole prefix (dates come first)."""
        return prefix

    def partition_prefix(self, prefix: str, topic: str, partition: int) -> str:
        """Where a partition's objects are listed: the whole prefix (dates come first)."""
        return prefix

    def topics_directory(self, prefix: str = "") -> str | None:
        """None: the directories are dates, and topics are told from file names."""
        return None

    def partition_of_directory(self, directory: str) -> int | None:
        """None: a directory is a day, holding any partition."""
        return None

    def is_bookkeeping(self, prefix: str, key: str) -> bool:
        """The connector's cursor files, ``last_chunk_index.<topic>-<partition>.txt``."""
        return key.rsplit("/", 1)[-1].startswith(_CURSOR)

    def one_copy_each(self, refs: Sequence[ObjectRef]) -> list[ObjectRef]:
        """The same name in several date directories was re-uploaded after a restart (the
        connector resumes from its last committed index): keep the latest day's copy."""
        latest = {(r.topic, r.partition, r.start_offset): r for r in refs}
        return [r for r in refs if latest[(r.topic, r.partition, r.start_offset)] is r]

    def describe(self) -> str:
        return "layout=deviantart"

    def parse_data_key(
        self, key: str, *, size: int = -1, extension: str | None = None, any_extension: bool = False
    ) -> ObjectRef | None:
        """The :class:`ObjectRef` of a data key; ``None`` for index, cursor and other keys
        (the whole name must match, so ``any_extension`` changes nothing)."""
        directory, _, name = key.rpartition("/")
        match = _DEVIANTART_NAME.match(name)
        if match is None or extension not in (None, ".gz", "gz"):
            return None
        return ObjectRef(
            key=key,
            topic=match["topic"],
            partition=int(match["partition"]),
            start_offset=int(match["start"]),
            extension="gz",
            directory=directory,
            size=size,
        )
