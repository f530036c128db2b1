"""Two writers over one archive: every reader returns each offset once, from one object.

The archives are written by the real write task twice with other batch boundaries (what a
second export with a lost checkpoint did before blockgz resumed from the archive), so the
second run's objects start inside the first run's and hold the same offsets again.
"""

from __future__ import annotations

import logging

import pytest

from blockgz.reader import open_archive
from blockgz.reader.reading.overlaps import find_overlaps
from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan
from testkit.archives import export_batches, input_records
from tests.unit.test_scan import rows_of


def _two_writers(root, layout: str, records) -> None:
    # Two checkpoints (epochs) of one job, with other batch boundaries: overlapping objects.
    export_batches(str(root), records, layout, batches=10, **{"blockgz.epoch": "e1"})
    export_batches(str(root), records, layout, batches=7, **{"blockgz.epoch": "e2"})


@pytest.fixture(scope="module", params=["default", "hourly", "field"])
def doubled(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"doubled-{request.param}")
    records = input_records(120)
    _two_writers(root, request.param, records)
    return root, records


def _expected(records, partition, start=0):
    return [(r.offset, r.value) for r in records if r.partition == partition and r.offset >= start]


@pytest.mark.parametrize("committed", ["true", "false"])
def test_records_return_each_offset_once(doubled, committed):
    root, records = doubled
    with open_archive(str(root), {"committed": committed}) as archive:
        refs = archive.objects("ev", 0)
        assert find_overlaps(refs, archive.index), "the two runs' objects must overlap"
        for partition in (0, 1):
            got = [(r.offset, r.value) for _, r in archive.records("ev", [partition])]
            assert got == _expected(records, partition)


def test_a_seek_from_any_offset_returns_each_offset_once(doubled):
    root, records = doubled
    held = [r.offset for r in records if r.partition == 0]
    with open_archive(str(root)) as archive:
        for offset in held[::7]:
            got = [(r.offset, r.value) for r in archive.seek("ev", 0, offset, count=20)]
            assert got == _expected(records, 0, offset)[:20]


def test_the_spark_scan_plan_reads_each_offset_once(doubled):
    root, records = doubled
    with open_archive(str(root)) as archive:
        for scan in (ScanFilter(), ScanFilter().with_range("offset", low=40, high=90)):
            rows = rows_of(archive, plan_scan(archive, scan), scan)
            got = sorted((p, o) for _, p, o, _ in rows)
            wanted = sorted(
                (r.partition, r.offset) for r in records if scan.offsets.contains(r.offset)
            )
            assert got == wanted


def test_overlapping_objects_are_named_in_a_warning(doubled, caplog):
    root, _ = doubled
    with caplog.at_level(logging.WARNING, "blockgz.reader"), open_archive(str(root)) as archive:
        list(archive.records("ev", [0]))
    assert any("holds offset" in m and "blockgz verify" in m for m in caplog.messages)


def test_which_copy_is_read_is_the_object_with_the_lowest_first_offset(tmp_path):
    from blockgz import BlockGzipUpload
    from blockgz.store import LocalStore

    store = LocalStore(tmp_path)
    for start, end, tag in ((300, 400, b"a"), (307, 421, b"b")):
        key = f"topics/t/partition=0/t+0+{start:010d}.json.gz"
        with BlockGzipUpload(store, key, first_offset=start, max_records=5) as out:
            for n in range(start, end):
                out.write(b"%s%d" % (tag, n))
    with open_archive(str(tmp_path)) as archive:
        from_300 = {r.offset: r.value for r in archive.seek("t", 0, 300)}
        from_310 = [r.value for r in archive.seek("t", 0, 310, count=2)]
    assert sorted(from_300) == list(range(300, 421))
    assert from_300[399] == b"a399" and from_300[400] == b"b400"
    assert from_310 == [b"a310", b"a311"]  # the same copy whichever offset the seek starts at
