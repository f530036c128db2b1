"""Object stores shared by the sink and the reader: S3 (boto3) and local directories.

>>> import tempfile
>>> store, prefix = open_store(tempfile.mkdtemp() + "/archive")
>>> type(store).__name__, prefix
('LocalStore', '')
>>> store, prefix = open_store("s3://bucket/exports/v1", {"store.url": "http://127.0.0.1:1"})
>>> store.bucket, prefix
('bucket', 'exports/v1/')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from blockgz.errors import ConfigError
from blockgz.store.base import ObjectInfo, ObjectStore, Upload
from blockgz.store.local import LocalStore
from blockgz.store.settings import S3Settings

__all__ = ["LocalStore", "ObjectInfo", "ObjectStore", "S3Settings", "Upload", "open_store"]


def open_store(url: str, options: Mapping[str, Any] | None = None) -> tuple[ObjectStore, str]:
    """Open ``s3://bucket/prefix``, ``file:///dir`` or a plain path; return (store, key prefix).

    The prefix is ``""`` or ends with ``/``. S3 options use Confluent's names
    (``store.url``, ``s3.region``, ``s3.part.size``, ...).
    """
    options = dict(options or {})
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ConfigError(f"{url!r}: an S3 URL needs a bucket, e.g. s3://bucket/prefix")
        from blockgz.store.s3 import S3Store

        options["s3.bucket.name"] = parsed.netloc
        prefix = parsed.path.strip("/")
        return S3Store(S3Settings.from_options(options)), (prefix + "/" if prefix else "")
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else url
        return LocalStore(path), ""
    raise ConfigError(
        f"{url!r}: unsupported scheme {parsed.scheme!r}; allowed: s3://, file://, a path"
    )


def split_object_url(url: str, options: Mapping[str, Any] | None = None) -> tuple[ObjectStore, str]:
    """Open the store holding one object and return (store, key): ``s3://b/k`` or a file path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        store, prefix = open_store(url, options)
        return store, prefix.rstrip("/")
    from pathlib import Path

    path = Path(parsed.path if parsed.scheme == "file" else url).resolve()
    return LocalStore(path.parent), path.name
