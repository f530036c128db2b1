"""Pure logic of the store layer: settings validation, part sizing, retry policy."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from blockgz.errors import ConfigError
from blockgz.store import open_store
from blockgz.store.multipart import part_size_for
from blockgz.store.retry import backoff_delays, call_with_retries, is_retryable
from blockgz.store.settings import MAX_PARTS, S3Settings

MIB = 1024 * 1024


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "s3.bucket.name is required"),
        (
            {"s3.part.size": "1024"},
            r"s3.part.size: 1024 is out of range; allowed: 5242880..2147483647",
        ),
        ({"s3.part.size": "big"}, "s3.part.size: 'big' is not a whole number"),
        ({"s3.path.style.access.enabled": "yes"}, "allowed: true, false"),
        ({"s3.acl.canned": "secret"}, "allowed: private, public-read"),
        (
            {"s3.ssea.name": "aws:kms", "s3.sse.customer.key": "x"},
            "only works with s3.ssea.name=AES256",
        ),
        ({"s3.sse.kms.key.id": "k"}, "needs s3.ssea.name=aws:kms"),
    ],
)
def test_bad_s3_settings_name_the_option_and_allowed_values(options, message):
    options = {"s3.bucket.name": "b", **options} if "s3.bucket.name" not in message else options
    with pytest.raises(ConfigError, match=message):
        S3Settings.from_options(options)


def test_settings_translate_to_request_arguments():
    key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # base64 of 32 bytes
    sse_c = S3Settings.from_options({"s3.bucket.name": "b", "s3.sse.customer.key": key})
    assert sse_c.write_args() == {
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": b"0123456789abcdef" * 2,
    }
    kms = S3Settings.from_options(
        {
            "s3.bucket.name": "b",
            "s3.ssea.name": "aws:kms",
            "s3.sse.kms.key.id": "k1",
            "s3.acl.canned": "private",
        }
    )
    assert kms.write_args() == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "k1",
        "ACL": "private",
    }
    bare = S3Settings.from_options({"s3.bucket.name": "b", "store.url": "minio.local:9000"})
    assert bare.endpoint_url == "https://minio.local:9000"


def test_open_store_rejects_unknown_schemes():
    with pytest.raises(ConfigError, match="allowed: s3://, file://, a path"):
        open_store("gs://bucket/x")


def test_part_size_doubles_so_uploads_fit_in_ten_thousand_parts():
    assert part_size_for(1, 25 * MIB) == part_size_for(1000, 25 * MIB) == 25 * MIB
    assert part_size_for(1001, 25 * MIB) == 50 * MIB

    def largest_object(part_size: int) -> int:
        return sum(part_size_for(n, part_size) for n in range(1, MAX_PARTS + 1))

    assert largest_object(25 * MIB) > 5 * 1024**4  # the default passes S3's 5 TiB object limit
    assert largest_object(5 * MIB) > 4.8 * 1024**4  # even the minimum part size nearly does


def test_backoff_is_full_jitter_exponential_capped_at_a_day():
    assert backoff_delays(attempts=3, base_ms=200, rng=lambda: 0.5) == [0.1, 0.2]
    assert backoff_delays(attempts=40, base_ms=200, rng=lambda: 1.0)[-1] == 24 * 3600


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (client_error("SlowDown", 503), True),
        (client_error("InternalError", 500), True),
        (client_error("RequestTimeout", 400), True),
        (ConnectionClosedError(endpoint_url="http://x"), True),
        (client_error("AccessDenied", 403), False),
        (client_error("NoSuchKey", 404), False),
    ],
)
def test_botocore_decides_what_is_retryable(exc, retryable):
    assert is_retryable(exc) is retryable


def test_call_with_retries_stops_at_the_attempt_limit():
    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        raise client_error("SlowDown", 503)

    with pytest.raises(ClientError):
        call_with_retries(flaky, attempts=3, base_ms=10, what="PUT", sleep=sleeps.append)
    assert len(calls) == 3 and len(sleeps) == 2

    calls.clear()
    with pytest.raises(ClientError):
        call_with_retries(
            lambda: calls.append(1) or (_ for _ in ()).throw(client_error("AccessDenied", 403)),
            attempts=5,
            base_ms=10,
            what="PUT",
            sleep=sleeps.append,
        )
    assert len(calls) == 1  # not retryable: fails at once


def test_a_local_listing_shows_hidden_files_but_not_puts_in_progress(tmp_path):
    """Hidden index sidecars are objects; only a put's temporary file is left out."""
    from blockgz.store import LocalStore

    store = LocalStore(tmp_path)
    store.put("d/.t+0+0000000000.json.index.json", b"{}")
    store.put("d/t+0+0000000000.json.gz", b"x")
    (tmp_path / "d" / ".t+0+0000000005.json.gz.a1b2.tmp").write_bytes(b"half")
    assert [o.key for o in store.list("d/")] == [
        "d/.t+0+0000000000.json.index.json",
        "d/t+0+0000000000.json.gz",
    ]
