"""``blockgz seek``, ``cat``, ``ls`` and ``verify``: reading objects and archives."""

from __future__ import annotations

import sys

import click

from blockgz.cli.app import (
    collect_options,
    fail_cleanly,
    main,
    progress_bar,
    store_options,
    target_options,
)
from blockgz.formats.avro.datum_json import json_default

#: How ``--output json`` writes values (the ``--help`` of seek and cat says it too).
JSON_OUTPUT_HELP = (
    "json prints one object per record with its offset (and key/timestamp/headers where "
    "kept). Its value is the JSON value itself where the object's format is JSON (.json, "
    ".json.gz: a JSON-format archive; a value that does not parse stays a string), the decoded "
    "record for Avro, else the stored text as a string, or value_base64 when it is not UTF-8. "
    "The record timestamps are read for json output only (from the sidecar, or from the "
    "timestamps file older archives keep beside the values). The output "
    "is strict JSON: a number is printed as archived (1e999 stays 1e999), a decoded NaN or "
    'infinite double is the string "NaN", "Infinity" or "-Infinity".'
)


def _echo_records(records, output: str, *, json_values: bool = False) -> None:
    """Lines of records: block-GZIP values as stored, decoded (Avro) values as JSON. With
    ``output="json"`` and ``json_values`` (the objects are JSON-format), a value that is
    JSON text goes in as the JSON value it holds."""
    from blockgz.cli.json_text import dumps

    out = sys.stdout.buffer
    for record in records:
        value = record.value
        stored = isinstance(value, (bytes, bytearray))
        if output == "raw":
            line = value if stored else dumps(value, default=json_default).encode()
            out.write(line + b"\n")
        else:
            doc = {"offset": record.offset}
            if not stored:
                doc["value"] = value
            else:
                try:
                    doc["value"] = _json_value(value) if json_values else value.decode("utf-8")
                except UnicodeDecodeError:  # binary values (Protobuf, ...) survive as base64
                    doc["value_base64"] = json_default(value)
            for field in ("key", "timestamp", "headers"):
                if getattr(record, field, None) is not None:
                    doc[field] = getattr(record, field)
            out.write(dumps(doc, default=json_default).encode() + b"\n")
    out.flush()


def _json_value(value: bytes) -> object:
    """The JSON value a JSON-format object stored (a number a double cannot hold kept as
    its text: :func:`~blockgz.cli.json_text.parse_stored`); its text when it is not JSON."""
    from blockgz.cli.json_text import parse_stored

    text = value.decode("utf-8")
    try:
        return parse_stored(text)
    except ValueError:
        return text


def _json_named(key: str) -> bool:
    """Whether an object's name says it holds JSON values (``.json``, ``.json.gz``, or their
    ``.index.json``).

    >>> _json_named("t+0+0000000000.json.index.json"), _json_named("t+0+0000000000.bin.gz")
    (True, False)
    """
    fmt = _named_format(key)
    return fmt is not None and fmt.json_text


def _named_format(key: str):
    """The format an object's name (or its ``.index.json``'s) names, ``None`` for none."""
    from blockgz.blocks.codecs.families import strip_suffix
    from blockgz.formats.by_name import format_of_extension
    from blockgz.written.sidecars import data_key_for

    name = strip_suffix(data_key_for(key).rpartition("/")[2])
    return format_of_extension(name.rpartition(".")[2]) if "." in name else None


def _named_decoder(key: str):
    """How the format an object's name names decodes the object read whole (its
    :meth:`~blockgz.formats.base.Format.stream_decoder`); ``None``: framed records."""
    fmt = _named_format(key)
    return None if fmt is None else fmt.stream_decoder()


def _json_archive(refs) -> bool:
    """Whether every object read is of a format of JSON text (a JSON archive)."""
    from blockgz.formats.by_name import FORMATS

    return bool(refs) and all(
        ref.role == "value" and ref.format is not None and FORMATS.get(ref.format).json_text
        for ref in refs
    )


def _archive(target: str, topic: str | None, partition: int | None, options: dict):
    if topic is None or partition is None:
        raise click.UsageError("an archive prefix needs both --topic and --partition")
    from blockgz.reader import open_archive

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
    help="raw prints each value as stored (Avro records as JSON); " + JSON_OUTPUT_HELP,
)
@click.option(
    "--scan", is_flag=True, help="Stream .gz objects without an index instead of failing."
)
@click.option(
    "--stats",
    is_flag=True,
    help="Afterwards, print the requests made to the store (LIST, GET, ranged GET, bytes).",
)
@target_options
@fail_cleanly
def seek(
    target, offset, count, output, scan, stats, topic, partition, endpoint_url, options
) -> None:
    """Print records from OFFSET on, fetching only the block that holds it.

    TARGET is a block-GZIP, Avro or Parquet object (local path or s3://bucket/key, or its
    .index.json, hidden or old name), or an archive prefix (a directory or
    s3://bucket/prefix) with --topic and --partition. If OFFSET was compacted away, printing
    starts at the next offset that exists.
    -O layout=deviantart reads a prefix written by DeviantArt's kafka-connect-s3
    (<prefix>/<yyyy-MM-dd>/<topic>-<partition>-<offset>.gz); ls, cat and verify take it too.
    A cold seek of an archive prefix reads the exports' catalog heads (_blockgz/heads.json,
    one GET), the object's sidecar and one block: 3 requests. -O name=<job> reads that export
    job's catalog alone.

    \b
    Examples:
      blockgz seek --offset 1200 events.json.gz
      blockgz seek --offset 1200 --count 1 --output json s3://bucket/t+0+0000000000.json.gz
      blockgz seek --offset 1200 --count 10 --topic orders --partition 3 s3://bucket/exports
      blockgz seek --stats --offset 7 --count 1 --topic orders --partition 3 s3://bucket/exports
      blockgz seek --endpoint-url http://127.0.0.1:9000 --offset 5 --topic t --partition 0 s3://b
      blockgz seek -O layout=deviantart --offset 5 --topic t --partition 0 s3://bucket/prefix
      blockgz seek -O name=s3-sink --offset 7 --count 1 --topic orders --partition 3 s3://b/ex
    """
    options = collect_options(endpoint_url, options)
    if topic is None and partition is None:
        from blockgz.objects.seek import seek_object

        decode = _named_decoder(target)
        records = seek_object(target, offset, count, scan=scan, options=options, decode=decode)
        _echo_records(records, output, json_values=_json_named(target))
        return
    if scan:
        options["scan.unindexed"] = "true"
    with _archive(target, topic, partition, options) as archive:
        # --output json prints timestamps: only then are they read (the sidecar's, or the
        # hidden timestamps file of an older archive)
        stamps = output == "json"
        records = archive.seek(topic, partition, offset, count, timestamps=stamps)  # may raise
        refs, _ = archive.seek_objects(topic, partition, offset)
        _echo_records(records, output, json_values=_json_archive(refs))
        if stats:
            click.echo(f"read: {archive.store.requests.summary()}", err=True)


@main.command()
@click.argument("target")
@click.option(
    "--output",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
    help="raw prints the values as stored; " + JSON_OUTPUT_HELP,
)
@target_options
@fail_cleanly
def cat(target, output, topic, partition, endpoint_url, options) -> None:
    """Print every record of an object (any gzip or plain file, or Avro or Parquet as JSON
    lines), or of a topic-partition.

    \b
    Examples:
      blockgz cat events.json.gz | head
      blockgz cat s3://bucket/topics/t/partition=0/t+0+0000000000.avro
      blockgz cat s3://bucket/topics/t/partition=0/t+0+0000000000.snappy.parquet
      blockgz cat s3://bucket/topics/t/partition=0/t+0+0000000000.json.gz
      blockgz cat --topic t --partition 0 s3://bucket/exports > t-0.json
      blockgz cat -O layout=deviantart --topic t --partition 0 s3://bucket/prefix
      blockgz cat --output json -O format.bytearray.framing=length-prefixed t+0+0000000000.bin
    """
    import shutil

    options = collect_options(endpoint_url, options)
    if topic is None and partition is None:
        from blockgz.objects.indexed import resolve_data_key
        from blockgz.objects.stream import stream_object
        from blockgz.store import split_object_url

        store, key = split_object_url(target, options)
        key = resolve_data_key(store, key)
        fmt = _named_format(key)
        if fmt is not None and fmt.indexes_itself:  # Parquet: its rows with their offsets
            from blockgz.objects.indexed import IndexedReader

            with IndexedReader.open_object(store, key) as obj:
                _echo_records(obj.records(), output)
            return
        decode = _named_decoder(key)
        if decode is not None or output == "json":
            from blockgz.archive.layout import Layout, parse_archive_key
            from blockgz.blocks.framing import framing_from_options
            from blockgz.objects.stream import stream_records

            ref = parse_archive_key(Layout(), key, any_extension=True)
            start = ref.start_offset if ref is not None else 0
            framing = framing_from_options(options)
            records = stream_records(store, key, start, framing=framing, decode=decode)
            _echo_records(records, output, json_values=_json_named(key))
            return
        with stream_object(store, key) as stream:
            shutil.copyfileobj(stream, sys.stdout.buffer, 1024 * 1024)
        return
    with _archive(target, topic, partition, options) as archive:
        refs = archive.objects(topic, partition)
        if not refs:
            raise archive.nothing_found(topic, partition)
        records = archive.seek(topic, partition, refs[0].start_offset, timestamps=output == "json")
        _echo_records(records, output, json_values=_json_archive(refs))


@main.command(name="ls")
@click.argument("target")
@click.option("--topic", help="Only this topic.")
@store_options
@fail_cleanly
def ls_command(target, topic, endpoint_url, options) -> None:
    """List archived objects: topic, partition, offset range, records, bytes.

    \b
    Examples:
      blockgz ls s3://bucket/exports
      blockgz ls --topic orders s3://bucket/exports
      blockgz ls -O layout=deviantart s3://bucket/prefix   # DeviantArt's kafka-connect-s3
    """
    from rich.console import Console
    from rich.table import Table

    from blockgz.reader import open_archive
    from blockgz.reader.audit.verify import overlap_lines
    from blockgz.reader.reading.strays import stray_line

    with open_archive(target, collect_options(endpoint_url, options)) as archive:
        rows = archive.ls(topic)
        if not rows:
            raise archive.nothing_found(topic)
        strays = [stray_line(archive.store.url(key)) for key in rows.strays]
        overlaps = [
            line for t in sorted({r.topic for r in rows}) for line in overlap_lines(archive, t)
        ]
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
    for line in strays + overlaps:
        click.echo(line)
    counts = [f"{len(rows)} objects"]
    counts += [f"{len(strays)} strays"] if strays else []
    counts += [f"{len(overlaps)} overlaps (blockgz verify --topic lists them)"] if overlaps else []
    click.echo(", ".join(counts), err=True)


@main.command()
@click.argument("target")
@click.option("--topic", help="Verify every object of this topic under a prefix.")
@click.option(
    "--scan",
    is_flag=True,
    help="Check objects without an index sidecar by reading them whole instead of failing.",
)
@store_options
@fail_cleanly
def verify(target, topic, scan, endpoint_url, options) -> None:
    """Check every block against the index; exit 1 naming each problem.

    With --scan, an object without an index is checked by reading it whole instead.

    With --topic, where exports' manifests commit the topic, this is `blockgz audit --deep
    --no-kafka --topic` of each of them: every committed file (value objects, keys/headers/
    timestamps companions, sidecars) is checked against what its manifest committed (size,
    CRC-32, what its sidecar names) and read once; a deleted object or manifest, a corrupt or
    swapped object, a tampered sidecar and another topic's object in the topic's folder are
    damage (exit 2); a stray or an overlap is a warning (exit 1); each problem is one line,
    and so is each gap between objects (a note: no broker is asked; `blockgz audit` asks
    one to tell compaction and transaction markers from lost records). Without manifests,
    every object of the topic gets a line: an object without its index sidecar is a problem
    unless --scan reads it whole, and so is a stray and every pair of objects that hold the
    same offsets; a bad block is damage (exit 2).

    \b
    Examples:
      blockgz verify events.json.gz && echo intact
      blockgz verify s3://bucket/topics/t/partition=0/t+0+0000000000.json.gz
      blockgz verify --topic orders s3://bucket/exports
      blockgz verify --topic orders --scan s3://bucket/exports
      blockgz verify -O layout=deviantart --topic orders s3://bucket/prefix
    """
    from blockgz.errors import MissingIndexError
    from blockgz.objects.indexed import IndexedReader, resolve_data_key
    from blockgz.store import split_object_url

    options = collect_options(endpoint_url, options)
    if topic is not None:
        _verify_topic(target, topic, scan, options)
        return
    store, key = split_object_url(target, options)
    key = resolve_data_key(store, key)
    try:
        obj = IndexedReader.open_object(store, key)
    except MissingIndexError:
        if not scan:
            raise
        _read_whole(store, key, options)
        return
    with obj:
        if not _verify_object(obj):
            sys.exit(1)


def _read_whole(store, key: str, options: dict) -> None:
    """``verify --scan`` of one object without an index: read it whole or exit 1."""
    from blockgz.archive.layout import Layout, parse_archive_key
    from blockgz.blocks.framing import framing_from_options
    from blockgz.reader.audit.verify import read_whole

    ref = parse_archive_key(Layout(), key, any_extension=True)
    start = ref.start_offset if ref is not None else 0
    framing = framing_from_options(options)
    line, problem = read_whole(store, key, start, framing, decode=_named_decoder(key))
    click.echo(problem or line, err=True)
    if problem is not None:
        sys.exit(1)


def _verify_topic(target: str, topic: str, scan: bool, options: dict) -> None:
    """Every problem one line; exit 2 for damage, 1 for warnings, after printing them all."""
    from blockgz.reader import open_archive
    from blockgz.reader.audit.verify import verify_topic

    def with_progress(obj):
        with progress_bar(f"verifying {obj.source}", obj.index.byte_length) as advance:
            return obj.verify(on_block=advance)

    with open_archive(target, options) as archive:
        check = verify_topic(archive, topic, scan=scan, check_indexed=with_progress)
    for line in check.lines:
        click.echo(line, err=True)
    for problem in check.problems:
        click.echo(problem, err=True)
    click.echo(
        f"{check.objects} objects: {len(check.lines)} ok, {len(check.problems)} problem(s)",
        err=True,
    )
    if check.level:
        sys.exit(check.level)


def _verify_object(obj) -> bool:
    with progress_bar(f"verifying {obj.source}", obj.index.byte_length) as advance:
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
