"""The boto3 side of the S3 store: sessions (credentials, profiles, STS roles) and the shared,
per-process S3 client of each :class:`~blockgz.store.settings.S3Settings`.

>>> from blockgz.store.settings import S3Settings
>>> make_client(S3Settings.from_options({"s3.bucket.name": "b"})) is make_client(
...     S3Settings.from_options({"s3.bucket.name": "b"}))
True
"""

from __future__ import annotations

import datetime
import email.utils
import os
import threading
from typing import Any

from blockgz.errors import StoreAccessDeniedError
from blockgz.store.request_stats import REQUESTS
from blockgz.store.settings import S3Settings

_SESSIONS: dict[tuple, Any] = {}
_SESSIONS_LOCK = threading.Lock()
#: botocore's credential providers behind the single-source ``s3.credentials.provider.class``es.
_BOTOCORE_PROVIDERS = {
    "env": "env",
    "web-identity": "assume-role-with-web-identity",
    "instance": "iam-role",
    "container": "container-role",
}


def _session(settings: S3Settings):
    """One boto3 Session per credential set, for the life of the process.

    Building a Session loads botocore's service models (50-70 ms here); a client made
    from an existing one costs ~3 ms, which is most of a cold `blockgz seek`.
    """
    key = settings.credentials_key()
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            _SESSIONS[key] = new_session(settings)
        return _SESSIONS[key]


def new_session(settings: S3Settings):
    """A boto3 Session whose credentials follow ``s3.credentials.provider.class``.

    As in Confluent's connector, ``aws.access.key.id``/``aws.secret.access.key`` win over
    any provider but the assume-role one, which uses them (or the default chain) to call STS.
    """
    import boto3

    kind = settings.credentials_provider
    static = settings.access_key_id is not None or settings.secret_access_key is not None
    if kind == "assume-role":
        base = _plain_session(settings, settings.profile)
        return _with_credentials(settings, assume_role_credentials(settings, base))
    if static or kind == "default":
        return _plain_session(settings, settings.profile)
    if kind == "profile":
        profile = settings.profile or os.environ.get("AWS_PROFILE") or "default"
        return boto3.session.Session(profile_name=profile, region_name=settings.region)
    return _single_provider_session(settings, _BOTOCORE_PROVIDERS[kind])


def _plain_session(settings: S3Settings, profile: str | None):
    import boto3

    return boto3.session.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        profile_name=profile,
        region_name=settings.region,
    )


def _single_provider_session(settings: S3Settings, method: str):
    """A Session that takes credentials from one of botocore's providers only."""
    import boto3
    import botocore.session
    from botocore.credentials import CredentialResolver

    core = botocore.session.Session()
    provider = core.get_component("credential_provider").get_provider(method)
    core.register_component("credential_provider", CredentialResolver([provider]))
    return boto3.session.Session(botocore_session=core, region_name=settings.region)


def _with_credentials(settings: S3Settings, credentials):
    """A Session that signs with ``credentials`` (e.g. refreshable ones)."""
    import boto3
    import botocore.session
    from botocore.credentials import CredentialProvider, CredentialResolver

    class Fixed(CredentialProvider):
        METHOD = getattr(credentials, "method", "blockgz")

        def load(self):
            return credentials

    core = botocore.session.Session()
    core.register_component("credential_provider", CredentialResolver([Fixed()]))
    return boto3.session.Session(botocore_session=core, region_name=settings.region)


def assume_role_credentials(settings: S3Settings, base):
    """Credentials from STS AssumeRole, refreshed before they expire (Confluent's
    ``AwsAssumeRoleCredentialsProvider``); STS is called with ``base``'s credentials.

    ``s3.credentials.provider.sts.region`` picks the STS region (default: ``s3.region``);
    boto3 honours ``AWS_ENDPOINT_URL_STS`` for the endpoint.
    """
    import functools

    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    source = base.get_credentials()
    if source is None:
        raise StoreAccessDeniedError(
            "s3.credentials.provider.class=AwsAssumeRoleCredentialsProvider: no credentials to "
            "call STS with (set aws.access.key.id/aws.secret.access.key or the default chain)"
        )
    extra = {"RoleSessionName": settings.sts_role_session_name}
    if settings.sts_role_external_id:
        extra["ExternalId"] = settings.sts_role_external_id
    fetcher = AssumeRoleCredentialFetcher(
        functools.partial(base.client, region_name=settings.sts_region or settings.region),
        source,
        settings.sts_role_arn,
        extra_args=extra,
    )
    return DeferredRefreshableCredentials(fetcher.fetch_credentials, "assume-role")


_CLIENTS: dict[tuple[int, S3Settings], Any] = {}


def parse_time(value: Any) -> datetime.datetime:
    """A time in an S3 answer as an aware ``datetime``: a LIST's ISO 8601 ``LastModified``
    (``2026-12-05T06:39:14.000Z``) and a header's HTTP date by the standard library, anything
    else by botocore's own parser, which takes ~1 ms each through dateutil: 20 s of a
    listing of 20,000 keys, a fifth of a HEAD's time.

    >>> parse_time("2026-12-05T06:39:14.123Z").timestamp()
    1796452754.123
    >>> parse_time("Sat, 05 Dec 2026 06:39:14 GMT").timestamp()
    1796452754.0
    """
    if isinstance(value, str) and value.endswith("Z") and "T" in value:
        try:
            return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=datetime.UTC)
        except ValueError:
            pass
    elif isinstance(value, str) and value.endswith(" GMT"):  # a header's (RFC 7231) date
        try:
            return email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            pass
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def make_client(settings: S3Settings):
    """The boto3 S3 client for ``settings``, made once per process and shared.

    boto3 clients are thread-safe; making one costs 10-15 ms (endpoint and model setup), a
    tenth of a cold seek against S3. The process id is part of the key, so a forked worker
    never reuses its parent's connections.
    """
    key = (os.getpid(), settings)
    with _SESSIONS_LOCK:
        client = _CLIENTS.get(key)
    if client is None:
        client = _new_client(settings)
        with _SESSIONS_LOCK:
            client = _CLIENTS.setdefault(key, client)
    return client


def _new_client(settings: S3Settings):
    """A new boto3 S3 client, with botocore's own retries off (we retry) and its requests
    counted in :data:`~blockgz.store.request_stats.REQUESTS`."""
    from botocore.config import Config

    s3: dict[str, Any] = {"addressing_style": "path" if settings.path_style else "virtual"}
    if settings.accelerate:
        s3["use_accelerate_endpoint"] = True
    config = Config(
        s3=s3,
        proxies={"http": settings.proxy_url, "https": settings.proxy_url}
        if settings.proxy_url
        else None,
        retries={"total_max_attempts": 1},
        max_pool_connections=max(10, settings.upload_concurrency * 2 + 4),
        # Only checksum when the operation requires it: third-party S3 servers (and older
        # MinIO/Ceph) reject the CRC trailers of boto3's newer default.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    # endpoint_url=None lets boto3 honour AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 itself, and
    # verify=None its AWS_CA_BUNDLE and the config file's ca_bundle.
    session = _session(settings)
    with _SESSIONS_LOCK:  # a Session is not thread-safe while it creates clients
        parsers = session._session.get_component("response_parser_factory")
        parsers.set_parser_defaults(timestamp_parser=parse_time)
        client = session.client(
            "s3", endpoint_url=settings.endpoint_url, verify=settings.ca_bundle, config=config
        )
    return REQUESTS.watch(client)
