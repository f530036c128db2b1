"""Where S3 credentials come from: Confluent's ``s3.credentials.provider.class`` names mapped to
boto3's credential sources, and the STS settings of an assumed role.

>>> from blockgz.options import Options
>>> credential_source("com.amazonaws.auth.profile.ProfileCredentialsProvider", Options({}))
{'credentials_provider': 'profile'}
>>> credential_source("com.example.Mine", Options({}))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.credentials.provider.class: 'com.example.Mine' has no boto3 ...
"""

from __future__ import annotations

from typing import Any

from blockgz.errors import ConfigError
from blockgz.options import Options

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


def credential_source(name: str, opts: Options) -> dict[str, Any]:
    """``s3.credentials.provider.class`` (``name``) and its STS settings among ``opts``, as
    :class:`~blockgz.store.settings.S3Settings` fields."""
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
