"""`make demo`: make sample Kafka-style JSON events, compress them to block-GZIP, seek back.

It grows into the full Kafka -> S3 export quickstart once the Spark job lands.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from blockgz import IndexedReader, compress_file
from blockgz.sample import events_bytes

console = Console()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="blockgz-demo-"))
    source = work / "events.json"
    console.rule("[bold]1. Sample data")
    source.write_bytes(events_bytes(20_000))
    console.print(f"wrote {source} with 20,000 JSON events ({source.stat().st_size:,} bytes)")

    console.rule("[bold]2. Compress to block-GZIP (offsets 5,000,000 on, 256 KiB blocks)")
    started = time.perf_counter()
    index = compress_file(
        source, work / "events.json.gz", block_size=256 * 1024, first_offset=5_000_000
    )
    ratio = index.byte_length_uncompressed / index.byte_length
    took = time.perf_counter() - started
    console.print(f"{len(index.chunks)} blocks, ratio {ratio:.2f}, {took:.3f}s")
    table = Table("block", "first offset", "records", "byte offset", "bytes", "uncompressed")
    for n, c in enumerate(index.chunks[:5]):
        table.add_row(
            *map(
                str,
                (
                    n,
                    c.first_record_offset,
                    c.num_records,
                    c.byte_offset,
                    c.byte_length,
                    c.byte_length_uncompressed,
                ),
            )
        )
    console.print(table)
    console.print(f"(index sidecar, a hidden file: {work / '.events.json.index.json'})")

    console.rule("[bold]3. It is a plain gzip file")
    whole = gzip.decompress((work / "events.json.gz").read_bytes())
    console.print(
        f"python's gzip reads it whole: identical to the input = {whole == source.read_bytes()}"
    )

    console.rule("[bold]4. Seek to offset 5,012,345: one block read")
    with IndexedReader.open_file(work / "events.json.gz") as archive:
        started = time.perf_counter()
        records = list(archive.seek(5_012_345, count=2))
        took = (time.perf_counter() - started) * 1000
    for record in records:
        console.print(f"[cyan]{record.offset}[/] {record.value[:110].decode()}…")
    console.print(f"found in {took:.2f} ms")

    console.rule("[bold]5. The same from the command line")
    cmd = [
        sys.executable,
        "-m",
        "blockgz.cli",
        "seek",
        "--offset",
        "5012345",
        "--count",
        "1",
        "--output",
        "json",
        str(work / "events.json.gz"),
    ]
    console.print("$ blockgz seek --offset 5012345 --count 1 --output json events.json.gz")
    print(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout[:200] + "…")
    subprocess.run(
        [sys.executable, "-m", "blockgz.cli", "verify", str(work / "events.json.gz")], check=True
    )


if __name__ == "__main__":
    main()
