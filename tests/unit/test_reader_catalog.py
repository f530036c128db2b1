"""Seek on every layout the sink writes: the reader finds objects through the export's catalog.

Archives written by the real write task (time- and field-partitioned, many batches, compacted
catalog) into a local directory, then read by offset: exactly the input records from the offset
on, in offset order, though one partition's records are interleaved over many directories.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockgz.commits.catalog import Catalog
from blockgz.errors import ObjectNotFoundError, OffsetNotFoundError
from blockgz.reader import open_archive
from testkit.archives import LAYOUTS, export_batches, input_records


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def archive_dir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    records = input_records(300)
    export_batches(str(root), records, request.param, batches=10)
    return root, records


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_seek_returns_exactly_the_records_from_the_offset(archive_dir, data):
    root, records = archive_dir
    partition = data.draw(st.integers(0, 1))
    held = [r for r in records if r.partition == partition]
    offset = data.draw(st.integers(0, held[-1].offset))
    count = data.draw(st.none() | st.integers(1, 40))
    expected = [(r.offset, r.value) for r in held if r.offset >= offset][:count]
    with open_archive(str(root)) as archive:
        got = [(r.offset, r.value) for r in archive.seek("ev", partition, offset, count=count)]
    assert got == expected


def test_the_catalog_was_compacted_and_objects_interleave(archive_dir):
    root, _ = archive_dir
    with open_archive(str(root)) as archive:
        refs = archive.objects("ev", 0)
    assert len({r.directory for r in refs}) > 1
    assert any(a.last_offset >= b.start_offset for a, b in itertools.pairwise(refs))
    from blockgz.archive.layout import Layout
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.store import LocalStore

    root_doc = Catalog(ManifestLog(LocalStore(root), "", Layout(), "job")).latest_root()
    assert root_doc is not None and root_doc.manifests == 8  # batches 0-7; 8 and 9 are the tail


def test_a_cold_seek_reads_a_bounded_number_of_objects(tmp_path):
    records = input_records(600, partitions=1)
    export_batches(str(tmp_path), records, "hourly", batches=60, every=10)
    with open_archive(str(tmp_path)) as archive:
        store = archive.store
        got = list(archive.seek("ev", 0, records[300].offset, count=1))
        counts = store.requests
    assert [r.offset for r in got] == [records[300].offset]
    # partition prefix (empty), exports' directory, the job's first manifest page and one
    # manifest, roots, tail manifests; then segments, sidecars and blocks of the objects open
    # around the offset: nowhere near the 60 manifests and ~400 objects of the history.
    assert counts.lists <= 5
    assert counts.gets + counts.ranged_gets <= 20, counts.summary()


def test_without_the_catalog_a_time_partitioned_archive_says_what_it_listed(archive_dir):
    root, _ = archive_dir
    with (
        open_archive(str(root), {"catalog": "false"}) as archive,
        pytest.raises(ObjectNotFoundError, match="partition 0: listed"),
    ):
        list(archive.seek("ev", 0, 5))


def test_offsets_outside_the_archive_are_named(archive_dir):
    root, records = archive_dir
    last = max(r.offset for r in records if r.partition == 1)
    with (
        open_archive(str(root)) as archive,
        pytest.raises(OffsetNotFoundError, match="past the end"),
    ):
        list(archive.seek("ev", 1, last + 1))
