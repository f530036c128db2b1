"""The hidden timestamps file beside each value file (``store.kafka.timestamps``, on by default).

Since issue 44 a value file with a sidecar keeps its timestamps there instead
(tests/unit/test_sidecar_stamps.py); these tests write archives the way blockgz did before
(``STAMPS_IN_SIDECAR`` off), which must keep reading.

Its name starts with ``.`` so query engines reading a topic's folder skip it; readers fetch it
only when timestamps are wanted (a time window, ``records()``, replay/restore, ``--output json``),
and archives written before it was hidden (a visible ``…timestamps.<ext>``) still read.
"""

from __future__ import annotations

import glob
import gzip
import json

import pytest

from blockgz.archive.layout import Layout, parse_archive_key
from blockgz.archive.timestamps_keys import shown_key
from blockgz.reader import open_archive
from blockgz.reader.reading.archive import Archive
from blockgz.reader.reading.strays import is_stray
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write import companions
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches
from testkit.kafka_data import read_exported

T0 = 1_700_000_000_000


@pytest.fixture(autouse=True)
def old_writer(monkeypatch):
    """Archives written as before issue 44: a timestamps file beside each value file."""
    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", False)


def records(n: int = 40) -> list[KafkaRecord]:
    return [
        KafkaRecord("t", 0, i, T0 + 10 * i, None, b'{"n": %d}' % i, timestamp_type=i % 2)
        for i in range(n)
    ]


def export(path, recs=None, **options) -> SinkSettings:
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
    message = write_task(config, iter(arrow_batches(recs or records())))
    write_manifest(config.manifest_log(), 0, [message])
    return config


class RecordingStore(LocalStore):
    """A local store that remembers the key of every read."""

    def __init__(self, root):
        super().__init__(root)
        self.read: list[str] = []

    def get(self, key):
        self.read.append(key)
        return super().get(key)

    def get_range(self, key, start, end):
        self.read.append(key)
        return super().get_range(key, start, end)

    def iter_chunks(self, key, chunk_size=1024 * 1024):
        self.read.append(key)
        return super().iter_chunks(key, chunk_size)


def stamps_read(store: RecordingStore) -> list[str]:
    """The timestamps files (not their index sidecars) read, each once."""
    return sorted({k for k in store.read if ".timestamps." in k and ".index." not in k})


def test_the_file_is_hidden_from_globs_and_engines_and_no_data_object(tmp_path):
    export(tmp_path)
    folder = tmp_path / "topics/t/partition=0"
    # What Spark/Hadoop, DuckDB and glob see of the folder: the value files only.
    visible = sorted(p.rsplit("/", 1)[1] for p in glob.glob(f"{folder}/*"))
    assert visible == ["t+0+0000000000.json.gz", "t+0+0000000020.json.gz"]
    hidden = sorted(p.name for p in folder.iterdir() if ".timestamps." in p.name)
    assert hidden == [
        "..t+0+0000000000.timestamps.json.index.json",
        "..t+0+0000000020.timestamps.json.index.json",
        ".t+0+0000000000.timestamps.json.gz",
        ".t+0+0000000020.timestamps.json.gz",
    ]
    key = "topics/t/partition=0/.t+0+0000000020.timestamps.json.gz"
    assert Layout().parse_data_key(key) is None  # never read as records of topic ".t"
    ref = parse_archive_key(Layout(), key)
    assert (ref.topic, ref.partition, ref.start_offset, ref.role) == ("t", 0, 20, "timestamps")
    assert not is_stray(Layout(), "", key)
    assert not is_stray(
        Layout(), "", "topics/t/partition=0/..t+0+0000000020.timestamps.json.index.json"
    )
    lines = gzip.decompress((tmp_path / key).read_bytes()).splitlines()
    assert [json.loads(line) for line in lines[:2]] == [[T0 + 200, 0], [T0 + 210, 1]]


def test_testkit_reads_the_values_apart_from_the_hidden_file(tmp_path):
    export(tmp_path)
    exported = read_exported(LocalStore(tmp_path))
    assert sorted(exported.objects) == [
        "topics/t/partition=0/t+0+0000000000.json.gz",
        "topics/t/partition=0/t+0+0000000020.json.gz",
    ]
    assert sorted(exported.companions) == [
        "topics/t/partition=0/.t+0+0000000000.timestamps.json.gz",
        "topics/t/partition=0/.t+0+0000000020.timestamps.json.gz",
    ]


@pytest.mark.parametrize("committed", ["true", "false"])  # from the catalog, or from a listing
def test_a_seek_does_not_read_the_file_and_a_time_window_does(tmp_path, committed):
    export(tmp_path)
    store = RecordingStore(tmp_path)
    archive = Archive(store, committed_only=committed == "true")
    got = list(archive.seek("t", 0, 22, count=3))
    assert [(r.offset, r.timestamp) for r in got] == [(22, None), (23, None), (24, None)]
    assert stamps_read(store) == []
    assert [r.offset for r in archive.read("t", 0, 5, 9)] == [5, 6, 7, 8]
    assert stamps_read(store) == []

    stamped = list(archive.seek("t", 0, 22, count=3, timestamps=True))
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in stamped] == [
        (22, T0 + 220, 0), (23, T0 + 230, 1), (24, T0 + 240, 0),
    ]  # fmt: skip
    assert stamps_read(store) == ["topics/t/partition=0/.t+0+0000000020.timestamps.json.gz"]

    store.read.clear()
    window = list(archive.records("t", [0], from_time=T0 + 95, to_time=T0 + 125))
    assert [(r.offset, r.timestamp) for _, r in window] == [
        (10, T0 + 100),
        (11, T0 + 110),
        (12, T0 + 120),
    ]
    assert stamps_read(store) == ["topics/t/partition=0/.t+0+0000000000.timestamps.json.gz"]


def test_json_output_fetches_timestamps_and_raw_output_does_not(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from blockgz.cli import main

    export(tmp_path)
    opened: list[Archive] = []
    real_seek = Archive.seek

    def seek(self, *args, **kwargs):
        opened.append(kwargs.get("timestamps"))
        return real_seek(self, *args, **kwargs)

    monkeypatch.setattr(Archive, "seek", seek)
    where = ["--topic", "t", "--partition", "0", str(tmp_path)]
    raw = CliRunner().invoke(main, ["seek", "--offset", "3", "--count", "1", *where])
    assert raw.exit_code == 0 and raw.stdout == '{"n": 3}\n'
    as_json = CliRunner().invoke(
        main, ["seek", "--offset", "3", "--count", "1", "--output", "json", *where]
    )
    assert json.loads(as_json.stdout) == {"offset": 3, "value": {"n": 3}, "timestamp": T0 + 30}
    assert opened == [False, True]


def test_archives_with_the_visible_name_of_older_versions_still_read(tmp_path):
    """Before it was hidden, the file was ``t+0+<start>.timestamps.json.gz`` (and the manifests
    recorded that key): listings and catalogs both still find it."""
    export(tmp_path)
    folder = tmp_path / "topics/t/partition=0"
    for hidden in sorted(folder.glob(".t+0+*.timestamps.json.gz")):
        hidden.rename(folder / hidden.name[1:])
    for sidecar in sorted(folder.glob("..t+0+*.timestamps.json.index.json")):
        sidecar.rename(folder / sidecar.name[1:])  # the visible file's hidden sidecar
    for sidecar in folder.glob(".*.index.json"):  # those versions' sidecars named no object
        doc = json.loads(sidecar.read_text())
        del doc["object"]
        sidecar.write_text(json.dumps(doc))
    manifests = tmp_path / "_blockgz"
    for path in manifests.rglob("*.json"):
        text = path.read_text()
        for start in ("0000000000", "0000000020"):
            text = text.replace(f"/.t+0+{start}.timestamps", f"/t+0+{start}.timestamps")
            text = text.replace(f"/..t+0+{start}.timestamps", f"/.t+0+{start}.timestamps")
        path.write_text(_without_checksums(text))
    for head in [*manifests.rglob("catalog/head.json"), *manifests.glob("heads.json")]:  # none
        head.unlink()
    assert not list(folder.glob(".t+0+*.timestamps.json.gz"))
    assert len(list(folder.glob("t+0+*.timestamps.json.gz"))) == 2
    for committed in ("true", "false"):
        with open_archive(str(tmp_path), {"committed": committed}) as archive:
            window = list(archive.records("t", [0], from_time=T0 + 300, to_time=T0 + 320))
            assert [(r.offset, r.timestamp) for _, r in window] == [(30, T0 + 300), (31, T0 + 310)]
            assert archive.ls("t").strays == []
            assert [r.timestamp for r in archive.seek("t", 0, 30, count=1)] == [None]
    assert (
        shown_key("d/.t+0+0000000000.timestamps.json.gz") == "d/t+0+0000000000.timestamps.json.gz"
    )


def _without_checksums(text: str) -> str:
    """A manifest as blockgz wrote it before its entries bound content (issue 41)."""
    doc = json.loads(text)
    for entry in doc.get("files", []) if isinstance(doc, dict) else []:
        for name in ("crc32", "index_size", "index_crc32"):
            entry.pop(name, None)
    return json.dumps(doc)


def test_ls_and_verify_do_not_count_it_as_a_stray_or_an_object(tmp_path):
    from click.testing import CliRunner

    from blockgz.cli import main

    export(tmp_path)
    with open_archive(str(tmp_path)) as archive:
        listing = archive.ls("t")
        assert [o.key.rsplit("/", 1)[1] for o in listing] == [
            "t+0+0000000000.json.gz",
            "t+0+0000000020.json.gz",
        ]
        assert listing.strays == []
    verified = CliRunner().invoke(main, ["verify", "--topic", "t", str(tmp_path)])
    assert verified.exit_code == 0, verified.output
    assert "stray" not in verified.output and "timestamps" not in verified.output


def test_off_writes_no_file_and_formats_that_keep_timestamps_write_none(tmp_path):
    export(tmp_path / "off", **{"store.kafka.timestamps": "false"})
    assert not list((tmp_path / "off").rglob("*timestamps*"))
    export(tmp_path / "envelope", **{"format.json.envelope": "true"})
    assert not list((tmp_path / "envelope").rglob("*timestamps*"))
    with open_archive(str(tmp_path / "envelope")) as archive:  # the envelope keeps them
        assert [r.timestamp for r in archive.seek("t", 0, 3, count=1)] == [T0 + 30]


@pytest.mark.parametrize("block", [{"s3.compression.block.records": "4"},
                                   {"s3.compression.block.size": "100",  # blocks of 11, 9
                                    "s3.compression.block.records": "100000"}])  # fmt: skip
def test_the_scan_reads_timestamps_beside_the_blocks_without_the_record_reader(
    tmp_path, monkeypatch, block
):
    """The Spark reader's task path: a JSON timestamps file alone beside the values keeps the
    block path (no Record per row), its entries matched to the rows by offset, also where its
    blocks do not line up with the values' (cut by bytes) and offsets have gaps."""
    from blockgz.reader.spark import scan_read
    from blockgz.reader.spark.scan_plan import IntRange, ScanFilter, plan_scan

    recs = [
        KafkaRecord("t", 0, o, T0 + 7 * o, None, b'{"n": %d}' % o, timestamp_type=o % 2)
        for o in [*range(0, 30), *range(33, 60, 3)]
    ]
    export(tmp_path, recs, **block)

    def refuse(*args, **kwargs):
        raise AssertionError("the record reader was used")

    monkeypatch.setattr(scan_read, "_record_path", refuse)
    with open_archive(str(tmp_path)) as archive:
        splits = plan_scan(archive, ScanFilter(), topics=["t"])
        assert all(p.index_json == "" for s in splits for p in s.pieces)
        rows = [
            row
            for s in splits
            for b in scan_read.split_batches(archive, s, IntRange(low=5))
            for row in b.select(["offset", "timestamp", "timestampType"]).to_pylist()
        ]
    assert [r["offset"] for r in rows] == [r.offset for r in recs if r.offset >= 5]
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [
        r.timestamp_ms for r in recs if r.offset >= 5
    ]
    assert [r["timestampType"] for r in rows] == [r.timestamp_type for r in recs if r.offset >= 5]


def test_audit_knows_the_file_committed_and_an_uncommitted_one_is_removed_with_its_value(
    tmp_path,
):
    """``blockgz audit``: the committed timestamps files are objects of the job (checked, read
    by --deep), never strays; a dead batch's timestamps file goes with its value object."""
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.reader.audit.auditor import audit_job

    export(tmp_path)
    store = LocalStore(tmp_path)
    log = ManifestLog(store, "", Layout(), "blockgz")
    report = audit_job(log, deep=True)
    assert report.findings == [] and report.exit_code == 0
    assert report.objects == 4  # two value objects and their timestamps files

    folder = "topics/t/partition=0/"
    dead = [f"{folder}t+0+0000000040.json.gz", f"{folder}.t+0+0000000040.timestamps.json.gz"]
    for key in dead:  # copies of the first batch's, from offset 40 on: a dead batch's
        store.put(key, store.get(key.replace("0000000040", "0000000000")))
    found = {f.key: f.kind for f in audit_job(log).findings}
    assert found == {key: "uncommitted" for key in dead}
    repaired = audit_job(log, do_repair=True)
    assert sorted(r.rsplit("/", 1)[-1] for r in repaired.repaired) == sorted(
        k.rsplit("/", 1)[-1] for k in dead
    )
    assert audit_job(log).findings == []
