"""``blockgz replay``: the deprecated one-topic alias of ``blockgz restore`` (kept for scripts).

Its arguments map onto the restore's send loop (:func:`blockgz.reader.restore.send.send_records`,
on Spark :func:`~blockgz.reader.restore.spark_send.send_on_spark`): one topic into an existing one,
with the ``blockgz.replay`` header, and no consumer groups.
"""

from __future__ import annotations

import click

from blockgz.cli.app import collect_options, fail_cleanly, main, store_options
from blockgz.cli.restore import _epoch_ms, _Progress, _registry, spark_job


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
@click.option("--schema-registry-url", metavar="URL", help="As for restore.")
@click.option("--master", metavar="URL", help="As for restore.")
@click.option("--json-null", type=click.Choice(["tombstone", "value"]), help="As for restore.")
@click.option(
    "--tombstone-partition", default="tombstone", show_default=True, metavar="NAME",
    help="As for restore.",
)  # fmt: skip
@store_options
@fail_cleanly
def replay(
    source, topic, partitions, from_offset, to_offset, from_time, to_time, to_topic,
    bootstrap_servers, by_key, allow_same_topic, no_marker, schema_registry_url, master,
    json_null, tombstone_partition, endpoint_url, options,
) -> None:  # fmt: skip
    """Replay archived records of SOURCE (an archive prefix) into an existing Kafka topic.

    Deprecated: `blockgz restore` is the one command for restores, and this is its alias for
    one topic: `--topic T --to-topic U` is `restore SOURCE T --rename T=U`, `--partition 3` is
    `--partition T:3`, `--from-offset A --to-offset B` is `--offsets T:3=A-B`. The same code
    sends the records, in offset order per partition, keys, headers and timestamps as kept;
    replay writes into an existing topic, each record with a blockgz.replay header naming its
    source offset (a rerun sends only what is not there yet), and sets no groups.
    -O kafka.<setting>=<value> passes a producer setting; other -O settings are the archive's.

    \b
    Examples:
      blockgz replay s3://bucket/exports --topic orders --to-topic orders-restored \\
          --bootstrap-servers kafka:9092
      blockgz replay s3://bucket/exports --topic orders --partition 3 --from-offset 1000 \\
          --to-offset 2000 --to-topic orders-fix --bootstrap-servers kafka:9092
    """
    from rich.console import Console

    from blockgz.reader import open_archive
    from blockgz.reader.restore.send import SendSettings, restore_options, send_records
    from blockgz.reader.restore.spark_send import send_on_spark

    archive_options, producer = restore_options(collect_options(endpoint_url, options), "replay")
    settings = SendSettings(
        topic, to_topic, list(partitions) or None, from_offset, to_offset, from_time, to_time,
        by_key=by_key, mark=not no_marker, allow_same_topic=allow_same_topic,
        registry=_registry(schema_registry_url, archive_options),
        producer={**producer, "bootstrap.servers": bootstrap_servers},
        json_null=json_null, tombstone_directory=tombstone_partition,
    )  # fmt: skip
    if master:
        with spark_job(master, "blockgz-replay") as (spark, env):
            [result] = send_on_spark(spark, source, archive_options, [settings], task_env=env)
    else:
        with (
            open_archive(source, archive_options) as archive,
            _Progress(Console(stderr=True)) as show,
        ):
            result = send_records(archive, settings, on_progress=show)
    rate = result.total_sent / result.seconds if result.seconds else 0.0
    skipped = sum(result.skipped.values())
    click.echo(
        f"replayed {result.total_sent} records of {topic} into {to_topic} in "
        f"{result.seconds:.1f} s ({rate:,.0f} records/s)"
        + (f"; {skipped} were there already" if skipped else "")
        + "".join(f"; without {what} (the archive kept none)" for what in result.not_kept),
        err=True,
    )
