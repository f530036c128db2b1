"""Joda-Time ``DateTimeFormat`` patterns (``path.format``), re-done in Python.

:func:`compile_pattern` renders a pattern with Joda's letters and counts: ``Y`` is year-of-era
(not week-year as in ``java.time``), ``x`` is the ISO week-year, ``yy``/``YY``/``xx`` are
two-digit years, ``MMM`` a short month name. :func:`parse_locale` checks the ``locale`` option.
Zones are in :mod:`blockgz.sink.partitioning.zones`, ISO-8601 text in
:mod:`blockgz.sink.partitioning.isotime`.

    >>> from datetime import UTC, datetime
    >>> render = compile_pattern("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "en")
    >>> render(datetime(2026, 11, 22, 10, 15, tzinfo=UTC))
    'year=2026/month=11/day=22/hour=10'

Names (``MMM``, ``EEEE``, ``a``, ``G``, ``zzzz``) come from CLDR through babel, as they do on a
Java 9+ JVM. One deliberate difference: Confluent builds its locale with ``new Locale(text)``,
which turns ``en_US`` into an unknown *language* and silently falls back to the JVM's default
locale; here ``en_US``, ``en-US`` and ``de_DE`` mean what they say. Short zone names (``z``)
are the tz database abbreviations (``EST``, ``CEST``, ``IST``; numeric ones print as Joda's
``-03:00``), which match the JDK's except for a few legacy ones such as ``BRT``. Time fields
match Joda-Time 2.14 exactly; names can differ where the JDK's CLDR version differs from babel's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from blockgz.errors import ConfigError

#: Joda pattern letters :func:`compile_pattern` renders.
SUPPORTED_LETTERS = "GCYyxwMdDEeaKhHkmsSzZ"

Renderer = Callable[[datetime], str]


# -- patterns -----------------------------------------------------------------------------------
def _is_letter(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def tokenize(pattern: str) -> list[str | tuple[str, int]]:
    """Split a Joda pattern into literal text and ``(letter, count)`` fields, as Joda does.

    Quoted text is literal, ``''`` is a quote (inside or outside quotes), an unterminated quote
    runs to the end, and every other non-letter is literal.

    >>> tokenize("'year'=YYYY/'it''s'")
    ['year=', ('Y', 4), "/it's"]
    """
    tokens: list[str | tuple[str, int]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if _is_letter(c):
            j = i + 1
            while j < n and pattern[j] == c:
                j += 1
            tokens.append((c, j - i))
            i = j
            continue
        text: list[str] = []
        quoted = False
        while i < n:
            c = pattern[i]
            if c == "'":
                if i + 1 < n and pattern[i + 1] == "'":
                    text.append("'")
                    i += 2
                else:
                    quoted = not quoted
                    i += 1
            elif not quoted and _is_letter(c):
                break
            else:
                text.append(c)
                i += 1
        if text:
            tokens.append("".join(text))
    return tokens


def parse_locale(text: str, option: str = "locale") -> Any:
    """The babel ``Locale`` for ``en``, ``en_US``, ``en-US``, ``de_DE``...; ConfigError if unknown.

    >>> str(parse_locale("fr-FR"))
    'fr_FR'
    """
    from babel import Locale, UnknownLocaleError

    cleaned = text.strip().replace("-", "_")
    try:
        if not cleaned:
            raise ValueError("empty")
        return Locale.parse(cleaned)
    except (UnknownLocaleError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"{option}: unknown locale {text!r}; allowed: a CLDR locale as language[_REGION], "
            "e.g. en, en_US, en-GB, de_DE, fr_FR, ja"
        ) from exc


@dataclass(frozen=True)
class _Names:
    months_wide: tuple[str, ...]
    months_abbr: tuple[str, ...]
    days_wide: tuple[str, ...]  # Monday first, as date.weekday()
    days_abbr: tuple[str, ...]
    am: str
    pm: str
    eras: tuple[str, str]  # (BC, AD)
    locale: Any


@lru_cache(maxsize=32)
def _names(locale_id: str) -> _Names:
    from babel import Locale
    from babel.dates import get_day_names, get_era_names, get_month_names, get_period_names

    loc = Locale.parse(locale_id)
    months_wide = get_month_names("wide", "format", loc)
    months_abbr = get_month_names("abbreviated", "format", loc)
    days_wide = get_day_names("wide", "format", loc)
    days_abbr = get_day_names("abbreviated", "format", loc)
    periods = get_period_names("abbreviated", "format", loc)
    eras = get_era_names("abbreviated", loc)
    return _Names(
        months_wide=tuple(months_wide[m] for m in range(1, 13)),
        months_abbr=tuple(months_abbr[m] for m in range(1, 13)),
        days_wide=tuple(days_wide[d] for d in range(7)),
        days_abbr=tuple(days_abbr[d] for d in range(7)),
        am=periods["am"],
        pm=periods["pm"],
        eras=(eras[0], eras[1]),
        locale=loc,
    )


def _number(get: Callable[[datetime], int], width: int) -> Renderer:
    return lambda dt: f"{get(dt):0{width}d}"


def _two_digits(get: Callable[[datetime], int]) -> Renderer:
    return lambda dt: f"{abs(get(dt)) % 100:02d}"


def _fraction(count: int) -> Renderer:
    # Joda prints exactly `count` digits of the second's fraction, truncated (millisecond clock).
    return lambda dt: f"{dt.microsecond // 1000:03d}".ljust(count, "0")[:count]


def _offset(colon: bool) -> Renderer:
    def render(dt: datetime) -> str:
        off = dt.utcoffset() or timedelta(0)
        sign = "-" if off < timedelta(0) else "+"
        minutes = int(abs(off).total_seconds()) // 60
        sep = ":" if colon else ""
        return f"{sign}{minutes // 60:02d}{sep}{minutes % 60:02d}"

    return render


def zone_id(tz: tzinfo | None) -> str:
    """Joda's zone id: the IANA key, ``UTC`` or a fixed offset such as ``+05:30``."""
    key = getattr(tz, "key", None)
    if key:
        return str(key)
    return (tz.tzname(None) if tz is not None else None) or "UTC"


def _short_zone_name(dt: datetime) -> str:
    name = dt.tzname() or zone_id(dt.tzinfo)
    if name[:1] in "+-" and name[1:].isdigit():  # tzdata's numeric "-03": print Joda's "-03:00"
        return _offset(colon=True)(dt)
    return name


@lru_cache(maxsize=1)
def _cldr_aliases() -> dict[str, list[str]]:
    """IANA name -> the other names CLDR may file the zone under (Asia/Kolkata: Asia/Calcutta)."""
    from babel.core import get_global

    names: dict[str, list[str]] = {}
    for alias, target in get_global("zone_aliases").items():
        names.setdefault(target, []).append(alias)
        names.setdefault(alias, []).append(target)
    return names


def _long_zone_name(loc: Any) -> Renderer:
    """CLDR's long name (``Eastern Daylight Time``), as Java prints for ``zzzz``."""

    def render(dt: datetime) -> str:
        from babel.core import get_global

        key = zone_id(dt.tzinfo)
        variant = "daylight" if dt.dst() else "standard"
        meta_zones = get_global("meta_zones")
        for zone in [key, *_cldr_aliases().get(key, ()), "Etc/" + key]:
            own = loc.time_zones.get(zone, {}).get("long", {}).get(variant)
            meta = meta_zones.get(zone)
            name = own or (
                loc.meta_zones.get(meta, {}).get("long", {}).get(variant) if meta else None
            )
            if name and name != "\u2205\u2205\u2205":  # CLDR's "no inheritance" marker
                return name
        return _short_zone_name(dt)

    return render


def _field(letter: str, count: int, names: _Names) -> Renderer:
    """One Joda pattern field (``count`` repeats of ``letter``) as a render function."""
    if letter in "yY":
        return _two_digits(lambda dt: dt.year) if count == 2 else _number(lambda dt: dt.year, count)
    if letter == "x":
        weekyear: Callable[[datetime], int] = lambda dt: dt.isocalendar()[0]  # noqa: E731
        return _two_digits(weekyear) if count == 2 else _number(weekyear, count)
    if letter == "M":
        if count >= 4:
            return lambda dt: names.months_wide[dt.month - 1]
        if count == 3:
            return lambda dt: names.months_abbr[dt.month - 1]
        return _number(lambda dt: dt.month, count)
    if letter == "E":
        days = names.days_wide if count >= 4 else names.days_abbr
        return lambda dt: days[dt.weekday()]
    simple: dict[str, Callable[[datetime], int]] = {
        "C": lambda dt: dt.year // 100,
        "w": lambda dt: dt.isocalendar()[1],
        "e": lambda dt: dt.isoweekday(),
        "D": lambda dt: dt.timetuple().tm_yday,
        "d": lambda dt: dt.day,
        "H": lambda dt: dt.hour,
        "k": lambda dt: dt.hour or 24,
        "K": lambda dt: dt.hour % 12,
        "h": lambda dt: dt.hour % 12 or 12,
        "m": lambda dt: dt.minute,
        "s": lambda dt: dt.second,
    }
    if letter in simple:
        return _number(simple[letter], count)
    if letter == "S":
        return _fraction(count)
    if letter == "a":
        return lambda dt: names.am if dt.hour < 12 else names.pm
    if letter == "G":
        return lambda dt: names.eras[1]  # datetime only holds years 1..9999: always AD
    if letter == "z":
        if count >= 4:
            return _long_zone_name(names.locale)
        return _short_zone_name
    if letter == "Z":
        return _offset(colon=count == 2) if count <= 2 else lambda dt: zone_id(dt.tzinfo)
    raise AssertionError(letter)  # pragma: no cover - callers check SUPPORTED_LETTERS


def compile_pattern(pattern: str, locale: Any = "en", *, option: str = "path.format") -> Renderer:
    """Compile a Joda ``DateTimeFormat`` pattern once into a function of an aware datetime.

    ``locale`` is a locale name or babel ``Locale`` (for month, day, AM/PM and era names).
    Letters outside :data:`SUPPORTED_LETTERS` raise :class:`ConfigError` naming ``option``.

    >>> from datetime import datetime
    >>> from zoneinfo import ZoneInfo
    >>> dt = datetime(2026, 3, 8, 3, 5, tzinfo=ZoneInfo("America/New_York"))
    >>> compile_pattern("EEE, d MMM yyyy hh:mm a Z (z)", "en")(dt)
    'Sun, 8 Mar 2026 03:05 AM -0400 (EDT)'
    >>> compile_pattern("EEEE d. MMMM YY, 'KW' ww/xxxx", "de")(dt)
    'Sonntag 8. März 26, KW 10/2026'
    >>> compile_pattern("'day'=dd/Q", "en")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: path.format: unsupported pattern letter 'Q' in "'day'=dd/Q"; ...
    """
    loc = locale if not isinstance(locale, str) else parse_locale(locale)
    names = _names(str(loc))
    parts: list[Renderer | str] = []
    for token in tokenize(pattern):
        if isinstance(token, str):
            if parts and isinstance(parts[-1], str):
                parts[-1] += token
            else:
                parts.append(token)
            continue
        letter, count = token
        if letter not in SUPPORTED_LETTERS:
            raise ConfigError(
                f"{option}: unsupported pattern letter {letter!r} in {pattern!r}; supported "
                f"(Joda-Time DateTimeFormat): {' '.join(SUPPORTED_LETTERS)}; quote literal "
                "text, e.g. 'year'=YYYY"
            )
        parts.append(_field(letter, count, names))
    if all(isinstance(p, str) for p in parts):
        constant = "".join(parts)  # type: ignore[arg-type]
        return lambda dt: constant
    funcs = [(lambda dt, s=p: s) if isinstance(p, str) else p for p in parts]
    if len(funcs) == 1:
        return funcs[0]
    return lambda dt: "".join([f(dt) for f in funcs])
