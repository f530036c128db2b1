"""Kafka-shaped Arrow batches, what a Spark write task receives, built from records."""

from __future__ import annotations

from sink.records import KafkaRecord, kafka_arrow_schema


def arrow_batches(records: list[KafkaRecord], sizes: list[int] | None = None) -> list:
    """Kafka-shaped Arrow batches of ``records``, cut into the given sizes (the rest last)."""
    import pyarrow as pa

    schema = kafka_arrow_schema(False)
    batches, pos = [], 0
    for size in [*(sizes or []), len(records)]:
        chunk = records[pos : pos + size]
        if not chunk:
            break
        pos += len(chunk)
        columns = {
            "key": [r.key for r in chunk],
            "value": [r.value for r in chunk],
            "topic": [r.topic for r in chunk],
            "partition": [r.partition for r in chunk],
            "offset": [r.offset for r in chunk],
            "timestamp": [(r.timestamp_ms or 0) * 1000 for r in chunk],
            "timestampType": [0] * len(chunk),
        }
        batches.append(pa.RecordBatch.from_pydict(columns, schema=schema))
    return batches
