"""Loopback helpers shared by the local servers: the address, free ports, child-process cleanup."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Self

LOOPBACK = "127.0.0.1"


def free_port(host: str) -> int:
    """A port that was free a moment ago (the broker binds it itself, so it may be taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago (held together while chosen, so
    the kernel cannot hand out one twice)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child get SIGKILL when its parent thread dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import signal

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)

    return preexec


class StartStop:
    """``with server:`` calls ``start()`` (whose result it binds) and always ``stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
