"""The S3 security settings and the permission probe, against botocore's Stubber (no server).

The probe's refusals by a real server are in ``tests/integration/test_s3_security.py``; the one
SeaweedFS cannot refuse alone (AbortMultipartUpload, which its s3:PutObject also allows) is here.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from blockgz.blocks.checksum import block_crc32
from blockgz.errors import ConfigError, StoreAccessDeniedError
from blockgz.store.digest import crc32_header
from blockgz.store.permissions import (
    ABORT,
    EXPORT_PERMISSIONS,
    READER_PERMISSIONS,
    TAGGING,
    MissingPermissionError,
    policy_document,
    probe_export_permissions,
)
from blockgz.store.s3 import S3Store
from blockgz.store.s3_client import make_client
from blockgz.store.settings import S3Settings
from sink.executor_env import forwarded_env

SECURITY_DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"
OPTIONS = {
    "s3.bucket.name": "b",
    "store.url": "http://127.0.0.1:9",
    "s3.region": "us-east-1",
    "aws.access.key.id": "k",
    "aws.secret.access.key": "s",
    "s3.retry.backoff.ms": "0",
}


def stubbed_store(**options: str) -> tuple[S3Store, Stubber]:
    settings = S3Settings.from_options({**OPTIONS, **options})
    client = make_client(settings)
    store = S3Store(settings, client=client)
    return store, Stubber(client)


def expect_probe_until(stub: Stubber, refused: str, code: str = "AccessDenied") -> None:
    """Queue the probe's answers: each call succeeds until ``refused``, which gets ``code``."""
    answers = [
        ("put_object", {}),
        ("list_objects_v2", {"IsTruncated": False}),
        ("get_object", {"Body": StreamingBody(io.BytesIO(b""), 0)}),
        ("delete_object", {}),
        ("create_multipart_upload", {"UploadId": "u1"}),
        ("list_multipart_uploads", {"IsTruncated": False}),
        ("abort_multipart_upload", {}),
    ]
    for method, response in answers:
        if method == refused:
            stub.add_client_error(method, code, "no", http_status_code=403)
            return
        stub.add_response(method, response)


def test_a_refused_abort_is_named_after_the_upload_was_started():
    store, stub = stubbed_store()
    expect_probe_until(stub, "abort_multipart_upload")
    with stub, pytest.raises(MissingPermissionError) as refused:
        probe_export_permissions(store, "_blockgz/job/")
    assert refused.value.permission is ABORT
    stub.assert_no_pending_responses()


def test_the_documented_set_passes_with_one_request_each():
    store, stub = stubbed_store()
    expect_probe_until(stub, refused="")
    with stub:
        probe_export_permissions(store, "_blockgz/job/")
    stub.assert_no_pending_responses()


def test_keys_the_server_does_not_know_are_not_a_missing_permission():
    store, stub = stubbed_store()
    expect_probe_until(stub, "put_object", code="InvalidAccessKeyId")
    with stub, pytest.raises(StoreAccessDeniedError) as refused:
        probe_export_permissions(store, "_blockgz/job/")
    assert not isinstance(refused.value, MissingPermissionError)
    assert "InvalidAccessKeyId" in str(refused.value)


def test_the_policy_document_splits_bucket_and_object_actions():
    doc = policy_document("archive", "kafka/", (*EXPORT_PERMISSIONS, TAGGING))
    objects, bucket = doc["Statement"]
    assert objects["Resource"] == ["arn:aws:s3:::archive/kafka/*"]
    assert set(objects["Action"]) == {
        "s3:PutObject",
        "s3:GetObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:PutObjectTagging",
    }
    assert bucket["Resource"] == ["arn:aws:s3:::archive"]
    assert set(bucket["Action"]) == {"s3:ListBucket", "s3:ListBucketMultipartUploads"}
    assert bucket["Condition"] == {"StringLike": {"s3:prefix": ["kafka/*"]}}


def test_the_docs_tables_list_exactly_the_permissions_of_the_code():
    text = SECURITY_DOCS.read_text(encoding="utf-8")
    section = text[text.index("## S3: TLS, permissions, encryption") :]
    section = section[: section.index("\n## ")]
    export_table = section[section.index("| export needs") :].split("\n\n")[0]
    reader_table = section[section.index("| readers need") :].split("\n\n")[0]
    assert re.findall(r"^\| `(s3:\w+)`", export_table, re.M) == [
        p.action for p in (*EXPORT_PERMISSIONS, TAGGING)
    ]
    assert re.findall(r"^\| `(s3:\w+)`", reader_table, re.M) == [
        p.action for p in READER_PERMISSIONS
    ]


def test_the_ca_bundle_option_reaches_the_client(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    settings = S3Settings.from_options({**OPTIONS, "s3.ssl.ca.bundle": str(bundle)})
    assert settings.ca_bundle == str(bundle)
    assert make_client(settings)._endpoint.http_session._verify == str(bundle)
    plain = make_client(S3Settings.from_options(OPTIONS))._endpoint.http_session._verify
    assert plain != str(bundle)


@pytest.mark.parametrize(
    ("content", "words"),
    [(None, "cannot read it"), ("not a certificate", "holds no PEM certificate")],
)
def test_a_ca_bundle_that_is_no_pem_file_is_refused_naming_the_option(tmp_path, content, words):
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_text(content)
    with pytest.raises(ConfigError, match=f"s3.ssl.ca.bundle={re.escape(str(bundle))}: {words}"):
        S3Settings.from_options({**OPTIONS, "s3.ssl.ca.bundle": str(bundle)})


def test_aws_ca_bundle_is_forwarded_to_executors():
    assert forwarded_env({"AWS_CA_BUNDLE": "/etc/ca.pem"}) == {
        "spark.executorEnv.AWS_CA_BUNDLE": "/etc/ca.pem"
    }


def test_sse_c_goes_with_the_completion_of_a_multipart_upload():
    key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    # One part in flight: the stub answers calls in the order queued (part 1, then part 2).
    options = {"s3.sse.customer.key": key, "s3.part.size": "5242880", "s3.upload.concurrency": "1"}
    store, stub = stubbed_store(**options)
    sse = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": bytes(range(32))}
    whole = {"ChecksumAlgorithm": "CRC32", "ChecksumType": "FULL_OBJECT"}  # S3's own CRC-32
    stub.add_response(
        "create_multipart_upload", {"UploadId": "u"}, {"Bucket": "b", "Key": "k", **sse, **whole}
    )
    bodies = (b"x" * (5 * 1024 * 1024), b"x")
    for n in (1, 2):
        stub.add_response(
            "upload_part",
            {"ETag": f'"e{n}"'},
            {
                "Bucket": "b",
                "Key": "k",
                "UploadId": "u",
                "PartNumber": n,
                "Body": stub_any(),
                "ChecksumCRC32": crc32_header(block_crc32(bodies[n - 1])),  # S3 checks the part
                **sse,
            },
        )
    crcs = [crc32_header(block_crc32(body)) for body in bodies]
    parts = [{"PartNumber": n, "ETag": f'"e{n}"', "ChecksumCRC32": crcs[n - 1]} for n in (1, 2)]
    whole_crc = crc32_header(block_crc32(b"".join(bodies)))
    done = {"ChecksumCRC32": whole_crc, "ChecksumType": "FULL_OBJECT"}
    stub.add_response(
        "complete_multipart_upload",
        {},
        {"Bucket": "b", "Key": "k", "UploadId": "u", "MultipartUpload": {"Parts": parts}, **sse,
         **done},
    )  # fmt: skip
    with stub, store.open_upload("k") as upload:
        upload.write(b"x" * (5 * 1024 * 1024 + 1))
    store.close()
    stub.assert_no_pending_responses()


def stub_any():
    from botocore.stub import ANY

    return ANY
