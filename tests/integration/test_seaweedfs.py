"""blockgz's S3 store on SeaweedFS, a server that serves ranges and takes parts like S3 does.

moto answers a ranged GET by reading the whole object and completes multipart uploads in
~1.4 s, so what these tests check (one range per block, parts in parallel, aborts that leave
nothing) is measured here, on SeaweedFS, through the request-logging proxy.
"""

from __future__ import annotations

import os

import pytest

from blockgz.archive.layout import Layout
from blockgz.local_servers.ports import free_ports
from blockgz.objects.indexed import IndexedReader
from blockgz.reader import open_archive
from blockgz.store import open_store
from blockgz.written.upload import BlockGzipUpload
from testkit.archives import build_partition
from testkit.s3 import s3_options

MIB = 1024 * 1024


def test_a_seek_is_one_ranged_get_per_block(weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{weed_bucket}", options)
    expected = build_partition(store, prefix, objects=2, records_per_object=300)
    with open_archive(f"s3://{weed_bucket}", options) as archive:
        list(archive.seek("orders", 0, 300, count=1))  # listing and this object's index cached
        weed_proxy.clear_log()
        (record,) = archive.seek("orders", 0, 450, count=1)
    assert record.value == expected[450]
    gets = [r for r in weed_proxy.requests if r.method == "GET"]
    assert len(gets) == 1 and gets[0].headers.get("Range", "").startswith("bytes=")
    assert gets[0].response_bytes < 20_000  # one block, not the object


def test_parts_go_up_in_parallel_and_the_object_reads_back(weed_proxy, weed_bucket):
    weed_proxy.latency_s = 0.05
    options = s3_options(
        weed_proxy.endpoint_url, **{"s3.part.size": str(5 * MIB), "s3.upload.concurrency": "4"}
    )
    store, _ = open_store(f"s3://{weed_bucket}", options)
    data = os.urandom(MIB) * 22  # 22 MiB: four full parts and a short one
    with store.open_upload("big.bin") as upload:
        for n in range(0, len(data), MIB):
            upload.write(data[n : n + MIB])
    assert weed_proxy.peak_in_flight >= 3
    assert store.get_range("big.bin", 7 * MIB - 3, 7 * MIB + 3) == data[7 * MIB - 3 : 7 * MIB + 3]
    assert store.head("big.bin").size == len(data)


def test_a_failed_upload_leaves_no_parts(weed_proxy, weed_bucket, seaweed_s3):
    options = s3_options(weed_proxy.endpoint_url, **{"s3.part.size": str(5 * MIB)})
    store, _ = open_store(f"s3://{weed_bucket}", options)
    weed_proxy.inject("500", times=None, method="PUT", query_contains="partNumber=2")
    with pytest.raises(Exception, match="UploadPart 2"), store.open_upload("doomed.bin") as up:
        for _ in range(12):
            up.write(os.urandom(MIB))
    weed_proxy.clear_faults()
    uploads = seaweed_s3.client().list_multipart_uploads(Bucket=weed_bucket)
    assert uploads.get("Uploads", []) == []
    assert [o.key for o in store.list("")] == []


def test_directories_and_indexed_objects(seaweed_s3, weed_bucket):
    store, _ = open_store(f"s3://{weed_bucket}", s3_options(seaweed_s3.endpoint_url))
    key = Layout().data_key("", "t/partition=0", "t", 0, 0, ".json.gz")
    with BlockGzipUpload(store, key, block_size=64) as out:
        for n in range(50):
            out.write(b'{"n": %d}' % n)
    store.put("_blockgz/job/manifests/00000000000000000000.json", b"{}")
    assert store.list_prefixes("") == ["_blockgz/", "topics/"]
    with IndexedReader.open_object(store, key) as obj:
        assert [r.value for r in obj.seek(47)] == [b'{"n": 47}', b'{"n": 48}', b'{"n": 49}']
        assert obj.verify().ok


def test_a_port_taken_before_weed_binds_it_is_retried_on_new_ports(monkeypatch):
    """Free ports are chosen, then bound by ``weed mini``: another process may take one in
    between (a CI run once lost every SeaweedFS test so). The start tries again on new ports."""
    import socket

    from blockgz.local_servers import seaweed

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    chosen: list[list[int]] = []

    def ports_with_master_taken_first(host: str, count: int) -> list[int]:
        ports = free_ports(host, count)
        if not chosen:
            ports[0] = taken_port  # master.port, the first flag
        chosen.append(ports)
        return ports

    monkeypatch.setattr(seaweed, "free_ports", ports_with_master_taken_first)
    try:
        with seaweed.SeaweedS3() as server:
            server.client().create_bucket(Bucket="retried")
            names = [b["Name"] for b in server.client().list_buckets()["Buckets"]]
    finally:
        taken.close()
    assert [ports[0] == taken_port for ports in chosen] == [True, False]
    assert names == ["retried"]
