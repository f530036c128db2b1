"""One object an export wrote, as its batch's manifest lists it: no imports beyond the standard
library, so the object writers (:mod:`blockgz.formats`) can describe what they wrote without
depending on the commit log (:mod:`blockgz.commits.manifests`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A finished data object: where it is and which records it holds (offsets may have gaps)."""

    key: str
    topic: str
    partition: int
    encoded_partition: str
    first_offset: int
    last_offset: int
    records: int
    size: int
    uncompressed_size: int
    index_key: str | None = None
    #: ``value``, or ``keys`` / ``headers`` / ``timestamps`` for the files beside a value file
    #: (``store.kafka.keys``, ``store.kafka.headers``, ``store.kafka.timestamps``: a hidden
    #: name, :mod:`blockgz.archive.timestamps_keys`; none beside a value file with a sidecar,
    #: which keeps the timestamps itself), one entry per value record.
    role: str = "value"
    #: The smallest and largest Kafka record timestamp in the file (epoch ms), when the
    #: records had timestamps: readers skip files outside a time window without opening them.
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    #: The converter whose output the file holds (values: ``value.converter``; keys files:
    #: ``key.converter``), as :func:`blockgz.sink.convert.converters.converter_label` names
    #: it (``none``, ``avro``, ``json+schemas``, ``string:utf-8``, ``bytearray``); ``None``:
    #: not recorded (written before blockgz recorded it, or a headers/timestamps file).
    converter: str | None = None
    #: CRC-32 (zlib's polynomial, unsigned; :func:`blockgz.blocks.checksum.block_crc32`) of
    #: the file's bytes as stored (the whole object); ``None``: not recorded (older manifests).
    crc32: int | None = None
    #: Size and CRC-32 of the bytes of the file's index sidecar (at :attr:`index_key`);
    #: ``None``: not recorded, or no sidecar.
    index_size: int | None = None
    index_crc32: int | None = None
    #: The ETag the store gave the file's object when the export wrote it (its PUT or
    #: CompleteMultipartUpload, quotes removed): an audit whose listing shows the same ETag
    #: knows the object is the version written and skips asking for its CRC-32; ``None``: not
    #: recorded (older manifests, or a store without ETags).
    etag: str | None = None
    #: Fields a newer blockgz wrote that this one does not know: kept, and written back.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        doc = {**self.extra, **asdict(self)}
        del doc["extra"]
        if self.role == "value":
            del doc["role"]  # manifests of value files read the same as before
        for name in _OPTIONAL_FIELDS:
            if doc[name] is None:
                del doc[name]  # written before blockgz kept them, or no timestamps
        return doc

    def holds_times(self, low: int | None, high: int | None) -> bool:
        """Whether the file may hold a record stamped in ``low..high`` (epoch ms, inclusive;
        ``None``: open); ``True`` when its times are unknown.

        >>> f = WrittenFile("k", "t", 0, "", 0, 9, 10, 1, 1, min_timestamp=100, max_timestamp=200)
        >>> f.holds_times(150, None), f.holds_times(201, None), f.holds_times(None, 99)
        (True, False, False)
        """
        return times_overlap(self.min_timestamp, self.max_timestamp, low, high)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> WrittenFile:
        """A file entry; fields this blockgz does not know are kept in :attr:`extra`.

        >>> f = WrittenFile.from_dict({"key": "k", "topic": "t", "partition": 0,
        ...     "encoded_partition": "", "first_offset": 0, "last_offset": 0, "records": 1,
        ...     "size": 1, "uncompressed_size": 1, "checksum": "abc"})
        >>> f.extra, f.to_dict()["checksum"]
        ({'checksum': 'abc'}, 'abc')
        """
        known = {name: doc[name] for name in _FILE_FIELDS if name in doc}
        extra = {name: value for name, value in doc.items() if name not in _FILE_FIELDS}
        return cls(**known, extra=extra)


_FILE_FIELDS = frozenset(f.name for f in fields(WrittenFile)) - {"extra"}
#: Written only when known, so a manifest reads the same as before blockgz kept them.
_OPTIONAL_FIELDS = (
    "min_timestamp",
    "max_timestamp",
    "converter",
    "crc32",
    "index_size",
    "index_crc32",
    "etag",
)


def times_overlap(first: int | None, last: int | None, low: int | None, high: int | None) -> bool:
    """Whether ``first..last`` (unknown: ``None``, so anything) meets ``low..high``.

    >>> times_overlap(100, 200, 201, None), times_overlap(None, None, 5, 6)
    (False, True)
    """
    if first is None or last is None:
        return True
    return (low is None or last >= low) and (high is None or first <= high)
