"""Codec determinism: the same block and settings give the same bytes on any thread."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from blockgz import Compression
from blockgz.blocks.codecs.gzip_members import ISAL_MIN_INPUT


@pytest.mark.parametrize("compression", [Compression.preset("fast"), Compression.preset("small")])
def test_small_blocks_compress_identically_on_busy_threads(compression):
    """Regression: ISA-L gave different bytes for small inputs after heap churn on threads."""
    rng = random.Random(11)
    alphabet = b"\x00\x01\x15\xb8\x1c\n"
    inputs = [bytes(rng.choices(alphabet, k=rng.randint(1, 3000))) for _ in range(8000)]
    reference = [compression.compress(x) for x in inputs]

    def churn_then_compress(data: bytes) -> bytes:
        np.random.bytes(rng.randint(1000, 300_000))  # leave stale memory in this thread's heap
        return compression.compress(data)

    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(churn_then_compress, inputs))
    assert sum(a != b for a, b in zip(got, reference, strict=True)) == 0


def test_isal_still_handles_real_blocks():
    block = b'{"event": "page_view", "n": 1}\n' * (ISAL_MIN_INPUT // 16)
    fast = Compression.preset("fast").compress(block)
    assert fast != Compression("zlib", 6).compress(block)  # a 1 MiB-ish block is ISA-L's
