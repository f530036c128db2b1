"""One small interface over object stores: put, streaming upload, ranged get, head, list, delete."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """A listed object: its key (relative to the store's root) and size in bytes."""

    key: str
    size: int


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

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class ObjectStore(ABC):
    """Where objects live. Keys use ``/`` whatever the backend."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write a whole object in one request."""

    @abstractmethod
    def open_upload(self, key: str) -> Upload:
        """Start a streaming upload (multipart on S3) that becomes visible on close."""

    @abstractmethod
    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object: one ranged request."""

    @abstractmethod
    def iter_chunks(self, key: str, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """The whole object, streamed."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo:
        """Size of an object; :class:`~blockgz.errors.ObjectNotFoundError` if missing."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order."""

    def list_prefixes(self, prefix: str) -> list[str]:
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

    @abstractmethod
    def url(self, key: str) -> str:
        """A URL naming the object, for messages."""

    def get(self, key: str) -> bytes:
        """The whole object in memory (for small objects such as indexes)."""
        return b"".join(self.iter_chunks(key))

    def close(self) -> None:  # noqa: B027 - optional hook; most stores hold nothing
        """Release threads and connections."""
