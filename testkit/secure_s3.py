"""The users of the TLS SeaweedFS of the security tests (``secure_s3`` in ``tests/conftest.py``):
one with exactly the export's documented permissions, one per permission with that one taken
away, a tagger and a reader, each an IAM policy with per-API actions on the ``sec-*`` buckets.

>>> user_key("reader")
('reader', 'reader-secret-key')
>>> from blockgz.store.permissions import EXPORT_PERMISSIONS
>>> without(EXPORT_PERMISSIONS[0])
'no-putobject'
"""

from __future__ import annotations

from typing import Any

from blockgz.store.permissions import (
    EXPORT_PERMISSIONS,
    READER_PERMISSIONS,
    TAGGING,
    Permission,
    policy_document,
)
from testkit.s3 import s3_options

#: Every bucket of these tests starts with this (the users' policies name ``sec-*``).
BUCKETS = "sec-"


def user_key(name: str) -> tuple[str, str]:
    """The access key and secret key of user ``name``."""
    return name, f"{name}-secret-key"


def without(permission: Permission) -> str:
    """The user that has every export permission but ``permission``."""
    return "no-" + permission.action.removeprefix("s3:").lower()


def s3_user(name: str, permissions) -> Any:
    from blockgz.local_servers.seaweed import S3User

    access, secret = user_key(name)
    return S3User(access, secret, policy_document(f"{BUCKETS}*", "", permissions))


def secure_users() -> list[Any]:
    """Every user the secure SeaweedFS knows."""
    every = (*EXPORT_PERMISSIONS, TAGGING)
    return [
        s3_user("exporter", EXPORT_PERMISSIONS),
        s3_user("tagger", every),
        s3_user("reader", READER_PERMISSIONS),
        *(s3_user(without(p), [q for q in every if q != p]) for p in every),
    ]


def secure_options(server, user: str | None = None, **extra: str) -> dict[str, str]:
    """S3 options for ``server`` over TLS (its CA bundle), as ``user`` (else the admin)."""
    options = s3_options(server.endpoint_url, **{"s3.ssl.ca.bundle": server.ca_bundle})
    if user is not None:
        access, secret = user_key(user)
        options.update({"aws.access.key.id": access, "aws.secret.access.key": secret})
    return {**options, **extra}
