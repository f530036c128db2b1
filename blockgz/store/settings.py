"""S3 settings under Confluent's S3-sink option names, validated at the boundary.

>>> s = S3Settings.from_options({"s3.bucket.name": "b", "s3.part.size": "5242880"})
>>> s.part_size, s.part_retries, s.path_style
(5242880, 3, True)
>>> S3Settings.from_options({"s3.bucket.name": "b", "s3.ssea.name": "rot13"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.ssea.name: 'rot13' is not allowed; allowed: '' (none), AES256, ...
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.errors import ConfigError
from blockgz.options import Options, as_options

MIB = 1024 * 1024
MIN_PART_SIZE = 5 * MIB  # S3's minimum for every part but the last
DEFAULT_PART_SIZE = 25 * MIB  # Confluent's s3.part.size default
MAX_PART_SIZE = 2**31 - 1  # Confluent's upper bound
MAX_PARTS = 10_000  # S3's limit per multipart upload
SSE_ALGORITHMS = ("", "AES256", "aws:kms", "aws:kms:dsse")
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "log-delivery-write",
)
OPTION_NAMES = (
    "s3.bucket.name",
    "s3.region",
    "store.url",
    "s3.path.style.access.enabled",
    "aws.access.key.id",
    "aws.secret.access.key",
    "aws.profile",
    "s3.ssea.name",
    "s3.sse.kms.key.id",
    "s3.sse.customer.key",
    "s3.acl.canned",
    "s3.part.size",
    "s3.part.retries",
    "s3.retry.backoff.ms",
    "s3.upload.concurrency",
)


@dataclass(frozen=True)
class S3Settings:
    """Everything the S3 backend needs; build it with :meth:`from_options`."""

    bucket: str
    region: str | None = None
    endpoint_url: str | None = None
    path_style: bool = True
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    profile: str | None = None
    sse_algorithm: str = ""
    sse_kms_key_id: str | None = None
    sse_customer_key: str | None = field(default=None, repr=False)
    acl: str | None = None
    part_size: int = DEFAULT_PART_SIZE
    part_retries: int = 3
    retry_backoff_ms: int = 200
    upload_concurrency: int = 4

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> S3Settings:
        """Read Confluent-named options (``s3.part.size``, ``store.url``, ...) and validate them."""
        opts = as_options(options)
        bucket = opts.text("s3.bucket.name")
        if not bucket:
            raise ConfigError("s3.bucket.name is required")
        endpoint = opts.text("store.url") or None
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint  # as Confluent does for a bare host
        sse = opts.choice("s3.ssea.name", SSE_ALGORITHMS, "")
        customer_key = opts.text("s3.sse.customer.key") or None
        if customer_key and sse not in ("", "AES256"):
            raise ConfigError("s3.sse.customer.key (SSE-C) only works with s3.ssea.name=AES256")
        kms_key = opts.text("s3.sse.kms.key.id") or None
        if kms_key and not sse.startswith("aws:kms"):
            raise ConfigError("s3.sse.kms.key.id needs s3.ssea.name=aws:kms or aws:kms:dsse")
        acl = (
            opts.choice("s3.acl.canned", CANNED_ACLS, "private")
            if opts.given("s3.acl.canned")
            else None
        )
        return cls(
            bucket=bucket,
            region=opts.text("s3.region") or None,
            endpoint_url=endpoint,
            path_style=opts.flag("s3.path.style.access.enabled", True),
            access_key_id=opts.text("aws.access.key.id") or None,
            secret_access_key=opts.text("aws.secret.access.key") or None,
            profile=opts.text("aws.profile") or None,
            sse_algorithm=sse,
            sse_kms_key_id=kms_key,
            sse_customer_key=customer_key,
            acl=acl,
            part_size=opts.integer(
                "s3.part.size", DEFAULT_PART_SIZE, low=MIN_PART_SIZE, high=MAX_PART_SIZE
            ),
            part_retries=opts.integer("s3.part.retries", 3, low=1, high=100),
            retry_backoff_ms=opts.integer("s3.retry.backoff.ms", 200, low=0, high=24 * 3600 * 1000),
            upload_concurrency=opts.integer("s3.upload.concurrency", 4, low=1, high=64),
        )

    @staticmethod
    def select(options: Mapping[str, Any]) -> Options:
        """The S3 settings among ``options`` (what a store needs, nothing else)."""
        opts = as_options(options)
        return Options({k: opts[k] for k in OPTION_NAMES if k in opts})

    def write_args(self) -> dict[str, Any]:
        """Extra arguments for PutObject and CreateMultipartUpload (SSE, ACL)."""
        args: dict[str, Any] = {}
        if self.sse_customer_key:
            args.update(self.sse_customer_args())
        elif self.sse_algorithm:
            args["ServerSideEncryption"] = self.sse_algorithm
            if self.sse_kms_key_id:
                args["SSEKMSKeyId"] = self.sse_kms_key_id
        if self.acl:
            args["ACL"] = self.acl
        return args

    def sse_customer_args(self) -> dict[str, Any]:
        """SSE-C arguments, needed on every part upload and every read of such an object.

        The option holds the base64 of a 256-bit key, as in Confluent's connector; botocore
        base64-encodes the raw key and adds its MD5 itself.
        """
        if not self.sse_customer_key:
            return {}
        try:
            raw = base64.b64decode(self.sse_customer_key, validate=True)
        except ValueError:
            raise ConfigError("s3.sse.customer.key must be the base64 of a 256-bit key") from None
        if len(raw) != 32:
            raise ConfigError("s3.sse.customer.key must be the base64 of a 256-bit (32-byte) key")
        return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": raw}
