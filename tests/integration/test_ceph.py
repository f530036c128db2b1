"""blockgz's S3 store and reader on Ceph's RADOS Gateway, a third real S3 server.

Every check of ``test_s3.py`` runs on radosgw too (``ceph`` is one of its servers). The tests
here add what those do not reach: listing across pages (with ``StartAfter``, plain and by
directory), aborting left uploads across ``ListMultipartUploads`` pages, deletes, radosgw's own
answers at the edges of multipart uploads, and an archive written through the store and read
back by offset.

One cluster (``ceph_s3`` in conftest) serves the whole session; it starts in about 1.5 s.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
from typing import Any

import pytest
from botocore.exceptions import ClientError

from blockgz.archive.layout import Layout
from blockgz.errors import ObjectNotFoundError, StoreError
from blockgz.reader import open_archive
from blockgz.store import open_store
from blockgz.store.s3 import translate_error
from blockgz.written.upload import BlockGzipUpload
from testkit.archives import build_partition
from testkit.s3 import FaultProxy, s3_options

pytestmark = pytest.mark.slow

MIB = 1024 * 1024


@pytest.fixture
def ceph_proxy(ceph_s3):
    """The fault-injecting, request-logging proxy in front of radosgw."""
    with FaultProxy(ceph_s3.endpoint_url) as proxy:
        yield proxy


# -- helpers ---------------------------------------------------------------------------------------
class _SmallPages:
    """A boto3 client whose listings come back a few entries a page, unless the caller asks for
    fewer: the store's paging is then exercised against radosgw's own continuation tokens and
    markers without writing a thousand objects first."""

    def __init__(self, client: Any, page: int):
        self._client = client
        self._page = page

    def list_objects_v2(self, **args: Any) -> dict[str, Any]:
        args["MaxKeys"] = min(args.get("MaxKeys", self._page), self._page)
        return self._client.list_objects_v2(**args)

    def list_multipart_uploads(self, **args: Any) -> dict[str, Any]:
        args["MaxUploads"] = min(args.get("MaxUploads", self._page), self._page)
        return self._client.list_multipart_uploads(**args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _paged_store(ceph_s3, bucket: str, page: int = 3):
    store, _ = open_store(f"s3://{bucket}", s3_options(ceph_s3.endpoint_url))
    store.client = _SmallPages(store.client, page)
    return store


# -- options --------------------------------------------------------------------------------------
def test_the_canned_acl_reaches_radosgw(ceph_s3, ceph_bucket):
    options = s3_options(ceph_s3.endpoint_url, **{"s3.acl.canned": "public-read"})
    store, _ = open_store(f"s3://{ceph_bucket}", options)
    store.put("open.json", b"{}\n")
    grants = ceph_s3.client().get_object_acl(Bucket=ceph_bucket, Key="open.json")["Grants"]
    assert {"URI": "http://acs.amazonaws.com/groups/global/AllUsers", "Type": "Group"} in [
        {k: v for k, v in g["Grantee"].items() if k in ("URI", "Type")}
        for g in grants
        if g["Permission"] == "READ"
    ]


# -- the store's operations ----------------------------------------------------------------------
def test_put_get_ranges_and_delete(ceph_s3, ceph_bucket):
    store, _ = open_store(f"s3://{ceph_bucket}", s3_options(ceph_s3.endpoint_url))
    data = random.Random(3).randbytes(3 * MIB + 11)
    store.put("a/obj.bin", data)
    assert store.get("a/obj.bin") == data
    assert store.head("a/obj.bin").size == len(data)
    assert store.get_range("a/obj.bin", 1000, 2000) == data[1000:2000]
    assert store.get_range("a/obj.bin", len(data) - 5, len(data) + 100) == data[-5:]  # clipped
    assert store.get_range("a/obj.bin", 7, 7) == b""
    assert b"".join(store.iter_chunks("a/obj.bin", MIB)) == data

    store.delete("a/obj.bin")
    with pytest.raises(ObjectNotFoundError):
        store.head("a/obj.bin")
    with pytest.raises(ObjectNotFoundError, match="NoSuchKey"):
        store.get("a/obj.bin")
    with pytest.raises(ObjectNotFoundError):
        store.get_range("a/obj.bin", 0, 10)
    store.delete("a/obj.bin")  # deleting a missing key is no error, as on S3


def test_listing_pages_with_start_after_and_limit(ceph_s3, ceph_bucket):
    store = _paged_store(ceph_s3, ceph_bucket, page=3)
    keys = [f"p/{n:03d}" for n in range(11)]
    for key in [*keys, "other/x", "p0"]:
        store.put(key, key.encode())
    assert [(o.key, o.size) for o in store.list("p/")] == [(k, len(k)) for k in keys]
    assert store.requests.lists >= 4  # pages of three
    assert [o.key for o in store.list("p/", start_after="p/004")] == keys[5:]
    assert [o.key for o in store.list("p/", start_after="p/004", limit=4)] == keys[5:9]
    assert [o.key for o in store.list("p/", limit=7)] == keys[:7]
    assert [o.key for o in store.list("", start_after="p/009")] == ["p/010", "p0"]
    assert list(store.list("p/", start_after="p/010")) == []


def test_directories_are_listed_across_pages(ceph_s3, ceph_bucket):
    store = _paged_store(ceph_s3, ceph_bucket, page=2)
    for n in range(7):
        store.put(f"topics/t{n}/partition=0/x", b"1")
        store.put(f"topics/t{n}/partition=1/x", b"1")
    store.put("topics/loose", b"1")
    assert store.list_prefixes("topics/") == [f"topics/t{n}/" for n in range(7)]
    assert store.list_prefixes("topics/t3/") == ["topics/t3/partition=0/", "topics/t3/partition=1/"]


def test_parallel_parts_complete_despite_the_empty_etag(ceph_proxy, ceph_s3, ceph_bucket):
    """radosgw answers CompleteMultipartUpload with ``<ETag></ETag>``; the store never reads it,
    and the object is whole (HEAD has the multipart ETag of its five parts)."""
    ceph_proxy.latency_s = 0.05
    options = s3_options(
        ceph_proxy.endpoint_url, **{"s3.part.size": str(5 * MIB), "s3.upload.concurrency": "4"}
    )
    store, _ = open_store(f"s3://{ceph_bucket}", options)
    completed: list[dict[str, Any]] = []
    store.client.meta.events.register(
        "after-call.s3.CompleteMultipartUpload", lambda parsed, **_: completed.append(parsed)
    )
    data = random.Random(5).randbytes(MIB) * 22  # four full parts and a short one
    with store.open_upload("big.bin") as upload:
        for n in range(0, len(data), MIB):
            upload.write(data[n : n + MIB])
    assert ceph_proxy.peak_in_flight >= 3
    assert ceph_proxy.count(method="PUT", query_contains="partNumber=") == 5
    [answer] = completed
    head = ceph_s3.client().head_object(Bucket=ceph_bucket, Key="big.bin")
    assert head["ETag"].endswith('-5"')
    assert answer.get("ETag", "") in ("", head["ETag"])  # Pacific: ""
    ceph_proxy.latency_s = 0.0
    assert store.head("big.bin").size == len(data)
    assert store.get_range("big.bin", 5 * MIB - 3, 5 * MIB + 3) == data[5 * MIB - 3 : 5 * MIB + 3]
    assert hashlib.sha256(store.get("big.bin")).digest() == hashlib.sha256(data).digest()


def test_an_aborted_upload_is_not_found_whatever_radosgw_calls_it(ceph_s3, ceph_bucket):
    """After an abort radosgw answers ListParts with NoSuchKey, not S3's NoSuchUpload (and a
    second abort with NoSuchUpload): the store reports both as a missing object."""
    store, _ = open_store(f"s3://{ceph_bucket}", s3_options(ceph_s3.endpoint_url))
    client = ceph_s3.client()
    upload_id = client.create_multipart_upload(Bucket=ceph_bucket, Key="gone")["UploadId"]
    client.abort_multipart_upload(Bucket=ceph_bucket, Key="gone", UploadId=upload_id)
    ids = {"Bucket": ceph_bucket, "Key": "gone", "UploadId": upload_id}
    for operation, expected in [
        (store.client.list_parts, {"NoSuchKey", "NoSuchUpload"}),
        (store.client.abort_multipart_upload, {"NoSuchUpload"}),
    ]:
        with pytest.raises(ClientError) as raw:
            operation(**ids)
        assert raw.value.response["Error"]["Code"] in expected
        assert isinstance(translate_error(raw.value, "x"), ObjectNotFoundError)
        with pytest.raises(ObjectNotFoundError):
            store.call("x", lambda op=operation: op(**ids))


def test_abort_uploads_follows_pages_and_the_start_time(ceph_s3, ceph_bucket):
    store = _paged_store(ceph_s3, ceph_bucket, page=2)
    client = ceph_s3.client()
    left = sorted(f"topics/t/partition=0/t+0+{n:010d}.json.gz" for n in range(5))
    for key in [*left, "elsewhere/keep.json.gz"]:
        client.create_multipart_upload(Bucket=ceph_bucket, Key=key)
    # Begun after the cutoff: someone else's live uploads, left alone.
    assert store.abort_uploads("topics/", started_before=0.0) == []
    assert sorted(store.abort_uploads("topics/")) == left
    remaining = client.list_multipart_uploads(Bucket=ceph_bucket).get("Uploads", [])
    assert [u["Key"] for u in remaining] == ["elsewhere/keep.json.gz"]


def test_a_failed_upload_leaves_neither_parts_nor_object(ceph_proxy, ceph_s3, ceph_bucket):
    options = s3_options(ceph_proxy.endpoint_url, **{"s3.part.size": str(5 * MIB)})
    store, _ = open_store(f"s3://{ceph_bucket}", options)
    ceph_proxy.inject("500", times=None, method="PUT", query_contains="partNumber=3")
    with pytest.raises(StoreError, match="UploadPart 3"), store.open_upload("x.bin") as up:
        for _ in range(16):
            up.write(os.urandom(MIB))
    assert ceph_proxy.count(method="DELETE", query_contains="uploadId") == 1  # the abort
    assert ceph_s3.client().list_multipart_uploads(Bucket=ceph_bucket).get("Uploads", []) == []
    assert list(store.list("")) == []


# -- an archive, end to end ------------------------------------------------------------------------
def test_an_archive_reads_back_by_offset_one_range_per_block(ceph_proxy, ceph_bucket):
    options = s3_options(ceph_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{ceph_bucket}/arch", options)
    expected = build_partition(store, prefix, objects=2, records_per_object=300)
    with open_archive(f"s3://{ceph_bucket}/arch", options) as archive:
        list(archive.seek("orders", 0, 300, count=1))  # listing and this object's index cached
        ceph_proxy.clear_log()
        (record,) = archive.seek("orders", 0, 450, count=1)
        assert record.offset == 450 and record.value == expected[450]
        gets = [r for r in ceph_proxy.requests if r.method == "GET"]
        assert len(gets) == 1 and (gets[0].header("Range") or "").startswith("bytes=")
        assert gets[0].response_bytes < 20_000  # one block, not the object
        assert [r.offset for r in archive.seek("orders", 0, 590)] == list(range(590, 600))


def test_a_multipart_archive_object_reads_back_by_offset(ceph_s3, ceph_bucket):
    """A block-GZIP object large enough to go up in parts (so completed with the empty ETag),
    with its index, then sought through ``blockgz.reader.open_archive``."""
    options = s3_options(
        ceph_s3.endpoint_url, **{"s3.part.size": str(5 * MIB), "s3.upload.concurrency": "3"}
    )
    store, prefix = open_store(f"s3://{ceph_bucket}", options)
    rng = random.Random(11)
    values = [
        b'{"n": %d, "pad": "%s"}' % (n, base64.b64encode(rng.randbytes(3000))) for n in range(4000)
    ]
    key = Layout().data_key(prefix, "big/partition=2", "big", 2, 1000, ".json.gz")
    with BlockGzipUpload(store, key, block_size=256 * 1024, first_offset=1000, threads=2) as out:
        for n, value in enumerate(values):
            out.write(value, 1000 + n)
    size = store.head(key).size
    assert size > 10 * MIB
    head = ceph_s3.client().head_object(Bucket=ceph_bucket, Key=key)
    assert head["ETag"].endswith(f'-{-(-size // (5 * MIB))}"')  # it did go up in parts

    with open_archive(f"s3://{ceph_bucket}", options) as archive:
        for offset in (1000, 2345, 4999):
            (record,) = archive.seek("big", 2, offset, count=1)
            assert (record.offset, record.value) == (offset, values[offset - 1000])
