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
_CUTOVER_ORDINAL = _CUTOVER.toordinal()
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DAY_MS = 86_400_000
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def julian_fields(day: dt.date) -> tuple[int, int, int]:
    """The (year, month, day) Java prints for ``day``: Julian before the cutover.

    >>> julian_fields(dt.date(1, 1, 1)), julian_fields(dt.date(1582, 10, 14))
    ((1, 1, 3), (1582, 10, 4))
    """
    return calendar_fields(day.toordinal())


def calendar_fields(ordinal: int) -> tuple[int, int, int]:
    """The (year, month, day) of Java's calendar for a day given as a proleptic Gregorian
    ordinal (``date.toordinal()``, any integer: years before 1 or after 9999 too): Julian
    before 1582-10-15; the year is astronomical (0 is 1 BC).

    >>> calendar_fields(0), calendar_fields(dt.date(2024, 3, 5).toordinal())
    ((1, 1, 2), (2024, 3, 5))
    """
    jdn = ordinal + _JDN_OF_ORDINAL_0
    century = 0
    if ordinal >= _CUTOVER_ORDINAL:
        a = jdn + 32044
        b = (4 * a + 3) // 146097
        c = a - 146097 * b // 4
        century = 100 * b
    else:
        c = jdn + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    year = century + d - 4800 + m // 10
    return year, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


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
        since = when.astimezone(dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return self.format_millis(since // dt.timedelta(milliseconds=1))

    def format_millis(self, millis: int) -> str:
        """Epoch ms (UTC) as text, as Java prints any ``Date``: years before 1 as their year
        of era (1 BC is year 1), past 9999 with more digits.

        >>> JavaDateFormat("yyyy-MM-dd HH:mm:ss.SSS").format_millis(-62135596800001)
        '0001-01-02 23:59:59.999'
        """
        days, of_day = divmod(millis, _DAY_MS)
        ordinal = _EPOCH_ORDINAL + days
        year, month, day = calendar_fields(ordinal)
        era_year = year if year > 0 else 1 - year
        seconds, ms = divmod(of_day, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        numbers = {"M": month, "d": day, "H": hour, "m": minute, "s": second, "S": ms}
        out = []
        for kind, text in self.parts:
            letter = text[0]
            if kind == "lit":
                out.append(text)
            elif letter == "y" and len(text) == 2:
                out.append(f"{era_year % 100:02d}")
            elif letter == "y":
                out.append(f"{era_year:0{len(text)}d}")
            elif letter == "S":
                out.append(f"{ms:0{len(text)}d}")
            elif letter in numbers:
                out.append(f"{numbers[letter]:02d}")
            elif letter == "E":
                out.append(_WEEKDAYS[(ordinal - 1) % 7])
            else:
                out.append(_LETTERS[letter][0])
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
