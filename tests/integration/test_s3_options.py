"""Confluent's S3 options that blockgz's store honours, against real local S3 servers.

Both moto and SeaweedFS implement object tagging, and both check ``If-None-Match``. Only
SeaweedFS checks ``Content-MD5`` (a wrong digest is ``BadDigest``; moto accepts it), so the
digest is seen on the wire on both and refused when corrupted on SeaweedFS. moto's server also
answers STS ``AssumeRole``, so ``AwsAssumeRoleCredentialsProvider`` runs end to end there.
"""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest

from blockgz.errors import ObjectNotFoundError, StoreError
from blockgz.store import open_store
from blockgz.store.s3 import content_md5, offset_tags
from blockgz.store.s3_client import _session
from testkit.s3 import s3_options

MIB = 1024 * 1024


@pytest.fixture(params=["moto", "seaweedfs"])
def s3_server(request):
    name = "moto_s3" if request.param == "moto" else "seaweed_s3"
    return request.getfixturevalue(name)


@pytest.fixture
def bucket(s3_server):
    # A new bucket name also means new S3Settings, so a client of its own (handlers stay here).
    name = "opt-" + uuid.uuid4().hex[:20]
    s3_server.client().create_bucket(Bucket=name)
    return name


def sent_headers(store, operations=("PutObject", "UploadPart")):
    """Record the headers (and body digest) of each request ``store``'s client sends."""
    seen: list[tuple[str, dict[str, str], str]] = []

    def record(request, event_name, **_):
        body = request.body
        data = body if isinstance(body, bytes) else (body.read() if body else b"")
        if hasattr(body, "seek"):
            body.seek(0)
        operation = event_name.rsplit(".", 1)[-1]
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        seen.append((operation, headers, content_md5(data)))

    for op in operations:
        store.client.meta.events.register(f"before-send.s3.{op}", record)
    return seen


def test_object_tagging(s3_server, bucket):
    options = s3_options(
        s3_server.endpoint_url,
        **{"s3.object.tagging": "true", "s3.object.tagging.key.value.pairs": "team:data"},
    )
    store, _ = open_store(f"s3://{bucket}", options)
    store.put("t/t+0+0000000007.json", b"{}\n" * 3)
    assert store.tag("t/t+0+0000000007.json", offset_tags(7, 9, 3)) is True
    tags = s3_server.client().get_object_tagging(Bucket=bucket, Key="t/t+0+0000000007.json")
    assert {t["Key"]: t["Value"] for t in tags["TagSet"]} == {
        "team": "data",
        "startOffset": "7",
        "endOffset": "9",
        "recordCount": "3",
    }


@pytest.mark.parametrize("behavior", ["ignore", "fail"])
def test_tagging_a_missing_object(s3_server, bucket, behavior):
    options = s3_options(
        s3_server.endpoint_url,
        **{"s3.object.tagging": "true", "s3.object.behavior.on.tagging.error": behavior},
    )
    store, _ = open_store(f"s3://{bucket}", options)
    if behavior == "fail":
        with pytest.raises(ObjectNotFoundError, match="PutObjectTagging"):
            store.tag("missing.json", offset_tags(0, 0, 1))
    else:
        assert store.tag("missing.json", offset_tags(0, 0, 1)) is False


@pytest.mark.parametrize("send", [True, False])
def test_send_digest_puts_content_md5_on_put_and_every_part(s3_server, bucket, send):
    options = s3_options(
        s3_server.endpoint_url,
        **{"s3.send.digest": str(send).lower(), "s3.part.size": str(5 * MIB)},
    )
    store, _ = open_store(f"s3://{bucket}", options)
    seen = sent_headers(store)
    store.put("small.json", b"{}\n")
    data = bytes(range(256)) * (11 * MIB // 256)
    with store.open_upload("big.bin") as upload:
        upload.write(data)
    assert s3_server.client().get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data
    assert sorted(op for op, _, _ in seen) == [
        "PutObject",
        "UploadPart",
        "UploadPart",
        "UploadPart",
    ]
    for _op, headers, digest in seen:
        assert headers.get("Content-MD5") == (digest if send else None)


def test_a_corrupted_digest_is_refused(seaweed_s3):
    """SeaweedFS checks Content-MD5, so the header really is what S3 verifies."""
    name = "opt-" + uuid.uuid4().hex[:20]
    seaweed_s3.client().create_bucket(Bucket=name)
    options = s3_options(
        seaweed_s3.endpoint_url,
        **{"s3.send.digest": "true", "s3.part.size": str(5 * MIB), "s3.part.retries": "1"},
    )
    store, _ = open_store(f"s3://{name}", options)
    wrong = base64.b64encode(hashlib.md5(b"other bytes").digest()).decode()

    def corrupt(request, **_):
        request.headers.replace_header("Content-MD5", wrong)

    for op in ("PutObject", "UploadPart"):
        store.client.meta.events.register(f"before-sign.s3.{op}", corrupt)
    with pytest.raises(StoreError, match="BadDigest"):
        store.put("small.json", b"{}\n")
    with pytest.raises(StoreError, match="BadDigest"), store.open_upload("big.bin") as upload:
        upload.write(b"x" * (6 * MIB))
    listed = seaweed_s3.client().list_objects_v2(Bucket=name).get("Contents", [])
    assert listed == []


def test_assume_role_through_moto_sts(moto_s3, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_s3.endpoint_url)
    name = "opt-" + uuid.uuid4().hex[:20]
    moto_s3.client().create_bucket(Bucket=name)
    session_name = "blockgz-" + uuid.uuid4().hex[:8]
    options = s3_options(
        moto_s3.endpoint_url,
        **{
            "s3.credentials.provider.class": (
                "io.confluent.connect.s3.auth.AwsAssumeRoleCredentialsProvider"
            ),
            "s3.credentials.provider.sts.role.arn": "arn:aws:iam::123456789012:role/archiver",
            "s3.credentials.provider.sts.role.session.name": session_name,
            "s3.credentials.provider.sts.role.external.id": "ext-42",
        },
    )
    store, _ = open_store(f"s3://{name}", options)
    seen = sent_headers(store, ("PutObject",))
    store.put("k.json", b"{}\n")
    ((_, headers, _),) = seen
    assert "Credential=ASIA" in headers["Authorization"]  # temporary keys from STS ...
    assert headers["X-Amz-Security-Token"]  # ... with their session token
    identity = _session(store.settings).client("sts").get_caller_identity()
    assert identity["Arn"] == f"arn:aws:sts::123456789012:assumed-role/archiver/{session_name}"
    assert moto_s3.client().get_object(Bucket=name, Key="k.json")["Body"].read() == b"{}\n"


def test_the_sink_tags_each_committed_object_with_its_offsets(s3_server, bucket):
    """``s3.object.tagging=true`` through a write task: every data object, as Confluent."""
    from blockgz.sink.records import KafkaRecord
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.batches import arrow_batches

    records = [KafkaRecord("t", 0, n, 0, None, b'{"n": %d}' % n) for n in range(5, 12)]
    config = SinkSettings.from_options(
        {
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "4",
            "s3.object.tagging": "true",
        }
    )
    written = write_task(config, iter(arrow_batches(records))).files
    files = [f for f in written if f.role == "value"]  # not the timestamps files beside them
    client = s3_server.client()
    tags = [
        {
            t["Key"]: t["Value"]
            for t in client.get_object_tagging(Bucket=bucket, Key=f.key)["TagSet"]
        }
        for f in files
    ]
    assert tags == [
        {"startOffset": "5", "endOffset": "8", "recordCount": "4"},
        {"startOffset": "9", "endOffset": "11", "recordCount": "3"},
    ]
