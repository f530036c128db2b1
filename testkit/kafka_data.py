"""Export test data: produce numbered records, read an exported bucket back.

Every produced value carries its own Kafka offset (``"i"``), so reading the bucket back tells
exactly which offsets landed where, how often, and whether any object is outside the manifests.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass, field

from blockgz.archive.layout import Layout, parse_archive_key
from blockgz.sink.write.config import SinkSettings
from blockgz.store.base import ObjectStore
from blockgz.written.sidecars import is_sidecar

COUNTRIES = ("DE", "us", "Fr")
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
T0 = 1_795_305_600_000  # 2026-11-22T00:00:00Z


def value_for(partition: int, i: int) -> dict:
    """The JSON value of record ``i`` (its offset) in ``partition``."""
    return {
        "i": i,
        "p": partition,
        "country": COUNTRIES[i % 3],
        "user": {"tier": i % 2, "name": f"u{i}"},
        "ts": T0 + i * 5 * HOUR_MS,
    }


def produce_numbered(
    bootstrap: str, topic: str, partitions: int, per_partition: int, *, start: int = 0
) -> None:
    """Produce ``per_partition`` records into each partition, one record per Kafka batch.

    One record per batch keeps Tansu's high watermark exact (CONTRIBUTING.md's test servers); record
    timestamps step five hours apart so time partitioners see several days and hours.
    """
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "batch.num.messages": 1,
            "linger.ms": 0,
            "enable.idempotence": False,
            # In order even when a request is retried (a new topic's first produce may meet a
            # leader not yet known): each record's value names its offset.
            "max.in.flight.requests.per.connection": 1,
        }
    )
    for p in range(partitions):
        for i in range(start, start + per_partition):
            doc = value_for(p, i)
            producer.produce(
                topic,
                json.dumps(doc).encode(),
                key=f"k{i}".encode(),
                partition=p,
                timestamp=doc["ts"],
            )
            producer.poll(0)
    assert producer.flush(30) == 0, "records left unsent"


@dataclass
class Exported:
    """What a bucket holds under ``topics/``: per object, the offsets of its records."""

    objects: dict[str, list[dict]] = field(default_factory=dict)
    indexes: set[str] = field(default_factory=set)
    #: The ``.keys``/``.headers``/``.timestamps`` files beside value objects (not decoded).
    companions: set[str] = field(default_factory=set)

    @property
    def written(self) -> set[str]:
        """Every key under ``topics/``: value objects, sidecars and the files beside values
        (what the manifests must list, no more, no less)."""
        return set(self.objects) | self.indexes | self.companions

    def offsets(self) -> Counter:
        """How many times each (partition, offset) was written, over all objects."""
        return Counter((doc["p"], doc["i"]) for docs in self.objects.values() for doc in docs)

    def assert_exactly_once(self, partitions: int, per_partition: int) -> None:
        counts = self.offsets()
        dupes = {k: n for k, n in counts.items() if n > 1}
        assert not dupes, f"offsets written more than once: {sorted(dupes)[:10]}"
        expected = {(p, i) for p in range(partitions) for i in range(per_partition)}
        missing = expected - set(counts)
        assert not missing, f"offsets missing: {sorted(missing)[:10]}"
        assert set(counts) == expected


def read_exported(store: ObjectStore, prefix: str = "", topics_dir: str = "topics") -> Exported:
    """Decode every value object under ``topics_dir``; index sidecars and the keys, headers and
    timestamps files beside values (hidden or not, as the layout names them) are collected
    apart."""
    out = Exported()
    layout = Layout(topics_dir=topics_dir)
    for info in store.list(f"{prefix}{topics_dir}/"):
        if is_sidecar(info.key):
            out.indexes.add(info.key)
            continue
        ref = parse_archive_key(layout, info.key)  # a value object, or a file beside one
        if ref is not None and ref.role != "value":
            out.companions.add(info.key)
            continue
        data = store.get(info.key)
        if info.key.endswith(".avro"):
            out.objects[info.key] = read_avro(data)
            continue
        if info.key.endswith(".parquet"):
            out.objects[info.key] = read_parquet(data)
            continue
        if info.key.endswith(".gz"):
            data = gzip.decompress(data)
        if info.key.endswith(".zst"):  # every frame, the seek table skipped (as zstd -d)
            data = zstd_decompress(data)
        out.objects[info.key] = [json.loads(line) for line in data.splitlines() if line]
    return out


def zstd_decompress(data: bytes) -> bytes:
    """A zstd file's bytes, every frame (python-zstandard's reader, not blockgz's code)."""
    import io

    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return reader.read()


def read_avro(data: bytes) -> list[dict]:
    """The records of an Avro container file, timestamps as epoch milliseconds (as produced)."""
    import io
    from datetime import datetime

    import fastavro

    docs = []
    for doc in fastavro.reader(io.BytesIO(data)):
        if isinstance(doc.get("ts"), datetime):
            doc["ts"] = int(doc["ts"].timestamp() * 1000)
        docs.append(doc)
    return docs


def read_parquet(data: bytes) -> list[dict]:
    """The values of a blockgz Parquet file (pyarrow, not blockgz's reader), timestamps as
    epoch milliseconds, without the Kafka columns."""
    import io
    from datetime import datetime

    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    docs = table.drop_columns(["__kafka_offset", "__kafka_timestamp"]).to_pylist()
    for doc in docs:
        if isinstance(doc.get("ts"), datetime):
            doc["ts"] = int(doc["ts"].timestamp() * 1000)
    return docs


def manifest_keys_of(store: ObjectStore, prefix: str, config: SinkSettings) -> set[str]:
    """Data and index keys listed by the job's manifests."""
    keys = set()
    for f in config.manifest_log(store, prefix).committed_files():
        keys.add(f.key)
        if f.index_key:
            keys.add(f.index_key)
    return keys
