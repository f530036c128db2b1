"""Block compression and gzip member decompression over ISA-L, libdeflate and stdlib zlib
(and zstd frames through :mod:`blockgz.blocks.codecs.zstd`).

Each call turns one block into one complete, standalone gzip member (mtime 0, so
the bytes depend only on the input and the settings), or with codec ``zstd`` one zstd frame.
All these libraries release the GIL while they work, which is what lets the writer compress
on threads. Which family decodes an index's blocks is :mod:`blockgz.blocks.codecs.families`' job.

    >>> c = Compression.from_level(1)
    >>> member = c.compress(b"hello\\n")
    >>> bytes(decompress_member(member))
    b'hello\\n'
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

from blockgz.blocks.codecs.one_frame import decode_one
from blockgz.errors import ConfigError, CorruptBlockError, MissingDependencyError

# Optional at import time (the fallbacks below), so typed as a module or None.
isal_zlib: ModuleType | None
igzip_lib: ModuleType | None
_libdeflate: ModuleType | None
try:  # ISA-L: the fast path for levels 0-3.
    from isal import igzip_lib, isal_zlib
except ImportError:  # pragma: no cover - isal is a hard dependency; this is the documented fallback
    isal_zlib = None
    igzip_lib = None

try:  # libdeflate: best ratio per CPU second, and the fastest single-member decoder.
    import deflate as _libdeflate
except ImportError:  # pragma: no cover - same as above
    _libdeflate = None

GZIP_WBITS = 31  # zlib's "wbits" for a gzip wrapper

CODEC_LEVELS: dict[str, range] = {
    "isal": range(0, 4),
    "zlib": range(0, 10),
    "libdeflate": range(1, 13),
    # zstd's levels (its negative "fast" levels lose too much ratio on JSON to be useful).
    "zstd": range(1, 23),
}
PRESETS: dict[str, tuple[str, int]] = {
    # isal level 1: ~780 MB/s per core, ratio ~4.7 on Kafka JSON (measured on a 2-core machine).
    "fast": ("isal", 1),
    # libdeflate level 5: gzip -6's ratio at ~2.4x pigz -6's speed on 2 cores; level 6 adds
    # ~5 % ratio for ~20 % less speed (benchmarks/README.md).
    "small": ("libdeflate", 5),
}


def available_codecs() -> list[str]:
    """The codecs whose library is importable here."""
    found = ["zlib"]
    if isal_zlib is not None:
        found.insert(0, "isal")
    if _libdeflate is not None:
        found.append("libdeflate")
    return found


@dataclass(frozen=True)
class Compression:
    """Which library compresses blocks, at which level (``zstd``: zstd frames, else gzip).

    Use :meth:`from_level` for the ``gzip -N`` style (0-3 on ISA-L, 4-9 on zlib) or
    :meth:`preset` for a named choice.
    """

    codec: str = "isal"
    level: int = 1

    def __post_init__(self) -> None:
        if self.codec not in CODEC_LEVELS:
            raise ConfigError(
                f"compression codec {self.codec!r} is not known; allowed: "
                + ", ".join(CODEC_LEVELS)
            )
        allowed = CODEC_LEVELS[self.codec]
        if self.level not in allowed:
            raise ConfigError(
                f"compression level {self.level} is not valid for {self.codec}; "
                f"allowed: {allowed.start}-{allowed.stop - 1}"
            )

    @classmethod
    def from_level(cls, level: int) -> Compression:
        """Levels 0-3 use ISA-L (zlib when isal is missing), 4-9 use stdlib zlib."""
        if level not in range(0, 10):
            raise ConfigError(f"compression level {level} is not valid; allowed: 0-9")
        if level <= 3:
            if isal_zlib is not None:
                return cls("isal", level)
            # zlib level 0 stores without compressing; ISA-L level 0 still compresses.
            return cls("zlib", max(level, 1))
        return cls("zlib", level)

    @classmethod
    def preset(cls, name: str) -> Compression:
        """A named preset: ``fast`` (isal 1, the default) or ``small`` (libdeflate 6)."""
        if name not in PRESETS:
            raise ConfigError(
                f"compression preset {name!r} is not known; allowed: {', '.join(PRESETS)}"
            )
        codec, level = PRESETS[name]
        if codec == "libdeflate" and _libdeflate is None:  # pragma: no cover
            return cls("zlib", level)
        return cls(codec, level)

    @property
    def compress(self) -> Callable[[bytes | memoryview], bytes]:
        """A function turning one block into one gzip member."""
        return _compressor(self.codec, self.level)


# ISA-L's stateless deflate, as python-isal 1.9 calls it, can read stale scratch memory for
# small inputs: compressing the same few-KB block on a worker thread after other allocations
# sometimes gives different (still valid) bytes (seen up to 2,178-byte inputs; none in 1,620
# samples from 4 KB to 1.1 MB; intel/isa-l#140 asks the same question). blockgz promises
# byte-identical objects for identical input, so blocks below this size go to zlib, which is
# deterministic; they are rare (a file's last block, tiny block sizes), so speed is moot.
ISAL_MIN_INPUT = 32 * 1024
SMALL_BLOCK_ZLIB_LEVEL = 6


def _compressor(codec: str, level: int) -> Callable[[bytes | memoryview], bytes]:
    if codec == "zstd":
        from blockgz.blocks.codecs.zstd import frame_compressor

        return frame_compressor(level)
    if codec == "isal":
        if isal_zlib is None:  # pragma: no cover
            raise MissingDependencyError("codec 'isal' needs the isal package: pip install isal")

        def isal_compress(data: bytes | memoryview) -> bytes:
            if len(data) < ISAL_MIN_INPUT:
                return zlib.compress(data, SMALL_BLOCK_ZLIB_LEVEL, wbits=GZIP_WBITS)
            return isal_zlib.compress(data, level, wbits=GZIP_WBITS)

        return isal_compress
    if codec == "libdeflate":
        if _libdeflate is None:  # pragma: no cover
            raise MissingDependencyError(
                "codec 'libdeflate' needs the deflate package: pip install deflate"
            )
        return lambda data: _libdeflate.gzip_compress(data, level)
    return lambda data: zlib.compress(data, level, wbits=GZIP_WBITS)


def decompress_member(
    data: bytes | memoryview, expected_size: int | None = None
) -> bytes | bytearray:
    """Decompress exactly one gzip member; raise :class:`CorruptBlockError` if it is damaged.

    libdeflate decodes only the first member and ignores what follows, so callers with
    several members in one range use :func:`decompress_members` instead.
    """
    if _libdeflate is not None:
        try:
            out = _libdeflate.gzip_decompress(data)  # a bytearray: not copied again
        except _libdeflate.DeflateError as exc:
            raise CorruptBlockError(f"gzip member does not decompress ({exc})") from exc
    else:  # pragma: no cover
        out = decompress_members(data)
    if expected_size is not None and len(out) != expected_size:
        raise CorruptBlockError(
            f"gzip member decompressed to {len(out)} bytes, expected {expected_size}"
        )
    return out


def decompress_members(data: bytes | memoryview) -> bytes:
    """Decompress a run of one or more concatenated gzip members, checking every CRC."""
    parts: list[bytes] = []
    view = memoryview(data)
    while len(view):
        decoder = _new_decoder()
        try:
            parts.append(decoder.decompress(view))
        except Exception as exc:  # isal raises IsalError, zlib raises zlib.error
            raise CorruptBlockError(f"gzip member does not decompress ({exc})") from exc
        if not decoder.eof:
            raise CorruptBlockError("gzip data ends in the middle of a member (truncated)")
        view = view[len(view) - len(decoder.unused_data) :]
    return b"".join(parts)


def _new_decoder():
    if isal_zlib is not None:
        return isal_zlib.decompressobj(wbits=GZIP_WBITS)
    return zlib.decompressobj(wbits=GZIP_WBITS)  # pragma: no cover


def new_member_decoder():
    """A streaming decoder that stops at the end of one gzip member (``.eof``, ``.unused_data``)."""
    return _new_decoder()


def walk_members(
    view: memoryview, on_progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(byte_offset, byte_length, uncompressed)`` for each gzip member of ``view``."""
    pos, size = 0, len(view)
    while pos < size:
        # isal.IsalError or zlib.error
        consumed, data = decode_one(view, pos, new_member_decoder(), "gzip member", Exception)
        yield pos, consumed, data
        pos += consumed
        if on_progress is not None:
            on_progress(consumed)
