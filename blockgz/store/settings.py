"""S3 settings under Confluent's S3-sink option names, validated at the boundary.

>>> s = S3Settings.from_options({"s3.bucket.name": "b", "s3.part.size": "5242880"})
>>> s.part_size, s.part_retries, s.path_style
(5242880, 3, True)
>>> S3Settings.from_options({"s3.bucket.name": "b", "s3.ssea.name": "rot13"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.ssea.name: 'rot13' is not allowed; allowed: '' (none), AES256, ...
>>> S3Settings.from_options({"s3.bucket.name": "b", "s3.object.tagging": "true",
...     "s3.object.tagging.key.value.pairs": "team:data, env:prod"}).object_tags
(('team', 'data'), ('env', 'prod'))
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

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
#: The tags Confluent's connector puts on each object it commits (``s3.object.tagging``).
OFFSET_TAGS = ("startOffset", "endOffset", "recordCount")
MAX_TAGS = 10  # S3's limit per object
TAGGING_ERROR_BEHAVIORS = ("ignore", "fail")
_TAG_TEXT = re.compile(r"^[\w\s+\-=.:/@]*$")  # the characters S3 allows in a tag

#: ``s3.credentials.provider.class`` values and the boto3 credential source each maps to.
CREDENTIALS_PROVIDERS = {
    "com.amazonaws.auth.DefaultAWSCredentialsProviderChain": "default",
    "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider": "default",
    "com.amazonaws.auth.profile.ProfileCredentialsProvider": "profile",
    "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider": "profile",
    "com.amazonaws.auth.EnvironmentVariableCredentialsProvider": "env",
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider": "env",
    "com.amazonaws.auth.WebIdentityTokenCredentialsProvider": "web-identity",
    "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider": (
        "web-identity"
    ),
    "com.amazonaws.auth.InstanceProfileCredentialsProvider": "instance",
    "software.amazon.awssdk.auth.credentials.InstanceProfileCredentialsProvider": "instance",
    "com.amazonaws.auth.ContainerCredentialsProvider": "container",
    "software.amazon.awssdk.auth.credentials.ContainerCredentialsProvider": "container",
    "io.confluent.connect.s3.auth.AwsAssumeRoleCredentialsProvider": "assume-role",
}
STS_PREFIX = "s3.credentials.provider."
STS_OPTIONS = tuple(
    STS_PREFIX + name
    for name in ("sts.role.arn", "sts.role.session.name", "sts.role.external.id", "sts.region")
)
OPTION_NAMES = (
    "s3.bucket.name",
    "s3.region",
    "store.url",
    "s3.path.style.access.enabled",
    "s3.wan.mode",
    "aws.access.key.id",
    "aws.secret.access.key",
    "aws.profile",
    "s3.credentials.provider.class",
    *STS_OPTIONS,
    "s3.proxy.url",
    "s3.proxy.user",
    "s3.proxy.password",
    "s3.ssea.name",
    "s3.sse.kms.key.id",
    "s3.sse.customer.key",
    "s3.acl.canned",
    "s3.send.digest",
    "s3.object.tagging",
    "s3.object.tagging.key.value.pairs",
    "s3.object.behavior.on.tagging.error",
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
    #: ``s3.wan.mode``: S3 Transfer Acceleration (``bucket.s3-accelerate.amazonaws.com``).
    accelerate: bool = False
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    profile: str | None = None
    #: Where credentials come from: one of the values of :data:`CREDENTIALS_PROVIDERS`.
    credentials_provider: str = "default"
    sts_role_arn: str | None = None
    sts_role_session_name: str | None = None
    sts_role_external_id: str | None = field(default=None, repr=False)
    sts_region: str | None = None
    #: ``s3.proxy.url`` with ``s3.proxy.user``/``.password`` folded in as its user info.
    proxy_url: str | None = field(default=None, repr=False)
    sse_algorithm: str = ""
    sse_kms_key_id: str | None = None
    sse_customer_key: str | None = field(default=None, repr=False)
    acl: str | None = None
    #: ``s3.send.digest``: Content-MD5 on every PutObject and UploadPart.
    send_digest: bool = False
    #: ``s3.object.tagging``: the sink tags each committed object with :data:`OFFSET_TAGS`.
    object_tagging: bool = False
    #: ``s3.object.tagging.key.value.pairs``: extra tags put on every tagged object.
    object_tags: tuple[tuple[str, str], ...] = ()
    #: ``s3.object.behavior.on.tagging.error``: ``ignore`` (log) or ``fail`` (raise).
    on_tagging_error: str = "ignore"
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
        path_style = opts.flag("s3.path.style.access.enabled", True)
        return cls(
            bucket=bucket,
            region=opts.text("s3.region") or None,
            endpoint_url=endpoint,
            path_style=path_style,
            accelerate=_accelerate(opts, bucket, endpoint, path_style),
            access_key_id=opts.text("aws.access.key.id") or None,
            secret_access_key=opts.text("aws.secret.access.key") or None,
            profile=opts.text("aws.profile") or None,
            **_credentials(opts),
            proxy_url=_proxy_url(opts),
            sse_algorithm=sse,
            sse_kms_key_id=kms_key,
            sse_customer_key=customer_key,
            acl=acl,
            send_digest=opts.flag("s3.send.digest", False),
            **_tagging(opts),
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

    def credentials_key(self) -> tuple:
        """What decides the credentials (one boto3 Session per distinct value)."""
        return (
            self.credentials_provider,
            self.access_key_id,
            self.secret_access_key,
            self.profile,
            self.region,
            self.sts_role_arn,
            self.sts_role_session_name,
            self.sts_role_external_id,
            self.sts_region,
        )


def _accelerate(opts: Options, bucket: str, endpoint: str | None, path_style: bool) -> bool:
    """``s3.wan.mode``, refused where Transfer Acceleration cannot work."""
    if not opts.flag("s3.wan.mode", False):
        return False
    if endpoint:
        raise ConfigError(
            "s3.wan.mode=true cannot be used with store.url: Transfer Acceleration is AWS's "
            "own endpoint (bucket.s3-accelerate.amazonaws.com), not a custom one"
        )
    if path_style:
        raise ConfigError(
            "s3.wan.mode=true needs s3.path.style.access.enabled=false: Transfer Acceleration "
            "only works with virtual-hosted addressing (Confluent's default is path style)"
        )
    if "." in bucket:
        raise ConfigError(
            f"s3.wan.mode=true cannot be used with bucket {bucket!r}: Transfer Acceleration "
            "needs a bucket name without dots"
        )
    return True


def _credentials(opts: Options) -> dict[str, Any]:
    """``s3.credentials.provider.class`` and its STS settings."""
    name = opts.text("s3.credentials.provider.class")
    kind = CREDENTIALS_PROVIDERS.get(name) if name else "default"
    if kind is None:
        raise ConfigError(
            f"s3.credentials.provider.class: {name!r} has no boto3 equivalent (blockgz cannot "
            "load Java classes); allowed: " + ", ".join(CREDENTIALS_PROVIDERS)
        )
    arn, session_name, external_id, sts_region = (opts.text(k) or None for k in STS_OPTIONS)
    if kind != "assume-role":
        given = [k for k in STS_OPTIONS if opts.given(k)]
        if given:
            raise ConfigError(
                f"{', '.join(given)}: only used with s3.credentials.provider.class="
                "io.confluent.connect.s3.auth.AwsAssumeRoleCredentialsProvider"
            )
        return {"credentials_provider": kind}
    for key, value in ((STS_OPTIONS[0], arn), (STS_OPTIONS[1], session_name)):
        if not value:
            raise ConfigError(
                f"{key} is required with s3.credentials.provider.class=io.confluent.connect.s3."
                "auth.AwsAssumeRoleCredentialsProvider (the role to assume through STS)"
            )
    return {
        "credentials_provider": kind,
        "sts_role_arn": arn,
        "sts_role_session_name": session_name,
        "sts_role_external_id": external_id,
        "sts_region": sts_region,
    }


def _proxy_url(opts: Options) -> str | None:
    """``s3.proxy.url`` with ``s3.proxy.user``/``s3.proxy.password`` as its user info."""
    url = opts.text("s3.proxy.url")
    user, password = opts.text("s3.proxy.user"), opts.text("s3.proxy.password")
    if not url:
        if user or password:
            raise ConfigError("s3.proxy.user/s3.proxy.password need s3.proxy.url")
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"s3.proxy.url: {url!r} is not a proxy URL; use http://host:port or https://host:port"
        )
    if user or password:
        if parts.username:
            raise ConfigError("s3.proxy.url already holds a user; leave out s3.proxy.user")
        userinfo = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
        parts = parts._replace(netloc=f"{userinfo}@{parts.netloc}")
    return parts.geturl()


def _tagging(opts: Options) -> dict[str, Any]:
    """``s3.object.tagging`` and its extra tags, checked against S3's limits."""
    tagging = opts.flag("s3.object.tagging", False)
    pairs = _tag_pairs(opts.text("s3.object.tagging.key.value.pairs"))
    if pairs and not tagging:
        raise ConfigError(
            "s3.object.tagging.key.value.pairs: only used with s3.object.tagging=true"
        )
    return {
        "object_tagging": tagging,
        "object_tags": pairs,
        "on_tagging_error": opts.choice(
            "s3.object.behavior.on.tagging.error", TAGGING_ERROR_BEHAVIORS, "ignore"
        ),
    }


def _tag_pairs(text: str) -> tuple[tuple[str, str], ...]:
    name = "s3.object.tagging.key.value.pairs"
    pairs: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition(":"))
        if not sep or not key:
            raise ConfigError(f"{name}: {item!r} is not key:value (e.g. team:data,env:prod)")
        if key in OFFSET_TAGS:
            raise ConfigError(
                f"{name}: {key!r} is one of the offset tags ({', '.join(OFFSET_TAGS)})"
            )
        if key in pairs:
            raise ConfigError(f"{name}: tag {key!r} is given twice")
        if len(key) > 128 or len(value) > 256:
            raise ConfigError(
                f"{name}: {item!r}: S3 allows keys of 128 and values of 256 characters"
            )
        if not (_TAG_TEXT.match(key) and _TAG_TEXT.match(value)):
            raise ConfigError(
                f"{name}: {item!r}: S3 tags allow letters, digits, spaces and + - = . _ : / @"
            )
        pairs[key] = value
    if len(pairs) + len(OFFSET_TAGS) > MAX_TAGS:
        raise ConfigError(
            f"{name}: {len(pairs)} tags; S3 allows {MAX_TAGS} per object, "
            f"{len(OFFSET_TAGS)} of them the offset tags, so at most {MAX_TAGS - len(OFFSET_TAGS)}"
        )
    return tuple(pairs.items())
