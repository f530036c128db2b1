"""Reading typed settings from string options, with errors that name the key and the allowed values.

One place for the sink, the export job and the Kafka source. ``key`` looks the value up under
another spelling (the Kafka source lower-cases option names, as Spark does) while errors keep
the documented ``name``.

>>> bool_option({"a": " TRUE "}, "a", False)
True
>>> choice_option({}, "mode", ("fail", "ignore"), "fail")
'fail'
>>> int_option({"n": "0"}, "n", 1, 1, None)
Traceback (most recent call last):
...
blockgz.errors.ConfigError: n: 0 is out of range; allowed: 1 or more
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blockgz.errors import ConfigError


def _raw(options: Mapping[str, Any], name: str, key: str | None) -> Any:
    raw = options.get(key or name)
    return None if raw is None or str(raw).strip() == "" else raw


def int_option(
    options: Mapping[str, Any],
    name: str,
    default: int,
    low: int,
    high: int | None,
    *,
    key: str | None = None,
) -> int:
    """A whole number in ``low..high`` (``high=None``: no upper bound); blank means default."""
    raw = _raw(options, name, key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{name}: {raw!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        shown = f"{low}..{high}" if high is not None else f"{low} or more"
        raise ConfigError(f"{name}: {value} is out of range; allowed: {shown}")
    return value


def choice_option(
    options: Mapping[str, Any],
    name: str,
    allowed: tuple[str, ...],
    default: str,
    *,
    key: str | None = None,
) -> str:
    """One of ``allowed`` (case-insensitive, returned lower-cased); blank means default."""
    raw = _raw(options, name, key)
    value = default if raw is None else str(raw).strip()
    if value.lower() not in allowed:
        raise ConfigError(f"{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value.lower()


def bool_option(
    options: Mapping[str, Any], name: str, default: bool, *, key: str | None = None
) -> bool:
    """``true`` or ``false`` (any case); blank means default."""
    raw = _raw(options, name, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{name}: {raw!r} is not allowed; allowed: true, false")
    return text == "true"


def text_option(options: Mapping[str, Any], name: str, default: str = "") -> str:
    """The option as stripped text; missing means ``default``."""
    value = options.get(name)
    return default if value is None else str(value).strip()
