"""ISO-8601 text to epoch milliseconds, as Joda's ``ISODateTimeFormat.dateTimeParser`` reads it.

Used by the ``RecordField`` timestamp extractor.

    >>> parse_iso_millis("2026-11-22T10:15Z")
    1795342500000
"""

from __future__ import annotations

import re
from datetime import date, timedelta

# -- ISO-8601 text ------------------------------------------------------------------------------
_ISO = re.compile(
    r"""
    (?:
      (?P<year>\d{4})
      (?:-(?:
          W(?P<week>\d{1,2})(?:-(?P<wday>\d))?
        | (?P<yday>\d{3})
        | (?P<month>\d{1,2})(?:-(?P<day>\d{1,2}))?
      ))?
      (?:T(?P<time>[\d:.,]*)(?P<off1>Z|[+-][\d:]+)?)?
    |
      T(?P<time_only>[\d:.,]+)(?P<off2>Z|[+-][\d:]+)?
    )
    """,
    re.VERBOSE,
)
_TIME = re.compile(r"(\d{1,2})(?::(\d{1,2})(?::(\d{1,2}))?)?(?:[.,](\d+))?")
_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2})(?::?(\d{2}))?)?")


def parse_iso_millis(text: str) -> int:
    """Epoch milliseconds of ISO-8601 text, with the forms Joda's ``dateTimeParser`` accepts.

    Dates ``yyyy[-MM[-dd]]``, ``yyyy-DDD``, ``yyyy-Www[-e]``; an optional ``T`` time
    ``HH[:mm[:ss]]`` with a ``.``/``,`` fraction of its last unit; an optional offset ``Z`` or
    ``±HH[:mm]``. Text without an offset is read as UTC (Joda uses the JVM's default zone,
    which is UTC on typical Connect workers). Raises ValueError otherwise.

    >>> parse_iso_millis("2026-11-22T10:15:00.250Z")
    1795342500250
    >>> parse_iso_millis("2026-11-22T11:15+01:00")
    1795342500000
    >>> parse_iso_millis("2026-W47-7")
    1795305600000
    """
    m = _ISO.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time")
    if m["year"] is not None:
        year = int(m["year"])
        if m["week"] is not None:
            day = date.fromisocalendar(year, int(m["week"]), int(m["wday"] or 1))
        elif m["yday"] is not None:
            day = date(year, 1, 1) + timedelta(days=int(m["yday"]) - 1)
            if day.year != year:
                raise ValueError(f"{text!r}: day of year out of range")
        else:
            day = date(year, int(m["month"] or 1), int(m["day"] or 1))
        time_text, offset_text = m["time"] or "", m["off1"]
    else:
        day = date(1970, 1, 1)
        time_text, offset_text = m["time_only"], m["off2"]
    ms = (day.toordinal() - 719163) * 86_400_000
    if time_text:
        t = _TIME.fullmatch(time_text)
        if t is None:
            raise ValueError(f"{text!r}: bad time {time_text!r}")
        hour, minute, second = int(t[1]), int(t[2] or 0), int(t[3] or 0)
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError(f"{text!r}: time out of range")
        ms += ((hour * 60 + minute) * 60 + second) * 1000
        if t[4]:
            unit = 1000 if t[3] else 60_000 if t[2] else 3_600_000
            ms += int(t[4][:12].ljust(12, "0")) * unit // 10**12
    if offset_text and offset_text != "Z":
        o = _OFFSET.fullmatch(offset_text)
        if o is None:
            raise ValueError(f"{text!r}: bad offset {offset_text!r}")
        minutes = int(o[2]) * 60 + int(o[3] or 0)
        if int(o[2]) > 23 or int(o[3] or 0) > 59:
            raise ValueError(f"{text!r}: offset out of range")
        seconds = minutes * 60 + int(o[4] or 0)
        ms -= (seconds if o[1] == "+" else -seconds) * 1000
    return ms
