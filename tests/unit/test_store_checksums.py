"""The checksum plumbing of the stores (issue 41): each upload's CRC-32 as it streams, S3's
``x-amz-checksum-crc32`` both ways, and the fallback where a server refuses it.

The S3 cases use a recording stand-in for boto3's client (pure request-building logic); the
real servers' answers are ``tests/integration/test_store_checksums.py``.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from blockgz.errors import StoreError
from blockgz.store.digest import crc32_from_header, crc32_header
from blockgz.store.local import LocalStore
from blockgz.store.s3 import S3Store
from blockgz.store.settings import S3Settings
from blockgz.written.files import WrittenFile


class _Client:
    """Records each call's arguments; refuses checksum arguments when told to."""

    def __init__(self, refuse: bool = False, head: dict[str, Any] | None = None):
        self.refuse = refuse
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._head = head or {}

    def _answer(self, name: str, args: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, args))
        if self.refuse and any(k.startswith("Checksum") for k in args):
            error = {"Error": {"Code": "InvalidArgument", "Message": "x-amz-checksum-crc32"}}
            error["ResponseMetadata"] = {"HTTPStatusCode": 400}
            raise ClientError(error, name)
        return answer

    def put_object(self, **args: Any) -> dict[str, Any]:
        return self._answer("put_object", args, {"ETag": '"e"'})

    def create_multipart_upload(self, **args: Any) -> dict[str, Any]:
        return self._answer("create_multipart_upload", args, {"UploadId": "u"})

    def upload_part(self, **args: Any) -> dict[str, Any]:
        return self._answer("upload_part", args, {"ETag": f'"p{args["PartNumber"]}"'})

    def complete_multipart_upload(self, **args: Any) -> dict[str, Any]:
        return self._answer("complete_multipart_upload", args, {})

    def head_object(self, **args: Any) -> dict[str, Any]:
        return self._answer("head_object", args, {"ContentLength": 3, **self._head})


def _s3(client: _Client, part_size: int = 5 * 1024 * 1024) -> S3Store:
    settings = S3Settings.from_options(
        {"s3.bucket.name": "b", "s3.part.size": str(part_size), "s3.retry.backoff.ms": "1"}
    )
    return S3Store(settings, client=client)


def test_crc32_header_round_trips():
    for crc in (0, 1, 907060870, 0xFFFFFFFF):
        assert crc32_from_header(crc32_header(crc)) == crc
    assert crc32_from_header("QEMRHQ==-2") is None  # a composite multipart checksum


def test_local_upload_counts_the_crc_of_what_it_wrote(tmp_path):
    store = LocalStore(tmp_path)
    with store.open_upload("a/b.bin") as upload:
        upload.write(b"hel")
        upload.write(memoryview(b"lo"))
    assert upload.crc32 == zlib.crc32(b"hello")
    assert store.stored_crc32("a/b.bin") is None  # a directory keeps no checksums


def test_put_sends_the_crc32_for_the_server_to_check():
    client = _Client()
    _s3(client).put("k", b"hello")
    (name, args), *_ = client.calls
    assert (name, args["ChecksumAlgorithm"]) == ("put_object", "CRC32")
    assert crc32_from_header(args["ChecksumCRC32"]) == zlib.crc32(b"hello")


def test_multipart_sends_part_and_full_object_checksums():
    client = _Client()
    store = _s3(client)
    data = b"x" * (5 * 1024 * 1024) + b"tail"
    with store.open_upload("big") as upload:
        upload.write(data)
    store.close()
    by_name = {name: args for name, args in client.calls}
    assert by_name["create_multipart_upload"]["ChecksumType"] == "FULL_OBJECT"
    complete = by_name["complete_multipart_upload"]
    assert crc32_from_header(complete["ChecksumCRC32"]) == zlib.crc32(data)
    parts = complete["MultipartUpload"]["Parts"]
    assert [crc32_from_header(p["ChecksumCRC32"]) for p in parts] == [
        zlib.crc32(data[: 5 * 1024 * 1024]),
        zlib.crc32(b"tail"),
    ]


def test_a_server_refusing_checksums_gets_uploads_without_them():
    client = _Client(refuse=True)
    store = _s3(client)
    store.put("k", b"hello")
    assert not store.send_checksums
    with store.open_upload("big") as upload:
        upload.write(b"y" * (5 * 1024 * 1024 + 1))
    store.close()
    sent = [name for name, args in client.calls if not any(k.startswith("Checksum") for k in args)]
    calls = ["put_object", "create_multipart_upload", "upload_part", "upload_part"]
    assert sent == [*calls, "complete_multipart_upload"]


def test_other_errors_are_not_taken_for_a_refusal():
    class Broken(_Client):
        def put_object(self, **args: Any) -> dict[str, Any]:
            error = {"Error": {"Code": "BadDigest"}, "ResponseMetadata": {"HTTPStatusCode": 400}}
            raise ClientError(error, "PutObject")

    store = _s3(Broken())
    with pytest.raises(StoreError, match="BadDigest"):
        store.put("k", b"hello")
    assert store.send_checksums


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ({"ChecksumCRC32": "NhCmhg=="}, 907060870),  # SeaweedFS's single PUT: no type
        ({"ChecksumCRC32": "NhCmhg==", "ChecksumType": "FULL_OBJECT"}, 907060870),
        ({"ChecksumCRC32": "NhCmhg==", "ChecksumType": "COMPOSITE"}, None),
        ({"ChecksumCRC32": "NhCmhg==-2"}, None),
        ({}, None),
    ],
)
def test_stored_crc32_trusts_only_a_full_object_checksum(head, expected):
    client = _Client(head=head)
    assert _s3(client).stored_crc32("k") == expected
    assert client.calls[0][1]["ChecksumMode"] == "ENABLED"


def test_written_file_keeps_checksums_and_omits_them_when_unknown():
    base = {
        "key": "k",
        "topic": "t",
        "partition": 0,
        "encoded_partition": "",
        "first_offset": 0,
        "last_offset": 1,
        "records": 2,
        "size": 10,
        "uncompressed_size": 12,
    }
    old = WrittenFile.from_dict(base)
    assert (old.crc32, old.index_size, old.index_crc32) == (None, None, None)
    assert "crc32" not in old.to_dict() and "index_crc32" not in old.to_dict()
    new = WrittenFile.from_dict({**base, "crc32": 5, "index_size": 7, "index_crc32": 9})
    assert WrittenFile.from_dict(new.to_dict()) == new
    assert (new.crc32, new.index_size, new.index_crc32) == (5, 7, 9)
