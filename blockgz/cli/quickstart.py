"""``blockgz quickstart``: Confluent's S3-sink quickstart, end to end, on this machine.

It follows Confluent's own quickstart: a local Kafka broker (Apache Kafka, or Tansu where
Java or Maven Central cannot be had), a local S3 server
(SeaweedFS, or moto where SeaweedFS is not installed) and a local Schema Registry (blockgz's
loopback stand-in); nine ``{"f1": "valueN"}`` records produced with confluent-kafka's
``AvroSerializer`` (what ``kafka-avro-console-producer`` does); the export with ``AvroFormat``
and ``flush.size=3``; the three ``.avro`` objects listed and the first printed as avro-tools
``tojson`` prints it. Then blockgz's own part: the same topic exported as block-GZIP JSON, and
a seek that fetches one block with one ranged GET. Everything is shut down at the end.
"""

from __future__ import annotations

import io
import json
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.syntax import Syntax

TOPIC = "s3_topic"
BUCKET = "quickstart"
RECORDS = 9
FLUSH_SIZE = 3
#: The schema of Confluent's quickstart (``kafka-avro-console-producer --property value.schema``).
VALUE_SCHEMA = {"type": "record", "name": "myrecord", "fields": [{"name": "f1", "type": "string"}]}

PROPERTIES = """\
name=s3-sink
connector.class=io.confluent.connect.s3.S3SinkConnector
tasks.max=1
topics={topic}
kafka.bootstrap.servers={bootstrap}
s3.bucket.name={bucket}
s3.region=us-east-1
store.url={endpoint}
aws.access.key.id=testing
aws.secret.access.key=testing
s3.part.size=5242880
flush.size={flush}
storage.class=io.confluent.connect.s3.storage.S3Storage
format.class=io.confluent.connect.s3.format.avro.AvroFormat
partitioner.class=io.confluent.connect.storage.partitioner.DefaultPartitioner
schema.compatibility=NONE
value.converter=io.confluent.connect.avro.AvroConverter
value.converter.schema.registry.url={registry}
"""

#: blockgz's flagship on the same topic: seekable block-GZIP JSON, small blocks to show a seek.
BLOCKGZIP_PROPERTIES = """\
format.class=io.confluent.connect.s3.format.json.JsonFormat
s3.compression.type=blockgzip
s3.compression.block.records=2
topics.dir=blockgz
"""


def produce_avro_quickstart(bootstrap: str, registry_url: str) -> None:
    """The nine records of the quickstart, serialised as the Avro console producer does."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(
        SchemaRegistryClient({"url": registry_url}), json.dumps(VALUE_SCHEMA)
    )
    context = SerializationContext(TOPIC, MessageField.VALUE)
    # One record per Kafka batch keeps the local broker's high watermark exact.
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for n in range(1, RECORDS + 1):
        producer.produce(TOPIC, serializer({"f1": f"value{n}"}, context), partition=0)
        producer.poll(0)
    if producer.flush(30):
        raise RuntimeError("the quickstart's records could not all be produced")


def avro_tojson(data: bytes) -> list[str]:
    """An Avro container file's records in Avro's JSON encoding, as ``avro-tools tojson``."""
    import fastavro

    reader = fastavro.reader(io.BytesIO(data))
    schema = fastavro.parse_schema(reader.writer_schema)
    lines = []
    for record in reader:
        out = io.StringIO()
        fastavro.json_writer(out, schema, [record])
        lines.append(out.getvalue().strip())
    return lines


def run_quickstart(
    console: Console | None = None,
    *,
    seek_offset: int = 4,
    master: str | None = None,
    cluster: bool = False,
) -> list[str]:
    """Run the whole quickstart; return the keys of the exported Avro objects.

    ``master`` runs the exports on that Spark master; ``cluster`` starts a standalone master
    and worker on loopback for them (:mod:`blockgz.local_servers.spark_cluster`).
    """
    if cluster:
        from blockgz.local_servers.spark_cluster import LocalSparkCluster

        with LocalSparkCluster(workers=1) as spark_cluster:
            return run_quickstart(console, seek_offset=seek_offset, master=spark_cluster.master_url)
    from blockgz.archive.layout import Layout
    from blockgz.local_servers import LocalSchemaRegistry, MotoS3
    from blockgz.local_servers.seaweed import SeaweedS3
    from blockgz.reader import open_archive
    from blockgz.reader.reading.read_options import READER_OPTIONS
    from blockgz.sink.export.job import run_export
    from blockgz.sink.jobconfig.config import ExportSettings

    console = console or Console()
    started = time.monotonic()

    def step(n: int, text: str) -> None:
        console.print(f"\n[bold cyan]{n}.[/] {text}  [dim]({time.monotonic() - started:.1f} s)[/]")

    def show(text: str, lexer: str = "properties") -> None:
        console.print(Syntax(text, lexer, theme="ansi_dark", background_color="default"))

    def export(config_path: Path, checkpoint: Path) -> None:
        result = run_export(
            ExportSettings.from_file(config_path),
            checkpoint=checkpoint,
            once=True,
            master=master,
            install_signal_handlers=False,
            log_file=checkpoint / "blockgz-export.log",  # Spark's start-up chatter
        )
        console.print(
            f"   {result.records} records in {result.batches} batch(es), "
            f"{result.files} object{'s' if result.files != 1 else ''} written."
        )

    with tempfile.TemporaryDirectory(prefix="blockgz-quickstart-") as tmp:
        seaweed = SeaweedS3.unavailable_reason() is None
        s3_server = SeaweedS3() if seaweed else MotoS3(in_process=False)
        s3_name = "SeaweedFS" if seaweed else "moto"
        broker, broker_name = _local_broker()
        step(
            1,
            f"Starting a local Kafka broker ({broker_name}), a local S3 ({s3_name}) and a "
            "local Schema Registry.",
        )
        with broker as kafka, s3_server as s3, LocalSchemaRegistry() as registry:
            console.print(
                f"   Kafka at {kafka.bootstrap_servers}, S3 at {s3.endpoint_url}, "
                f"Schema Registry at {registry.url}"
            )
            s3.client().create_bucket(Bucket=BUCKET)

            step(
                2,
                f"Producing {RECORDS} Avro records to {TOPIC!r}, as kafka-avro-console-producer "
                "does (confluent-kafka's AvroSerializer, schema registered as s3_topic-value).",
            )
            kafka.create_topic(TOPIC, partitions=1)
            produce_avro_quickstart(kafka.bootstrap_servers, registry.url)
            console.print(f"   value.schema={json.dumps(VALUE_SCHEMA)}")
            console.print('   {"f1": "value1"} ... {"f1": "value9"}')

            step(3, "The connector config: Confluent's quickstart-s3.properties, as it is.")
            text = PROPERTIES.format(
                topic=TOPIC,
                bootstrap=kafka.bootstrap_servers,
                bucket=BUCKET,
                endpoint=s3.endpoint_url,
                flush=FLUSH_SIZE,
                registry=registry.url,
            )
            config_path = Path(tmp) / "quickstart-s3.properties"
            config_path.write_text(text)
            show(text)

            step(
                4,
                "Exporting with Spark (`blockgz export quickstart-s3.properties --once"
                + (f" --master {master}" if master else "")
                + "`). Starting Spark takes ~10-20 s; the records then land in S3 exactly once.",
            )
            export(config_path, Path(tmp) / "checkpoint")

            step(5, f"Listing the bucket: flush.size={FLUSH_SIZE} gives three Avro objects.")
            client = s3.client()
            listed = [
                obj["Key"]
                for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
                if obj["Key"].startswith("topics/")
            ]
            layout = Layout()
            keys = sorted(k for k in listed if (ref := layout.parse_data_key(k)) and ref.is_avro)
            for key in keys:
                console.print(f"   s3://{BUCKET}/{key}")
            console.print(
                f"   (+ {len(listed) - len(keys)} hidden .index.json sidecars: blockgz's block "
                "index, which makes each Avro file seekable; engines reading the folder skip "
                "them, blockgz.avro.index=false leaves them out)"
            )

            step(
                6, f"The first object's records, as `avro-tools tojson {keys[0].rsplit('/')[-1]}`:"
            )
            first = client.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read()
            for line in avro_tojson(first):
                console.print(f"   {line}")

            step(
                7,
                "blockgz's own part: the same topic as seekable block-GZIP JSON (these keys "
                "added to the config, a second checkpoint):",
            )
            show(BLOCKGZIP_PROPERTIES)
            blockgz_path = Path(tmp) / "blockgz-s3.properties"
            blockgz_path.write_text(
                text.replace("name=s3-sink", "name=s3-sink-blockgz")
                .replace(f"flush.size={FLUSH_SIZE}\n", "")
                .replace("format.class=io.confluent.connect.s3.format.avro.AvroFormat\n", "")
                + BLOCKGZIP_PROPERTIES
            )
            export(blockgz_path, Path(tmp) / "checkpoint-blockgz")

            step(
                8,
                f"Seeking offset {seek_offset} (`blockgz seek --stats -O topics.dir=blockgz "
                f"--topic {TOPIC} --partition 0 --offset {seek_offset} --count 1 "
                f"s3://{BUCKET}`):",
            )
            # What the command above passes: the reader's own settings of the job's config
            # (the store's, topics.dir), not the export's, which it would warn it ignores.
            sink_options = ExportSettings.from_file(blockgz_path).sink_options
            options = {k: v for k, v in sink_options.items() if READER_OPTIONS.declared(k)}
            with open_archive(f"s3://{BUCKET}", options) as archive:
                for record in archive.seek(TOPIC, 0, seek_offset, count=1):
                    console.print(f"   offset {record.offset}: {record.value.decode()}")
                (ref,) = archive.objects(TOPIC, 0)
                blocks = len(archive.index(ref).chunks)
                console.print(
                    f"   read: {archive.store.requests.summary()}: the export's manifests "
                    "(only committed objects are read), the index, "
                    f"then the one block of {blocks} that holds offset {seek_offset}."
                )

            step(9, "Stopping the Schema Registry, S3 and Kafka.")
        console.print(f"\n[bold green]Done[/] in {time.monotonic() - started:.1f} s.")
        return keys


def _local_broker():
    """Apache Kafka (the broker blockgz is proven on; its jars come from Maven Central once),
    or Tansu where that cannot start: ``(broker, what to call it)``."""
    from blockgz.errors import JarResolutionError
    from blockgz.jars import resolve
    from blockgz.local_servers import LocalKafka
    from blockgz.local_servers.apache_kafka import KAFKA, ApacheKafka

    reason = ApacheKafka.unavailable_reason()
    if reason is None:
        try:
            resolve(KAFKA)
        except JarResolutionError as exc:  # no route to Maven Central: the demo still runs
            reason = str(exc).splitlines()[0]
    if reason is None:
        return ApacheKafka(), f"Apache Kafka {KAFKA.version}, KRaft"
    return LocalKafka(), f"Tansu, in memory; Apache Kafka unavailable: {reason}"
