"""The local S3 test servers (tests/s3_servers.py): moto's S3, the fault-injecting proxy, and
the start and stop of Ceph's radosgw (blockgz/local_servers/ceph.py)."""

from __future__ import annotations

import gc
import hashlib
import http.client
import io
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from time import monotonic
from typing import Any
from urllib.parse import urlsplit

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from testkit.s3 import FaultProxy, MotoS3

pytest.importorskip("moto.server")
psutil = pytest.importorskip("psutil")


MiB = 1 << 20
BUCKET = "s3-servers-test"
# What botocore raises when the connection dies under it (ConnectionClosedError, ProtocolError,
# ReadTimeoutError are HTTPClientErrors; EndpointConnectionError is a ConnectionError).
CONNECTION_ERRORS = (HTTPClientError, BotoConnectionError)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    # A child process: moto keeps objects in RAM, which must not count as the proxy's memory.
    with MotoS3(in_process=False) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(moto: MotoS3) -> Iterator[FaultProxy]:
    with FaultProxy(moto.endpoint_url) as server:
        yield server


@pytest.fixture(scope="module")
def s3(proxy: FaultProxy) -> Any:
    """Through the proxy, botocore's standard retries (3 attempts)."""
    return proxy.client()


@pytest.fixture(scope="module")
def s3_once(proxy: FaultProxy) -> Any:
    """Through the proxy, no retries."""
    return proxy.client(retries={"total_max_attempts": 1})


@pytest.fixture
def bucket(moto: MotoS3, proxy: FaultProxy) -> Iterator[str]:
    """A fresh moto with one empty bucket, and a proxy with no faults, no latency, empty log."""
    moto.reset()
    proxy.clear_faults()
    proxy.latency_s = 0.0
    moto.client().create_bucket(Bucket=BUCKET)
    proxy.clear_log()
    yield BUCKET
    proxy.clear_faults()
    proxy.latency_s = 0.0
    proxy.wait_idle()


def pattern(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ at every offset and between seeds (catches shifted ranges)."""
    block = hashlib.sha256(seed.to_bytes(8, "big")).digest() + bytes(range(256))
    return (block * (size // len(block) + 1))[:size]


def test_moto_in_thread_lifecycle(moto: MotoS3) -> None:
    # In-process moto servers share moto's global state with each other (and with conftest's
    # session server), so this test neither expects an empty server nor calls reset().
    with MotoS3() as server:
        s3 = server.client()
        s3.create_bucket(Bucket="thread-lifecycle")
        assert "thread-lifecycle" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        s3.delete_bucket(Bucket="thread-lifecycle")
        port = server.port
        assert server.endpoint_url == f"http://127.0.0.1:{port}"
    assert server.port is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    # The child-process server is a separate moto.
    assert "thread-lifecycle" not in [b["Name"] for b in moto.client().list_buckets()["Buckets"]]


@pytest.mark.slow
def test_ceph_lifecycle_leaves_nothing_behind() -> None:
    """A cluster of its own (not the session's), with keys of its own: SigV4 is checked, and
    stop() leaves no daemon, process group, port or file behind."""
    from blockgz.local_servers.moto_s3 import make_s3_client
    from testkit.ceph import CephRgwS3

    reason = CephRgwS3.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with CephRgwS3(access_key="lifecycle", secret_key="lifecycle-secret") as server:
        s3 = server.client()
        s3.create_bucket(Bucket="ceph-lifecycle")
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["ceph-lifecycle"]
        wrong = make_s3_client(server.endpoint_url, access_key="lifecycle", secret_key="nope")
        with pytest.raises(ClientError) as refused:
            wrong.list_buckets()
        assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        pids, directory = server.pids, server.directory
        port = urlsplit(server.endpoint_url).port
        assert sorted(pids) == ["mon", "osd", "rgw"]
        assert all(os.getpgid(pid) == pid for pid in pids.values())  # each leads its group
        assert directory is not None and (directory / "ceph.conf").is_file()
    assert server.pids == {} and server.directory is None and not directory.exists()
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    server.stop()  # a second stop is harmless


def test_ceph_unavailable_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from testkit.ceph import CephRgwS3

    monkeypatch.setenv("PATH", "/nonexistent")
    reason = CephRgwS3.unavailable_reason()
    assert reason is not None
    assert "scripts/install-tools" in reason and "radosgw ceph-mon ceph-osd" in reason
    with pytest.raises(RuntimeError, match="Ceph is not installed"):
        CephRgwS3().start()


def test_reset_wipes_the_server(moto: MotoS3) -> None:
    s3 = moto.client()
    s3.create_bucket(Bucket="doomed")
    s3.put_object(Bucket="doomed", Key="k", Body=b"x")
    moto.reset()
    assert s3.list_buckets()["Buckets"] == []


def test_put_get_list_delete_through_proxy(s3: Any, proxy: FaultProxy, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="a/one", Body=b"first")
    s3.put_object(Bucket=bucket, Key="a/two", Body=pattern(3 * MiB))  # botocore: Expect 100
    assert s3.get_object(Bucket=bucket, Key="a/one")["Body"].read() == b"first"
    assert s3.get_object(Bucket=bucket, Key="a/two")["Body"].read() == pattern(3 * MiB)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="a/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("a/one", 5), ("a/two", 3 * MiB)]

    s3.delete_object(Bucket=bucket, Key="a/one")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/two"]
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="a/one")
    assert missing.value.response["Error"]["Code"] == "404"

    records = proxy.requests
    assert [(r.method, r.path) for r in records[:2]] == [
        ("PUT", f"/{bucket}/a/one"),
        ("PUT", f"/{bucket}/a/two"),
    ]
    assert records[1].header("expect") == "100-continue"
    assert records[1].request_bytes == 3 * MiB
    assert proxy.count(method="GET", path_contains="/a/two") == 1
    assert proxy.count(method="GET", query_contains="list-type=2") == 2
    assert proxy.count(method="DELETE") == 1
    assert proxy.count(faulted=True) == 0
    assert [r.status for r in records] == [200, 200, 200, 200, 200, 204, 200, 404]


def test_range_get_returns_the_bytes_and_logs_the_header(
    s3: Any, proxy: FaultProxy, bucket: str
) -> None:
    data = pattern(2 * MiB + 17)
    s3.put_object(Bucket=bucket, Key="ranged", Body=data)
    proxy.clear_log()

    ranges = {
        "bytes=1000-1999": data[1000:2000],
        "bytes=-100": data[-100:],
        f"bytes={MiB}-": data[MiB:],
        f"bytes={len(data) - 10}-{len(data) + 10}": data[-10:],  # clipped to the object
    }
    for header, expected in ranges.items():
        got = s3.get_object(Bucket=bucket, Key="ranged", Range=header)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["Body"].read() == expected, header

    records = proxy.requests
    assert [r.header("Range") for r in records] == list(ranges)
    assert [r.headers["Range"] for r in records] == list(ranges)  # as botocore spells it
    assert [r.status for r in records] == [206] * len(ranges)
    assert [r.response_bytes for r in records] == [len(v) for v in ranges.values()]
    assert records[0].path == f"/{bucket}/ranged"
    assert records[0].query == ""


@pytest.mark.parametrize("size", [10, 2 * MiB], ids=["small", "expect-100"])
def test_slowdown_without_retries_is_a_client_error(
    s3: Any, s3_once: Any, proxy: FaultProxy, bucket: str, size: int
) -> None:
    proxy.inject("503", method="PUT", path_contains="/slow")
    with pytest.raises(ClientError) as error:
        s3_once.put_object(Bucket=bucket, Key="slow", Body=pattern(size))
    assert error.value.response["Error"]["Code"] == "SlowDown"
    assert error.value.response["Error"]["Message"] == "Please reduce your request rate."
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert proxy.faults == []  # times=1: used up

    [record] = proxy.requests
    assert (record.faulted, record.fault, record.status) == (True, "503", 503)
    # The faulted request never reached moto.
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="slow")
    assert missing.value.response["Error"]["Code"] == "404"
    # And the connection is still usable (kept alive, or closed cleanly after an Expect).
    s3_once.put_object(Bucket=bucket, Key="slow", Body=pattern(size))


@pytest.mark.parametrize("size", [10, 2 * MiB], ids=["small", "expect-100"])
def test_slowdown_with_standard_retries_succeeds(
    s3: Any, proxy: FaultProxy, bucket: str, size: int
) -> None:
    proxy.inject("503", method="PUT", path_contains="/slow")
    s3.put_object(Bucket=bucket, Key="slow", Body=pattern(size))
    assert s3.get_object(Bucket=bucket, Key="slow")["Body"].read() == pattern(size)

    assert proxy.count(method="PUT", path_contains="/slow", faulted=True) == 1
    assert proxy.count(method="PUT", path_contains="/slow", faulted=False) == 1
    first, second = (r for r in proxy.requests if r.method == "PUT")
    assert (first.status, second.status) == (503, 200)
    assert first.header("amz-sdk-request") == "attempt=1; max=3"
    assert second.header("amz-sdk-request") == "attempt=2; max=3"


def test_reset_without_retries_is_a_connection_error(
    s3: Any, s3_once: Any, proxy: FaultProxy, bucket: str
) -> None:
    s3.put_object(Bucket=bucket, Key="obj", Body=b"payload")
    proxy.clear_log()
    proxy.inject("reset", method="GET")
    with pytest.raises(CONNECTION_ERRORS):
        s3_once.get_object(Bucket=bucket, Key="obj")
    [record] = proxy.requests
    assert (record.faulted, record.fault, record.status, record.response_bytes) == (
        True,
        "reset",
        None,
        0,
    )

    # A reset while botocore waits for "100 Continue" on a big upload.
    proxy.inject("reset", method="PUT")
    with pytest.raises(CONNECTION_ERRORS):
        s3_once.put_object(Bucket=bucket, Key="big", Body=pattern(2 * MiB))
    assert s3_once.get_object(Bucket=bucket, Key="obj")["Body"].read() == b"payload"


def test_reset_with_retries_succeeds(s3: Any, proxy: FaultProxy, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="obj", Body=b"payload")
    proxy.clear_log()
    proxy.inject("reset", method="GET", path_contains="/obj")
    assert s3.get_object(Bucket=bucket, Key="obj")["Body"].read() == b"payload"
    assert proxy.count(method="GET", faulted=True) == 1
    assert proxy.count(method="GET", faulted=False) == 1


def test_permanent_500_on_upload_part_fails_the_multipart_upload(
    s3: Any, s3_once: Any, proxy: FaultProxy, bucket: str
) -> None:
    rule = proxy.inject("500", times=None, method="PUT", query_contains="uploadId")
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    with pytest.raises(ClientError) as error:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=1, Body=b"x")
    assert error.value.response["Error"]["Code"] == "InternalError"
    assert proxy.count(method="PUT", query_contains="uploadId", faulted=True) == 3  # 3 attempts
    assert proxy.count(method="PUT", faulted=False) == 0
    assert rule.hits == 3
    assert proxy.faults == [rule]  # permanent
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id)  # DELETE: not faulted

    # boto3's managed transfer gives up too, and aborts its upload.
    proxy.clear_log()
    transfer = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    with pytest.raises(ClientError, match="InternalError"):
        s3_once.upload_fileobj(io.BytesIO(pattern(10 * MiB)), bucket, "managed", Config=transfer)
    assert proxy.count(method="POST", query_contains="uploads") == 1
    assert proxy.count(method="PUT", query_contains="uploadId", faulted=True) >= 1
    assert proxy.count(method="DELETE", query_contains="uploadId") == 1
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_latency_and_a_multipart_round_trip(s3: Any, proxy: FaultProxy, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="small", Body=b"x")
    proxy.latency_s = 0.02

    started = monotonic()
    for _ in range(10):
        s3.head_object(Bucket=bucket, Key="small")
    assert monotonic() - started >= 10 * 0.02
    assert proxy.count(method="HEAD") == 10

    parts = [pattern(5 * MiB, seed) for seed in range(3)]
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=number, Body=part)[
            "ETag"
        ]
        for number, part in enumerate(parts, start=1)
    ]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    got = s3.get_object(Bucket=bucket, Key="mp")
    assert got["ContentLength"] == 15 * MiB
    assert got["ETag"].endswith('-3"')
    assert got["Body"].read() == b"".join(parts)

    uploads = [r for r in proxy.requests if r.method == "PUT" and "uploadId" in r.query]
    assert [r.params["partNumber"] for r in uploads] == ["1", "2", "3"]
    assert [r.request_bytes for r in uploads] == [5 * MiB] * 3
    assert proxy.count(method="POST", query_contains="uploads") == 1
    assert proxy.count(method="POST", query_contains="uploadId") == 1  # complete
    assert proxy.count(faulted=True) == 0


def test_concurrent_requests_are_served_in_parallel(
    s3: Any, proxy: FaultProxy, bucket: str
) -> None:
    for i in range(8):
        s3.put_object(Bucket=bucket, Key=f"c{i}", Body=pattern(1000, i))
    proxy.clear_log()
    proxy.latency_s = 0.1

    def fetch(i: int) -> bytes:
        return s3.get_object(Bucket=bucket, Key=f"c{i}")["Body"].read()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(fetch, range(8))) == [pattern(1000, i) for i in range(8)]
    assert proxy.count(method="GET") == 8
    assert proxy.peak_in_flight > 1


def test_chunked_and_aws_chunked_request_bodies(s3: Any, proxy: FaultProxy, bucket: str) -> None:
    """Bodies sent with Transfer-Encoding: chunked (which moto never sees: the proxy dechunks)."""
    data = pattern(3 * MiB + 5)
    url = urlsplit(
        s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "chunked"})
    )
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        pieces = (data[i : i + 256 * 1024] for i in range(0, len(data), 256 * 1024))
        conn.request("PUT", f"{url.path}?{url.query}", body=pieces, encode_chunked=True)
        response = conn.getresponse()
        response.read()
        assert response.status == 200

        # aws-chunked content coding inside HTTP chunked framing, as an SDK streams a trailer
        # checksum. moto decodes it (keyed on x-amz-content-sha256).
        small = b"hello aws-chunked world"
        framed = b"%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n" % (len(small), small)
        url = urlsplit(
            s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "aws"})
        )
        conn.request(
            "PUT",
            f"{url.path}?{url.query}",
            body=iter([framed[:10], framed[10:]]),
            encode_chunked=True,
            headers={
                "Content-Encoding": "aws-chunked",
                "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                "x-amz-decoded-content-length": str(len(small)),
                "x-amz-trailer": "x-amz-checksum-crc32",
            },
        )
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    finally:
        conn.close()

    assert s3.get_object(Bucket=bucket, Key="chunked")["Body"].read() == data
    assert s3.get_object(Bucket=bucket, Key="aws")["Body"].read() == small
    first, second = proxy.requests[:2]
    assert first.header("Transfer-Encoding") == "chunked"
    assert (first.request_bytes, second.request_bytes) == (len(data), len(framed))


def test_keep_alive_head_and_fault_matching(proxy: FaultProxy, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="ka", Body=b"0123456789")
    proxy.clear_log()
    proxy.inject("500", times=2, method="HEAD")
    proxy.inject("503", method="GET", path_contains="/other")
    with pytest.raises(ValueError, match="unknown fault"):
        proxy.inject("404")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="times"):
        proxy.inject("500", times=0)

    # One raw keep-alive connection: HEADs (two faulted, then forwarded), then a GET.
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        statuses = []
        sockets = set()
        for operation in ["head_object"] * 3 + ["get_object"]:
            url = urlsplit(
                s3.generate_presigned_url(operation, Params={"Bucket": bucket, "Key": "ka"})
            )
            conn.request(operation.split("_")[0].upper(), f"{url.path}?{url.query}")
            response = conn.getresponse()
            statuses.append(
                (response.status, response.getheader("Content-Length"), response.read())
            )
            sockets.add(id(conn.sock))
            assert conn.sock is not None  # not closed by the proxy
    finally:
        conn.close()
    assert len(sockets) == 1
    assert [(status, body) for status, _, body in statuses] == [
        (500, b""),
        (500, b""),
        (200, b""),
        (200, b"0123456789"),
    ]
    assert statuses[2][1] == "10"  # HEAD: the object's length, and no body
    assert statuses[3] == (200, "10", b"0123456789")
    assert [f.fault for f in proxy.faults] == ["503"]  # the HEAD rule is used up
    assert proxy.count(method="HEAD", faulted=True) == 2
    assert proxy.count(method="head", faulted=False) == 1
    assert proxy.count(query_contains="Signature=") == 4
    proxy.clear_faults()
    assert proxy.faults == []


def test_large_get_streams_without_buffering(moto: MotoS3, proxy: FaultProxy, bucket: str) -> None:
    size, part_size = 100 * MiB, 10 * MiB
    direct = moto.client()
    expected = hashlib.sha256()
    upload_id = direct.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    parts = []
    for number in range(1, size // part_size + 1):
        part = pattern(part_size, number)
        expected.update(part)
        etag = direct.upload_part(
            Bucket=bucket, Key="big", UploadId=upload_id, PartNumber=number, Body=part
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    direct.complete_multipart_upload(
        Bucket=bucket, Key="big", UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    del part
    s3 = proxy.client()
    gc.collect()

    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.005):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        body = s3.get_object(Bucket=bucket, Key="big")["Body"]
        got, received = hashlib.sha256(), 0
        for chunk in body.iter_chunks(MiB):
            got.update(chunk)
            received += len(chunk)
    finally:
        done.set()
        sampler.join()
    peak = max(peak, process.memory_info().rss)

    assert received == size
    assert got.hexdigest() == expected.hexdigest()
    proxy.wait_idle()
    [record] = [r for r in proxy.requests if r.method == "GET"]
    assert (record.status, record.response_bytes) == (200, size)
    growth = peak - baseline
    assert growth < 50 * MiB, f"RSS grew by {growth / MiB:.0f} MiB while streaming {size / MiB:.0f}"


def test_proxy_stop_closes_open_connections(moto: MotoS3) -> None:
    with FaultProxy(moto.endpoint_url) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        conn.request("GET", "/moto-api/data.json")
        assert conn.getresponse().read()  # the connection now idles in keep-alive
        port = proxy.port
    assert not [t for t in threading.enumerate() if t.name.startswith(f"FaultProxy:{port}")]
    conn.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
