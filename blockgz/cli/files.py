"""``blockgz compress`` and ``blockgz index``: local files to block-GZIP, and sidecars."""

from __future__ import annotations

from pathlib import Path

import click

from blockgz.cli.app import (
    fail_cleanly,
    main,
    progress_bar,
    size_option,
)


@main.command()
@click.argument("input", type=click.Path(allow_dash=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Output file [INPUT.gz].")
@click.option(
    "--block-size",
    default="1MiB",
    callback=size_option,
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
@fail_cleanly
def compress(input, output, block_size, max_records, level, preset, threads, first_offset) -> None:
    """Compress newline-delimited records into block-GZIP plus an .index.json sidecar
    (a hidden file beside it: events.json.gz -> .events.json.index.json).

    INPUT is a file, or - for standard input (then --output is required).

    \b
    Examples:
      blockgz compress events.json
      blockgz compress --preset small --block-size 4MiB events.json -o archive.json.gz
      kafkacat -C -t orders -e | blockgz compress - -o orders.json.gz --first-offset 0
    """
    from blockgz.runtime.process_tuning import tune_command_process

    tune_command_process()  # before numpy loads: see blockgz.runtime.process_tuning
    from blockgz.blocks.codecs.gzip_members import Compression
    from blockgz.objects.compress import compress_file

    if input == "-" and not output:
        raise click.UsageError("reading standard input needs --output")
    output = Path(output or f"{input}.gz")
    compression = Compression.from_level(level) if level is not None else Compression.preset(preset)
    total = 0 if input == "-" else Path(input).stat().st_size
    with progress_bar(f"compressing {input}", total) as advance:
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


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--first-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Kafka offset of the first record.",
)
@fail_cleanly
def index(file, first_offset) -> None:
    """Rebuild the .index.json sidecar of any multi-member gzip or multi-frame zstd file
    (written under the hidden name, .<file minus .gz/.zst>.index.json, beside it).

    Works on files written by blockgz, pigz, bgzip or gzip, and on block-zstd (from its seek
    table) or any zstd file (by walking its frames); members that split a record are grouped
    so every indexed block holds whole records.

    \b
    Examples:
      blockgz index events.json.gz
      bgzip -c events.json > events.json.gz && blockgz index events.json.gz
      blockgz index t+0+0000000000.json.zst
    """
    from blockgz.blocks.rebuild import scan_members
    from blockgz.store import split_object_url
    from blockgz.written.upload import publish_index

    with (
        open(file, "rb") as stream,
        progress_bar(f"indexing {file}", Path(file).stat().st_size) as adv,
    ):
        built = scan_members(stream, first_offset=first_offset, on_progress=adv)
    store, key = split_object_url(file)
    built, note = _with_kept_stamps(store, key, built)
    path = store.url(publish_index(store, key, built))
    click.echo(
        f"{path}: {built.record_count} records in {len(built.chunks)} blocks{note}", err=True
    )


def _with_kept_stamps(store, key: str, built):
    """``built`` with the record timestamps the sidecar it replaces kept (issue 44), when its
    blocks are the same; else ``built`` and a note that they were not carried over."""
    from blockgz.blocks.index import BlockIndex
    from blockgz.errors import BlockGzError
    from blockgz.written.sidecars import sidecar_key

    try:
        old = BlockIndex.from_json(store.get(sidecar_key(key)))
    except (BlockGzError, OSError):  # none, or unreadable: nothing to carry over
        return built, ""
    if not old.keeps_stamps:
        return built, ""
    kept = built.stamps_from(old)
    if kept is None:
        return built, " (the old sidecar's record timestamps were not kept: its blocks differ)"
    return kept, " (record timestamps kept from the old sidecar)"
