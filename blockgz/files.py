"""Compress newline-delimited files into block-GZIP plus sidecar, atomically.

The data file is written under a temporary name and renamed into place, then the
index the same way: whoever trusts only indexed files never sees a half-written one.

    >>> import pathlib, tempfile
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "in.txt").write_bytes(b"a\\nb\\nc\\n")
    >>> compress_file(tmp / "in.txt", tmp / "in.txt.gz").record_count
    3
    >>> sorted(p.name for p in tmp.iterdir())
    ['in.txt', 'in.txt.gz', 'in.txt.index.json']
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from blockgz.codec import Compression
from blockgz.framing import NEWLINE, Separated
from blockgz.index import BlockIndex, sidecar_key
from blockgz.writer import DEFAULT_BLOCK_SIZE, BlockGzipWriter

READ_CHUNK = 4 * 1024 * 1024  # large reads keep per-call overhead out of the ~1 GB/s path


def compress_stream(
    source: BinaryIO,
    out: BinaryIO,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_records: int | None = None,
    compression: Compression | None = None,
    threads: int | None = None,
    separator: bytes = b"\n",
    first_offset: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> BlockIndex:
    """Compress separator-delimited records from ``source`` into ``out``; return the index."""
    framing = NEWLINE if separator == b"\n" else Separated(separator)
    writer = BlockGzipWriter(
        out,
        block_size=block_size,
        max_records=max_records,
        compression=compression,
        threads=threads,
        framing=framing,
        first_offset=first_offset,
    )
    with writer:
        mapped = _map_file(source)
        if mapped is not None:  # a regular file: blocks are compressed straight from the page cache
            size = len(mapped)
            try:
                writer.write_delimited(mapped)
                writer.close()
            finally:
                _close_map(mapped)
            if on_progress is not None:
                on_progress(size)
            return writer.index
        buffer = bytearray(READ_CHUNK)
        view = memoryview(buffer)
        while True:
            n = source.readinto(buffer)  # type: ignore[attr-defined]
            if not n:
                break
            writer.write_delimited(view[:n])
            if on_progress is not None:
                on_progress(n)
    return writer.index


def compress_file(
    src: str | os.PathLike[str] | BinaryIO,
    dst: str | os.PathLike[str],
    **options,
) -> BlockIndex:
    """Compress ``src`` (a path, or a binary stream such as stdin) to ``dst`` and its sidecar."""
    dst = Path(dst)
    with _open_source(src) as source, atomic_write(dst) as out:
        index = compress_stream(source, out, **options)
    with atomic_write(Path(sidecar_key(str(dst)))) as out:
        out.write(index.to_json().encode())
    return index


def write_index(data_path: str | os.PathLike[str], index: BlockIndex) -> Path:
    """Write ``index`` as the sidecar of ``data_path`` (atomically) and return its path."""
    path = Path(sidecar_key(str(data_path)))
    with atomic_write(path) as out:
        out.write(index.to_json().encode())
    return path


def _map_file(source: BinaryIO) -> mmap.mmap | None:
    """Map a regular, non-empty file read-only; ``None`` for pipes, sockets and the like."""
    try:
        fd = source.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size == 0:
            return None
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _close_map(mapped: mmap.mmap) -> None:
    # A block view still referenced by a failed pipeline keeps it open; GC closes it later.
    with contextlib.suppress(BufferError):
        mapped.close()


@contextmanager
def _open_source(src):
    if isinstance(src, (str, os.PathLike)):
        if str(src) == "-":
            yield sys.stdin.buffer
            return
        with open(src, "rb", buffering=0) as f:
            yield f
    else:
        yield src


def temp_file_beside(path: Path) -> tuple[int, str]:
    """A new temporary file in ``path``'s directory, with the mode a plain open() would give."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    current = os.umask(0)
    os.umask(current)
    os.chmod(tmp, 0o666 & ~current)  # mkstemp makes 0600
    return fd, tmp


@contextmanager
def atomic_write(path: Path):
    """Write to a temporary file beside ``path``; rename over it only on success."""
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
