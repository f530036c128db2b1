"""The damage table of docs/operating.md (issue 41), one row per test: each damage done to a
committed archive on SeaweedFS, and what ``seek``, ``records()``, blockgz's Spark reader, ``restore
--dry-run`` (against Apache Kafka), ``audit`` and ``audit --deep`` then do.

Every reader either returns every record as archived or fails naming the key: never a silent
wrong answer. The archive: ev-0 and ev-1, offsets 0..59 each, 3 manifests, block-GZIP objects
of 7 records (the sink's write task, ``testkit.archives.export_batches``); the damage hits ev-0's
object at offset 20 (ev-1's object at 20 has the same size).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord
from blockgz.store import ObjectStore, open_store
from blockgz.written.sidecars import sidecar_key
from testkit import damage
from testkit.archives import export_batches
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

KEY = "topics/ev/partition=0/ev+0+0000000020.json.gz"
MANIFEST = "_blockgz/job/manifests/00000000000000000001.json"
FOREIGN = "topics/ev/partition=0/pay+0+0000000000.json.gz"
STRAY = KEY + ".bak"
STEM = "ev+0+0000000020.json"  # in the object's key and its sidecar's: errors name one


def _records(topic: str = "ev") -> list[KafkaRecord]:
    return [
        KafkaRecord(topic, p, n, 1_700_000_000_000 + n, None, b'{"n":%d,"p":%d}' % (n, p))
        for p in (0, 1)
        for n in range(60)
    ]


def _swap(store: ObjectStore) -> None:
    other = KEY.replace("partition=0/ev+0+", "partition=1/ev+1+")
    assert store.head(other).size == store.head(KEY).size
    store.put(KEY, store.get(other))
    store.put(sidecar_key(KEY), store.get(sidecar_key(other)))


def _tamper(store: ObjectStore) -> None:
    doc = json.loads(store.get(sidecar_key(KEY)))
    doc["chunks"][0]["min_timestamp"] -= 1000
    store.put(sidecar_key(KEY), json.dumps(doc).encode())


def _foreign(store: ObjectStore) -> None:
    store.put(FOREIGN, store.get(KEY).replace(b'"n"', b'"m"'))


DAMAGES: dict[str, tuple[Callable[[ObjectStore], None], str]] = {
    "deleted object": (lambda s: s.delete(KEY), STEM),
    "truncated object": (lambda s: damage.truncate(s, KEY), STEM),
    "swapped object": (_swap, STEM),
    "tampered sidecar": (_tamper, STEM),
    "foreign object": (_foreign, FOREIGN),
    "stray": (lambda s: s.put(STRAY, s.get(KEY)), STRAY),
    "deleted manifest": (lambda s: s.delete(MANIFEST), MANIFEST),
}

ALL = sorted((p, n) for p in (0, 1) for n in range(60))

#: What each reader and the audit did, as the docs' table says it (checked below).
TABLE = {
    # restore --dry-run plans from the manifests and reads no object
    "deleted object": ("error", "error", "error", "all", "2 missing_object", "2 missing_object"),
    "truncated object": ("error", "error", "error", "all", "2 truncated_object",
                         "2 truncated_object"),
    "swapped object": ("error", "error", "error", "error", "2 checksum_mismatch sidecar_mismatch",
                       "2 checksum_mismatch sidecar_mismatch"),
    "tampered sidecar": ("error", "error", "error", "error", "2 sidecar_mismatch",
                         "2 sidecar_mismatch"),
    "foreign object": ("all", "all", "all", "all", "2 foreign_object", "2 foreign_object"),
    "stray": ("all", "all", "all", "all", "1 stray", "1 stray"),
    # seek reads inside the prefix's heads document, which keeps the manifest's copy;
    # records() reads to the partition's end, past the head, and lists the manifests
    "deleted manifest": ("all", "error", "error", "error", "2 missing_manifest",
                         "2 missing_manifest"),
}  # fmt: skip


class Archive:
    def __init__(self, endpoint_url: str, bucket: str, kafka):
        self.options = s3_options(endpoint_url)
        self.url = f"s3://{bucket}"
        self.kafka = kafka
        export_batches(self.url, _records(), "default", batches=3,
                       **{"flush.size": "7"}, **self.options)  # fmt: skip
        self.store, _ = open_store(self.url, self.options)

    def cli(self, *args: str):
        flags = [a for k, v in self.options.items() for a in ("-O", f"{k}={v}")]
        result = CliRunner().invoke(main, [args[0], self.url, *flags, *args[1:]])
        assert "Traceback" not in result.output, result.output
        return result

    def seek(self, named: str) -> str:
        got = []
        for p in (0, 1):
            r = self.cli("seek", "--topic", "ev", "--partition", str(p), "--offset", "0",
                         "--count", "60")  # fmt: skip
            if r.exit_code:
                assert named in r.output, r.output
                return "error"
            got += [(p, json.loads(line)["n"]) for line in r.stdout.splitlines()]
        return _outcome(got)

    def records(self, named: str) -> str:
        try:
            with open_archive(self.url, self.options) as archive:
                got = [(p, r.offset) for p, r in archive.records("ev")]
        except Exception as exc:  # the reader's error: it must name the damaged key
            assert named in str(exc), exc
            return "error"
        return _outcome(got)

    def spark(self, spark, named: str) -> str:
        try:
            frame = spark.read.format("blockgz").options(**self.options).load(self.url)
            rows = frame.where("topic = 'ev'").select("partition", "offset").collect()
        except Exception as exc:
            assert named in str(exc)
            return "error"
        return _outcome([(r.partition, r.offset) for r in rows])

    def restore(self, named: str) -> str:
        r = self.cli("restore", "ev", "--suffix", "_x", "--dry-run", "--output", "json",
                     "--bootstrap-servers", self.kafka.bootstrap_servers)  # fmt: skip
        if r.exit_code:
            assert named in r.output, r.output
            return "error"
        return "all" if json.loads(r.stdout)["records"] == len(ALL) else "WRONG"

    def audit(self, *args: str) -> str:
        r = self.cli("audit", "--output", "json", *args)
        doc = json.loads(r.stdout)["jobs"][0]
        kinds = sorted({f["kind"] for f in doc["findings"] if f["level"] != "note"})
        return f"{r.exit_code} {' '.join(kinds)}"


def _outcome(got: list[tuple[int, int]]) -> str:
    return "all" if sorted(got) == ALL else "WRONG"


@pytest.mark.parametrize("name", list(DAMAGES))
def test_the_damage_table(name, spark, kafka, seaweed_s3, weed_bucket):
    archive = Archive(seaweed_s3.endpoint_url, weed_bucket, kafka)
    do, named = DAMAGES[name]
    do(archive.store)
    row = (
        archive.seek(named),
        archive.records(named),
        archive.spark(spark, named),
        archive.restore(named),
        archive.audit(),
        archive.audit("--deep"),
    )
    assert row == TABLE[name]


def _docs_table() -> dict[str, tuple[str, ...]]:
    """The damage table of docs/operating.md, its cells as TABLE writes them."""
    page = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
    text = page.read_text(encoding="utf-8")
    lines = text[text.index("### What each damage does") :].splitlines()
    rows = [line for line in lines if line.startswith("| ")][1:]  # below the header row
    table = {}
    for row in rows[: len(DAMAGES)]:
        cells = [
            re.sub(r"\s*\([^)]*\)", "", c).replace("`", "").replace(",", "")
            for c in row.split("|")[1:-1]
        ]
        cells = [" ".join(c.split()).removeprefix("plans ") for c in cells]
        table[cells[0]] = tuple(cells[1:])
    return table


def test_the_docs_table_is_the_tested_table():
    assert _docs_table() == TABLE
