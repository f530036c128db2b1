"""Tune a short-lived command's own process for block work (``blockgz compress``): both settings in
one place, each with what it measured.

**Freed heap stays mapped** (:func:`keep_freed_heap`). A compression thread allocates each
block's output (and ISA-L's working buffers) afresh. In a new process, glibc's ``malloc`` hands
the top of each thread's heap back to the kernel as soon as a block is freed, so the next
block's buffers are new pages: zero-filled and faulted in one by one, ~50,000 page faults for 1
GB of input (``perf record -e page-faults``: most in ISA-L's encoder, writing into its fresh
output). A long-running process has raised its trim threshold by then, which is why the
in-process benchmark does not pay this and the ``blockgz compress`` command did.
:func:`keep_freed_heap` sets ``M_TOP_PAD``, the memory kept at the top of a heap when ``malloc``
trims it, so the pages stay mapped for the next block.

The library cannot be asked to reuse buffers (``isal_zlib.compress`` returns a new ``bytes``
each call), so this is set with ``mallopt`` through :mod:`ctypes`; it exists on glibc only, and
elsewhere the call does nothing.

**One OpenBLAS thread** (:func:`single_threaded_blas`). numpy, which counts the records, loads
OpenBLAS, and OpenBLAS starts a thread per core at import: ~0.06 s of CPU (``python -c "import
numpy"``: 0.13 s of user time, 0.07 s with ``OPENBLAS_NUM_THREADS=1``) for a library the command
never calls, taken from the cores that compress.

Both change the whole process, so they are for a command's own process; a library that others
import should not call them.

>>> keep_freed_heap() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import os
import sys

from blockgz.runtime.libc import function

#: glibc's ``M_TOP_PAD`` parameter number for ``mallopt``.
M_TOP_PAD = -2
#: Bytes kept at the top of each heap: a few blocks' worth of output and working buffers for
#: every compression thread.
DEFAULT_PAD = 64 * 1024 * 1024


def keep_freed_heap(pad: int = DEFAULT_PAD) -> bool:
    """Keep ``pad`` bytes mapped at the top of each ``malloc`` heap; ``True`` if glibc took it."""
    mallopt = function("mallopt", (ctypes.c_int, ctypes.c_int), ctypes.c_int)
    return mallopt is not None and mallopt(M_TOP_PAD, pad) == 1


def single_threaded_blas() -> None:
    """Have OpenBLAS start one thread, unless the user chose a number or numpy is loaded
    (then it is too late, and nothing changes)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def tune_command_process() -> None:
    """Both settings, for a command that compresses: call it before the compress path is
    imported."""
    single_threaded_blas()
    keep_freed_heap()
