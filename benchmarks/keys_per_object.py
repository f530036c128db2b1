"""Keys per data object, hidden bytes per record and a seek's requests, with the record
timestamps in a timestamps file of their own (as before issue 44) and in the value object's
``.index.json`` sidecar (issue 44), on one small export through the real write task into a
local directory (block-GZIP JSON, ``flush.size`` 1000, records 0-40 ms apart):

    .venv/bin/python -m benchmarks.keys_per_object

Prints a Markdown table (benchmarks/README.md, "Fewer keys per object").
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from blockgz.reader.reading.archive import Archive
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write import companions
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

RECORDS = 20_000
FLUSH = 1000
T0 = 1_700_000_000_000


class CountingStore(LocalStore):
    """A local store that counts reads (each GET or ranged GET is one request)."""

    def __init__(self, root):
        super().__init__(root)
        self.reads: list[str] = []

    def get(self, key):
        self.reads.append(key)
        return super().get(key)

    def get_range(self, key, start, end):
        self.reads.append(key)
        return super().get_range(key, start, end)


def records() -> list[KafkaRecord]:
    rng = random.Random(44)
    stamp, out = T0, []
    for n in range(RECORDS):
        stamp += rng.randrange(0, 41)
        value = b'{"id": %d, "item": "sku-%05d", "qty": %d}' % (n, rng.randrange(99999), n % 7)
        out.append(KafkaRecord("t", 0, n, stamp, None, value))
    return out


def measure(in_sidecar: bool, recs: list[KafkaRecord]) -> dict[str, float]:
    """One export, then its keys, hidden bytes and the requests of a seek with timestamps."""
    companions.STAMPS_IN_SIDECAR = in_sidecar
    root = Path(tempfile.mkdtemp())
    config = SinkSettings.from_options(
        {"path": str(root), "flush.size": str(FLUSH), "s3.compression.type": "blockgzip"}
    )
    write_manifest(config.manifest_log(), 0, [write_task(config, iter(arrow_batches(recs)))])
    keys = [p for p in (root / "topics" / "t").rglob("*") if p.is_file()]
    objects = [p for p in keys if not p.name.startswith(".")]
    hidden = [p for p in keys if p.name.startswith(".")]
    sidecars = [p for p in hidden if ".index." in p.name and "timestamps" not in p.name]
    seeks = []
    for timestamps in (False, True):
        store = CountingStore(root)
        with Archive(store, committed_only=False) as archive:
            got = list(archive.seek("t", 0, RECORDS // 2 + 7, count=1, timestamps=timestamps))
        assert got[0].timestamp == (recs[RECORDS // 2 + 7].timestamp_ms if timestamps else None)
        seeks.append([k for k in store.reads if k.startswith("topics/")])
    return {
        "keys": len(keys) / len(objects),
        "sidecar": sum(p.stat().st_size for p in sidecars) / len(recs),
        "hidden": sum(p.stat().st_size for p in hidden) / len(recs),
        "seek": len(seeks[0]),
        "stamped": len(seeks[1]),
    }


def main() -> None:
    recs = records()
    before, after = measure(False, recs), measure(True, recs)
    rows = {"before (timestamps file)": before, "after (sidecar)": after}
    companions.STAMPS_IN_SIDECAR = True
    print(f"{RECORDS} records, {RECORDS // FLUSH} data objects")
    print("| archive | keys per data object | sidecar bytes/record | hidden bytes/record "
          "| GETs of a seek | GETs of a seek with timestamps |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['keys']:.1f} | {row['sidecar']:.2f} | {row['hidden']:.2f} "
              f"| {row['seek']} | {row['stamped']} |")  # fmt: skip


if __name__ == "__main__":
    main()
