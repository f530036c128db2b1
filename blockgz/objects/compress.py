"""Compress a newline-delimited file into a block-GZIP object plus sidecar (``blockgz compress``).

The output goes through :class:`~blockgz.written.upload.BlockGzipUpload` on a local store, so
the data file appears (by atomic rename) before its index, and neither appears on failure.

    >>> import pathlib, tempfile
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "in.txt").write_bytes(b"a\\nb\\nc\\n")
    >>> compress_file(tmp / "in.txt", tmp / "in.txt.gz").record_count
    3
    >>> sorted(p.name for p in tmp.iterdir())
    ['.in.txt.index.json', 'in.txt', 'in.txt.gz']
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.framing import NEWLINE, Separated
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.store.local import LocalStore
from blockgz.written.upload import BlockGzipUpload

READ_CHUNK = 4 * 1024 * 1024  # large reads keep per-call overhead out of the ~1 GB/s path
#: Bytes of the input mapped in per ``MADV_POPULATE_READ`` call (:func:`populated`).
POPULATE_STEP = 8 * 1024 * 1024
#: ``MADV_POPULATE_READ`` (Linux's value; Python names it from 3.12 on where the kernel has it).
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)


def compress_file(
    src: str | os.PathLike[str] | BinaryIO,
    dst: str | os.PathLike[str],
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_records: int | None = None,
    compression: Compression | None = None,
    threads: int | None = None,
    separator: bytes = b"\n",
    first_offset: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> BlockIndex:
    """Compress ``src`` (a path, ``-`` for stdin, or a binary stream) to ``dst`` and its sidecar.

    Records are separated by ``separator``; their offsets count up from ``first_offset``.
    """
    dst = Path(dst).resolve()
    upload = BlockGzipUpload(
        LocalStore(dst.parent),
        dst.name,
        block_size=block_size,
        max_records=max_records,
        compression=compression,
        threads=threads,
        framing=NEWLINE if separator == b"\n" else Separated(separator),
        first_offset=first_offset,
    )
    with _open_source(src) as source, upload:
        _feed(source, upload, on_progress)
    return upload.index


def _feed(
    source: BinaryIO, upload: BlockGzipUpload, on_progress: Callable[[int], None] | None
) -> None:
    mapped = _map_file(source)
    if mapped is not None:  # a regular file: blocks are compressed straight from the page cache
        size = len(mapped)
        try:
            with populated(mapped):
                upload.write_delimited(mapped)
                upload.writer.close()  # every block compressed before the map goes away
        finally:
            _close_map(mapped)
        if on_progress is not None:
            on_progress(size)
        return
    buffer = bytearray(READ_CHUNK)
    view = memoryview(buffer)
    while n := source.readinto(buffer):  # type: ignore[attr-defined]
        upload.write_delimited(view[:n])
        if on_progress is not None:
            on_progress(n)


def _map_file(source: BinaryIO) -> mmap.mmap | None:
    """Map a regular, non-empty file read-only; ``None`` for pipes, sockets and the like.

    Not ``MAP_POPULATE``: that maps every page before the first block is cut, on one thread
    (for 1 GB, a serial pause before any compression starts). Unpopulated, the compression
    threads fault the pages in as they read them, in parallel; the kernel is told the file is
    read front to back and is wanted soon, so a file not yet cached is read ahead meanwhile.
    """
    try:
        fd = source.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size == 0:
            return None
        mapped = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    for advice in ("MADV_SEQUENTIAL", "MADV_WILLNEED"):
        if hasattr(mmap, advice):
            with contextlib.suppress(OSError):
                mapped.madvise(getattr(mmap, advice))
    return mapped


@contextmanager
def populated(mapped: mmap.mmap) -> Iterator[None]:
    """Map the file's pages in, front to back, on a thread of its own while the block holds.

    The compression threads otherwise take a page fault every few pages of input (the
    kernel's fault-around maps 64 KiB each), and those traps cost more CPU than having the
    pages mapped in bulk: ``MADV_POPULATE_READ`` (Linux 5.14) over :data:`POPULATE_STEP`
    bytes at a time, which also reads ahead a file not yet cached. Unlike ``MAP_POPULATE``
    it does not hold up the first block: compression starts at once, and a page the
    compression reaches first is simply faulted in as before. Where the kernel refuses the
    advice, the thread stops and nothing else changes.
    """
    stop = threading.Event()
    advise, pinned = _advice_call(mapped)

    def run() -> None:
        for start in range(0, len(mapped), POPULATE_STEP):
            if stop.is_set():
                return
            try:
                advise(MADV_POPULATE_READ, start, min(POPULATE_STEP, len(mapped) - start))
            except (OSError, ValueError):  # an older kernel, or the map went away
                return

    thread = threading.Thread(target=run, name="blockgz-populate", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        del pinned  # the map can be closed again


def _advice_call(mapped: mmap.mmap) -> tuple[Callable[[int, int, int], None], object]:
    """``madvise`` over part of ``mapped``, called without the GIL where it can be, and what
    keeps the map's address valid meanwhile (drop it before closing the map).

    :meth:`mmap.mmap.madvise` holds the GIL for the whole call: populating 8 MiB of a cached
    file takes ~0.8 ms, and of a file not yet cached as long as the disk takes, while every
    other thread of the pipeline waits (a Python loop ran at 3 % of its speed beside it).
    libc's ``madvise`` through :mod:`ctypes` lets go of the GIL, as any foreign call does.
    """
    import ctypes

    import numpy as np

    from blockgz.runtime.libc import errno, function

    madvise = function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int)
    if madvise is None:  # no C library to call: the mmap module's own, with the GIL
        return (lambda advice, start, length: mapped.madvise(advice, start, length)), None
    pinned = np.frombuffer(mapped, np.uint8)  # its address; the map cannot close under it
    base = pinned.ctypes.data

    def advise(advice: int, start: int, length: int) -> None:
        if madvise(base + start, length, advice) != 0:
            raise OSError(errno(), "madvise failed")

    return advise, pinned


def _close_map(mapped: mmap.mmap) -> None:
    # A block view still referenced by a failed pipeline keeps it open; GC closes it later.
    with contextlib.suppress(BufferError):
        mapped.close()


@contextmanager
def _open_source(src: str | os.PathLike[str] | BinaryIO) -> Iterator[BinaryIO]:
    if isinstance(src, (str, os.PathLike)):
        if str(src) == "-":
            yield sys.stdin.buffer
            return
        with open(src, "rb", buffering=0) as f:
            yield f
    else:
        yield src
