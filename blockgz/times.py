"""Points in time as readers take them: ISO-8601 text, ``datetime`` or epoch milliseconds.

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
