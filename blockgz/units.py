"""Parse human byte sizes such as ``1MiB``.

>>> parse_size("64KiB")
65536
>>> parse_size("1 MB")
1000000
"""

from __future__ import annotations

import re

from blockgz.errors import ConfigError

_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int, *, name: str = "size") -> int:
    """Return ``text`` as a number of bytes; ints pass through."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ConfigError(
            f"{name}: cannot read {text!r} as a size; use a whole number of bytes "
            "or one with a unit: B, KiB, MiB, GiB (powers of 1024) or kB, MB, GB (powers of 1000)"
        )
    return int(match.group(1)) * _UNITS[unit]


def format_size(num_bytes: float) -> str:
    """Format a byte count for people: ``format_size(1536) == '1.5 KiB'``."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
