"""S3 over TLS with a private CA, least-privilege keys, and server-side encryption, on SeaweedFS.

One SeaweedFS serves S3 over HTTPS with a certificate from a CA made for the session
(:mod:`testkit.certs`; the ``tls_ca``, ``secure_s3`` and ``secure_bucket`` fixtures of
``tests/conftest.py``, users from :mod:`testkit.secure_s3`), and knows users whose rights are
IAM policies with per-API actions: one with exactly the export's documented permissions
(:mod:`blockgz.store.permissions`), one per permission with that one taken away, and a reader.
SeaweedFS evaluates the policies itself (measured on 4.48: each of PutObject, GetObject,
ListBucket, DeleteObject, ListBucketMultipartUploads and PutObjectTagging is refused alone;
AbortMultipartUpload is also allowed by s3:PutObject there, so that one refusal is proven on
Ceph's radosgw, whose bucket policies refuse it, and with botocore's Stubber in
``tests/unit/test_s3_permissions.py``).

The SSE tests put the request-logging proxy (:class:`testkit.s3.FaultProxy`) in front of the
plain-HTTP SeaweedFS and check the headers each request carried, and that SeaweedFS itself
refuses an SSE-C object to a GET without the key.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from blockgz.errors import PreflightError, StoreError
from blockgz.store import open_store
from blockgz.store.permissions import (
    EXPORT_PERMISSIONS,
    TAGGING,
    policy_document,
)
from testkit.cli import assert_one_line_failure, export_once
from testkit.s3 import fake_aws_env, s3_options
from testkit.secure_s3 import secure_options, user_key, without

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))


def left_in(server, bucket: str) -> tuple[list[str], list[str]]:
    """The keys and the open multipart uploads in ``bucket`` (seen with the admin keys)."""
    client = server.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    uploads = [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
    return keys, uploads


# -- TLS ------------------------------------------------------------------------------------


def test_every_request_verifies_against_the_ca_bundle_option(secure_s3, secure_bucket):
    options = secure_options(secure_s3, **{"s3.part.size": str(5 * 1024 * 1024)})
    store, prefix = open_store(f"s3://{secure_bucket}/tls", options)
    data = os.urandom(11 * 1024 * 1024)
    with store.open_upload(prefix + "big") as upload:  # three parts in parallel
        upload.write(data)
    store.put(prefix + "small", b"x")
    assert (
        store.get_range(prefix + "big", 5 * 1024 * 1024 - 2, 5 * 1024 * 1024 + 2)
        == (data[5 * 1024 * 1024 - 2 : 5 * 1024 * 1024 + 2])
    )
    assert sorted(i.key for i in store.list(prefix)) == [prefix + "big", prefix + "small"]
    assert store.client.meta.endpoint_url.startswith("https://")


def test_aws_ca_bundle_works_without_the_option(secure_s3, secure_bucket, monkeypatch):
    monkeypatch.setenv("AWS_CA_BUNDLE", secure_s3.ca_bundle)
    options = s3_options(secure_s3.endpoint_url, **{"s3.retry.backoff.ms": "2"})  # own client
    store, prefix = open_store(f"s3://{secure_bucket}", options)
    store.put(prefix + "k", b"through AWS_CA_BUNDLE")
    assert store.get(prefix + "k") == b"through AWS_CA_BUNDLE"


def job_options(bucket: str, options: dict[str, str], **extra: str) -> dict[str, str]:
    # The S3 checks come before Kafka's: no broker is needed to fail there.
    return {
        "name": "secured",
        "topics": "t",
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "s3.bucket.name": bucket,
        **options,
        **extra,
    }


@pytest.mark.parametrize("ca", ["none", "another CA"])
def test_an_untrusted_certificate_fails_the_preflight_in_one_line(
    tmp_path, secure_s3, secure_bucket, tls_ca, ca
):
    options = secure_options(secure_s3)
    if ca == "none":
        del options["s3.ssl.ca.bundle"]
        named = f"store.url={secure_s3.endpoint_url}"
    else:
        options["s3.ssl.ca.bundle"] = str(tls_ca.other_ca_file)
        named = f"s3.ssl.ca.bundle={tls_ca.other_ca_file}"
    code, lines, seconds = export_once(tmp_path, job_options(secure_bucket, options))
    assert_one_line_failure(
        code, lines, seconds, named, "TLS certificate not trusted", "s3.ssl.ca.bundle"
    )


# -- least privilege ----------------------------------------------------------------------------


def preflight_store(bucket: str, options: dict[str, str], **extra: str) -> None:
    from blockgz.sink.export.preflight import check_store
    from blockgz.sink.jobconfig.config import ExportSettings

    check_store(ExportSettings.from_mapping(job_options(bucket, options, **extra)))


def test_the_documented_permissions_pass_the_preflight_and_leave_nothing(secure_s3, secure_bucket):
    preflight_store(secure_bucket, secure_options(secure_s3, "exporter"))
    preflight_store(
        secure_bucket, secure_options(secure_s3, "tagger"), **{"s3.object.tagging": "true"}
    )
    assert left_in(secure_s3, secure_bucket) == ([], [])


#: AbortMultipartUpload is left out: SeaweedFS lets s3:PutObject abort too (see the docstring).
REFUSED_BY_SEAWEEDFS = [p for p in EXPORT_PERMISSIONS if p.action != "s3:AbortMultipartUpload"]


@pytest.mark.parametrize("missing", [*REFUSED_BY_SEAWEEDFS, TAGGING], ids=lambda p: p.action)
def test_each_missing_permission_is_named_by_the_preflight(secure_s3, secure_bucket, missing):
    extra = {"s3.object.tagging": "true"} if missing is TAGGING else {}
    started = time.monotonic()
    with pytest.raises(PreflightError) as refused:
        preflight_store(secure_bucket, secure_options(secure_s3, without(missing)), **extra)
    message = str(refused.value)
    assert "\n" not in message and time.monotonic() - started < 10
    assert f"the credentials lack {missing.action} on s3://{secure_bucket}/" in message, message
    assert re.findall(r"lack (\S+) on", message) == [missing.action], message
    # The probe cleans up after itself unless the refusal is what stops it.
    keys, uploads = left_in(secure_s3, secure_bucket)
    assert uploads == []
    assert keys == ([] if missing.action != "s3:DeleteObject" else keys) and len(keys) <= 1


def test_a_missing_permission_fails_the_export_in_one_line(tmp_path, secure_s3, secure_bucket):
    options = secure_options(secure_s3, without(EXPORT_PERMISSIONS[2]))  # s3:ListBucket
    code, lines, seconds = export_once(tmp_path, job_options(secure_bucket, options))
    assert_one_line_failure(
        code, lines, seconds, f"s3.bucket.name={secure_bucket}", "lack s3:ListBucket"
    )


def test_read_only_keys_read_but_cannot_write(tmp_path, secure_s3, secure_bucket):
    from blockgz.reader import open_archive
    from testkit.archives import build_partition

    writer, _ = open_store(f"s3://{secure_bucket}", secure_options(secure_s3, "exporter"))
    expected = build_partition(writer, "", objects=2, records_per_object=50, block_size=2048)
    before = left_in(secure_s3, secure_bucket)
    reader_options = secure_options(secure_s3, "reader")
    with open_archive(f"s3://{secure_bucket}", reader_options) as archive:
        rows = list(archive.read("orders", 0, 10, 20))
    assert [(r.offset, r.value) for r in rows] == [(o, expected[o]) for o in range(10, 20)]

    flags = [f"-O{k}={v}" for k, v in reader_options.items()]
    env = {**os.environ, **fake_aws_env()}
    seek = [BLOCKGZ, "seek", *flags, "--offset", "60", "--count", "2", "--topic", "orders"]
    seek += ["--partition", "0", f"s3://{secure_bucket}"]
    done = subprocess.run(seek, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [expected[60], expected[61]]
    key = next(k for k in before[0] if k.endswith("0000000000.json.gz"))
    cat = [BLOCKGZ, "cat", *flags, f"s3://{secure_bucket}/{key}"]
    done = subprocess.run(cat, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [expected[o] for o in range(50)]

    from blockgz.sink.jobconfig.config import ExportSettings
    from blockgz.sink.status.job_status import job_status

    report = job_status(
        ExportSettings.from_mapping(job_options(secure_bucket, reader_options)), kafka=False
    )
    assert [(i.level, i.message) for i in report.issues] == [
        (1, "open multipart uploads not listed: no s3:ListBucketMultipartUploads")
    ]

    reader, _ = open_store(f"s3://{secure_bucket}", {**reader_options, "s3.part.size": "5242880"})
    with pytest.raises(StoreError, match="AccessDenied"):
        reader.put("topics/orders/x", b"nope")
    with pytest.raises(StoreError, match="AccessDenied"), reader.open_upload("big") as upload:
        upload.write(os.urandom(6 * 1024 * 1024))  # a multipart upload: refused at its start
    with pytest.raises(PreflightError, match="lack s3:PutObject"):
        preflight_store(secure_bucket, reader_options)
    assert left_in(secure_s3, secure_bucket) == before  # nothing partial left


@pytest.mark.slow
def test_an_export_with_exactly_the_documented_permissions_over_tls(
    tmp_path, secure_s3, secure_bucket, kafka, spark
):
    from blockgz.reader import open_archive
    from testkit.kafka_data import produce_numbered

    topic = f"secured-{secure_bucket[-8:]}"
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 30)
    options = {
        "name": "secured",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": secure_bucket,
        "flush.size": "10",
        "s3.compression.type": "blockgzip",
        **secure_options(secure_s3, "exporter"),
    }
    code, lines, _ = export_once(tmp_path, options)
    assert code == 0, lines
    reader_options = secure_options(secure_s3, "reader")
    with open_archive(f"s3://{secure_bucket}", reader_options) as archive:
        assert len(list(archive.read(topic, 1, 0, 30))) == 30
    rows = (
        spark.read.format("blockgz")
        .options(**reader_options)
        .load(f"s3://{secure_bucket}")
        .where(f"topic = '{topic}'")
        .count()
    )
    assert rows == 60
    assert left_in(secure_s3, secure_bucket)[1] == []


@pytest.mark.slow  # like tests/integration/test_ceph.py (a cluster; ~2 s to start here)
def test_radosgw_bucket_policies_refuse_each_permission_alone(ceph_s3, ceph_bucket):
    """radosgw evaluates bucket policies per action, AbortMultipartUpload included. (It lets a
    writer read its own objects whatever the policy says, so s3:GetObject cannot be taken away
    from the probe there.)"""
    import json

    users = {"exporter": EXPORT_PERMISSIONS}
    for p in EXPORT_PERMISSIONS:
        if p.action != "s3:GetObject":
            users[without(p)] = tuple(q for q in EXPORT_PERMISSIONS if q is not p)
    statements = []
    for name, permissions in users.items():
        ceph_s3.add_user(name, *user_key(name))
        for statement in policy_document(ceph_bucket, "", permissions)["Statement"]:
            principal = {"AWS": [f"arn:aws:iam:::user/{name}"]}
            statements.append({**statement, "Principal": principal})
    policy = {"Version": "2012-10-17", "Statement": statements}
    ceph_s3.client().put_bucket_policy(Bucket=ceph_bucket, Policy=json.dumps(policy))

    def refused(name: str) -> list[str]:
        access, secret = user_key(name)
        options = s3_options(ceph_s3.endpoint_url)
        options.update({"aws.access.key.id": access, "aws.secret.access.key": secret})
        try:
            preflight_store(ceph_bucket, options)
        except PreflightError as exc:
            return re.findall(r"lack (\S+) on", str(exc))
        return []

    assert refused("exporter") == []
    for p in EXPORT_PERMISSIONS:
        if p.action != "s3:GetObject":
            assert refused(without(p)) == [p.action]


# -- server-side encryption ---------------------------------------------------------------------

SSE_C_KEY = base64.b64encode(bytes(range(32))).decode()
SSE_C_HEADER = "x-amz-server-side-encryption-customer-key"


def requests_of(proxy, bucket: str) -> list:
    return [r for r in proxy.requests if r.path.startswith(f"/{bucket}/")]


def kind(r) -> str:
    """The S3 API call of a logged request."""
    q = r.params
    if r.method == "POST":
        return "CreateMultipartUpload" if "uploads" in q else "CompleteMultipartUpload"
    if r.method == "PUT":
        return (
            "UploadPart"
            if "partNumber" in q
            else ("PutObjectTagging" if "tagging" in q else "PutObject")
        )
    if r.method == "GET":
        return (
            "ListObjects"
            if "list-type" in q
            else ("ListMultipartUploads" if "uploads" in q else "GetObject")
        )
    return {"HEAD": "HeadObject", "DELETE": "DeleteObject" if "uploadId" not in q else "Abort"}[
        r.method
    ]


#: The calls that carry SSE-C's key (the others never touch an object's bytes).
NEEDS_THE_KEY = {
    "PutObject",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "GetObject",
    "HeadObject",
}


def test_sse_c_reaches_every_write_and_read_of_an_export(weed_proxy, weed_bucket, seaweed_s3):
    from blockgz.reader import open_archive
    from testkit.archives import export_batches, input_records

    sse = {"s3.sse.customer.key": SSE_C_KEY, "s3.part.size": str(5 * 1024 * 1024)}
    options = s3_options(weed_proxy.endpoint_url, **sse)
    records = input_records(60)
    export_batches(f"s3://{weed_bucket}", records, "default", batches=3, every=2, **options)
    store, _ = open_store(f"s3://{weed_bucket}", options)
    with store.open_upload("big") as upload:  # multipart: create, parts, complete
        upload.write(os.urandom(11 * 1024 * 1024))
    store.put_if("lease", b"{}", if_none_match=True)  # the lease's conditional writes
    assert store.head("big").size == 11 * 1024 * 1024
    with open_archive(f"s3://{weed_bucket}", options) as archive:
        assert len(list(archive.read("ev", 0, 0, 10**6))) == sum(r.partition == 0 for r in records)

    logged = requests_of(weed_proxy, weed_bucket)
    kinds = {kind(r) for r in logged}
    assert kinds >= NEEDS_THE_KEY, kinds
    missing = [
        (kind(r), r.path) for r in logged if kind(r) in NEEDS_THE_KEY and not r.header(SSE_C_HEADER)
    ]
    assert missing == []
    paths = {r.path for r in logged if kind(r) == "PutObject"}
    assert any(p.endswith(".index.json") for p in paths)  # sidecars
    assert any("/manifests/" in p or "manifest" in p for p in paths), paths  # manifests
    assert any("catalog" in p for p in paths), paths  # the catalog

    # At the server: without the key, SeaweedFS refuses the objects.
    plain = seaweed_s3.client(retries={"total_max_attempts": 1})
    key = unquote(next(p for p in paths if p.endswith(".json.gz")).removeprefix(f"/{weed_bucket}/"))
    from botocore.exceptions import ClientError

    for obj in (key, "big"):
        with pytest.raises(ClientError, match="customer"):
            plain.get_object(Bucket=weed_bucket, Key=obj)["Body"].read()


def test_sse_s3_is_asked_for_on_every_object_written(weed_proxy, weed_bucket, seaweed_s3):
    options = s3_options(
        weed_proxy.endpoint_url, **{"s3.ssea.name": "AES256", "s3.part.size": str(5 * 1024**2)}
    )
    store, _ = open_store(f"s3://{weed_bucket}", options)
    with store.open_upload("big") as upload:
        upload.write(os.urandom(6 * 1024 * 1024))
    store.put("small", b"x")
    starts = [
        r
        for r in requests_of(weed_proxy, weed_bucket)
        if kind(r) in ("PutObject", "CreateMultipartUpload")
    ]
    assert len(starts) == 2
    assert all(r.header("x-amz-server-side-encryption") == "AES256" for r in starts)
    for key in ("big", "small"):  # and the server says it encrypted them
        head = seaweed_s3.client().head_object(Bucket=weed_bucket, Key=key)
        assert head["ServerSideEncryption"] == "AES256"
