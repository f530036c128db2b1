"""C library functions through :mod:`ctypes`, for what Python's standard library does not offer
(``mallopt``) or offers only while holding the GIL (``mmap.madvise``): a foreign call through
ctypes releases the GIL for its duration.

>>> madvise = function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int)
>>> madvise is None or callable(madvise)
True
>>> function("no_such_function_here", (), ctypes.c_int) is None
True
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any


@functools.cache
def _library() -> ctypes.CDLL | None:
    # The running program's own symbols first (dlopen(NULL): CPython links the C library, so no
    # search is needed), then the C library by name.
    for name in _candidates():
        try:
            library = ctypes.CDLL(name, use_errno=True)
            library.free  # noqa: B018 - a C library has it; a program without one does not
        except (OSError, AttributeError):
            continue
        return library
    return None


def _candidates() -> Iterator[str | None]:
    # Lazily: find_library imports ctypes.util and runs ldconfig, which the first name spares.
    yield None
    import ctypes.util

    yield ctypes.util.find_library("c")
    yield "libc.so.6"


def function(name: str, argtypes: Sequence[Any], restype: Any) -> Callable[..., Any] | None:
    """The C library's function ``name`` with its argument and result types, or ``None`` where
    there is no such function (``mallopt`` is glibc's)."""
    library = _library()
    try:
        found = getattr(library, name) if library is not None else None
    except AttributeError:
        return None
    if found is not None:
        found.argtypes = tuple(argtypes)
        found.restype = restype
    return found


def errno() -> int:
    """The ``errno`` of the last failed call made through :func:`function` on this thread."""
    return ctypes.get_errno()
