"""Kafka's default partitioner for keyed records, as the Java producer applies it: the target
partition of every record ``--by-key`` sends is computed here rather than left to the client, so
a rerun knows where each record went (:mod:`blockgz.reader.restore.markers`).

>>> kafka_partition(b"user-1", 12)  # the partition Kafka's Java producer picks
8
"""

from __future__ import annotations


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed
    32-bit int. Written here because the partition of each record must be known to resume
    exactly, and librdkafka picks partitions with another hash by default.

    >>> murmur2(b"21"), murmur2(b"foobar")  # Kafka's own test vectors
    (-973932308, -790332482)
    """
    length = len(data)
    seed, m = 0x9747B28C, 0x5BD1E995
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partition_of(record, targets: int, key: bytes | None = None) -> int:
    """``--by-key``: Kafka's partition for the key (``key``: its bytes as sent, when they are
    not the record's own, e.g. Avro re-encoded with the target registry's id); a null key by
    its offset.

    >>> from blockgz.blocks.decode import Record
    >>> partition_of(Record.kept(3, b"v", key=b"archived"), 12, b"user-1")  # the bytes sent
    8
    >>> partition_of(Record(3, b"v"), 12)
    3
    """
    key = record.key if key is None else key
    if key is None:
        return record.offset % targets
    return kafka_partition(key, targets)
