"""The catalog on a real S3 server (SeaweedFS), counted at the server by the logging proxy.

A time-partitioned archive of many micro-batches, written by the real write task: resuming and
a cold seek read a bounded number of objects (``StartAfter`` and ``MaxKeys`` honoured by the
server), and the seek returns exactly the records from its offset.
"""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from blockgz.commits.catalog import Catalog
from blockgz.reader import open_archive
from testkit.archives import export_batches, input_records
from testkit.s3 import s3_options


def test_resume_and_cold_seek_cost_a_bounded_number_of_requests(weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    records = input_records(400, partitions=1)
    config = export_batches(
        f"s3://{weed_bucket}/arch", records, "hourly", batches=45, every=10, **options
    )
    weed_proxy.clear_log()
    offsets = config.manifest_log().committed_offsets()
    assert offsets == {"ev": {0: records[-1].offset + 1}}
    requests = [(r.method, r.query) for r in weed_proxy.requests]
    lists = [q for m, q in requests if m == "GET" and "list-type=2" in q]
    gets = [q for m, q in requests if m == "GET" and "list-type=2" not in q]
    # the roots, then only the 5 manifests after the newest root (start-after), 1 + 5 GETs
    assert len(lists) == 2 and any("start-after=" in q for q in lists)
    assert len(gets) == 1 + 5

    target = records[123]
    weed_proxy.clear_log()
    with open_archive(f"s3://{weed_bucket}/arch", options) as archive:
        got = [(r.offset, r.value) for r in archive.seek("ev", 0, target.offset, count=3)]
    expected = [(r.offset, r.value) for r in records if r.offset >= target.offset][:3]
    assert got == expected
    served = [r for r in weed_proxy.requests if r.method == "GET"]
    assert len(served) <= 25, [(r.path, r.query) for r in served]
    assert all(r.response_bytes < 64_000 for r in served)  # no whole-history read
    root = Catalog(config.manifest_log()).latest_root()
    assert root is not None and root.manifests == 40


@pytest.mark.parametrize("history", ["long", "short"])
def test_uncommitted_objects_are_found_without_listing_the_committed_ones(
    weed_proxy, weed_bucket, monkeypatch, history
):
    """A partition with a long committed history is listed from its committed offset on; a
    short one (fewer pages than the two per-partition LISTs) by one listing of the topic."""
    from blockgz.archive.layout import Layout
    from blockgz.commits import recovery
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.store import open_store
    from testkit.archives import build_partition

    options = s3_options(weed_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{weed_bucket}", options)
    build_partition(store, prefix, objects=3, records_per_object=100)  # starts 0, 100, 200
    directory = f"{prefix}topics/orders/partition=0/"
    for start in (0, 200):  # the hidden record timestamps files beside two of them
        store.put(f"{directory}.orders+0+{start:010d}.timestamps.json", b"[1,0]\n" * 100)
    log = ManifestLog(store, prefix, Layout(), "job")
    if history == "long":  # as if the catalog named more committed files than two LISTs hold
        monkeypatch.setattr(recovery, "_one_listing_cheaper", lambda *_: False)
    weed_proxy.clear_log()
    removed = log.remove_uncommitted({"orders": {0: 100}}, partition_directories=True)
    assert sorted(k.rsplit("/", 1)[1] for k in removed) == [
        ".orders+0+0000000100.json.index.json",
        ".orders+0+0000000200.json.index.json",
        ".orders+0+0000000200.timestamps.json",
        "orders+0+0000000100.json.gz",
        "orders+0+0000000200.json.gz",
    ]
    # Besides the catalog's (do the manifests say intents?), one listing of the directory's
    # objects and one of its hidden timestamps files, each from the committed offset on (the
    # hidden sidecars sort before the names: each is found from its object's name).
    listings = [
        unquote(r.query)
        for r in weed_proxy.requests
        if "list-type=2" in r.query and "topics" in r.query
    ]
    if history == "long":
        assert len(listings) == 2, listings
        assert all("start-after=" in q and "0000000099" in q for q in listings)
        assert sum("partition=0/.orders+0+" in q for q in listings) == 1
    else:
        assert len(listings) == 1, listings
        assert "prefix=" in listings[0] and "topics/orders/" in listings[0], listings
    assert [info.key.rsplit("/", 1)[1] for info in store.list(prefix)] == [
        ".orders+0+0000000000.json.index.json",
        ".orders+0+0000000000.timestamps.json",
        "orders+0+0000000000.json.gz",
    ]


@pytest.mark.parametrize("below", ["arch/topics", "arch/topics/orders", "arch/topics/orders/"])
def test_an_s3_archive_opens_from_its_topics_or_a_topic_directory(weed_proxy, weed_bucket, below):
    from blockgz.store import open_store
    from testkit.archives import build_partition

    options = s3_options(weed_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{weed_bucket}/arch", options)
    expected = build_partition(store, prefix, objects=2, records_per_object=50)
    with open_archive(f"s3://{weed_bucket}/{below}", options) as archive:
        (record,) = archive.seek("orders", 0, 70, count=1)
    assert record.value == expected[70]


def test_nothing_found_names_the_prefix_listed_and_topics_dir(weed_proxy, weed_bucket):
    from blockgz.errors import ObjectNotFoundError

    options = s3_options(weed_proxy.endpoint_url)
    with (
        open_archive(f"s3://{weed_bucket}/elsewhere", options) as archive,
        pytest.raises(ObjectNotFoundError) as failure,
    ):
        list(archive.seek("ev", 0, 5))
    message = str(failure.value)
    assert f"listed s3://{weed_bucket}/elsewhere/topics/ev/partition=0/" in message
    assert "topics.dir='topics'" in message


def test_a_killed_runs_multipart_uploads_are_aborted_at_start(seaweed_s3, weed_bucket):
    import time

    from blockgz.sink.export.start import abort_left_uploads
    from blockgz.sink.jobconfig.config import ExportSettings

    client = seaweed_s3.client()
    left = [
        "topics/mine/partition=0/mine+0+0000000000.json.gz",  # the job's topic
        "_blockgz/job/manifests/00000000000000000007.json",  # its job directory
        "topics/other/partition=0/other+0+0000000000.json.gz",  # another job's topic
    ]
    for key in left:
        client.create_multipart_upload(Bucket=weed_bucket, Key=key)
    job = ExportSettings.from_mapping(
        {
            "name": "job",
            "topics": "mine",
            "kafka.bootstrap.servers": "127.0.0.1:1",  # not contacted: topics are named
            "s3.bucket.name": weed_bucket,
            **s3_options(seaweed_s3.endpoint_url),
        }
    )
    aborted = abort_left_uploads(job, started_before=time.time() + 1)
    assert sorted(aborted) == sorted(left[:2])
    remaining = client.list_multipart_uploads(Bucket=weed_bucket).get("Uploads", [])
    assert [u["Key"] for u in remaining] == [left[2]]
    # an upload begun after this run started is alive: not touched
    client.create_multipart_upload(Bucket=weed_bucket, Key=left[0])
    assert abort_left_uploads(job, started_before=0.0) == []
    remaining = client.list_multipart_uploads(Bucket=weed_bucket).get("Uploads", [])
    assert sorted(u["Key"] for u in remaining) == sorted([left[0], left[2]])


def _hourly_history(hours: int) -> list:
    from blockgz.sink.records import KafkaRecord
    from testkit.archives import HOUR, T0

    return [
        KafkaRecord("ev", 0, n, T0 + (n // 4) * HOUR, None, b'{"kind": "k", "n": %d}' % n)
        for n in range(hours * 4)
    ]


@pytest.mark.parametrize("hours", [12, 120])
def test_a_restart_under_a_time_partitioner_costs_the_same_whatever_the_history(
    weed_proxy, weed_bucket, hours
):
    """Intents: the requests of removing an uncommitted batch depend on that batch (here: a
    late record for hour 1 and two new hours), not on the 12 or 120 hourly directories."""
    from blockgz.sink.records import KafkaRecord
    from blockgz.sink.write.task import write_task
    from testkit.archives import HOUR, T0
    from testkit.batches import arrow_batches

    options = s3_options(weed_proxy.endpoint_url)
    root = f"s3://{weed_bucket}/h{hours}"
    config = export_batches(root, _hourly_history(hours), "hourly", batches=6, every=4, **options)
    first = hours * 4
    stamps = [T0 + HOUR, T0 + hours * HOUR, T0 + (hours + 1) * HOUR]
    late = [
        KafkaRecord("ev", 0, first + i, s, None, b'{"n": %d}' % i) for i, s in enumerate(stamps)
    ]
    uncommitted = write_task(config, iter(arrow_batches(late)))  # dies before its manifest
    weed_proxy.clear_log()

    removed = config.manifest_log().remove_uncommitted({"ev": {0: first}})

    assert sorted(removed) == sorted(
        k for f in uncommitted.files for k in (f.key, f.index_key) if k
    )
    listings = [unquote(r.query) for r in weed_proxy.requests if "list-type=2" in r.query]
    data_listings = [q for q in listings if f"prefix=h{hours}/topics/" in q]
    # each of the 3 directories: its objects of the partition, and apart its hidden timestamps
    # files (.ev+0+…), each from the committed offset on
    assert len(data_listings) == 6 and all("ev+0+" in q for q in data_listings), data_listings
    assert sum("/.ev+0+&" in q for q in data_listings) == 3, data_listings
    # roots, manifests after the root, this partition's intents; then 3 directories, twice
    assert len(listings) == 3 + 6, listings
    with open_archive(root, options) as archive:
        assert [r.offset for r in archive.seek("ev", 0, 0)] == list(range(first))
