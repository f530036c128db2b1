"""``blockgz replay``: restore an archived range into a Kafka topic."""

from __future__ import annotations

import click

from blockgz.cli.app import collect_options, fail_cleanly, main, store_options


def _epoch_ms(ctx, param, value: str | None) -> int | None:
    """An ISO-8601 time (UTC unless it says otherwise) or epoch milliseconds."""
    from blockgz.errors import ConfigError
    from blockgz.times import epoch_ms

    try:
        return epoch_ms(value, name=param.name)
    except ConfigError as exc:
        raise click.BadParameter(
            f"{value!r} is neither ISO-8601 (2026-11-23T10:00:00Z) nor epoch milliseconds"
        ) from exc


@main.command(
    deprecated="use `blockgz restore SOURCE TOPIC --rename TOPIC=TO_TOPIC` (one way to restore; "
    "replay stays for existing scripts)"
)
@click.argument("source")
@click.option("--topic", required=True, help="The archived topic to replay.")
@click.option(
    "--partition", "partitions", type=click.IntRange(min=0), multiple=True,
    help="Only this partition (repeatable) [all the archive holds].",
)  # fmt: skip
@click.option("--from-offset", type=click.IntRange(min=0), help="First offset [the first kept].")
@click.option("--to-offset", type=click.IntRange(min=0), help="Stop before this offset [the end].")
@click.option("--from-time", callback=_epoch_ms, help="Only records at or after this time.")
@click.option("--to-time", callback=_epoch_ms, help="Only records before this time.")
@click.option("--to-topic", required=True, help="The topic to write to (it must exist).")
@click.option("--bootstrap-servers", required=True, help="Kafka brokers, HOST:PORT[,...].")
@click.option(
    "--by-key", is_flag=True,
    help="Spread records over the target's partitions by key (Kafka's murmur2) instead of "
    "keeping each record's partition number.",
)  # fmt: skip
@click.option("--allow-same-topic", is_flag=True, help="Allow --to-topic to be the archived topic.")
@click.option(
    "--no-marker", is_flag=True,
    help="Leave out the blockgz.replay header (then a rerun cannot tell what was delivered).",
)  # fmt: skip
@click.option(
    "--schema-registry-url", metavar="URL",
    help="The target cluster's schema registry: an Avro archive's values go back in "
    "Confluent's wire format with its schema ids (required for one). -O "
    "basic.auth.user.info=USER:PASSWORD logs in.",
)  # fmt: skip
@click.option(
    "--master", metavar="URL",
    help="Run as a Spark job (local[4], spark://host:7077): one task per archived partition.",
)  # fmt: skip
@click.option(
    "--json-null", type=click.Choice(["tombstone", "value"]),
    help="What a null kept as a value under the tombstone directory was (as for restore): "
    "without it such records stop the replay (exit 1) before anything is sent.",
)  # fmt: skip
@click.option(
    "--tombstone-partition", default="tombstone", show_default=True, metavar="NAME",
    help="The export's tombstone.encoded.partition: the directory its tombstones are in.",
)  # fmt: skip
@store_options
@fail_cleanly
def replay(
    source, topic, partitions, from_offset, to_offset, from_time, to_time, to_topic,
    bootstrap_servers, by_key, allow_same_topic, no_marker, schema_registry_url, master,
    json_null, tombstone_partition, endpoint_url, options,
) -> None:  # fmt: skip
    """Replay archived records of SOURCE (an archive prefix) into a Kafka topic.

    Keys, headers and timestamps go with each record where the archive kept them, in offset
    order per partition, through an idempotent producer. Each record carries a
    blockgz.replay header naming its source offset; a rerun after a crash or a kill reads the
    end of each target partition and sends only what is not there yet, so nothing is
    duplicated. -O kafka.<setting>=<value> passes a producer setting (librdkafka names);
    other -O settings are the archive's (S3, key layout).

    Deprecated: `blockgz restore` is the one command for restores (many topics, topic
    creation, renames, consumer groups, records sent unchanged) and does all replay does:
    `--topic T --to-topic U` is `restore SOURCE T --rename T=U`, `--partition 3` is
    `--partition T:3`, `--from-offset A --to-offset B` is `--offsets T:3=A-B`. The same code
    sends the records; replay writes into an existing topic, always with the header, and sets
    no groups.

    \b
    Examples:
      blockgz replay s3://bucket/exports --topic orders --to-topic orders-restored \\
          --bootstrap-servers kafka:9092
      blockgz replay s3://bucket/exports --topic orders --partition 3 --from-offset 1000 \\
          --to-offset 2000 --to-topic orders-fix --bootstrap-servers kafka:9092
      blockgz replay s3://bucket/exports --topic orders --master 'local[4]' \\
          --to-topic orders-restored --bootstrap-servers kafka:9092
      blockgz replay s3://bucket/exports --topic payments --to-topic payments \\
          --bootstrap-servers dr-kafka:9092 --schema-registry-url http://dr-registry:8081
      blockgz replay s3://bucket/exports --topic orders --from-time 2026-11-01T00:00:00Z \\
          --to-topic orders-nov --by-key --bootstrap-servers kafka:9092 \\
          -O kafka.compression.type=zstd
    """
    from rich.console import Console

    from blockgz.reader import open_archive
    from blockgz.reader.restore.replay import ReplaySettings, replay_options
    from blockgz.reader.restore.replay import replay as run_replay

    archive_options, producer = replay_options(collect_options(endpoint_url, options))
    producer["bootstrap.servers"] = bootstrap_servers
    settings = ReplaySettings(
        topic=topic,
        to_topic=to_topic,
        partitions=list(partitions) or None,
        start=from_offset,
        end=to_offset,
        from_time=from_time,
        to_time=to_time,
        by_key=by_key,
        mark=not no_marker,
        allow_same_topic=allow_same_topic,
        registry=_registry(schema_registry_url, archive_options),
        producer=producer,
        json_null=json_null,
        tombstone_directory=tombstone_partition,
    )
    console = Console(stderr=True)
    if master:
        from blockgz.reader.restore.spark_driver import replay_on_spark
        from blockgz.spark_session import spark_session

        spark = spark_session(master, app_name="blockgz-replay")
        try:
            result = replay_on_spark(spark, source, archive_options, settings)
        finally:
            spark.stop()
    else:
        with open_archive(source, archive_options) as archive, _progress(console) as show:
            result = run_replay(archive, settings, on_progress=show)
    rate = result.total_sent / result.seconds if result.seconds else 0.0
    skipped = sum(result.skipped.values())
    click.echo(
        f"replayed {result.total_sent} records of {topic} into {to_topic} in "
        f"{result.seconds:.1f} s ({rate:,.0f} records/s)"
        + (f"; {skipped} were there already" if skipped else "")
        + "".join(f"; without {what} (the archive kept none)" for what in result.not_kept),
        err=True,
    )


def _registry(url: str | None, options: dict[str, str]):
    """The target registry's settings from ``--schema-registry-url`` and the ``-O``
    ``basic.auth.*`` options (``None`` without a URL)."""
    if not url:
        return None
    from blockgz.registry import RegistrySettings

    auth = {k: v for k, v in options.items() if k.startswith(("basic.auth.", "schema.registry."))}
    return RegistrySettings.from_options({**auth, "schema.registry.url": url}, "value.converter")


class _progress:
    """Records sent per partition, and the rate, on a terminal (nothing otherwise)."""

    def __init__(self, console):
        self.console = console
        self.bar = None
        self.tasks: dict[int, int] = {}

    def __enter__(self):
        if self.console.is_terminal:
            from rich.progress import Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                "[progress.description]{task.description}",
                TextColumn("{task.completed:,} records"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.bar.__enter__()
        return self.show

    def show(self, partition: int, sent: int) -> None:
        if self.bar is None:
            return
        if partition not in self.tasks:
            self.tasks[partition] = self.bar.add_task(f"partition {partition}", rate="")
        task = self.tasks[partition]
        elapsed = self.bar.tasks[task].elapsed or 0
        rate = f"{sent / elapsed:,.0f}/s" if elapsed else ""
        self.bar.update(task, completed=sent, rate=rate)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
