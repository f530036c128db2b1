"""What the timestamps files (``store.kafka.timestamps``, on by default) cost: bytes and write
CPU of one write task, with and without them, on 200,000 JSON records of about 70 bytes
(timestamps 0-40 ms apart), best of 3, into a local directory:

    .venv/bin/python -m benchmarks.timestamps_cost
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

N = 200_000
CASES = {
    "JSON, blockgzip": {"s3.compression.type": "blockgzip"},
    "JSON, gzip": {"s3.compression.type": "gzip"},
    "Avro deflate, StringConverter": {
        "format.class": "avro",
        "value.converter": "string",
        "avro.codec": "deflate",
    },
}


def records() -> list[KafkaRecord]:
    rng, stamp, out = random.Random(1), 1_764_000_000_000, []
    for n in range(N):
        stamp += rng.randrange(0, 40)
        value = b'{"user":"u%d","n":%d,"amount":%d.%02d,"kind":"%s"}' % (
            rng.randrange(10_000),
            n,
            rng.randrange(1000),
            rng.randrange(100),
            rng.choice([b"buy", b"sell"]),
        )
        out.append(KafkaRecord("t", 0, n, stamp, None, value, timestamp_type=0))
    return out


def measure(batches: list, options: dict[str, str]) -> tuple[float, dict[str, int]]:
    """Best write CPU of 3 runs, and the bytes of value and timestamps files."""
    best, root = float("inf"), ""
    for _ in range(3):
        root = tempfile.mkdtemp()
        config = SinkSettings.from_options({"path": root, "flush.size": "100000", **options})
        started = time.process_time()
        write_task(config, iter(batches))
        best = min(best, time.process_time() - started)
    sizes: dict[str, int] = {}
    for path in Path(root).rglob("*t+0+*"):  # the timestamps file is hidden: .t+0+…
        if path.name.endswith(".index.json"):
            continue
        kind = "timestamps" if ".timestamps." in path.name else "values"
        sizes[kind] = sizes.get(kind, 0) + path.stat().st_size
    return best, sizes


def main() -> None:
    batches = arrow_batches(records(), [10_000] * (N // 10_000))
    for name, options in CASES.items():
        for kept in ("false", "true"):
            cpu, sizes = measure(batches, {**options, "store.kafka.timestamps": kept})
            print(f"{name:30} timestamps={kept:5} cpu {cpu:.3f} s  bytes {sizes}")


if __name__ == "__main__":
    main()
