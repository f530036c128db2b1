"""Build a multi-object, multi-block partition in any store, the way the sink lays it out."""

from __future__ import annotations

from blockgz.layout import Layout, default_partition
from blockgz.objects.upload import BlockGzipUpload
from blockgz.sample import events
from blockgz.store import ObjectStore


def build_partition(
    store: ObjectStore,
    prefix: str = "",
    *,
    topic: str = "orders",
    partition: int = 0,
    objects: int = 3,
    records_per_object: int = 400,
    block_size: int = 16 * 1024,
    gap_every: int = 0,
) -> dict[int, bytes]:
    """Write ``objects`` block-GZIP objects plus indexes; return {offset: value}.

    With ``gap_every`` > 0, every n-th offset is skipped (as compaction would leave it).
    """
    expected: dict[int, bytes] = {}
    offset = 0
    values = iter(events(objects * records_per_object * 2))
    for _ in range(objects):
        start = offset
        path = f"{topic}/{default_partition(partition)}"
        key = Layout().data_key(prefix, path, topic, partition, start, ".json.gz")
        with BlockGzipUpload(
            store, key, block_size=block_size, first_offset=start, threads=2
        ) as out:
            for _ in range(records_per_object):
                if gap_every and offset % gap_every == gap_every - 1:
                    offset += 1
                value = next(values)
                out.write(value, offset)
                expected[offset] = value
                offset += 1
    return expected
