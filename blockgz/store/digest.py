"""The Content-MD5 header (``s3.send.digest``), for single PUTs and multipart parts alike.

>>> content_md5(b"abc")
'kAFQmDzST7DWlj99KOF/cg=='
"""

from __future__ import annotations

import base64
import hashlib


def content_md5(data) -> str:
    """The Content-MD5 header of ``data``: the base64 of its MD5 (``s3.send.digest``)."""
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")
