"""S3's own checksum of what blockgz uploads, on moto, SeaweedFS and radosgw (issue 41).

Every upload sends the CRC-32 of its bytes (``x-amz-checksum-crc32``; a multipart upload the
full-object type, every part its own); :meth:`S3Store.stored_crc32` asks for it back with one
HEAD. What each server keeps is the table in docs/storage.md ("Checksums"):
these tests pin it, and that no server's answer breaks an upload.
"""

from __future__ import annotations

import zlib

import pytest

from blockgz.store import open_store
from testkit.s3 import s3_options
from testkit.servers import fresh_bucket

MIB = 1024 * 1024
SERVERS = {"moto": "moto_s3", "seaweedfs": "seaweed_s3", "ceph": "ceph_s3"}
#: Which servers keep the CRC-32 (single PUT, full-object multipart), as measured.
KEEPS = {"moto": (True, True), "seaweedfs": (True, True), "ceph": (False, False)}


@pytest.fixture(params=list(SERVERS))
def server(request):
    """(name, the session's server): moto, SeaweedFS and radosgw (skipped where not installed)."""
    return request.param, request.getfixturevalue(SERVERS[request.param])


def _store(server, request):
    name, s3 = server
    bucket = fresh_bucket(s3, request, "k-", digits=24)
    options = s3_options(s3.endpoint_url, **{"s3.part.size": str(5 * MIB)})
    store, _ = open_store(f"s3://{bucket}/", options)
    return name, store


def test_single_put_keeps_its_crc32_where_the_server_does(server, request):
    name, store = _store(server, request)
    data = b"bound content\n" * 1000
    store.put("one.json", data)
    expected = zlib.crc32(data) if KEEPS[name][0] else None
    assert store.stored_crc32("one.json") == expected
    assert store.get("one.json") == data
    assert store.send_checksums  # no server refused the arguments


def test_multipart_upload_keeps_the_whole_objects_crc32(server, request):
    name, store = _store(server, request)
    data = bytes(range(256)) * (11 * MIB // 256 + 7)  # three parts of 5 MiB, the last short
    with store.open_upload("many.bin") as upload:
        for start in range(0, len(data), 3 * MIB):
            upload.write(data[start : start + 3 * MIB])
    assert upload.crc32 == zlib.crc32(data)
    expected = zlib.crc32(data) if KEEPS[name][1] else None
    assert store.stored_crc32("many.bin") == expected
    assert store.head("many.bin").size == len(data)


def test_small_upload_is_one_put_with_its_crc32(server, request):
    name, store = _store(server, request)
    with store.open_upload("small.json") as upload:
        upload.write(b"a")
        upload.write(b"bc")
    assert upload.crc32 == zlib.crc32(b"abc")
    assert store.stored_crc32("small.json") == (zlib.crc32(b"abc") if KEEPS[name][0] else None)
