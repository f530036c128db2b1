"""``blockgz quickstart``: Confluent's S3-sink quickstart, end to end, on this machine.

It starts a local Kafka broker (Tansu) and a local S3 server (SeaweedFS, or moto where SeaweedFS
is not installed), produces nine records,
exports them with ``flush.size=3`` (three objects, as in Confluent's quickstart), lists the
objects, seeks an offset through the reader, and shuts everything down, explaining each step.
"""

from __future__ import annotations

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

PROPERTIES = """\
name=s3-sink
topics={topic}
kafka.bootstrap.servers={bootstrap}
s3.bucket.name={bucket}
s3.region=us-east-1
store.url={endpoint}
aws.access.key.id=testing
aws.secret.access.key=testing
format.class=io.confluent.connect.s3.format.json.JsonFormat
partitioner.class=io.confluent.connect.storage.partitioner.DefaultPartitioner
flush.size={flush}
"""


def run_quickstart(console: Console | None = None, *, seek_offset: int = 4) -> list[str]:
    """Run the whole quickstart; return the keys of the exported objects."""
    from blockgz.local_servers import LocalKafka, MotoS3
    from blockgz.local_servers.seaweed import SeaweedS3
    from reader import open_archive
    from sink.export.config import ExportConfig
    from sink.export.job import run_export

    console = console or Console()
    started = time.monotonic()

    def step(n: int, text: str) -> None:
        console.print(f"\n[bold cyan]{n}.[/] {text}  [dim]({time.monotonic() - started:.1f} s)[/]")

    with tempfile.TemporaryDirectory(prefix="blockgz-quickstart-") as tmp:
        seaweed = SeaweedS3.unavailable_reason() is None
        s3_server = SeaweedS3() if seaweed else MotoS3(in_process=False)
        s3_name = "SeaweedFS" if seaweed else "moto"
        step(1, f"Starting a local Kafka broker (Tansu, in memory) and a local S3 ({s3_name}).")
        with LocalKafka() as kafka, s3_server as s3:
            console.print(f"   Kafka at {kafka.bootstrap_servers}, S3 at {s3.endpoint_url}")
            s3.client().create_bucket(Bucket=BUCKET)

            step(2, f"Creating topic {TOPIC!r} and producing {RECORDS} JSON records.")
            kafka.create_topic(TOPIC, partitions=1)
            values = [json.dumps({"f1": f"value{n}"}).encode() for n in range(1, RECORDS + 1)]
            kafka.produce(TOPIC, values)
            console.print('   {"f1": "value1"} ... {"f1": "value9"}')

            step(3, "The connector config: the same keys as Confluent's S3 sink quickstart.")
            text = PROPERTIES.format(
                topic=TOPIC,
                bootstrap=kafka.bootstrap_servers,
                bucket=BUCKET,
                endpoint=s3.endpoint_url,
                flush=FLUSH_SIZE,
            )
            config_path = Path(tmp) / "s3-sink.properties"
            config_path.write_text(text)
            console.print(Syntax(text, "properties", theme="ansi_dark", background_color="default"))

            step(
                4,
                "Exporting with Spark (`blockgz export s3-sink.properties --once`). Starting "
                "Spark takes ~10-20 s; the records then land in S3 exactly once.",
            )
            job = ExportConfig.from_file(config_path)
            checkpoint = Path(tmp) / "checkpoint"
            result = run_export(
                job,
                checkpoint=checkpoint,
                once=True,
                install_signal_handlers=False,
                log_file=checkpoint / "blockgz-export.log",  # Spark's start-up chatter
            )
            console.print(
                f"   {result.records} records in {result.batches} batch(es), "
                f"{result.files} objects written."
            )

            step(5, f"Listing the bucket: flush.size={FLUSH_SIZE} gives three objects.")
            keys = sorted(
                obj["Key"]
                for obj in s3.client().list_objects_v2(Bucket=BUCKET).get("Contents", [])
                if obj["Key"].startswith("topics/")
            )
            for key in keys:
                console.print(f"   s3://{BUCKET}/{key}")

            step(
                6,
                f"Reading from offset {seek_offset} "
                f"(`blockgz seek s3://{BUCKET} --topic {TOPIC} --partition 0 "
                f"--offset {seek_offset}`).",
            )
            with open_archive(f"s3://{BUCKET}", job.sink_options) as archive:
                for record in archive.seek(TOPIC, 0, seek_offset):
                    console.print(f"   offset {record.offset}: {record.value.decode()}")

            step(7, "Stopping S3 and Kafka.")
        console.print(f"\n[bold green]Done[/] in {time.monotonic() - started:.1f} s.")
        return keys
