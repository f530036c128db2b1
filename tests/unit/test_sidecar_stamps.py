"""Record timestamps in the value object's ``.index.json`` sidecar (issue 44, "Fewer keys per
object"): one hidden file per data object, a seek still one sidecar GET and one ranged GET, and
archives written with a timestamps file beside each value object keep reading."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blockgz.blocks.index import BlockIndex
from blockgz.blocks.stamps import encode_stamps
from blockgz.errors import CorruptIndexError
from blockgz.reader import open_archive
from blockgz.reader.audit.deep import check_blocks
from blockgz.reader.reading.archive import Archive
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write import companions
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000


def records(first: int = 0, n: int = 40, untimed: bool = True) -> list[KafkaRecord]:
    """Records 3 ms apart, types alternating every 7, one without a timestamp (``untimed``)."""
    out = []
    for i in range(first, first + n):
        stamp = None if untimed and i == first + 5 else T0 + 3 * i
        out.append(KafkaRecord("t", 0, i, stamp, None, b'{"n": %d}' % i, timestamp_type=i // 7 % 2))
    return out


def export(path, recs, batch: int = 0, **options) -> list:
    """One committed batch of ``recs`` (blockgzip, blocks of 4 records, files of 20)."""
    config = SinkSettings.from_options(
        {
            "path": str(path),
            "flush.size": "20",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.records": "4",
            **options,
        }
    )
    message = write_task(config, iter(arrow_batches(recs)))
    write_manifest(config.manifest_log(), batch, [message])
    return message.files


def expected(recs: list[KafkaRecord]) -> list[tuple[int, int | None, int | None]]:
    return [(r.offset, r.timestamp_ms, r.timestamp_type) for r in recs]


class RecordingStore(LocalStore):
    """A local store that remembers each read: ``(key, ranged)``."""

    def __init__(self, root):
        super().__init__(root)
        self.read: list[tuple[str, bool]] = []

    def get(self, key):
        self.read.append((key, False))
        return super().get(key)

    def get_range(self, key, start, end):
        self.read.append((key, True))
        return super().get_range(key, start, end)

    def iter_chunks(self, key, chunk_size=1024 * 1024):
        self.read.append((key, False))
        return super().iter_chunks(key, chunk_size)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_encoding_gives_back_every_timestamp_and_type(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    stamps = T0 + np.cumsum(rng.integers(-20, 500, n))  # out of order now and then
    stamps[rng.random(n) < 0.05] = -1  # no timestamp
    kinds = rng.integers(-1, 2, n) if seed == 3 else np.zeros(n, np.int64)
    kept = encode_stamps(stamps, kinds)
    assert (kept.kinds is None) == (seed != 3)
    ms, types = kept.decode(n)
    assert ms.tolist() == stamps.tolist() and types.tolist() == kinds.tolist()
    with pytest.raises(CorruptIndexError, match=f"a chunk of {n + 1} records keeps {n}"):
        kept.decode(n + 1)


def test_records_a_few_ms_apart_cost_under_two_characters_each():
    stamps = T0 + np.arange(10_000) * 3
    kept = encode_stamps(stamps, np.zeros(10_000, np.int64))
    assert len(json.dumps(kept.to_dict())) / 10_000 < 1.4


def test_a_malformed_member_is_a_corrupt_index():
    doc = {
        "chunks": [
            {"first_record_offset": 0, "num_records": 1, "byte_offset": 0, "byte_length": 9,
             "byte_length_uncompressed": 3, "timestamps": 7}
        ]
    }  # fmt: skip
    with pytest.raises(CorruptIndexError, match="chunk 0 timestamps must be a base64 string"):
        BlockIndex.from_json(json.dumps(doc), source="x")


def test_an_export_writes_one_sidecar_and_no_timestamps_file(tmp_path):
    recs = records()
    files = export(tmp_path, recs)
    assert {f.role for f in files} == {"value"}  # the manifest lists one file per object
    keys = sorted(p.name for p in tmp_path.joinpath("topics").rglob("*") if p.is_file())
    assert keys == [
        ".t+0+0000000000.json.index.json",
        ".t+0+0000000020.json.index.json",
        "t+0+0000000000.json.gz",
        "t+0+0000000020.json.gz",
    ]
    sidecar = json.loads(next(tmp_path.rglob(".t+0+0000000000.json.index.json")).read_text())
    assert all("timestamps" in c for c in sidecar["chunks"])
    assert sidecar["object"]["records"] == 20  # the "object" member is as it was
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0])]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == expected(recs)


def test_a_time_window_and_a_seek_read_one_sidecar_and_one_range(tmp_path):
    recs = records()
    export(tmp_path, recs)
    store = RecordingStore(tmp_path)
    low, high = T0 + 3 * 25, T0 + 3 * 28  # to_time is exclusive
    with Archive(store) as archive:
        window = [r for _, r in archive.records("t", [0], from_time=low, to_time=high)]
        store.read.clear()
        stamped = list(archive.seek("t", 0, 33, count=2, timestamps=True))
    assert [(r.offset, r.timestamp) for r in window] == [(o, T0 + 3 * o) for o in (25, 26, 27)]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in stamped] == expected(recs[33:35])
    # The index was cached by the window: the seek is the one ranged GET of its block.
    assert store.read == [("topics/t/partition=0/t+0+0000000020.json.gz", True)]
    with Archive(RecordingStore(tmp_path)) as archive:
        list(archive.seek("t", 0, 33, count=2, timestamps=True))
        reads = [read for read in archive.store.read if read[0].startswith("topics/")]
    assert reads == [  # besides the manifest: the sidecar, then one block
        ("topics/t/partition=0/.t+0+0000000020.json.index.json", False),
        ("topics/t/partition=0/t+0+0000000020.json.gz", True),
    ]


def test_an_old_archive_and_a_new_one_read_alike_and_mixed(tmp_path, monkeypatch):
    old, new = records(0, 40), records(40, 40, untimed=False)
    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", False)  # as before issue 44
    before = export(tmp_path, old, batch=0)
    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", True)
    after = export(tmp_path, new, batch=1)
    assert sorted({f.role for f in before}) == ["timestamps", "value"]
    assert {f.role for f in after} == {"value"}
    keys = [p for p in tmp_path.joinpath("topics").rglob("*") if p.is_file()]
    assert len(keys) / sum(f.role == "value" for f in before + after) == 3  # (4 + 2) / 2
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0])]
        window = [r.offset for _, r in archive.records("t", [0], from_time=T0 + 3 * 58)]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == expected(old + new)
    assert window == list(range(58, 80))


def test_a_sidecar_without_timestamps_reads_as_not_recorded(tmp_path):
    export(tmp_path, records())
    for sidecar in tmp_path.rglob(".*.index.json"):  # as a blockgz before issue 44 wrote it
        doc = json.loads(sidecar.read_text())
        for chunk in doc["chunks"]:
            for member in ("timestamps", "timestamp_type", "timestamp_types"):
                chunk.pop(member, None)
        doc["object"]["rebuilt"] = True  # not the committed bytes any more (audit --repair's)
        sidecar.write_text(json.dumps(doc))
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0])]
    assert [r.offset for r in got] == list(range(40))
    assert {(r.timestamp, "timestamp" in r.holds) for r in got} == {(None, False)}


def test_avro_values_keep_their_timestamps_in_the_sidecar(tmp_path):
    recs = records()
    files = export(
        tmp_path,
        recs,
        **{"format.class": "avro", "value.converter": "string", "s3.compression.type": "none"},
    )
    assert {f.role for f in files} == {"value"} and all(f.index_key for f in files)
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0])]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == expected(recs)


def test_a_deep_check_finds_timestamps_that_do_not_match_the_block(tmp_path):
    export(tmp_path, records())
    store = LocalStore(tmp_path)
    sidecar = next(tmp_path.rglob(".t+0+0000000000.json.index.json"))
    doc = json.loads(sidecar.read_text())
    doc["chunks"][1]["timestamps"] = doc["chunks"][0]["timestamps"][:-1]  # one record short
    index = BlockIndex.from_json(json.dumps(doc))
    problems = check_blocks(store, "topics/t/partition=0/t+0+0000000000.json.gz", index)
    assert len(problems) == 1 and "block 1:" in problems[0][1], problems


def test_verify_of_an_archive_without_manifests_names_a_sidecar_with_wrong_timestamps(tmp_path):
    from blockgz.reader.audit.verify import check_topic

    config = SinkSettings.from_options(
        {"path": str(tmp_path), "flush.size": "20", "s3.compression.type": "blockgzip",
         "s3.compression.block.records": "4"}
    )  # fmt: skip
    write_task(config, iter(arrow_batches(records())))  # no manifest: verify reads the listing
    assert check_topic(Archive(LocalStore(tmp_path)), "t").problems == []
    sidecar = next(tmp_path.rglob(".t+0+0000000020.json.index.json"))
    doc = json.loads(sidecar.read_text())
    doc["chunks"][2]["timestamps"] = doc["chunks"][2]["timestamps"][:-2]  # a record short
    sidecar.write_text(json.dumps(doc))
    check = check_topic(Archive(LocalStore(tmp_path)), "t")
    assert check.level == 2, check.problems
    assert any("t+0+0000000020.json.gz chunk 2: a chunk of 4 records keeps 2 timestamps" in p
               for p in check.problems), check.problems  # fmt: skip


@pytest.mark.parametrize("kept_in", ["sidecar", "file"])
def test_repair_of_a_lost_sidecar_says_when_its_timestamps_are_lost(tmp_path, monkeypatch, kept_in):
    from blockgz.reader.audit.auditor import audit_job

    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", kept_in == "sidecar")
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "flush.size": "20", "s3.compression.type": "blockgzip"}
    )
    write_manifest(config.manifest_log(), 0, [write_task(config, iter(arrow_batches(records())))])
    next(tmp_path.rglob(".t+0+0000000020.json.index.json")).unlink()
    repaired = audit_job(config.manifest_log(), do_repair=True)
    (finding,) = repaired.findings
    assert finding.repair.startswith("repaired: rebuilt"), finding.repair
    lost = "the record timestamps its sidecar kept are not in the object" in finding.repair
    assert lost == (kept_in == "sidecar")
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0], start=20)]
    assert [r.offset for r in got] == list(range(20, 40))
    assert {r.timestamp is None for r in got} == {kept_in == "sidecar"}  # never a wrong one


def test_keys_files_and_sidecar_timestamps_come_back_together(tmp_path):
    recs = records()
    for r in recs:
        r.key = b"user-%d" % r.offset
    files = export(tmp_path, recs, **{"store.kafka.keys": "true", "keys.format.class": "json"})
    assert sorted({f.role for f in files}) == ["keys", "value"]  # what Confluent writes, no more
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, r in archive.records("t", [0])]
        seek = list(archive.seek("t", 0, 22, count=2, timestamps=True))
    assert [(r.key, r.timestamp, r.timestamp_type) for r in got] == [
        (r.key, r.timestamp_ms, r.timestamp_type) for r in recs
    ]
    assert [(r.key, r.timestamp) for r in seek] == [(r.key, r.timestamp_ms) for r in recs[22:24]]


def test_blockgz_index_keeps_the_timestamps_of_the_sidecar_it_replaces(tmp_path):
    from click.testing import CliRunner

    from blockgz.cli import main

    recs = records()
    export(tmp_path, recs)
    data = next(tmp_path.rglob("t+0+0000000020.json.gz"))
    result = CliRunner().invoke(main, ["index", "--first-offset", "20", str(data)])
    assert result.exit_code == 0, result.output
    assert "record timestamps kept from the old sidecar" in result.stderr
    index = BlockIndex.from_json(data.with_name(".t+0+0000000020.json.index.json").read_text())
    assert index.keeps_stamps and "object" not in json.loads(index.to_json())  # rebuilt
    stamps = [t for n in range(len(index.chunks)) for t in index.block_stamps(n)[0].tolist()]
    assert stamps == [r.timestamp_ms for r in recs[20:]]


def test_keys_only_tombstones_keep_their_timestamps_in_the_keys_files_sidecar(tmp_path):
    from blockgz.reader.reading.window_counts import Window
    from blockgz.reader.restore.tombstones import kept_tombstones, tombstone_records

    recs = records(0, 12, untimed=False)
    for r in recs:
        r.key, r.value = b"k%d" % r.offset, None if r.offset % 4 == 3 else r.value
    export(tmp_path, recs, **{"store.kafka.keys": "true", "behavior.on.null.values": "write"})
    names = sorted(p.name for p in tmp_path.joinpath("topics/t/tombstone").iterdir())
    assert names == [".t+0+0000000003.keys.avro.index.json", "t+0+0000000003.keys.avro"]
    with open_archive(str(tmp_path)) as archive:
        kept = kept_tombstones(archive, "t", 0)
        dead = list(tombstone_records(archive, kept.keys_only, Window()))
    assert [(r.offset, r.key, r.timestamp) for r in dead] == [
        (n, b"k%d" % n, T0 + 3 * n) for n in (3, 7, 11)
    ]
