"""The S3 permissions the export and the readers need, why, and a cheap probe of each.

Derived from the boto3 calls :class:`~blockgz.store.s3.S3Store` and
:class:`~blockgz.store.multipart.MultipartUpload` make (nothing else in blockgz talks to S3):
PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload (all ``s3:PutObject``),
GetObject and HeadObject (``s3:GetObject``), ListObjectsV2 (``s3:ListBucket``), DeleteObject,
AbortMultipartUpload, ListMultipartUploads (``s3:ListBucketMultipartUploads``) and, with
``s3.object.tagging``, PutObjectTagging. Never called: ListParts, GetBucketLocation,
ListBuckets, CreateBucket, DeleteObjects, CopyObject.

>>> [p.action for p in export_permissions(tagging=False)]  # doctest: +NORMALIZE_WHITESPACE
['s3:PutObject', 's3:GetObject', 's3:ListBucket', 's3:DeleteObject', 's3:AbortMultipartUpload',
 's3:ListBucketMultipartUploads']
>>> [p.action for p in READER_PERMISSIONS]
['s3:GetObject', 's3:ListBucket']
>>> policy_document("archive", "kafka/", READER_PERMISSIONS)["Statement"][0]["Resource"]
['arn:aws:s3:::archive/kafka/*']
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blockgz.errors import StoreAccessDeniedError

if TYPE_CHECKING:
    from blockgz.store.s3 import S3Store


@dataclass(frozen=True)
class Permission:
    """One IAM action, what it is granted on and why blockgz needs it."""

    action: str
    #: ``object`` (``arn:aws:s3:::bucket/prefix*``) or ``bucket`` (``arn:aws:s3:::bucket``).
    on: str
    calls: str
    why: str


PUT = Permission(
    "s3:PutObject",
    "object",
    "PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload",
    "data objects, `.index.json` sidecars, manifests, catalog, lease, intents, dead letters",
)
GET = Permission(
    "s3:GetObject",
    "object",
    "GetObject, HeadObject",
    "at start and every batch: the lease, manifests and catalog (resume, recovery, other jobs "
    "under the prefix); readers: indexes and ranged GETs of blocks",
)
LIST = Permission(
    "s3:ListBucket",
    "bucket",
    "ListObjectsV2",
    "finds manifests, catalog roots, objects a batch that never committed left, other jobs "
    "under the prefix; readers: listings of the archive",
)
DELETE = Permission(
    "s3:DeleteObject",
    "object",
    "DeleteObject",
    "removes what a failed batch wrote (and its intent), expired catalog roots and segments, "
    "the preflight's test object",
)
ABORT = Permission(
    "s3:AbortMultipartUpload",
    "object",
    "AbortMultipartUpload",
    "cancels the parts of an upload that failed, and at start the uploads a killed run left",
)
LIST_UPLOADS = Permission(
    "s3:ListBucketMultipartUploads",
    "bucket",
    "ListMultipartUploads",
    "at start, finds the uploads a killed run left (`blockgz status` shows them)",
)
TAGGING = Permission(
    "s3:PutObjectTagging",
    "object",
    "PutObjectTagging",
    "only with `s3.object.tagging=true`: the offset tags of each committed object",
)

#: What ``blockgz export`` needs (plus :data:`TAGGING` with ``s3.object.tagging=true``).
EXPORT_PERMISSIONS = (PUT, GET, LIST, DELETE, ABORT, LIST_UPLOADS)
#: What ``seek``, ``cat``, the library's and Spark's readers need.
READER_PERMISSIONS = (GET, LIST)


def export_permissions(*, tagging: bool) -> tuple[Permission, ...]:
    """The permissions of an export, with ``s3:PutObjectTagging`` when it tags objects."""
    return EXPORT_PERMISSIONS + ((TAGGING,) if tagging else ())


def policy_document(bucket: str, prefix: str, permissions: Iterable[Permission]) -> dict:
    """An IAM policy granting ``permissions`` on ``bucket`` under ``prefix`` (bucket-level
    actions are limited to the prefix with an ``s3:prefix`` condition where they list)."""
    chosen = list(permissions)
    objects = sorted({p.action for p in chosen if p.on == "object"})
    bucket_wide = sorted({p.action for p in chosen if p.on == "bucket"})
    statements: list[dict[str, Any]] = []
    if objects:
        statements.append(
            {
                "Effect": "Allow",
                "Action": objects,
                "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"],
            }
        )
    if bucket_wide:
        statement: dict[str, Any] = {
            "Effect": "Allow",
            "Action": bucket_wide,
            "Resource": [f"arn:aws:s3:::{bucket}"],
        }
        if prefix:
            statement["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
        statements.append(statement)
    return {"Version": "2012-10-17", "Statement": statements}


class MissingPermissionError(StoreAccessDeniedError):
    """The credentials lack one permission the caller needs; :attr:`permission` names it."""

    def __init__(self, permission: Permission, cause: Exception):
        super().__init__(f"{permission.action} refused ({cause})")
        self.permission = permission


def probe_export_permissions(store: S3Store, where: str, *, tagging: bool = False) -> None:
    """Try each permission of :func:`export_permissions` once under ``where`` (the job's
    directory), with the store's SSE settings, and raise :class:`MissingPermissionError` for
    the first one refused. Other errors (no such bucket, TLS) are raised as they come.

    Eight small requests: put, list, get and delete a 0-byte object (tag it too with
    ``tagging``), then start, list and abort a multipart upload. (radosgw lets a writer read
    its own objects whatever the policy says, so there a missing s3:GetObject shows only
    when objects another user wrote are read.) Nothing is left behind
    unless the delete or the abort is what is refused.
    """
    key = f"{where}preflight-{secrets.token_hex(4)}"
    _try(PUT, lambda: store.put(key, b""))
    try:
        _try(LIST, lambda: next(iter(store.list(where, limit=1)), None))
        _try(GET, lambda: store.get(key))
        if tagging:
            _try(TAGGING, lambda: _tag(store, key))
    except BaseException:
        with contextlib.suppress(Exception):  # the first refusal is the one to report
            store.delete(key)
        raise
    _try(DELETE, lambda: store.delete(key))
    _probe_multipart(store, f"{key}-multipart")


def _probe_multipart(store: S3Store, key: str) -> None:
    args = {"Bucket": store.bucket, "Key": key, **store.settings.write_args()}
    created = _try(
        PUT,
        lambda: store.call(
            f"CreateMultipartUpload {store.url(key)}",
            lambda: store.client.create_multipart_upload(**args),
        ),
    )
    upload_id = created["UploadId"]

    def abort() -> None:
        store.call(
            f"AbortMultipartUpload {store.url(key)}",
            lambda: store.client.abort_multipart_upload(
                Bucket=store.bucket, Key=key, UploadId=upload_id
            ),
        )

    try:
        _try(LIST_UPLOADS, lambda: store.list_uploads(key))
    except BaseException:
        with contextlib.suppress(Exception):
            abort()
        raise
    _try(ABORT, abort)


def _tag(store: S3Store, key: str) -> None:
    tags = {"TagSet": [{"Key": "blockgz", "Value": "preflight"}]}
    store.call(
        f"PutObjectTagging {store.url(key)}",
        lambda: store.client.put_object_tagging(Bucket=store.bucket, Key=key, Tagging=tags),
    )


#: Refusals of the credentials themselves, not of one permission.
_NOT_PERMISSIONS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken")


def _try(permission: Permission, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except MissingPermissionError:
        raise
    except StoreAccessDeniedError as exc:
        if any(code in str(exc) for code in _NOT_PERMISSIONS):
            raise
        raise MissingPermissionError(permission, exc) from exc
