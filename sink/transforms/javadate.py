"""Java ``SimpleDateFormat`` patterns (the letters Connect configs use), in UTC.

>>> import datetime as dt
>>> when = dt.datetime(2024, 3, 5, 7, 8, 9, 123000, tzinfo=dt.timezone.utc)
>>> JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").format(when)
'2024-03-05T07:08:09.123Z'
>>> JavaDateFormat("yyyyMMdd").parse("20240305").isoformat()
'2024-03-05T00:00:00+00:00'
"""

from __future__ import annotations

import datetime as dt
import re

from blockgz.errors import ConfigError

_TOKEN = re.compile(r"'[^']*'|''|([a-zA-Z])\1*|[^a-zA-Z']+")
#: Letter to (strftime code for formatting, regex for parsing).
_LETTERS = {
    "y": ("%Y", r"\d{4}"),
    "M": ("%m", r"\d{2}"),
    "d": ("%d", r"\d{2}"),
    "H": ("%H", r"\d{2}"),
    "m": ("%M", r"\d{2}"),
    "s": ("%S", r"\d{2}"),
    "S": ("", r"\d{3}"),
    "Z": ("+0000", r"[+-]\d{4}|Z"),
    "X": ("Z", r"Z|[+-]\d{2}(?::?\d{2})?"),
    "E": ("%a", r"[A-Za-z]{3}"),
}


#: Java's GregorianCalendar switches from the Julian calendar on this day (1582-10-15).
_CUTOVER = dt.date(1582, 10, 15)
_JDN_OF_ORDINAL_0 = 1721425  # the Julian day number of date.fromordinal(1) is 1721426


def julian_fields(day: dt.date) -> tuple[int, int, int]:
    """The (year, month, day) Java prints for ``day``: Julian before the cutover.

    >>> julian_fields(dt.date(1, 1, 1)), julian_fields(dt.date(1582, 10, 14))
    ((1, 1, 3), (1582, 10, 4))
    """
    if day >= _CUTOVER:
        return day.year, day.month, day.day
    c = day.toordinal() + _JDN_OF_ORDINAL_0 + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def from_julian_fields(year: int, month: int, day: int) -> dt.date:
    """The day Java parses (year, month, day) as: Julian before the cutover.

    >>> from_julian_fields(1582, 10, 4), from_julian_fields(1500, 2, 29)
    (datetime.date(1582, 10, 14), datetime.date(1500, 3, 10))
    """
    if (year, month, day) >= (1582, 10, 15):
        return dt.date(year, month, day)
    if not (1 <= month <= 12 and 1 <= day <= (29 if month == 2 and year % 4 == 0 else 31)):
        raise ValueError(f"{year:04d}-{month:02d}-{day:02d} is not a Julian calendar date")
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    jdn = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083
    return dt.date.fromordinal(jdn - _JDN_OF_ORDINAL_0)


class JavaDateFormat:
    """A pattern of the letters ``y M d H m s S Z X E`` and quoted literals."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.parts: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(pattern):
            text = match.group(0)
            if text == "''":
                self.parts.append(("lit", "'"))
            elif text.startswith("'"):
                self.parts.append(("lit", text[1:-1]))
            elif text[0].isalpha():
                if text[0] not in _LETTERS:
                    raise ConfigError(
                        f"date format {pattern!r}: the letter {text[0]!r} is not supported "
                        "(blockgz reads y M d H m s S Z X E and quoted text)"
                    )
                self.parts.append(("field", text))
            else:
                self.parts.append(("lit", text))

    def format(self, when: dt.datetime) -> str:
        """``when`` (UTC) as text."""
        when = when.astimezone(dt.UTC)
        year, month, day = julian_fields(when.date())  # Java's calendar before 1582-10-15
        out = []
        for kind, text in self.parts:
            if kind == "lit":
                out.append(text)
            elif text[0] == "S":
                out.append(f"{when.microsecond // 1000:0{len(text)}d}")
            elif text[0] == "y" and len(text) == 2:
                out.append(f"{year % 100:02d}")
            elif text[0] == "y":
                out.append(f"{year:0{max(len(text), 1)}d}")
            elif text[0] == "M":
                out.append(f"{month:02d}")
            elif text[0] == "d":
                out.append(f"{day:02d}")
            else:
                code = _LETTERS[text[0]][0]
                out.append(when.strftime(code) if code.startswith("%") else code)
        return "".join(out)

    def parse(self, text: str) -> dt.datetime:
        """Text in this pattern as a UTC datetime; ``ValueError`` when it does not match."""
        regex = ""
        for kind, part in self.parts:
            regex += re.escape(part) if kind == "lit" else f"(?P<{part[0]}>{_LETTERS[part[0]][1]})"
        match = re.fullmatch(regex, text)
        if match is None:
            raise ValueError(f"{text!r} does not match the format {self.pattern!r}")
        got = {k: v for k, v in match.groupdict().items() if v is not None}
        day = from_julian_fields(
            int(got.get("y", 1970)), int(got.get("M", 1)), int(got.get("d", 1))
        )
        when = dt.datetime(
            day.year,
            day.month,
            day.day,
            int(got.get("H", 0)),
            int(got.get("m", 0)),
            int(got.get("s", 0)),
            int(got.get("S", 0)) * 1000,
            tzinfo=dt.UTC,
        )
        zone = got.get("Z") or got.get("X")
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
            when -= sign * offset
        return when
