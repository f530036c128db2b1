"""The Content-MD5 header (``s3.send.digest``), for single PUTs and multipart parts alike, and
S3's ``x-amz-checksum-crc32`` (the base64 of the big-endian CRC-32) both ways, and an answer's ETag.

>>> content_md5(b"abc")
'kAFQmDzST7DWlj99KOF/cg=='
>>> crc32_header(907060870), crc32_from_header("NhCmhg==")
('NhCmhg==', 907060870)
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any


def content_md5(data) -> str:
    """The Content-MD5 header of ``data``: the base64 of its MD5 (``s3.send.digest``)."""
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def crc32_header(crc: int) -> str:
    """S3's ``x-amz-checksum-crc32`` value of a CRC-32: base64 of its 4 big-endian bytes."""
    return base64.b64encode((crc & 0xFFFFFFFF).to_bytes(4, "big")).decode("ascii")


def crc32_from_header(value: str) -> int | None:
    """The CRC-32 in an ``x-amz-checksum-crc32`` value; ``None`` for anything else (a
    composite multipart checksum ``...-3``, a value that is not 4 bytes of base64).

    >>> crc32_from_header("NhCmhg==-2") is None, crc32_from_header("bm9wZQ==!") is None
    (True, True)
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        return None
    return int.from_bytes(raw, "big") if len(raw) == 4 else None


def etag_of(answer: Mapping[str, Any]) -> str | None:
    """The ETag of an S3 answer or listing entry, quotes removed; ``None``: none given.

    >>> etag_of({"ETag": '"abc-2"'}), etag_of({})
    ('abc-2', None)
    """
    value = str(answer.get("ETag") or "").strip('"')
    return value or None
