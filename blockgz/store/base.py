"""One small interface over object stores: put, streaming upload, ranged get, head, list, delete."""

from __future__ import annotations

import builtins
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """A listed object: its key (relative to the store's root) and size in bytes, and when it
    was last written (epoch seconds) where the store says."""

    key: str
    size: int
    modified: float | None = field(default=None, compare=False)
    #: The object's ETag (quotes removed) where the listing gives one: it changes whenever
    #: the object is written again with other bytes (``None``: not given).
    etag: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class UploadInfo:
    """An unfinished multipart upload: its key, id and start time (epoch seconds, if known)."""

    key: str
    upload_id: str
    initiated: float | None = None


class Upload(ABC):
    """A file-like writer to one object; :meth:`close` makes it visible, :meth:`abort` drops it.

    As a context manager it commits on success and aborts on an exception, so a failed
    writer never leaves a partial object or orphaned multipart parts behind.
    """

    key: str

    @abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def abort(self) -> None: ...

    @property
    @abstractmethod
    def bytes_written(self) -> int: ...

    @property
    @abstractmethod
    def crc32(self) -> int:
        """CRC-32 (:func:`~blockgz.blocks.checksum.block_crc32`) of the bytes written so far:
        after :meth:`close`, the stored object's."""

    #: After :meth:`close`: the ETag the server gave the object (quotes removed), as its
    #: listing shows it; ``None``: none given (a local store).
    etag: str | None = None

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@dataclass
class RequestCounts:
    """What a store was asked for, for ``--stats`` and for proving a seek's cost.

    >>> counts = RequestCounts()
    >>> counts.add("ranged_gets", 2048)
    >>> counts.summary()
    '1 ranged GET (2.0 KiB)'
    """

    gets: int = 0
    ranged_gets: int = 0
    heads: int = 0
    lists: int = 0
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, nbytes: int = 0) -> None:
        with self._lock:
            setattr(self, kind, getattr(self, kind) + 1)
            self.bytes_read += nbytes

    def summary(self) -> str:
        """``1 GET, 1 ranged GET (312.0 KiB)``: what was requested, and bytes received."""
        from blockgz.options import format_size

        parts = [
            f"{n} {name}{'s' if n != 1 else ''}"
            for n, name in (
                (self.lists, "LIST"),
                (self.heads, "HEAD"),
                (self.gets, "GET"),
                (self.ranged_gets, "ranged GET"),
            )
            if n
        ]
        if not parts:
            return "no requests"
        return ", ".join(parts) + f" ({format_size(self.bytes_read)})"


def content_tag(data: bytes) -> str:
    """A version tag of an object's bytes: their MD5 in hex, as S3 gives a plain PUT's ETag.

    >>> content_tag(b"1")
    'c4ca4238a0b923820dcc509a6f75849b'
    """
    import hashlib

    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class ObjectStore(ABC):
    """Where objects live. Keys use ``/`` whatever the backend.

    :attr:`requests` counts the read requests made through this instance.
    """

    @property
    def requests(self) -> RequestCounts:
        counts = self.__dict__.get("_request_counts")
        if counts is None:
            counts = self.__dict__["_request_counts"] = RequestCounts()
        return counts

    @abstractmethod
    def put(self, key: str, data: bytes) -> str | None:
        """Write a whole object in one request; return its ETag where the store gives one."""

    @abstractmethod
    def open_upload(self, key: str) -> Upload:
        """Start a streaming upload (multipart on S3) that becomes visible on close."""

    @abstractmethod
    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object: one ranged request."""

    def get_range_sized(self, key: str, start: int, end: int) -> tuple[bytes, int | None]:
        """:meth:`get_range`, and the object's whole size where the same answer tells it (S3's
        ``Content-Range: bytes a-b/<size>``) at no extra request; ``None`` where it does not."""
        return self.get_range(key, start, end), None

    @abstractmethod
    def iter_chunks(self, key: str, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """The whole object, streamed."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo:
        """Size of an object; :class:`~blockgz.errors.ObjectNotFoundError` if missing."""

    @abstractmethod
    def list(
        self, prefix: str, *, start_after: str = "", limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order; only keys after
        ``start_after`` when given (S3's ``StartAfter``: the listing starts there), and at
        most ``limit`` of them (S3's ``MaxKeys``: no page is asked for beyond it)."""

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        """The "directories" right below ``prefix`` (each ends with ``/``), as S3 lists them
        with a ``/`` delimiter. This default walks :meth:`list`; stores override it."""
        found = {
            prefix + info.key[len(prefix) :].split("/", 1)[0] + "/"
            for info in self.list(prefix)
            if "/" in info.key[len(prefix) :]
        }
        return sorted(found)

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object; a missing one is not an error."""

    def stored_crc32(self, key: str) -> int | None:
        """The CRC-32 of the whole object that the store itself keeps (S3's full-object
        ``x-amz-checksum-crc32``), read without the data; ``None`` when the store keeps none
        for it (this default: stores that keep no checksums)."""
        return None

    @abstractmethod
    def url(self, key: str) -> str:
        """A URL naming the object, for messages."""

    #: Whether committed data objects get their offsets as tags (``s3.object.tagging``).
    tags_objects: bool = False

    def tag(self, key: str, tags: Mapping[str, str]) -> bool:
        """Tag an object; stores without tags do nothing and say so (``False``)."""
        return False

    def list_uploads(self, prefix: str) -> builtins.list[UploadInfo]:
        """The unfinished uploads under ``prefix``; stores whose uploads cannot outlive their
        writer have none."""
        return []

    def abort_uploads(
        self, prefix: str, *, started_before: float | None = None
    ) -> builtins.list[str]:
        """Abort unfinished uploads under ``prefix`` (started before the epoch time
        ``started_before``, when given) and return their keys. Stores whose uploads cannot
        outlive their writer have none."""
        return []

    def get(self, key: str) -> bytes:
        """The whole object in memory (for small objects such as indexes)."""
        return b"".join(self.iter_chunks(key))

    #: Whether :meth:`put_if` is atomic at the store (S3 conditional writes, a local file
    #: system's exclusive create); the default below reads, compares and writes, which a
    #: concurrent writer can interleave with.
    atomic_conditional_puts: bool = False

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        """A small object and its version tag (its ETag), for a later :meth:`put_if`;
        :class:`~blockgz.errors.ObjectNotFoundError` if missing."""
        data = self.get(key)
        return data, content_tag(data)

    def put_if(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write ``data`` only if ``key`` does not exist (``if_none_match``) or still has the
        version tag ``if_match``; return the new tag, or raise
        :class:`~blockgz.errors.PreconditionFailedError`.

        This default is not atomic (see :attr:`atomic_conditional_puts`).
        """
        from blockgz.errors import ObjectNotFoundError, PreconditionFailedError

        if if_none_match == (if_match is not None):
            raise ValueError("put_if: give exactly one of if_none_match and if_match")
        try:
            _, current = self.get_versioned(key)
        except ObjectNotFoundError:
            current = None
        if (if_none_match and current is not None) or (
            if_match is not None and current != if_match
        ):
            raise PreconditionFailedError(f"PUT {self.url(key)}: precondition failed")
        self.put(key, data)
        return content_tag(data)

    def close(self) -> None:  # noqa: B027 - optional hook; most stores hold nothing
        """Release threads and connections."""
