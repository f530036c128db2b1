"""The ``blockgz`` command line: export, quickstart, compress, seek, cat, ls, index, verify.

Errors print as one line (``error: ...``) with exit status 1; ``--debug`` shows the
traceback. Heavy modules are imported inside commands so ``blockgz seek`` starts fast.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from blockgz.errors import BlockGzError, ExportFailed, OffsetNotFoundError

PROGRESS_MIN_BYTES = 64 * 1024 * 1024  # below this a file takes well under a second


class _State:
    debug = False


def _fail_cleanly(func: Callable) -> Callable:
    """Turn project and OS errors into one line on stderr unless --debug."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (BlockGzError, OSError) as exc:
            if _State.debug or isinstance(exc, BrokenPipeError):
                if isinstance(exc, BrokenPipeError):
                    sys.exit(0)  # `blockgz cat x | head` is not an error
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper


@contextmanager
def _progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr for big inputs on a terminal; a no-op otherwise."""
    from rich.console import Console

    console = Console(stderr=True)
    if total < PROGRESS_MIN_BYTES or not console.is_terminal:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def _size(ctx, param, value):
    from blockgz.options import parse_size

    try:
        return parse_size(value, name=param.name.replace("_", "-"))
    except BlockGzError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="blockgz")
def main(debug: bool) -> None:
    """Archive Kafka topics as seekable block-GZIP and read them back by offset.

    \b
    Examples:
      blockgz compress events.json            # events.json.gz + events.json.index.json
      blockgz seek --offset 1200 --count 5 events.json.gz
      blockgz verify events.json.gz
      blockgz export s3-sink.properties --once   # Kafka -> S3, Confluent's layout
      blockgz quickstart                         # the whole thing on local servers
    """
    _State.debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command()
@click.argument("input", type=click.Path(allow_dash=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Output file [INPUT.gz].")
@click.option(
    "--block-size",
    default="1MiB",
    callback=_size,
    show_default=True,
    help="Uncompressed bytes per block (KiB, MiB, ...).",
)
@click.option(
    "--max-records", type=click.IntRange(min=1), help="Also cut a block after this many records."
)
@click.option(
    "--level",
    type=click.IntRange(0, 9),
    help="gzip level: 0-3 use ISA-L, 4-9 use zlib. Overrides --preset.",
)
@click.option(
    "--preset",
    type=click.Choice(["fast", "small"]),
    default="fast",
    show_default=True,
    help="fast = ISA-L level 1; small = libdeflate level 5 (about 15% smaller, 3x slower).",
)
@click.option("--threads", type=click.IntRange(min=1), help="Compression threads [all cores].")
@click.option(
    "--first-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Kafka offset of the first record.",
)
@_fail_cleanly
def compress(input, output, block_size, max_records, level, preset, threads, first_offset) -> None:
    """Compress newline-delimited records into block-GZIP plus an .index.json sidecar.

    INPUT is a file, or - for standard input (then --output is required).

    \b
    Examples:
      blockgz compress events.json
      blockgz compress --preset small --block-size 4MiB events.json -o archive.json.gz
      kafkacat -C -t orders -e | blockgz compress - -o orders.json.gz --first-offset 0
    """
    from blockgz.format.codec import Compression
    from blockgz.objects.compress import compress_file

    if input == "-" and not output:
        raise click.UsageError("reading standard input needs --output")
    output = Path(output or f"{input}.gz")
    compression = Compression.from_level(level) if level is not None else Compression.preset(preset)
    total = 0 if input == "-" else Path(input).stat().st_size
    with _progress(f"compressing {input}", total) as advance:
        index = compress_file(
            input,
            output,
            block_size=block_size,
            max_records=max_records,
            compression=compression,
            threads=threads,
            first_offset=first_offset,
            on_progress=advance,
        )
    raw, packed = index.byte_length_uncompressed, index.byte_length
    ratio = raw / packed if packed else 0.0
    click.echo(
        f"{output}: {index.record_count} records in {len(index.chunks)} blocks, "
        f"{raw} -> {packed} bytes (ratio {ratio:.2f})",
        err=True,
    )


def _echo_records(records, output: str) -> None:
    import json

    out = sys.stdout.buffer
    for record in records:
        if output == "raw":
            out.write(record.value + b"\n")
        else:
            doc = {"offset": record.offset, "value": record.value.decode("utf-8", "replace")}
            for field in ("key", "timestamp", "headers"):
                if getattr(record, field, None) is not None:
                    doc[field] = getattr(record, field)
            out.write(json.dumps(doc).encode() + b"\n")
    out.flush()


def _seek_object(target: str, offset: int, count: int | None, scan: bool, options: dict):
    """Records of one object from ``offset`` on: through its index, or streamed with --scan."""
    import itertools

    from blockgz.errors import MissingIndexError
    from blockgz.objects.indexed import open_indexed

    try:
        with open_indexed(target, options) as obj:
            yield from obj.seek(offset, count)
            return
    except MissingIndexError:
        if not scan:
            raise
    from blockgz.layout import Layout, data_key_for
    from blockgz.options import Options
    from blockgz.store import split_object_url
    from reader.archive import stream_records

    store, key = split_object_url(target, options)
    key = data_key_for(key)
    ref = Layout.from_options(Options(options)).parse_data_key(key)
    start = ref.start_offset if ref is not None else 0  # a name without offsets counts from 0
    records = stream_records(store, key, start, compressed=key.endswith(".gz"))
    found = False
    for record in itertools.islice((r for r in records if r.offset >= offset), count):
        found = True
        yield record
    if not found:
        raise OffsetNotFoundError(
            f"{store.url(key)}: offset {offset} is past the end (streamed from offset {start})"
        )


def _store_options(func: Callable) -> Callable:
    """Options that reach the object store: an endpoint, and any Confluent-named setting."""
    func = click.option(
        "-O",
        "--option",
        "options",
        multiple=True,
        metavar="KEY=VALUE",
        help="An S3 setting by its Confluent name, e.g. -O s3.region=eu-west-1 (repeatable).",
    )(func)
    func = click.option(
        "--endpoint-url",
        envvar="BLOCKGZ_ENDPOINT_URL",
        help="S3 endpoint (store.url) for MinIO, Ceph, R2...; AWS_ENDPOINT_URL also works.",
    )(func)
    return func


def _target_options(func: Callable) -> Callable:
    func = click.option("--partition", type=click.IntRange(min=0), help="Kafka partition.")(func)
    func = click.option("--topic", help="Topic, when TARGET is an archive prefix.")(func)
    return _store_options(func)


def _collect_options(endpoint_url: str | None, options: tuple[str, ...]) -> dict[str, str]:
    collected = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        collected[key.strip()] = value.strip()
    if endpoint_url:
        collected["store.url"] = endpoint_url
    return collected


def _archive(target: str, topic: str | None, partition: int | None, options: dict):
    if topic is None or partition is None:
        raise click.UsageError("an archive prefix needs both --topic and --partition")
    from reader import open_archive

    return open_archive(target, options)


@main.command()
@click.argument("target")
@click.option("--offset", type=click.IntRange(min=0), required=True, help="First Kafka offset.")
@click.option("--count", type=click.IntRange(min=1), help="Print at most this many records [all].")
@click.option(
    "--output",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
    help="raw prints each value; json adds the offset (and key/timestamp where kept).",
)
@click.option(
    "--scan", is_flag=True, help="Stream .gz objects without an index instead of failing."
)
@_target_options
@_fail_cleanly
def seek(target, offset, count, output, scan, topic, partition, endpoint_url, options) -> None:
    """Print records from OFFSET on, fetching only the block that holds it.

    TARGET is a block-GZIP object (local path or s3://bucket/key, or its .index.json),
    or an archive prefix (a directory or s3://bucket/prefix) with --topic and --partition.
    If OFFSET was compacted away, printing starts at the next offset that exists.

    \b
    Examples:
      blockgz seek --offset 1200 events.json.gz
      blockgz seek --offset 1200 --count 1 --output json s3://bucket/t+0+0000000000.json.gz
      blockgz seek --offset 1200 --count 10 --topic orders --partition 3 s3://bucket/exports
      blockgz seek --endpoint-url http://127.0.0.1:9000 --offset 5 --topic t --partition 0 s3://b
    """
    options = _collect_options(endpoint_url, options)
    if topic is None and partition is None:
        _echo_records(_seek_object(target, offset, count, scan, options), output)
        return
    if scan:
        options["scan.unindexed"] = "true"
    with _archive(target, topic, partition, options) as archive:
        _echo_records(archive.seek(topic, partition, offset, count), output)


@main.command()
@click.argument("target")
@_target_options
@_fail_cleanly
def cat(target, topic, partition, endpoint_url, options) -> None:
    """Print every record of an object (any gzip or plain file), or of a topic-partition.

    \b
    Examples:
      blockgz cat events.json.gz | head
      blockgz cat s3://bucket/topics/t/partition=0/t+0+0000000000.json.gz
      blockgz cat --topic t --partition 0 s3://bucket/exports > t-0.json
    """
    import shutil

    options = _collect_options(endpoint_url, options)
    if topic is None and partition is None:
        from blockgz.layout import data_key_for
        from blockgz.objects.stream import stream_object
        from blockgz.store import split_object_url

        store, key = split_object_url(target, options)
        key = data_key_for(key)
        with stream_object(store, key, compressed=key.endswith(".gz")) as stream:
            shutil.copyfileobj(stream, sys.stdout.buffer, 1024 * 1024)
        return
    with _archive(target, topic, partition, options) as archive:
        refs = archive.objects(topic, partition)
        if not refs:
            raise archive.nothing_found(topic, partition)
        _echo_records(archive.seek(topic, partition, refs[0].start_offset), "raw")


@main.command(name="ls")
@click.argument("target")
@click.option("--topic", help="Only this topic.")
@_store_options
@_fail_cleanly
def ls_command(target, topic, endpoint_url, options) -> None:
    """List archived objects: topic, partition, offset range, records, bytes.

    \b
    Examples:
      blockgz ls s3://bucket/exports
      blockgz ls --topic orders s3://bucket/exports
    """
    from rich.console import Console
    from rich.table import Table

    from reader import open_archive

    with open_archive(target, _collect_options(endpoint_url, options)) as archive:
        rows = archive.ls(topic)
        if not rows:
            raise archive.nothing_found(topic)
    table = Table("topic", "partition", "first offset", "last offset", "records", "bytes", "key")
    for row in rows:
        table.add_row(
            row.topic,
            str(row.partition),
            str(row.first_offset),
            "?" if row.last_offset is None else str(row.last_offset),
            "?" if row.records is None else str(row.records),
            str(row.size),
            row.key + ("" if row.indexed else "  (no index)"),
        )
    Console(width=200).print(table)
    click.echo(f"{len(rows)} objects", err=True)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--first-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Kafka offset of the first record.",
)
@_fail_cleanly
def index(file, first_offset) -> None:
    """Rebuild the .index.json sidecar of any multi-member gzip file.

    Works on files written by blockgz, pigz, bgzip or gzip; members that split a
    record are grouped so every indexed block holds whole records.

    \b
    Examples:
      blockgz index events.json.gz
      bgzip -c events.json > events.json.gz && blockgz index events.json.gz
    """
    from blockgz.format.rebuild import scan_members
    from blockgz.objects.upload import publish_index
    from blockgz.store import split_object_url

    with (
        open(file, "rb") as stream,
        _progress(f"indexing {file}", Path(file).stat().st_size) as adv,
    ):
        built = scan_members(stream, first_offset=first_offset, on_progress=adv)
    store, key = split_object_url(file)
    path = store.url(publish_index(store, key, built))
    click.echo(f"{path}: {built.record_count} records in {len(built.chunks)} blocks", err=True)


@main.command()
@click.argument("target")
@click.option("--topic", help="Verify every indexed object of this topic under a prefix.")
@_store_options
@_fail_cleanly
def verify(target, topic, endpoint_url, options) -> None:
    """Check every block against the index; exit 1 naming each bad block.

    \b
    Examples:
      blockgz verify events.json.gz && echo intact
      blockgz verify s3://bucket/topics/t/partition=0/t+0+0000000000.json.gz
      blockgz verify --topic orders s3://bucket/exports
    """
    from blockgz.layout import data_key_for
    from blockgz.objects.indexed import IndexedReader
    from blockgz.store import split_object_url
    from reader import open_archive

    options = _collect_options(endpoint_url, options)
    if topic is not None:
        archive = open_archive(target, options)
        store, keys = archive.store, [r.key for r in archive.ls(topic) if r.indexed]
        if not keys:
            raise archive.nothing_found(topic)
    else:
        store, key = split_object_url(target, options)
        keys = [data_key_for(key)]
    bad = 0
    for key in keys:
        with IndexedReader.open_object(store, key) as obj:
            bad += not _verify_object(obj)
    if bad:
        sys.exit(1)


def _verify_object(obj) -> bool:
    with _progress(f"verifying {obj.source}", obj.index.byte_length) as advance:
        report = obj.verify(on_block=advance)
    for problem in report.problems:
        click.echo(f"bad: {problem}", err=True)
    if report.ok:
        click.echo(f"{obj.source}: ok, {report.blocks} blocks, {report.records} records", err=True)
    else:
        click.echo(
            f"{obj.source}: {len(report.problems)} problem(s) in {report.blocks} blocks", err=True
        )
    return report.ok


@main.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False),
    help="Spark checkpoint directory; keep it to resume exactly once [./checkpoints/NAME].",
)
@click.option("--once", is_flag=True, help="Export what is in Kafka now, then exit.")
@click.option("--master", help="Spark master [local[<cores>,3]].")
@click.option(
    "-O",
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config setting, e.g. -O flush.size=1000 (repeatable).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Show Spark's and the JVM's output here instead of in CHECKPOINT/blockgz-export.log.",
)
@_fail_cleanly
def export(config, checkpoint, once, master, options, verbose) -> None:
    """Export Kafka topics to S3 in the layout of Confluent's S3 sink, exactly once.

    CONFIG is a .properties file or a Kafka Connect JSON config ({"name":..,"config":{..}})
    with Confluent's S3-sink settings, plus topics (or topics.regex) and
    kafka.bootstrap.servers. Spark's Kafka source options such as startingOffsets
    (earliest, latest, JSON, or s3: resume from what the manifests committed) and
    maxOffsetsPerTrigger may sit in the same file; spark.* keys configure Spark;
    blockgz.trigger.interval (default "5 seconds") paces a running job, and
    blockgz.tasks.read.kafka=true lets the sink's tasks read Kafka themselves (faster;
    Spark's metrics then count offset ranges, not records).

    Before Spark starts, it checks that the bucket takes a write, the brokers answer and
    the topics exist (blockgz.preflight=false skips that). Spark's own output goes to
    blockgz-export.log in the checkpoint directory; a failure prints one line.
    Ctrl-C or SIGTERM stops cleanly: the running micro-batch is replayed on restart.

    \b
    Examples:
      blockgz export s3-sink.properties --once
      blockgz export s3-sink.json --checkpoint /var/lib/blockgz/s3-sink
      blockgz export s3-sink.properties -O startingOffsets=s3 --checkpoint /tmp/new
    """
    from sink.export.config import ExportConfig
    from sink.export.job import run_export
    from sink.export.progress import ProgressView

    job = ExportConfig.from_file(config, _collect_options(None, options))
    checkpoint = checkpoint or job.checkpoint_dir or str(Path("checkpoints") / job.name)
    logging.getLogger("blockgz").setLevel(logging.DEBUG if _State.debug else logging.INFO)
    log_file = None if (verbose or _State.debug) else Path(checkpoint) / "blockgz-export.log"
    click.echo(
        f"exporting {', '.join(job.topics) or 'matching topics'} to "
        f"{job.sink.target_url} (checkpoint {checkpoint}"
        + (f", log {log_file})" if log_file else ")"),
        err=True,
    )
    with ProgressView(title=f"blockgz export {job.name}") as view:
        try:
            result = run_export(
                job,
                checkpoint=checkpoint,
                once=once,
                master=master,
                on_progress=view.update,
                log_file=log_file,
            )
        except ExportFailed as exc:
            if log_file is None:
                raise
            raise ExportFailed(f"{exc} (Spark's account: {log_file})") from None
    how = "stopped" if result.stopped_by_signal else "done"
    click.echo(
        f"{how}: {result.records:,} records, {result.batches} batches, {result.files:,} objects",
        err=True,
    )


@main.command()
@_fail_cleanly
def quickstart() -> None:
    """Run Confluent's S3-sink quickstart on local servers, explaining each step.

    Starts a Tansu Kafka broker and a SeaweedFS S3 server on free loopback ports, produces nine
    records, exports them with flush.size=3, lists the three objects, seeks an offset,
    and shuts everything down. Needs the [spark,local] extras and Java 17+.

    \b
    Example:
      blockgz quickstart
    """
    from sink.export.quickstart import run_quickstart

    run_quickstart()


if __name__ == "__main__":  # pragma: no cover
    main()
