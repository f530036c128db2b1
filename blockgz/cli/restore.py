"""``blockgz restore``: topics back into a cluster, to a point in time, with their groups."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator
from typing import Any

import click

from blockgz.cli.app import collect_options, fail_cleanly, main, report_output, store_options


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


@main.command()
@click.argument("source")
@click.argument("topics", nargs=-1)
@click.option("--topics-regex", metavar="REGEX", help="Also every archived topic it matches whole.")
@click.option("--from-time", callback=_epoch_ms, help="Only records at or after this time.")
@click.option(
    "--to-time", callback=_epoch_ms,
    help="The point in time: records before it, topic configs and group offsets as the newest "
    "snapshot at or before it recorded them [now].",
)  # fmt: skip
@click.option(
    "--offsets", "offset_windows", multiple=True, metavar="TOPIC:PARTITION=FROM-TO",
    help="An offset window for one partition (repeatable; FROM or TO may be left out); the "
    "other partitions go whole.",
)  # fmt: skip
@click.option(
    "--partition", "only_partitions", multiple=True, metavar="TOPIC:PARTITION",
    help="Only this partition of TOPIC (repeatable); TOPIC's other partitions are left out.",
)  # fmt: skip
@click.option(
    "--rename", multiple=True, metavar="SOURCE=TARGET",
    help="Restore SOURCE into TARGET (repeatable).",
)  # fmt: skip
@click.option("--prefix", default="", help="Prefix of every target topic not renamed.")
@click.option("--suffix", default="", help="Suffix of every target topic not renamed.")
@click.option("--bootstrap-servers", help="The target cluster, HOST:PORT[,...].")
@click.option(
    "--by-key", is_flag=True,
    help="Spread records over the target's partitions by key (Kafka's murmur2) instead of "
    "keeping partition numbers (records then carry a blockgz.replay header; group offsets are "
    "set where one offset per target partition resumes the group exactly).",
)  # fmt: skip
@click.option(
    "--groups-regex", metavar="REGEX",
    help="Only the consumer groups it matches whole [every group in the snapshot].",
)  # fmt: skip
@click.option("--no-groups", is_flag=True, help="Set no consumer group offsets.")
@click.option(
    "--dry-run", is_flag=True,
    help="Print the plan (from the archive's catalog and snapshots) and touch nothing.",
)  # fmt: skip
@report_output
@click.option(
    "--allow-same-topic", is_flag=True,
    help="Allow appending to a non-empty target named as its source topic.",
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
    help="What a null kept as a value under the tombstone directory was (an export with "
    "behavior.on.null.values=write and no store.kafka.keys keeps a tombstone as JSON null, "
    "which reads as a value that was the text null): 'tombstone' sends key + null value, "
    "'value' the bytes read. Without it such records stop the restore (exit 1), named per "
    "partition in the plan.",
)  # fmt: skip
@click.option(
    "--tombstone-partition", default="tombstone", show_default=True, metavar="NAME",
    help="The export's tombstone.encoded.partition: the directory its tombstones are in.",
)  # fmt: skip
@click.option(
    "--transaction-records", type=click.IntRange(min=1), default=20_000, show_default=True,
    metavar="N",
    help="Records per Kafka transaction and position commit: at most what a killed restore "
    "sends again per partition.",
)  # fmt: skip
@store_options
@fail_cleanly
def restore(
    source, topics, topics_regex, from_time, to_time, offset_windows, only_partitions, rename,
    prefix, suffix,
    bootstrap_servers, by_key, groups_regex, no_groups, dry_run, output, allow_same_topic,
    schema_registry_url, master, json_null, tombstone_partition, transaction_records,
    endpoint_url, options,
) -> None:  # fmt: skip
    """Restore archived TOPICS of SOURCE (an archive prefix) into a Kafka cluster.

    Many topics in one run (names, or --topics-regex), up to a point in time (--to-time) or
    within offset windows. Missing target topics are created with the source's partition
    count and the configs set on it, from the export's snapshot at or before --to-time;
    existing ones must have the partitions to restore one to one. Records keep their
    partition, key, headers and timestamp where the archive kept them. Then each consumer
    group's committed offset at that time is translated to the restored topics' offsets and
    set on the target (groups with members there are left alone), so consumers resume where
    they stood: nothing reprocessed, nothing skipped.

    Tombstones come back as tombstones (key + null value) in offset order, wherever the archive
    kept them (behavior.on.null.values=write: the keys files under the tombstone directory, or
    with --json-null the nulls kept as values there); the plan counts them.

    A killed restore resumes when run again and sends nothing twice. Records go unchanged (no
    header added) in Kafka transactions (transactional.id blockgz.restore.<target>.<partition>),
    each committing with its records the partition's next source offset as the offset of the
    consumer group blockgz.restore.<target> on the target; a rerun resumes from there, whatever
    else was written to the target meanwhile. Consumers of the target must read committed
    records (isolation.level=read_committed; Java's default is read_uncommitted). Into a target
    that held records before the restore first reached it, and with --by-key, each record
    carries a blockgz.replay header naming its source offset, as `blockgz replay` does; there
    the groups' offsets are found by reading the restored records back (with --by-key, a group
    whose consumed records are not a prefix of each target partition is left alone, with the
    reason).

    `blockgz replay` (deprecated) is an alias of this command for one topic: it sends with the
    same code into an existing topic, with the header, and sets no groups.

    -O kafka.<setting>=<value> passes a producer setting (librdkafka names); other -O
    settings are the archive's (S3, key layout).

    \b
    Examples:
      blockgz restore s3://bucket/exports orders payments --dry-run
      blockgz restore s3://bucket/exports --topics-regex 'orders.*' \\
          --to-time 2026-11-20T09:30:00Z --bootstrap-servers dr-kafka:9092
      blockgz restore s3://bucket/exports orders --rename orders=orders_restored \\
          --bootstrap-servers kafka:9092 --groups-regex 'billing-.*'
      blockgz restore s3://bucket/exports orders --offsets orders:3=1000-2000 \\
          --suffix _fix --no-groups --bootstrap-servers kafka:9092
      blockgz restore s3://bucket/exports orders --partition orders:3 \\
          --rename orders=orders-fix --bootstrap-servers kafka:9092
      blockgz restore s3://bucket/exports --topics-regex '.*' --suffix _dr \\
          --master 'local[4]' --bootstrap-servers dr-kafka:9092 --dry-run --output json
    """
    from rich.console import Console

    from blockgz.reader import open_archive
    from blockgz.reader.restore.planning import plan_restore
    from blockgz.reader.restore.request import (
        Rename,
        RestoreRequest,
        parse_offset_window,
        parse_partition,
    )
    from blockgz.reader.restore.send import restore_options

    archive_options, producer = restore_options(collect_options(endpoint_url, options))
    if not dry_run and not bootstrap_servers:
        raise click.UsageError("--bootstrap-servers is required (or --dry-run)")
    windows = {}
    for text in offset_windows:
        topic, partition, low, high = parse_offset_window(text)
        windows[(topic, partition)] = (low, high)
    request = RestoreRequest(
        topics=tuple(topics),
        topics_regex=topics_regex,
        rename=Rename.parse(rename, prefix, suffix),
        from_time=from_time,
        to_time=to_time,
        offsets=windows,
        only=frozenset(parse_partition(text) for text in only_partitions),
        by_key=by_key,
        groups_regex=groups_regex,
        groups=not no_groups,
        json_null=json_null,
        tombstone_directory=tombstone_partition,
    )
    console = Console(stderr=True)
    with open_archive(source, archive_options) as archive:
        with console.status("planning the restore from the archive's catalog"):
            plan = plan_restore(archive, request)
        if dry_run:
            existing = _existing_targets(bootstrap_servers, producer)
            if output == "json":
                doc = plan.to_json()
                for topic in doc["topics"]:
                    if existing is not None:
                        topic["target_partitions_now"] = existing.get(topic["target"])
                from blockgz.cli.json_text import dumps

                click.echo(dumps(doc, indent=1))
            else:
                _print_plan(plan, existing)
            _refuse_ambiguous(plan)
            return
        _refuse_ambiguous(plan)
        from blockgz.reader.restore.restorer import RestoreSettings

        producer["bootstrap.servers"] = bootstrap_servers
        settings = RestoreSettings(
            producer,
            _registry(schema_registry_url, archive_options),
            allow_same_topic,
            json_null,
            transaction_records,
        )
        if master:
            result = _on_spark(master, source, archive_options, plan, settings)
        else:
            from blockgz.reader.restore.restorer import restore as run_restore

            with _Progress(console) as show:
                result = run_restore(
                    archive, plan, settings, on_progress=lambda t, p, n: show(f"{t}[{p}]", n)
                )
    _summary(result)
    if result.groups.skipped:
        from blockgz.errors import RestoreError

        raise RestoreError(
            f"{len(result.groups.skipped)} consumer groups were not set (above, with why); the "
            "records are restored. Where a group's consumers run on the target, stop them and "
            "run the restore again: it sends nothing twice and sets the groups"
        )


def _refuse_ambiguous(plan) -> None:
    """Exit 1 naming each partition whose nulls kept as values need ``--json-null``."""
    lines = plan.ambiguities
    if lines:
        from blockgz.errors import RestoreError

        for line in lines[:-1]:
            click.echo(f"error: {line}", err=True)
        raise RestoreError(lines[-1])


def _existing_targets(bootstrap: str | None, producer: dict[str, str]) -> dict[str, int] | None:
    """``--dry-run`` with ``--bootstrap-servers``: the target cluster's topics and partition
    counts (one metadata request: nothing is written); ``None`` without a cluster."""
    if not bootstrap:
        return None
    from blockgz.kafka.access import quiet_admin
    from blockgz.reader.restore.target_topics import existing_topics

    client = {k: v for k, v in producer.items() if k.startswith(("security.", "sasl.", "ssl."))}
    admin = quiet_admin({**client, "bootstrap.servers": bootstrap}).client
    return existing_topics(admin, bootstrap)


def _registry(url: str | None, options: dict[str, str]):
    """The target registry's settings from ``--schema-registry-url`` and the ``-O``
    ``basic.auth.*`` options (``None`` without a URL)."""
    if not url:
        return None
    from blockgz.registry import RegistrySettings

    auth = {k: v for k, v in options.items() if k.startswith(("basic.auth.", "schema.registry."))}
    return RegistrySettings.from_options({**auth, "schema.registry.url": url}, "value.converter")


@contextlib.contextmanager
def spark_job(master: str, app_name: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """A SparkSession on ``master`` (stopped after the block) and the environment variables
    its tasks set: the driver's AWS credentials, on a master whose executors do not inherit
    them. They go inside the pickled tasks, never into Spark's config, which PySpark puts on
    the spark-submit command line (readable in ``ps``) and Spark shows on its environment
    page and in its event log (:mod:`blockgz.sink.executor_env`)."""
    from blockgz.sink.executor_env import SECRET_VARIABLES, is_local
    from blockgz.spark_session import spark_session

    task_env = {}
    if not is_local(master):
        task_env = {name: os.environ[name] for name in SECRET_VARIABLES if os.environ.get(name)}
    spark = spark_session(master, app_name=app_name, forward_secrets=False)
    try:
        yield spark, task_env
    finally:
        spark.stop()


def _on_spark(master, source, archive_options, plan, settings):
    from blockgz.reader.restore.restorer import restore_on_spark

    with spark_job(master, "blockgz-restore") as (spark, task_env):
        return restore_on_spark(spark, source, archive_options, plan, settings, task_env=task_env)


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).replace(tzinfo=None)
    return stamp.isoformat(sep=" ", timespec="milliseconds")


def _print_plan(plan, existing: dict[str, int] | None) -> None:
    """The plan as tables for people (rich), on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    snap = _time(plan.snapshot_at) or "none"
    table = Table(title=f"restore plan: {plan.records:,} records (snapshot of {snap})")
    columns = ("topic", "target", "partition", "offsets", "times", "records", "tombstones")
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:5] else "right")
    for topic in plan.topics:
        for part in topic.partitions:
            count = part.count
            span = f"{count.first}..{count.last}" if count.first is not None else "-"
            times = f"{_time(part.min_time)} .. {_time(part.max_time)}" if part.min_time else ""
            table.add_row(
                topic.source, topic.target, str(part.partition), span, times,
                f"{count.records:,}", _tombstones_cell(part, plan.request.json_null),
            )  # fmt: skip
    console.print(table)
    topics = Table(title="target topics (created when missing)")
    for column in ("target", "now", "partitions", "configs"):
        topics.add_column(column)
    for topic in plan.topics:
        configs = dict(topic.state.configs) if topic.state is not None else {}
        text = ", ".join(f"{k}={v}" for k, v in sorted(configs.items())) or "(broker defaults)"
        now = None if existing is None else existing.get(topic.target)
        state = "" if existing is None else ("to create" if now is None else f"exists ({now})")
        topics.add_row(topic.target, state, str(topic.partition_count), text)
    console.print(topics)
    if plan.groups:
        groups = Table(title="consumer group offsets to set (from an empty target)")
        for column in ("group", "source", "offset", "target", "target offset"):
            groups.add_column(column)
        for g in plan.groups:
            where = f"{g.target}[{g.partition}]"
            at = f"{g.target_offset}" + (" (end: past the restored range)" if g.beyond else "")
            if plan.request.by_key:
                where, at = g.target, f"after {g.target_offset} restored records (by key)"
            groups.add_row(g.group, f"{g.source}[{g.partition}]", str(g.source_offset), where, at)
        console.print(groups)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False)


def _tombstones_cell(part, json_null: str | None) -> str:
    """The plan's tombstones column: keys-only ones, and nulls kept as values as counted."""
    text = f"{part.tombstones:,}"
    if part.kept_nulls:
        what = {"tombstone": "as tombstones", "value": "as values"}.get(json_null or "", "unclear")
        text += f" + {part.kept_nulls:,} kept nulls ({what})"
    return text


#: What the summary calls the records a rerun skips, by how the topic resumes.
_BEFORE = {"positions": "restored before (the recorded position)", "markers": "there already"}


def _summary(result) -> None:
    rate = result.sent / result.seconds if result.seconds else 0.0
    for topic in result.topics:
        skipped = sum(topic.result.skipped.values())
        click.echo(
            f"{topic.source} -> {topic.target}"
            + (" (created)" if topic.created else "")
            + f": {topic.result.total_sent} records sent"
            + (f", {skipped} {_BEFORE[topic.resume]}" if skipped else "")
            + (", with blockgz.replay headers" if topic.resume == "markers" else "")
            + "".join(f"; without {w} (the archive kept none)" for w in topic.result.not_kept),
            err=True,
        )
    for group, offsets in sorted(result.groups.set.items()):
        where = ", ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(offsets.items()))
        click.echo(f"group {group}: {where}", err=True)
    for group, why in sorted(result.groups.skipped.items()):
        click.echo(f"group {group} not set: {why}", err=True)
    click.echo(
        f"restored {result.sent} records of {len(result.topics)} topics in "
        f"{result.seconds:.1f} s ({rate:,.0f} records/s)",
        err=True,
    )


class _Progress:
    """Records sent per label (a source topic-partition, ``orders[3]``; or a partition number),
    and the rate, on a terminal (nothing otherwise)."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.bar: Any = None
        self.tasks: dict[Any, Any] = {}

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

    def show(self, label: Any, sent: int) -> None:
        if self.bar is None:
            return
        if label not in self.tasks:
            name = f"partition {label}" if isinstance(label, int) else str(label)
            self.tasks[label] = self.bar.add_task(name, rate="")
        task = self.tasks[label]
        elapsed = self.bar.tasks[task].elapsed or 0
        self.bar.update(task, completed=sent, rate=f"{sent / elapsed:,.0f}/s" if elapsed else "")

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
