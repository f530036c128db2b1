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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from blockgz.errors import ConfigError
from blockgz.option_defs import OptionDef, OptionSet, declarer
from blockgz.options import Options, as_options
from blockgz.store.credential_sources import credential_source
from blockgz.store.object_tags import TAGGING_ERROR_BEHAVIORS, tagging_fields

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


_store = declarer("store", "confluent", also=("sink", "reader"))


def _text(name: str, doc: str, **more: Any) -> OptionDef:
    """A store option whose value is text, empty (unset) by default."""
    return _store(name, "text", "", doc, **more)


#: The S3 settings, under Confluent's names (and ``aws.profile``, ``s3.upload.concurrency``).
STORE_OPTIONS = OptionSet(
    _text("s3.bucket.name", "bucket", shown="from the URL"),
    _text("s3.region", "region", shown="boto3's chain"),
    _text(
        "store.url",
        "endpoint for MinIO, Ceph, R2, GCS; `https://` added to a bare host",
        shown="boto3's (`AWS_ENDPOINT_URL`)",
    ),
    _text(
        "s3.ssl.ca.bundle",
        "PEM file of the CA(s) that signed the endpoint's TLS certificate (a private CA); "
        "every S3 request verifies against it instead of the system's CAs",
        origin="blockgz",
        shown="boto3's (`AWS_CA_BUNDLE`)",
    ),
    _store(
        "s3.path.style.access.enabled", "flag", True, "path-style addressing (Confluent's default)"
    ),
    _store(
        "s3.wan.mode",
        "flag",
        False,
        "S3 Transfer Acceleration; needs `s3.path.style.access.enabled=false`, refused with "
        "`store.url`",
    ),
    _text(
        "aws.access.key.id",
        "credentials (static keys win over any provider but assume-role, as in Confluent)",
        shown="boto3's chain",
    ),
    _text(
        "aws.secret.access.key",
        "the secret of `aws.access.key.id`",
        shown="boto3's chain",
    ),
    _text(
        "aws.profile",
        "the boto3 profile of the credentials",
        origin="blockgz",
        shown="boto3's chain",
    ),
    _text(
        "s3.credentials.provider.class",
        "`DefaultAWSCredentialsProviderChain`/`DefaultCredentialsProvider` → boto3's chain; "
        "`ProfileCredentialsProvider` → `aws.profile`, else `AWS_PROFILE`, else `default`; "
        "`EnvironmentVariable…`, `WebIdentityToken(File)…`, `InstanceProfile…`, "
        "`Container…CredentialsProvider` → that boto3 source only; "
        "`io.confluent.connect.s3.auth.AwsAssumeRoleCredentialsProvider` → STS AssumeRole, "
        "refreshed; other classes are refused",
        shown="default chain",
    ),
    _text(
        "s3.credentials.provider.sts.role.arn",
        "the role to assume (required with AwsAssumeRoleCredentialsProvider)",
    ),
    _text(
        "s3.credentials.provider.sts.role.session.name",
        "the session name of the assumed role (required with AwsAssumeRoleCredentialsProvider)",
    ),
    _text(
        "s3.credentials.provider.sts.role.external.id",
        "the external id STS is called with",
    ),
    _text(
        "s3.credentials.provider.sts.region",
        "where STS is called (default `s3.region`); `AWS_ENDPOINT_URL_STS` sets its endpoint",
    ),
    _text("s3.proxy.url", "HTTP(S) proxy for every S3 request", shown="none"),
    _text("s3.proxy.user", "the proxy's user", shown="none"),
    _text("s3.proxy.password", "the proxy's password", shown="none"),
    _store(
        "s3.ssea.name",
        "choice",
        "",
        "server-side encryption; with `s3.sse.kms.key.id`",
        allowed=SSE_ALGORITHMS,
        shown="none",
    ),
    _text("s3.sse.kms.key.id", "the KMS key of `aws:kms` encryption", shown="none"),
    _text(
        "s3.sse.customer.key",
        "SSE-C: base64 of a 256-bit key (sent on every write and read)",
        shown="none",
    ),
    _store(
        "s3.acl.canned",
        "choice",
        "private",
        "the canned ACL of every object",
        allowed=CANNED_ACLS,
        shown="none",
    ),
    _store(
        "s3.send.digest",
        "flag",
        False,
        "Content-MD5 on every PUT and every UploadPart (S3 refuses a body that does not match)",
    ),
    _store(
        "s3.object.tagging",
        "flag",
        False,
        "tag each committed object with `startOffset`, `endOffset`, `recordCount` (`S3Store.tag`)",
    ),
    _text(
        "s3.object.tagging.key.value.pairs",
        "extra tags, `k1:v1,k2:v2` (at most 7: S3 allows 10 per object)",
        shown="none",
    ),
    _store(
        "s3.object.behavior.on.tagging.error",
        "choice",
        "ignore",
        "`ignore` (log it) or `fail`",
        allowed=TAGGING_ERROR_BEHAVIORS,
    ),
    _store(
        "s3.part.size",
        "int",
        DEFAULT_PART_SIZE,
        "multipart part size, 5 MiB … 2 GiB",
        low=MIN_PART_SIZE,
        high=MAX_PART_SIZE,
        shown="25 MiB",
    ),
    _store(
        "s3.part.retries", "int", 3, "attempts per request, the first included", low=1, high=100
    ),
    _store(
        "s3.retry.backoff.ms",
        "int",
        200,
        "base of the exponential full-jitter backoff (capped at one day)",
        low=0,
        high=24 * 3600 * 1000,
    ),
    _store(
        "s3.upload.concurrency",
        "int",
        4,
        "parts in flight per store, across all open uploads",
        low=1,
        high=64,
        origin="blockgz",
    ),
)
OPTION_NAMES = tuple(STORE_OPTIONS)


@dataclass(frozen=True)
class S3Settings:
    """Everything the S3 backend needs; build it with :meth:`from_options`."""

    bucket: str
    region: str | None = None
    endpoint_url: str | None = None
    #: ``s3.ssl.ca.bundle``: the CA bundle TLS certificates verify with (``None``: boto3's,
    #: which honours ``AWS_CA_BUNDLE`` and ``ca_bundle`` in the AWS config file).
    ca_bundle: str | None = None
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
        bucket = _read(opts, "s3.bucket.name")
        if not bucket:
            raise ConfigError("s3.bucket.name is required")
        endpoint = _read(opts, "store.url") or None
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint  # as Confluent does for a bare host
        if endpoint and urlsplit(endpoint).scheme.lower() not in ("http", "https"):
            raise ConfigError(
                f"store.url={endpoint!r}: an S3 endpoint is an http:// or https:// URL "
                "(a local directory is a target path, not store.url)"
            )
        sse = _read(opts, "s3.ssea.name")
        customer_key = _read(opts, "s3.sse.customer.key") or None
        if customer_key and sse not in ("", "AES256"):
            raise ConfigError("s3.sse.customer.key (SSE-C) only works with s3.ssea.name=AES256")
        kms_key = _read(opts, "s3.sse.kms.key.id") or None
        if kms_key and not sse.startswith("aws:kms"):
            raise ConfigError("s3.sse.kms.key.id needs s3.ssea.name=aws:kms or aws:kms:dsse")
        acl = _read(opts, "s3.acl.canned") if opts.given("s3.acl.canned") else None
        path_style = _read(opts, "s3.path.style.access.enabled")
        return cls(
            bucket=bucket,
            region=_read(opts, "s3.region") or None,
            endpoint_url=endpoint,
            ca_bundle=_ca_bundle(opts),
            path_style=path_style,
            accelerate=_accelerate(opts, bucket, endpoint, path_style),
            access_key_id=_read(opts, "aws.access.key.id") or None,
            secret_access_key=_read(opts, "aws.secret.access.key") or None,
            profile=_read(opts, "aws.profile") or None,
            **credential_source(_read(opts, "s3.credentials.provider.class"), opts),
            proxy_url=_proxy_url(opts),
            sse_algorithm=sse,
            sse_kms_key_id=kms_key,
            sse_customer_key=customer_key,
            acl=acl,
            send_digest=_read(opts, "s3.send.digest"),
            **tagging_fields(
                _read(opts, "s3.object.tagging"),
                _read(opts, "s3.object.tagging.key.value.pairs"),
                _read(opts, "s3.object.behavior.on.tagging.error"),
            ),
            part_size=_read(opts, "s3.part.size"),
            part_retries=_read(opts, "s3.part.retries"),
            retry_backoff_ms=_read(opts, "s3.retry.backoff.ms"),
            upload_concurrency=_read(opts, "s3.upload.concurrency"),
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
        except ValueError as exc:
            raise ConfigError("s3.sse.customer.key must be the base64 of a 256-bit key") from exc
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


def _read(opts: Options, name: str) -> Any:
    return STORE_OPTIONS.read(opts, name)


def _ca_bundle(opts: Options) -> str | None:
    """``s3.ssl.ca.bundle``: a readable file holding PEM certificates, or unset."""
    path = _read(opts, "s3.ssl.ca.bundle")
    if not path:
        return None
    try:
        text = Path(path).expanduser().read_text(errors="replace")
    except OSError as exc:
        raise ConfigError(f"s3.ssl.ca.bundle={path}: cannot read it ({exc.strerror})") from exc
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(
            f"s3.ssl.ca.bundle={path}: holds no PEM certificate (-----BEGIN CERTIFICATE-----); "
            "convert a DER or PKCS#12 file with openssl first"
        )
    return str(Path(path).expanduser())


def _accelerate(opts: Options, bucket: str, endpoint: str | None, path_style: bool) -> bool:
    """``s3.wan.mode``, refused where Transfer Acceleration cannot work."""
    if not _read(opts, "s3.wan.mode"):
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


def _proxy_url(opts: Options) -> str | None:
    """``s3.proxy.url`` with ``s3.proxy.user``/``s3.proxy.password`` as its user info."""
    url = _read(opts, "s3.proxy.url")
    user, password = _read(opts, "s3.proxy.user"), _read(opts, "s3.proxy.password")
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
