"""Points in time as readers take them (ISO-8601 text, ``datetime`` or epoch milliseconds),
and spans of time as people write them (``15m``, ``1h30m``).

One parser for every public API that takes a time (``Archive.records(from_time=...)``,
``record_blocks``, ``offsets_in_time``, replay's settings) and for the CLI's ``--from-time``
/ ``--to-time``. A time without a zone (naive ``datetime``, or ISO text with no ``Z`` or
offset) is taken as UTC, never as the machine's local time.

>>> epoch_ms("2025-11-20T01:00:00Z", name="from_time")
1763600400000
>>> epoch_ms("2025-11-20T02:00:00+01:00", name="from_time")
1763600400000
>>> import datetime as dt
>>> epoch_ms(dt.datetime(2025, 11, 20, 1), name="to_time")  # naive: UTC
1763600400000
>>> epoch_ms(1763600400000, name="to_time"), epoch_ms(None, name="to_time")
(1763600400000, None)
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from blockgz.errors import ConfigError

#: What a time may be given as, for error messages.
TIME_FORMS = (
    "ISO-8601 text (2025-11-20T01:00:00Z or with an offset, +01:00; no zone means UTC), "
    "a datetime (naive means UTC) or epoch milliseconds (an int)"
)


def epoch_ms(value: Any, *, name: str) -> int | None:
    """``value`` as epoch milliseconds (``None`` stays ``None``); anything else is a
    :class:`~blockgz.errors.ConfigError` naming ``name`` and the accepted forms."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    when = value
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            when = None
    if not isinstance(when, dt.datetime):
        raise ConfigError(f"{name}={value!r} is not a time: give {TIME_FORMS}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


_DURATION_UNITS = {
    "": 1, "ms": 0.001,
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")


def parse_duration(text: str, *, name: str = "duration") -> float:
    """``text`` as seconds: ``15m``, ``90s``, ``1h30m``, ``2 days``, ``500ms``; a bare
    number is seconds. A :class:`~blockgz.errors.ConfigError` names what it cannot read.

    >>> parse_duration("15m"), parse_duration("1h30m"), parse_duration("45")
    (900.0, 5400.0, 45.0)
    """
    total, pos, text = 0.0, 0, text.strip()
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        unit = match.group(2).lower() if match else None
        if not match or unit not in _DURATION_UNITS:
            total = -1.0
            break
        total += float(match.group(1)) * _DURATION_UNITS[unit]
        pos = match.end()
    if not text or total < 0:
        raise ConfigError(
            f"{name}: cannot read {text!r} as a duration; use a number with a unit: "
            "ms, s, m, h, d (e.g. 15m, 1h30m)"
        )
    return total


def format_duration(seconds: float) -> str:
    """Seconds for people: ``format_duration(5400) == '1h30m'``."""
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = "".join(f"{n}{u}" for n, u in parts if n)
    return shown or "0s"


def iso_ms(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds; ``None`` stays ``None``.

    >>> iso_ms(1_700_000_000_123)
    '2023-11-14T22:13:20.123+00:00'
    """
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def iso_seconds(seconds: float | None) -> str | None:
    """Epoch seconds as ISO-8601 UTC to the second, ``Z``-suffixed; ``None`` stays ``None``.

    >>> iso_seconds(1_700_000_000.9)
    '2023-11-14T22:13:20Z'
    """
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
