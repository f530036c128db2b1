"""Profile (not a benchmark): the Python work of one Avro export task, outside Spark.

Runs ``blockgz.sink.write.task.write_task`` on the Arrow batches a Spark task hands the sink
(columns ``value, topic, partition, offset``, 10,000 rows each, values in Confluent's Avro wire
format from confluent-kafka's ``AvroSerializer``) into a local directory, under cProfile, and times
the plain loop's per-record work (wire header off, ``fastavro.schemaless_reader``,
``fastavro`` ``Writer.write``) on the same values for comparison:

    .venv/bin/python -m benchmarks.profile_avro_task --records 250000 --codec null
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import tempfile
import time

import fastavro
from fastavro.write import Writer

from benchmarks import avro_support as av
from blockgz.local_servers import LocalSchemaRegistry

TOPIC = "profile_avro"


def _values(registry_url: str, count: int) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(av.SCHEMA))
    context = SerializationContext(TOPIC, MessageField.VALUE)
    make = av.record_maker(0)
    return [serializer(make(i), context) for i in range(count)]


def _batches(values: list[bytes]):
    import pyarrow as pa

    out = []
    for start in range(0, len(values), av.ARROW_BATCH_ROWS):
        chunk = values[start : start + av.ARROW_BATCH_ROWS]
        n = len(chunk)
        out.append(
            pa.RecordBatch.from_pydict(
                {
                    "value": pa.array(chunk, pa.binary()),
                    "topic": pa.array([TOPIC] * n, pa.string()),
                    "partition": pa.array([0] * n, pa.int32()),
                    "offset": pa.array(range(start, start + n), pa.int64()),
                }
            )
        )
    return out


def _loop_work(values: list[bytes], schema, codec: str) -> float:
    """The loop's per-record work on ``values``: seconds."""
    started = time.perf_counter()
    writer = Writer(io.BytesIO(), schema, codec=codec, sync_interval=av.BLOCK_SIZE)
    read = fastavro.schemaless_reader
    for value in values:
        buffer = io.BytesIO(value)
        buffer.seek(5)
        writer.write(read(buffer, schema, None))
    writer.flush()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--codec", default="null")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task

    with LocalSchemaRegistry() as registry:
        values = _values(registry.url, args.records)
        batches = _batches(values)

        def config():
            return SinkSettings.from_options(
                {
                    "path": tempfile.mkdtemp(prefix="blockgz-profile-"),
                    "value.converter": "io.confluent.connect.avro.AvroConverter",
                    "value.converter.schema.registry.url": registry.url,
                    "format.class": "avro",
                    "avro.codec": args.codec,
                }
            )

        write_task(config(), iter(batches[:1]))  # warm: schema fetched, modules imported
        started = time.perf_counter()
        write_task(config(), iter(batches))
        task_s = time.perf_counter() - started
        profile = cProfile.Profile()
        profile.enable()
        write_task(config(), iter(batches))
        profile.disable()
    schema = fastavro.parse_schema(av.SCHEMA)
    loop_s = min(_loop_work(values, schema, args.codec) for _ in range(2))
    n = len(values)
    print(
        f"{n:,} records, avro.codec={args.codec}: write_task {task_s / n * 1e6:.2f} µs/record "
        f"({task_s:.2f} s); the loop's decode + fastavro write {loop_s / n * 1e6:.2f} µs/record "
        f"({loop_s:.2f} s): {task_s / loop_s:.2f}×"
    )
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
