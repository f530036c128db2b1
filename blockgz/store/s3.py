"""S3 (and any S3-compatible endpoint) through boto3, every call retried by our policy.

store = S3Store(S3Settings.from_options({"s3.bucket.name": "archive",
                                         "store.url": "http://127.0.0.1:9000"}))
with store.open_upload("topics/t/partition=0/t+0+0000000000.json.gz") as up:
    up.write(data)                  # parts go up in parallel while you write
store.get_range(key, 0, 100)        # one GET with Range: bytes=0-99
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from blockgz.blocks.checksum import block_crc32
from blockgz.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreAccessDeniedError,
    StoreError,
)
from blockgz.store.base import ObjectInfo, ObjectStore, Upload, UploadInfo
from blockgz.store.digest import content_md5, crc32_from_header, crc32_header, etag_of
from blockgz.store.object_tags import OFFSET_TAGS
from blockgz.store.retry import call_with_retries
from blockgz.store.s3_client import make_client
from blockgz.store.settings import S3Settings

log = logging.getLogger("blockgz.store")
T = TypeVar("T")
_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "404", "NotFound", "NoSuchUpload"}
_PRECONDITION = {"PreconditionFailed", "ConditionalRequestConflict"}
_DENIED = {"AccessDenied", "403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
#: What a server that does not take S3's checksum arguments answers them with (never
#: ``BadDigest``: that is a checksum taken and found wrong).
_CHECKSUM_REFUSED = {"InvalidArgument", "InvalidRequest", "NotImplemented", "UnsupportedHeader"}


class S3Store(ObjectStore):
    """One bucket. Parts of all open uploads share ``s3.upload.concurrency`` threads."""

    def __init__(self, settings: S3Settings, client=None):
        self.settings = settings
        self.bucket = settings.bucket
        self.client = client or make_client(settings)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        # Bounds the parts in flight across every open upload of this store.
        self.part_slots = threading.BoundedSemaphore(settings.upload_concurrency)
        #: Whether uploads send S3 checksums; off once the server refused them.
        self.send_checksums = True

    # -- plumbing ----------------------------------------------------------------------------
    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one S3 request with retries; translate the final error."""
        try:
            return call_with_retries(
                fn,
                attempts=self.settings.part_retries,
                base_ms=self.settings.retry_backoff_ms,
                what=what,
            )
        except Exception as exc:
            raise translate_error(exc, what) from exc

    def call_with_checksum(
        self, what: str, fn: Callable[[dict[str, Any]], T], checksum: dict[str, Any]
    ) -> tuple[T, bool]:
        """``fn(checksum)`` through :meth:`call`, and whether the checksum went with it: a
        server that refuses the checksum arguments (an S3-compatible one that predates them)
        is asked again without, and this store sends none from then on (logged once)."""
        if not checksum or not self.send_checksums:
            return self.call(what, lambda: fn({})), False
        try:
            return self.call(what, lambda: fn(checksum)), True
        except StoreError as exc:
            if not _refuses_checksums(exc):
                raise
            log.warning("%s refused S3 checksum arguments (%s); uploads go without them", what, exc)
            self.send_checksums = False
            return self.call(what, lambda: fn({})), False

    @property
    def executor(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.settings.upload_concurrency, thread_name_prefix="blockgz-s3"
                )
            return self._executor

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- the interface ------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> str | None:
        """One PutObject, with the CRC-32 of ``data`` for the server to check and keep;
        returns the object's ETag (quotes removed; ``None``: the server gave none)."""
        args = {"Bucket": self.bucket, "Key": key, "Body": data, **self.settings.write_args()}
        if self.settings.send_digest:
            args["ContentMD5"] = content_md5(data)
        checksum = {"ChecksumAlgorithm": "CRC32", "ChecksumCRC32": crc32_header(block_crc32(data))}
        answer, _ = self.call_with_checksum(
            f"PUT {self.url(key)}", lambda extra: self.client.put_object(**args, **extra), checksum
        )
        return etag_of(answer)

    def stored_crc32(self, key: str) -> int | None:
        """One HEAD asking for the object's checksum: the full-object CRC-32 the server keeps,
        or ``None`` (none kept, or a composite multipart checksum, a CRC of part CRCs).

        SeaweedFS keeps it for a PUT and a full-object multipart upload, moto for both (but
        checks neither), radosgw 16.2 for neither (README, "Object stores and S3 settings").
        """
        args = self._read_args(key, ChecksumMode="ENABLED")
        meta = self.call(f"HEAD {self.url(key)}", lambda: self.client.head_object(**args))
        self.requests.add("heads")
        value = meta.get("ChecksumCRC32")
        if not value or meta.get("ChecksumType") not in (None, "FULL_OBJECT"):
            return None
        return crc32_from_header(value)

    atomic_conditional_puts = True

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """A small object and its ETag (quotes removed) in one GET."""
        args = self._read_args(key)

        def fetch() -> tuple[bytes, str]:
            answer = self.client.get_object(**args)
            return answer["Body"].read(), str(answer.get("ETag", "")).strip('"')

        data, tag = self.call(f"GET {self.url(key)}", fetch)
        self.requests.add("gets", len(data))
        return data, tag

    def put_if(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """A conditional ``PutObject``: ``If-None-Match: *`` to create, ``If-Match: <etag>``
        to replace; a refusal (412, or AWS's 409 ``ConditionalRequestConflict``) raises
        :class:`PreconditionFailedError`. Returns the new ETag (quotes removed).

        SeaweedFS and moto honour both headers; radosgw 16.2 compares ``If-Match`` with the
        unquoted ETag, so a refused quoted one whose object still has that ETag is sent once
        more unquoted.
        """
        if if_none_match == (if_match is not None):
            raise ValueError("put_if: give exactly one of if_none_match and if_match")
        args = {"Bucket": self.bucket, "Key": key, "Body": data, **self.settings.write_args()}
        if self.settings.send_digest:
            args["ContentMD5"] = content_md5(data)
        if if_none_match:
            args["IfNoneMatch"] = "*"
            return self._put_conditionally(key, args)
        args["IfMatch"] = f'"{if_match}"'
        try:
            return self._put_conditionally(key, args)
        except PreconditionFailedError:
            try:
                current = self.client.head_object(**self._read_args(key))["ETag"].strip('"')
            except Exception as exc:
                raise PreconditionFailedError(f"PUT {self.url(key)}: it is gone") from exc
            if current != if_match:
                raise
            args["IfMatch"] = if_match  # radosgw's comparison
            return self._put_conditionally(key, args)

    def _put_conditionally(self, key: str, args: dict[str, Any]) -> str:
        what = f"conditional PUT {self.url(key)}"
        try:
            answer = self.call(what, lambda: self.client.put_object(**args))
        except StoreError as exc:
            response = getattr(exc.__cause__, "response", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = response.get("Error", {}).get("Code")
            if status in (409, 412) or code in _PRECONDITION:
                raise PreconditionFailedError(f"{what}: {code or status}") from exc
            if isinstance(exc, ObjectNotFoundError) and "IfMatch" in args:
                raise PreconditionFailedError(f"{what}: it is gone") from exc  # moto's 404
            raise
        return str(answer.get("ETag", "")).strip('"')

    @property
    def tags_objects(self) -> bool:  # type: ignore[override]
        return self.settings.object_tagging

    def tag(self, key: str, tags: Mapping[str, str]) -> bool:
        """Put ``tags`` and the ``s3.object.tagging.key.value.pairs`` on object ``key``
        (replacing its tag set), retried like every call. A final failure is logged and
        ``False`` returned, or raised with ``s3.object.behavior.on.tagging.error=fail``.

        The sink calls it after an object is committed, with :func:`offset_tags`, when
        ``settings.object_tagging`` is on.
        """
        merged = {**dict(self.settings.object_tags), **tags}
        tag_set = [{"Key": k, "Value": str(v)} for k, v in merged.items()]
        try:
            self.call(
                f"PutObjectTagging {self.url(key)}",
                lambda: self.client.put_object_tagging(
                    Bucket=self.bucket, Key=key, Tagging={"TagSet": tag_set}
                ),
            )
        except StoreError as exc:
            if self.settings.on_tagging_error == "fail":
                raise
            log.warning(
                "could not tag %s (s3.object.behavior.on.tagging.error=ignore): %s",
                self.url(key),
                exc,
            )
            return False
        return True

    def open_upload(self, key: str) -> Upload:
        from blockgz.store.multipart import MultipartUpload

        return MultipartUpload(self, key)

    def _read_args(self, key: str, **extra: Any) -> dict[str, Any]:
        return {"Bucket": self.bucket, "Key": key, **self.settings.sse_customer_args(), **extra}

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_range_sized(key, start, end)[0]

    def get_range_sized(self, key: str, start: int, end: int) -> tuple[bytes, int | None]:
        """One GET with ``Range``; the object's size from the answer's ``Content-Range``."""
        if end <= start:
            return b"", None
        args = self._read_args(key, Range=f"bytes={start}-{end - 1}")

        def fetch() -> tuple[bytes, int | None]:
            answer = self.client.get_object(**args)
            return answer["Body"].read(), _range_total(answer.get("ContentRange"))

        data, size = self.call(f"GET {self.url(key)} bytes {start}-{end - 1}", fetch)
        self.requests.add("ranged_gets", len(data))
        return data, size

    def get(self, key: str) -> bytes:
        """A small object (an index, a manifest) in one plain GET: no HEAD, no ranges."""
        args = self._read_args(key)
        data = self.call(
            f"GET {self.url(key)}", lambda: self.client.get_object(**args)["Body"].read()
        )
        self.requests.add("gets", len(data))
        return data

    def iter_chunks(self, key: str, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        # Streams with Range requests of growing position, so a dropped connection resumes
        # where it stopped instead of restarting the object.
        size = self.head(key).size
        pos = 0
        step = max(chunk_size, 8 * 1024 * 1024)
        while pos < size:
            end = min(size, pos + step)
            data = self.get_range(key, pos, end)
            for i in range(0, len(data), chunk_size):
                yield data[i : i + chunk_size]
            pos = end

    def head(self, key: str) -> ObjectInfo:
        args = self._read_args(key)
        meta = self.call(f"HEAD {self.url(key)}", lambda: self.client.head_object(**args))
        self.requests.add("heads")
        return ObjectInfo(key, int(meta["ContentLength"]), _epoch(meta.get("LastModified")))

    def list(
        self, prefix: str, *, start_after: str = "", limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        token: str | None = None
        remaining = limit
        while True:
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if start_after:
                args["StartAfter"] = start_after
            if remaining is not None:
                args["MaxKeys"] = min(remaining, 1000)
            if token:
                args["ContinuationToken"] = token
            page = self.call(
                f"LIST {self.url(prefix)}", partial(self.client.list_objects_v2, **args)
            )
            self.requests.add("lists")
            for item in page.get("Contents", []):
                yield ObjectInfo(
                    item["Key"],
                    int(item["Size"]),
                    _epoch(item.get("LastModified")),
                    etag_of(item),
                )
            if remaining is not None:
                remaining -= len(page.get("Contents", []))
            if not page.get("IsTruncated") or remaining == 0:
                return
            token = page["NextContinuationToken"]

    def list_uploads(self, prefix: str) -> builtins.list[UploadInfo]:
        """The multipart uploads under ``prefix`` nobody completed or aborted yet."""
        found: list[UploadInfo] = []
        markers: dict[str, str] = {}
        while True:
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, **markers}
            page = self.call(
                f"ListMultipartUploads {self.url(prefix)}",
                partial(self.client.list_multipart_uploads, **args),
            )
            found.extend(
                UploadInfo(u["Key"], u["UploadId"], _epoch(u.get("Initiated")))
                for u in page.get("Uploads", [])
            )
            if not page.get("IsTruncated"):
                return found
            markers = {
                "KeyMarker": page.get("NextKeyMarker", ""),
                "UploadIdMarker": page.get("NextUploadIdMarker", ""),
            }

    def abort_uploads(
        self, prefix: str, *, started_before: float | None = None
    ) -> builtins.list[str]:
        """Abort the multipart uploads under ``prefix`` that a killed writer left (their parts
        are billed and invisible until aborted); each is logged."""
        aborted: list[str] = []
        for upload in self.list_uploads(prefix):
            if (
                started_before is not None
                and upload.initiated is not None
                and upload.initiated >= started_before
            ):
                continue  # begun after the caller started: someone else's, alive
            key, upload_id = upload.key, upload.upload_id
            self.call(
                f"AbortMultipartUpload {self.url(key)}",
                partial(
                    self.client.abort_multipart_upload,
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload_id,
                ),
            )
            log.warning("aborted an unfinished multipart upload of %s", self.url(key))
            aborted.append(key)
        return aborted

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        found: list[str] = []
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
            if token:
                args["ContinuationToken"] = token
            page = self.call(
                f"LIST {self.url(prefix)} (directories)",
                partial(self.client.list_objects_v2, **args),
            )
            self.requests.add("lists")
            found.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
            if not page.get("IsTruncated"):
                return found
            token = page["NextContinuationToken"]

    def delete(self, key: str) -> None:
        self.call(
            f"DELETE {self.url(key)}",
            lambda: self.client.delete_object(Bucket=self.bucket, Key=key),
        )


def _refuses_checksums(exc: StoreError) -> bool:
    """Whether ``exc`` is a server's refusal of S3 checksum arguments (a 400 or 501 with one
    of :data:`_CHECKSUM_REFUSED`)."""
    response = getattr(exc.__cause__, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in _CHECKSUM_REFUSED and status in (400, 501)


def _range_total(content_range: str | None) -> int | None:
    """The whole object's size in a ``Content-Range`` (``bytes 0-9/11000``); ``None`` when
    absent or unknown (``*``).

    >>> _range_total("bytes 0-9/11000"), _range_total("bytes 0-9/*"), _range_total(None)
    (11000, None, None)
    """
    total = (content_range or "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


def _epoch(when: Any) -> float | None:
    """A boto3 ``datetime`` (``LastModified``, ``Initiated``) as epoch seconds."""
    return when.timestamp() if hasattr(when, "timestamp") else None


def offset_tags(start_offset: int, end_offset: int, record_count: int) -> dict[str, str]:
    """The tags Confluent's connector puts on a committed object (``s3.object.tagging``).

    >>> offset_tags(0, 41, 42)
    {'startOffset': '0', 'endOffset': '41', 'recordCount': '42'}
    """
    values = (start_offset, end_offset, record_count)
    return {name: str(value) for name, value in zip(OFFSET_TAGS, values, strict=True)}


def translate_error(exc: Exception, what: str) -> Exception:
    """Map a botocore error to the project's errors, keeping the message and cause."""
    from botocore.exceptions import BotoCoreError, ClientError, SSLError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"{what}: {code or status} {error.get('Message') or ''}".rstrip()
        if code in _NOT_FOUND or status == 404:
            return ObjectNotFoundError(message)
        if code in _DENIED or status == 403:
            return StoreAccessDeniedError(message)
        return StoreError(message)
    if isinstance(exc, SSLError):
        return StoreError(f"{what}: {tls_hint(exc)}")
    if isinstance(exc, BotoCoreError):
        return StoreError(f"{what}: {exc}")
    return exc


def tls_hint(exc: Exception) -> str:
    """What a failed TLS handshake means and which setting fixes it.

    >>> from botocore.exceptions import SSLError
    >>> tls_hint(SSLError(endpoint_url="https://s3:9000/", error="[SSL: CERTIFICATE_VERIFY_FAILED]"
    ...     " certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)"))
    ... # doctest: +NORMALIZE_WHITESPACE
    "TLS certificate not trusted (unable to get local issuer certificate): give the CA that
    signed the endpoint's certificate with s3.ssl.ca.bundle=/path/ca.pem (or AWS_CA_BUNDLE)"
    """
    text = str(exc)
    reason = text.split("certificate verify failed:", 1)[-1].split("(_ssl.c", 1)[0].strip()
    if "certificate verify failed" not in text:
        return f"TLS handshake failed ({text}); check store.url (https:// to a TLS endpoint)"
    if "mismatch" in reason:
        return (
            f"TLS certificate is not for this host ({reason}): use the host name in store.url "
            "that the certificate names"
        )
    return (
        f"TLS certificate not trusted ({reason}): give the CA that signed the endpoint's "
        "certificate with s3.ssl.ca.bundle=/path/ca.pem (or AWS_CA_BUNDLE)"
    )
