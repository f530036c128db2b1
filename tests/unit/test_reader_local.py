"""The offset reader on a local directory archive (the same code path as S3, no server)."""

from __future__ import annotations

import random

import pytest

from blockgz.errors import ObjectNotFoundError, OffsetNotFoundError
from blockgz.reader import open_archive
from blockgz.store import LocalStore
from testkit.archives import build_partition


@pytest.fixture(scope="module")
def local_archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("archive")
    expected = build_partition(LocalStore(root), gap_every=7)
    return root, expected


def test_seek_random_offsets_across_blocks_and_objects(local_archive):
    root, expected = local_archive
    offsets = sorted(expected)
    rng = random.Random(3)
    with open_archive(str(root)) as archive:
        for offset in rng.sample(offsets, 60):
            got = list(archive.seek("orders", 0, offset, count=25))
            want = [o for o in offsets if o >= offset][:25]
            assert [r.offset for r in got] == want
            assert [r.value for r in got] == [expected[o] for o in want]


def test_compacted_offset_starts_at_the_next_one(local_archive):
    root, expected = local_archive
    missing = next(o for o in range(max(expected)) if o not in expected)
    with open_archive(str(root)) as archive:
        assert next(archive.seek("orders", 0, missing)).offset == missing + 1


def test_read_range_is_half_open(local_archive):
    root, expected = local_archive
    with open_archive(str(root)) as archive:
        got = [r.offset for r in archive.read("orders", 0, 390, 420)]
    assert got == [o for o in sorted(expected) if 390 <= o < 420]


def test_read_everything_from_the_start(local_archive):
    root, expected = local_archive
    with open_archive(str(root)) as archive:
        assert [r.value for r in archive.seek("orders", 0, 0)] == [
            expected[o] for o in sorted(expected)
        ]


def test_clear_errors_for_missing_things(local_archive):
    root, expected = local_archive
    with open_archive(str(root)) as archive:
        with pytest.raises(
            OffsetNotFoundError, match=f"past the end: last archived offset is {max(expected)}"
        ):
            next(archive.seek("orders", 0, max(expected) + 1))
        with pytest.raises(
            ObjectNotFoundError,
            match=r"of topic 'orders', partition 9: listed .*topics/orders/partition=9",
        ):
            archive.seek("orders", 9, 0)


def test_ls_shows_offset_ranges_and_counts(local_archive):
    root, expected = local_archive
    with open_archive(str(root)) as archive:
        rows = archive.ls("orders")
    assert len(rows) == 3 and all(r.indexed for r in rows)
    assert sum(r.records for r in rows) == len(expected)
    assert rows[0].first_offset == 0 and rows[-1].last_offset == max(expected)


def test_object_without_index_is_an_error_unless_scanning(tmp_path):
    store = LocalStore(tmp_path)
    expected = build_partition(store, objects=1, records_per_object=50)
    (tmp_path / "topics/orders/partition=0/.orders+0+0000000000.json.index.json").unlink()
    with (
        open_archive(str(tmp_path)) as archive,
        pytest.raises(ObjectNotFoundError, match="has no index sidecar"),
    ):
        next(archive.seek("orders", 0, 10))
    with open_archive(str(tmp_path), {"scan.unindexed": "true"}) as archive:
        assert next(archive.seek("orders", 0, 10)).value == expected[10]


def test_envelope_records_come_back_with_key_headers_and_timestamp(tmp_path):
    """An export with format.json.envelope=true: the reader gives back what Kafka held."""
    from blockgz.reader import open_archive
    from blockgz.sink.records import KafkaRecord
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.batches import arrow_batches

    records = [
        KafkaRecord("t", 0, n, 1000 + n, None if n == 2 else b"k\xff%d" % n, b'{"n": %d}' % n)
        for n in range(5)
    ]
    records[1].headers = [("h", b"v"), ("bin", b"\x00\xff")]
    batch = arrow_batches(records)[0]  # with headers, as Spark's includeHeaders gives
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "format.json.envelope": "true", "s3.compression.type": "blockgzip"}
    )
    write_task(config, iter([batch]))
    with open_archive(str(tmp_path)) as archive:
        got = list(archive.seek("t", 0, 0))
    assert [(r.offset, r.value, r.key, r.timestamp) for r in got] == [
        (n, b'{"n":%d}' % n, None if n == 2 else b"k\xff%d" % n, 1000 + n) for n in range(5)
    ]
    assert got[1].headers == [("h", b"v"), ("bin", b"\x00\xff")]
    with open_archive(str(tmp_path), {"format.json.envelope": "false"}) as archive:
        raw = next(iter(archive.seek("t", 0, 0)))
    assert raw.value.startswith(b'{"topic":"t"') and raw.key is None


def test_a_sidecar_under_its_old_name_is_still_read(tmp_path):
    """Archives written before sidecars were hidden keep their ``….json.index.json``."""
    store = LocalStore(tmp_path)
    expected = build_partition(store, objects=2, records_per_object=50)
    folder = tmp_path / "topics/orders/partition=0"
    for hidden in folder.glob(".*.index.json"):
        hidden.rename(folder / hidden.name[1:])
    assert not list(folder.glob(".*")) and len(list(folder.glob("*.index.json"))) == 2
    with open_archive(str(tmp_path)) as archive:
        # In the first object: no earlier object whose index says whether it overlaps.
        assert [r.value for r in archive.seek("orders", 0, 10, count=3)] == [
            expected[n] for n in (10, 11, 12)
        ]
        assert archive.store.requests.gets == 1  # the listing said which name: no miss first
        assert all(row.indexed for row in archive.ls("orders"))


def test_a_custom_bytearray_extension_is_read_from_the_manifests_or_when_told(tmp_path):
    """format.bytearray.extension=.dat: the manifests record it; without them, say it."""
    from blockgz.sink.records import KafkaRecord
    from blockgz.sink.write.commit import write_manifest
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.archives import write_once
    from testkit.batches import arrow_batches

    records = [KafkaRecord("t", 0, n, 1000 + n, None, b"v%d" % n) for n in range(10)]
    options = {"name": "job", "format.class": "bytearray", "format.bytearray.extension": ".dat",
               "s3.compression.type": "blockgzip", "flush.size": "5"}  # fmt: skip
    config = SinkSettings.from_options({**options, "path": str(tmp_path / "m")})
    write_manifest(config.manifest_log(), 0, [write_task(config, iter(arrow_batches(records)))])
    wanted = [b"v%d" % n for n in range(3, 10)]
    with open_archive(str(tmp_path / "m")) as archive:
        assert [r.value for r in archive.seek("t", 0, 3)] == wanted
        assert [row.first_offset for row in archive.ls("t")] == [0, 5]
        assert archive.ls("t").strays == []

    write_once(records, {**options, "path": str(tmp_path / "w")})  # no manifest
    told = {"format.bytearray.extension": ".dat"}
    with open_archive(str(tmp_path / "w"), told) as archive:
        assert [r.value for r in archive.seek("t", 0, 3)] == wanted
    with (
        open_archive(str(tmp_path / "w")) as archive,
        pytest.raises(ObjectNotFoundError, match=r"format\.bytearray\.extension"),
    ):
        archive.seek("t", 0, 3)


def test_a_manifest_naming_the_old_sidecar_still_reads_after_it_was_renamed(tmp_path):
    from blockgz.objects.indexed import load_index
    from blockgz.written.sidecars import legacy_sidecar_key, sidecar_key

    store = LocalStore(tmp_path)
    build_partition(store, objects=1, records_per_object=20)
    key = "topics/orders/partition=0/orders+0+0000000000.json.gz"
    recorded = legacy_sidecar_key(key)  # what an older export's manifest says
    assert load_index(store, key, recorded).record_count == 20  # renamed to the hidden name
    store.delete(sidecar_key(key))
    with pytest.raises(ObjectNotFoundError, match=r"no index sidecar .*--scan"):
        load_index(store, key, recorded)
