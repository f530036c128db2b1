"""Object stores shared by the sink and the reader: S3 (boto3) and local directories.

:func:`open_store` opens a URL; :class:`StoreTarget` is the same thing as a typed, picklable
setting (what the sink carries to its tasks).

>>> import tempfile
>>> store, prefix = open_store(tempfile.mkdtemp() + "/archive")
>>> type(store).__name__, prefix
('LocalStore', '')
>>> store, prefix = open_store("s3://bucket/exports/v1", {"store.url": "http://127.0.0.1:1"})
>>> store.bucket, prefix
('bucket', 'exports/v1/')
>>> StoreTarget.from_options({"s3.bucket.name": "quickstart"}).url
's3://quickstart'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from blockgz.errors import ConfigError
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.options import as_options
from blockgz.store.base import ObjectInfo, ObjectStore, Upload, UploadInfo
from blockgz.store.local import LocalStore
from blockgz.store.settings import STORE_OPTIONS, S3Settings

__all__ = [
    "LocalStore",
    "ObjectInfo",
    "ObjectStore",
    "S3Settings",
    "StoreTarget",
    "Upload",
    "UploadInfo",
    "open_store",
    "split_object_url",
]


TARGET_OPTIONS = OptionSet(
    OptionDef(
        "path",
        "text",
        "",
        "the export's target as a URL (`s3://b/prefix`) or a local directory, instead of "
        "`s3.bucket.name`",
        "store",
        also=("sink",),
    ),
)


@dataclass(frozen=True)
class StoreTarget:
    """A store URL (``s3://bucket/prefix``, ``file:///dir`` or a path) and, for S3, its settings."""

    url: str
    s3: S3Settings | None = None

    @classmethod
    def from_url(cls, url: str, options: Mapping[str, Any] | None = None) -> StoreTarget:
        """Validate ``url`` and, for ``s3://``, the S3 settings among ``options``."""
        parsed = urlparse(url)
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise ConfigError(f"{url!r}: an S3 URL needs a bucket, e.g. s3://bucket/prefix")
            settings = S3Settings.select(as_options(options)).merged(
                {"s3.bucket.name": parsed.netloc}
            )
            return cls(url, S3Settings.from_options(settings))
        if parsed.scheme in ("", "file"):
            return cls(url)
        raise ConfigError(
            f"{url!r}: unsupported scheme {parsed.scheme!r}; allowed: s3://, file://, a path"
        )

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> StoreTarget:
        """Where an export writes: ``path`` (a URL or directory) or ``s3.bucket.name``."""
        opts = as_options(options)
        path = TARGET_OPTIONS.read(opts, "path")
        if path:
            return cls.from_url(path.rstrip("/") or path, opts)
        bucket = STORE_OPTIONS.read(opts, "s3.bucket.name")
        if not bucket:
            raise ConfigError(
                "s3.bucket.name is required (or give a target as path=s3://bucket/prefix "
                "or a local directory)"
            )
        return cls.from_url(f"s3://{bucket}", opts)

    def open(self) -> tuple[ObjectStore, str]:
        """The store and the key prefix (``""`` or ending with ``/``)."""
        parsed = urlparse(self.url)
        if self.s3 is not None:
            from blockgz.store.s3 import S3Store

            prefix = parsed.path.strip("/")
            return S3Store(self.s3), (prefix + "/" if prefix else "")
        return LocalStore(parsed.path if parsed.scheme == "file" else self.url), ""


def open_store(url: str, options: Mapping[str, Any] | None = None) -> tuple[ObjectStore, str]:
    """Open ``s3://bucket/prefix``, ``file:///dir`` or a plain path; return (store, key prefix).

    The prefix is ``""`` or ends with ``/``. S3 options use Confluent's names
    (``store.url``, ``s3.region``, ``s3.part.size``, ...).
    """
    return StoreTarget.from_url(url, options).open()


def split_object_url(url: str, options: Mapping[str, Any] | None = None) -> tuple[ObjectStore, str]:
    """Open the store holding one object and return (store, key): ``s3://b/k`` or a file path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        store, prefix = open_store(url, options)
        return store, prefix.rstrip("/")
    path = Path(parsed.path if parsed.scheme == "file" else url).resolve()
    return LocalStore(path.parent), path.name
