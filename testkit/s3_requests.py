"""S3 requests as the wire shows them: each request a :class:`testkit.s3.FaultProxy` logged,
named by its S3 operation and by the price class AWS bills it in.

The proxy sits between a client and a real S3 server (SeaweedFS in the benchmarks), so what is
counted here is what the server was asked, not what the client's own counters say. Path-style
addressing only (every local server and blockgz's clients use it)::

    with FaultProxy(seaweed.endpoint_url) as proxy:
        ...  # anything pointed at proxy.endpoint_url
        calls = [S3Call.of(r) for r in proxy.requests]
        Counter(c.operation for c in calls)  # {'PutObject': 12, 'GetObject (range)': 3, ...}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

#: AWS's request price classes for S3 Standard: PUT, COPY, POST and LIST requests are one tier,
#: GET, SELECT and every other request another; DELETE and CANCEL are free.
TIER_PUT = "PUT, COPY, POST, LIST"
TIER_GET = "GET and all other"
TIER_FREE = "DELETE, CANCEL (free)"

#: The price class of each operation :func:`operation_of` names.
TIERS: dict[str, str] = {
    "PutObject": TIER_PUT,
    "CopyObject": TIER_PUT,
    "CreateMultipartUpload": TIER_PUT,
    "UploadPart": TIER_PUT,
    "UploadPartCopy": TIER_PUT,
    "CompleteMultipartUpload": TIER_PUT,
    "ListObjects": TIER_PUT,
    "ListMultipartUploads": TIER_PUT,
    "ListParts": TIER_PUT,
    "CreateBucket": TIER_PUT,
    "GetObject": TIER_GET,
    "GetObject (range)": TIER_GET,
    "HeadObject": TIER_GET,
    "HeadBucket": TIER_GET,
    "GetBucket (other)": TIER_GET,
    "other": TIER_GET,
    "DeleteObject": TIER_FREE,
    "DeleteObjects": TIER_FREE,
    "AbortMultipartUpload": TIER_FREE,
    "DeleteBucket": TIER_FREE,
}


def operation_of(method: str, key: str, params: dict[str, str], headers: dict[str, str]) -> str:
    """The S3 operation of one request (``key`` empty: a bucket-level request).

    >>> operation_of("POST", "k", {"uploads": ""}, {})
    'CreateMultipartUpload'
    >>> operation_of("PUT", "k", {"partNumber": "1", "uploadId": "u"}, {})
    'UploadPart'
    >>> operation_of("GET", "", {"list-type": "2", "prefix": "t/"}, {})
    'ListObjects'
    >>> operation_of("GET", "k", {}, {"range": "bytes=0-9"})
    'GetObject (range)'
    """
    lowered = {name.lower() for name in headers}
    if method == "PUT":
        copy = "x-amz-copy-source" in lowered
        if "uploadId" in params:
            return "UploadPartCopy" if copy else "UploadPart"
        if not key:
            return "CreateBucket"
        return "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "uploads" in params:
            return "CreateMultipartUpload"
        if "uploadId" in params:
            return "CompleteMultipartUpload"
        return "DeleteObjects" if "delete" in params else "other"
    if method == "DELETE":
        if "uploadId" in params:
            return "AbortMultipartUpload"
        return "DeleteObject" if key else "DeleteBucket"
    if method == "HEAD":
        return "HeadObject" if key else "HeadBucket"
    if method == "GET":
        if "uploadId" in params:
            return "ListParts"
        if not key:
            if "uploads" in params:
                return "ListMultipartUploads"
            if "list-type" in params or not params or "prefix" in params:
                return "ListObjects"
            return "GetBucket (other)"
        return "GetObject (range)" if "range" in lowered else "GetObject"
    return "other"


@dataclass(frozen=True)
class S3Call:
    """One request on the wire: its operation, bucket and key (a LIST's: its ``prefix``)."""

    operation: str
    bucket: str
    key: str
    status: int | None
    request_bytes: int
    response_bytes: int

    @property
    def tier(self) -> str:
        return TIERS.get(self.operation, TIER_GET)

    @classmethod
    def of(cls, record: Any) -> S3Call:
        """The call a :class:`testkit.s3.RequestRecord` logged."""
        bucket, _, key = unquote(record.path).lstrip("/").partition("/")
        params = dict(parse_qsl(record.query, keep_blank_values=True))
        operation = operation_of(record.method, key, params, record.headers)
        if operation in ("ListObjects", "ListMultipartUploads"):
            key = params.get("prefix", "")
        return cls(
            operation, bucket, key, record.status, record.request_bytes, record.response_bytes
        )


def calls_of(records: Iterable[Any]) -> list[S3Call]:
    """Every logged request as an :class:`S3Call`, oldest first."""
    return [S3Call.of(r) for r in records]


def by_operation(calls: Iterable[S3Call]) -> Counter[str]:
    """How many calls of each operation."""
    return Counter(c.operation for c in calls)


def by_tier(calls: Iterable[S3Call]) -> Counter[str]:
    """How many calls of each price class."""
    return Counter(c.tier for c in calls)
