"""Object keys in the layout of Confluent's S3 sink, parsed back.

``<topics.dir>/<topic>/partition=<p>/<topic>+<p>+<start, zero-padded>.<ext>``

    >>> ref = parse_key("topics/orders/partition=3/orders+3+0000001000.json.gz", size=10)
    >>> ref.topic, ref.partition, ref.start_offset, ref.extension
    ('orders', 3, 1000, 'json.gz')
    >>> parse_key("topics/orders/partition=3/orders+3+0000001000.json.index.json") is None
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blockgz.index import INDEX_SUFFIX

_NAME = re.compile(
    r"^(?P<topic>[^/]+?)\+(?P<partition>\d+)\+(?P<start>\d+)\.(?P<ext>[A-Za-z0-9.]+)$"
)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A data object of one topic-partition, known from a listing."""

    key: str
    topic: str
    partition: int
    start_offset: int
    extension: str
    size: int = -1
    has_index: bool = False

    @property
    def compressed(self) -> bool:
        return self.extension.endswith("gz")


def parse_key(key: str, *, size: int = -1, file_delim: str = "+") -> ObjectRef | None:
    """The :class:`ObjectRef` of a data key, or ``None`` for indexes, manifests and strangers."""
    name = key.rsplit("/", 1)[-1]
    if name.endswith(INDEX_SUFFIX):
        return None
    if file_delim != "+":
        name = name.replace(file_delim, "+")
    match = _NAME.match(name)
    if not match:
        return None
    return ObjectRef(
        key=key,
        topic=match["topic"],
        partition=int(match["partition"]),
        start_offset=int(match["start"]),
        extension=match["ext"],
        size=size,
    )


def partition_prefix(
    prefix: str, topic: str, partition: int, *, topics_dir: str = "topics", delim: str = "/"
) -> str:
    """The key prefix holding one partition's objects under the default partitioner."""
    head = f"{prefix}{topics_dir}{delim}" if topics_dir else prefix
    return f"{head}{topic}{delim}partition={partition}{delim}"


def topic_prefix(
    prefix: str, topic: str | None, *, topics_dir: str = "topics", delim: str = "/"
) -> str:
    head = f"{prefix}{topics_dir}{delim}" if topics_dir else prefix
    return f"{head}{topic}{delim}" if topic else head
