"""Kafka-shaped Arrow batches, what a Spark write task receives, built from records."""

from __future__ import annotations

from blockgz.sink.records import KafkaRecord, kafka_arrow_schema


def arrow_batches(records: list[KafkaRecord], sizes: list[int] | None = None) -> list:
    """Kafka-shaped Arrow batches of ``records``, cut into the given sizes (the rest last);
    with a ``headers`` column when any record has headers (Spark's ``includeHeaders``)."""
    import pyarrow as pa

    with_headers = any(r.headers is not None for r in records)
    schema = kafka_arrow_schema(with_headers)
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
            "timestamp": [None if r.timestamp_ms is None else r.timestamp_ms * 1000 for r in chunk],
            "timestampType": [r.timestamp_type for r in chunk],
        }
        if with_headers:
            columns["headers"] = [
                None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers]
                for r in chunk
            ]
        batches.append(pa.RecordBatch.from_pydict(columns, schema=schema))
    return batches


def spark_kafka_rows(*columns: str):
    """The Spark ``StructType`` of Kafka rows with ``columns`` (Spark's Kafka source's types),
    as a write task's schema: ``spark_kafka_rows("value", "partition", "offset")``."""
    from pyspark.sql import types as t

    kinds = {
        "key": t.BinaryType(),
        "value": t.BinaryType(),
        "topic": t.StringType(),
        "partition": t.IntegerType(),
        "offset": t.LongType(),
        "timestamp": t.TimestampType(),
        "timestampType": t.IntegerType(),
    }
    return t.StructType([t.StructField(name, kinds[name]) for name in columns])
