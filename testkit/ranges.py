"""A :class:`~blockgz.objects.indexed.ByteRanges` wrapper that records every range read, for
tests that prove what a read costs."""

from __future__ import annotations

from typing import Any


class CountingRanges:
    """Reads through ``inner``, keeping each ``(start, end)`` asked for in :attr:`reads`."""

    def __init__(self, inner: Any):
        self.inner, self.source = inner, inner.source
        self.reads: list[tuple[int, int]] = []

    def read(self, start: int, end: int) -> bytes:
        self.reads.append((start, end))
        return self.inner.read(start, end)

    def size(self) -> int:
        return self.inner.size()

    def close(self) -> None:
        self.inner.close()
