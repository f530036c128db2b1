"""``blockgz audit --deep`` of Parquet archives written by the sink's write task (real objects,
manifests and catalog; no sidecars): each kind of damage is a finding naming the row group or the
object, never a crash."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from blockgz.archive.layout import Layout
from blockgz.commits.manifest_log import ManifestLog
from blockgz.formats.parquet.read import parquet_index
from blockgz.reader.audit.auditor import audit_job
from blockgz.reader.audit.parquet_check import check_parquet
from blockgz.sink.records import KafkaRecord
from blockgz.store import LocalStore
from testkit.archives import export_batches
from testkit.connect_orders import CONNECT_JSON

T0 = 1_700_000_000_000
SCHEMA = {
    "type": "struct",
    "optional": False,
    "fields": [
        {"field": "n", "type": "int64", "optional": False},
        {"field": "s", "type": "string", "optional": True},
    ],
}
PARQUET = {
    "format.class": "parquet",
    "s3.compression.type": "none",
    **CONNECT_JSON,
    "flush.size": "40",
    "s3.compression.block.records": "10",
}


def _key(start: int, partition: int = 0) -> str:
    return f"topics/ev/partition={partition}/ev+{partition}+{start:010d}.snappy.parquet"


def _records(count: int = 80) -> list[KafkaRecord]:
    def value(n: int) -> bytes:
        return json.dumps({"schema": SCHEMA, "payload": {"n": n, "s": "x" * (n % 7)}}).encode()

    return [KafkaRecord("ev", p, n, T0 + n, None, value(n)) for p in (0, 1) for n in range(count)]


@pytest.fixture
def archive(tmp_path):
    """ev-0 and ev-1, offsets 0..79 each, in Parquet objects of 40 records (0, 40), row
    groups of 10."""
    root = tmp_path / "a"
    export_batches(str(root), _records(), "default", batches=2, **PARQUET)
    store = LocalStore(root)
    return store, ManifestLog(store, "", Layout(), "job")


def _index(store, key: str):
    data = store.get(key)
    return parquet_index(lambda a, b: data[a:b], len(data), source=key), data


def test_an_intact_parquet_archive_audits_deep_with_every_byte_read(archive):
    store, log = archive
    assert pq.ParquetFile(store.path(_key(40))).metadata.num_row_groups == 4
    report = audit_job(log, deep=True)
    assert (report.exit_code, report.findings) == (0, [])
    stored = sum(store.head(_key(s, p)).size for s in (0, 40) for p in (0, 1))
    assert report.bytes_read == stored


def test_a_flipped_byte_in_a_row_group_is_its_finding(archive):
    """The writer puts a CRC-32 in every page header; the audit asks pyarrow to check it."""
    store, log = archive
    index, data = _index(store, _key(40, 1))
    chunk = index.chunks[2]
    damaged = bytearray(data)
    damaged[chunk.byte_offset + chunk.byte_length // 2] ^= 0x10
    store.put(_key(40, 1), bytes(damaged))
    assert audit_job(log).exit_code == 0  # the size is right: only reading finds it
    report = audit_job(log, deep=True)
    ((kind, partition, first, last, key, message),) = [
        (f.kind, f.partition, f.first, f.last, f.key, f.message) for f in report.findings
    ]
    assert (kind, partition, first, last, key) == ("corrupt_block", 1, 60, 69, _key(40, 1))
    assert message.startswith(f"row group 2 (bytes {chunk.byte_offset}..")
    assert "does not decode" in message
    assert report.exit_code == 2


def test_a_row_group_whose_offsets_disagree_with_its_footer(tmp_path):
    """A row group holding offsets 5, 6, 5, 8, 9 (no page CRCs, as another writer may write
    it): its statistics (5..9, 5 rows) look contiguous, the values are checked too."""
    import pyarrow as pa

    from blockgz.written.files import WrittenFile

    store = LocalStore(tmp_path)
    key = "t+0+0000000000.parquet"
    offsets = [0, 1, 2, 3, 4, 5, 6, 5, 8, 9]
    table = pa.table({"n": list(range(10)), "__kafka_offset": pa.array(offsets, pa.int64())})
    pq.write_table(table, store.path(key), row_group_size=5, compression="none")
    size = store.head(key).size
    index, _ = _index(store, key)
    problems = check_parquet(store, WrittenFile(key, "t", 0, "", 0, 9, 10, size, 0), size)
    assert [(chunk, text.partition("): ")[2]) for chunk, text in problems] == [
        (index.chunks[1], "row 2 has offset 5, the footer's statistics and gaps say 7")
    ]


def test_a_truncated_parquet_object_is_a_finding_not_a_crash(archive):
    """Cut short after the manifest recorded no size: the footer is gone."""
    store, log = archive
    store.put(_key(0), store.get(_key(0))[:-30])
    report = audit_job(log, deep=True)
    assert [(f.kind, f.key) for f in report.findings] == [("truncated_object", _key(0))]
    from blockgz.written.files import WrittenFile

    size = store.head(_key(0)).size
    problems = check_parquet(store, WrittenFile(_key(0), "ev", 0, "", 0, 39, 40, -1, 0), size)
    ((chunk, problem),) = problems
    assert chunk is None
    assert problem.startswith("the footer cannot be read: does not end with Parquet's PAR1")


def test_a_footer_that_disagrees_with_the_manifest(archive):
    """Another Parquet file put at the key (ev-0's offsets 0..39 where the manifest committed
    40..79): the footer is checked against the manifest's entry."""
    store, log = archive
    (committed,) = [f for f in log.committed_files() if f.key == _key(40)]
    store.put(_key(40), store.get(_key(0)))
    problems = check_parquet(store, committed, store.head(_key(40)).size)
    assert problems == [
        (
            None,
            "its footer holds offsets 0..39 (40 records), the manifest committed 40..79 "
            "(40 records)",
        )
    ]
