"""Escaping of record-controlled text that becomes one segment of an object key.

A field value such as ``../../etc`` or ``a/b`` must stay inside its ``name=value`` segment,
whatever the target (S3, where ``/`` only *looks* like a directory, or a local directory, where
``..`` really climbs). :func:`escape_path_value` uses Hive's partition-path escaping
(``FileUtils.escapePathName``: ``%`` plus two upper-case hex digits) so Hive, Spark, Athena and
Glue decode the directories back to the original values, and adds a few rules of its own:

* Hive's set: control characters, ``"`` ``#`` ``%`` ``'`` ``*`` ``/`` ``:`` ``=`` ``?`` ``\\``
  DEL ``{`` ``[`` ``]`` ``^``; plus ``+`` (Confluent's file delimiter), the C1 controls
  U+0080..U+009F and any *extra* characters (the configured directory and file delimiters).
  Characters above U+007F are escaped as their UTF-8 bytes, as in URLs.
* A value made only of dots (``.``, ``..``, ...) has its dots escaped, so no segment is ever
  ``.`` or ``..``.
* Other non-ASCII text is kept as is (S3 keys are UTF-8); a lone surrogate, which has no UTF-8
  form, is refused with :class:`ValueError`.

    >>> escape_path_value("../../etc/passwd")
    '..%2F..%2Fetc%2Fpasswd'
    >>> escape_path_value("..")
    '%2E%2E'
    >>> unescape_path_value(escape_path_value("x=y/z"))
    'x=y/z'
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import unquote

#: Characters Hive's ``FileUtils.escapePathName`` escapes (on every OS), in escape order.
HIVE_ESCAPED = "".join(map(chr, range(0x01, 0x20))) + "\"#%'*/:=?\\\x7f{[]^"

#: What :func:`escape_path_value` always escapes: Hive's set, NUL, ``+`` and the C1 controls.
ALWAYS_ESCAPED = "\x00" + HIVE_ESCAPED + "+" + "".join(map(chr, range(0x80, 0xA0)))

_DOTS = re.compile(r"\.+")


#: Characters escapes are made of, so they cannot be escaped themselves.
ESCAPE_ALPHABET = "%0123456789ABCDEFabcdef"


@lru_cache(maxsize=64)
def _pattern(extra: str) -> re.Pattern[str]:
    bad = sorted(set(extra) & set(ESCAPE_ALPHABET) - {"%"})
    if bad:
        raise ValueError(f"cannot escape {', '.join(bad)}: escapes are written with hex digits")
    chars = sorted(set(ALWAYS_ESCAPED) | set(extra))
    return re.compile("[" + "".join(re.escape(c) for c in chars) + "]")


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{b:02X}" for b in match.group().encode("utf-8"))


def escape_path_value(value: str, extra: str = "") -> str:
    """Escape ``value`` so it stays one safe path segment; ``extra`` adds characters to escape.

    ``extra`` must not hold hex digits (escapes are made of them; ``%`` is always escaped).
    Raises :class:`ValueError` for text that is not valid Unicode (a lone surrogate).

    >>> escape_path_value("café: 50%")
    'café%3A 50%25'
    >>> escape_path_value("a|b", extra="|")
    'a%7Cb'
    >>> escape_path_value("")
    ''
    """
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"text contains a lone surrogate ({value[exc.start : exc.end]!r}) and has no "
                "UTF-8 form for an object key"
            ) from exc
    escaped = _pattern(extra).sub(_percent, value)
    if escaped and escaped[0] == "." and _DOTS.fullmatch(escaped):
        return "%2E" * len(escaped)
    return escaped


def unescape_path_value(segment: str) -> str:
    """The inverse of :func:`escape_path_value` (``%XX`` sequences are UTF-8 bytes).

    A ``%`` not followed by two hex digits is kept, as Hive's ``unescapePathName`` does.

    >>> unescape_path_value("caf%C3%A9%3A 50%25")
    'café: 50%'
    >>> unescape_path_value("100%")
    '100%'
    """
    if "%" not in segment:
        return segment
    return unquote(segment, encoding="utf-8", errors="strict")
