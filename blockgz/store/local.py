"""A local directory as an object store; objects appear atomically (temp file + rename).

>>> import tempfile
>>> store = LocalStore(tempfile.mkdtemp())
>>> store.put("topics/t/partition=0/a.json", b"hello")
>>> store.get_range("topics/t/partition=0/a.json", 1, 3)
b'el'
>>> [o.key for o in store.list("topics/t/")]
['topics/t/partition=0/a.json']
"""

from __future__ import annotations

import builtins
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from blockgz.blocks.checksum import block_crc32
from blockgz.errors import ConfigError, ObjectNotFoundError
from blockgz.store.base import ObjectInfo, ObjectStore, Upload


class LocalStore(ObjectStore):
    """Objects are files under ``root``; keys are ``/``-separated paths below it."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()

    def path(self, key: str) -> Path:
        parts = key.split("/")
        if (
            not key
            or key.startswith("/")
            or any(p in ("", ".", "..") for p in parts[:-1])
            or parts[-1] in (".", "..")
        ):
            raise ConfigError(f"object key {key!r} is not a clean relative path")
        return self.root.joinpath(*parts)

    def url(self, key: str) -> str:
        return str(self.root.joinpath(*[p for p in key.split("/") if p]))

    def put(self, key: str, data: bytes) -> None:
        with self.open_upload(key) as upload:
            upload.write(data)

    def open_upload(self, key: str) -> Upload:
        return _LocalUpload(key, self.path(key))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            fd = os.open(self.path(key), os.O_RDONLY)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{self.url(key)}: no such object") from exc
        try:
            data = os.pread(fd, max(0, end - start), start)
        finally:
            os.close(fd)
        self.requests.add("ranged_gets", len(data))
        return data

    def get_range_sized(self, key: str, start: int, end: int) -> tuple[bytes, int | None]:
        """:meth:`get_range`, and the file's size (a ``stat``: no request to count)."""
        data = self.get_range(key, start, end)
        try:
            return data, self.path(key).stat().st_size
        except FileNotFoundError:
            return data, None

    def get(self, key: str) -> bytes:
        """The whole file in one read (sized by ``fstat``: no over-allocated buffer)."""
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{self.url(key)}: no such object") from exc
        self.requests.add("gets", len(data))
        return data

    def iter_chunks(self, key: str, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        try:
            f = open(self.path(key), "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{self.url(key)}: no such object") from exc
        with f:
            while chunk := f.read(chunk_size):
                yield chunk

    def head(self, key: str) -> ObjectInfo:
        try:
            stat = self.path(key).stat()
            return ObjectInfo(key, stat.st_size, stat.st_mtime)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{self.url(key)}: no such object") from exc

    def list(
        self, prefix: str, *, start_after: str = "", limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        # Walk only the deepest directory the prefix names, as S3 lists only the prefix.
        directory = self.root.joinpath(*prefix.split("/")[:-1]) if "/" in prefix else self.root
        self.requests.add("lists")
        if not directory.is_dir():
            return
        found = []
        for dirpath, _, files in os.walk(directory):
            for name in files:
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if (
                    key.startswith(prefix)
                    and key > start_after
                    # a put in progress, or the lock of a conditional put (hidden sidecars count)
                    and not (name.startswith(".") and name.endswith((".tmp", ".lock")))
                ):
                    stat = full.stat()
                    found.append(ObjectInfo(key, stat.st_size, stat.st_mtime))
        yield from sorted(found, key=lambda o: o.key)[:limit]

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        head, _, start = prefix.rpartition("/")
        directory = self.root.joinpath(*head.split("/")) if head else self.root
        if not directory.is_dir():
            return []
        base = f"{head}/" if head else ""
        return sorted(
            f"{base}{entry.name}/"
            for entry in os.scandir(directory)
            if entry.is_dir() and entry.name.startswith(start) and not entry.name.startswith(".")
        )

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    atomic_conditional_puts = True

    def put_if(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Atomic on one host: a create is a hard link of a finished temporary file (which
        fails if the name exists); a replace compares and renames under an exclusive
        ``flock`` of a hidden lock file beside the object.

        >>> import tempfile
        >>> store = LocalStore(tempfile.mkdtemp())
        >>> tag = store.put_if("l.json", b"1", if_none_match=True)
        >>> store.put_if("l.json", b"2", if_none_match=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        blockgz.errors.PreconditionFailedError: ...l.json: exists already
        >>> store.put_if("l.json", b"3", if_match=tag) == store.get_versioned("l.json")[1]
        True
        """
        import fcntl

        from blockgz.errors import PreconditionFailedError
        from blockgz.store.base import content_tag

        if if_none_match == (if_match is not None):
            raise ValueError("put_if: give exactly one of if_none_match and if_match")
        path = self.path(key)
        fd, tmp = temp_file_beside(path)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            lock_path = path.with_name(f".{path.name}.lock")
            with open(lock_path, "a+b") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                if if_none_match:
                    try:
                        os.link(tmp, path)
                    except FileExistsError as exc:
                        raise PreconditionFailedError(f"{self.url(key)}: exists already") from exc
                else:
                    try:
                        current = content_tag(path.read_bytes())
                    except FileNotFoundError:
                        current = None
                    if current != if_match:
                        raise PreconditionFailedError(f"{self.url(key)}: changed since it was read")
                    os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return content_tag(data)


def temp_file_beside(path: Path) -> tuple[int, str]:
    """A new temporary file in ``path``'s directory, with the mode a plain open() would give."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    current = os.umask(0)
    os.umask(current)
    os.chmod(tmp, 0o666 & ~current)  # mkstemp makes 0600
    return fd, tmp


class _LocalUpload(Upload):
    def __init__(self, key: str, path: Path):
        self.key = key
        self._path = path
        fd, self._tmp = temp_file_beside(path)
        self._file = os.fdopen(fd, "wb")
        self._written = 0
        self._crc = 0

    @property
    def bytes_written(self) -> int:
        return self._written

    @property
    def crc32(self) -> int:
        return self._crc

    def write(self, data) -> int:
        n = self._file.write(data)
        self._written += n
        self._crc = block_crc32(data, self._crc)
        return n

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.close()
        os.replace(self._tmp, self._path)

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        Path(self._tmp).unlink(missing_ok=True)
