"""One transform's (or predicate's) options, read with Connect's names and one-line errors.

>>> opts = TransformOptions("transforms.t", {"field": "a", "mode": "x"})
>>> opts.text("field"), opts.text("other", "d")
('a', 'd')
>>> opts.choice("mode", ("include", "exclude"), "include")
Traceback (most recent call last):
...
blockgz.errors.ConfigError: transforms.t.mode=x: not one of include, exclude
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blockgz.errors import ConfigError

_MISSING: Any = object()


class TransformOptions:
    """The ``<prefix>.<name>`` options of one transform or predicate."""

    def __init__(self, prefix: str, values: Mapping[str, str]):
        self.prefix = prefix
        self.values = dict(values)

    def error(self, name: str, why: str) -> ConfigError:
        """A one-line :class:`ConfigError` about option ``name``."""
        value = self.values.get(name)
        shown = f"{self.prefix}.{name}" + ("" if value is None else f"={value}")
        return ConfigError(f"{shown}: {why}")

    def text(self, name: str, default: Any = _MISSING) -> Any:
        """The option's text; an error naming it when missing and no default is given."""
        value = self.values.get(name)
        if value is None:
            if default is _MISSING:
                raise self.error(name, "missing (this transform needs it)")
            return default
        return str(value).strip()

    def names(self, name: str, default: Sequence[str] = ()) -> list[str]:
        """A comma-separated list (blanks dropped)."""
        raw = self.values.get(name)
        if raw is None:
            return list(default)
        return [part.strip() for part in str(raw).split(",") if part.strip()]

    def pairs(self, name: str) -> dict[str, str]:
        """A ``a:b,c:d`` list as a mapping."""
        out: dict[str, str] = {}
        for part in self.names(name):
            left, sep, right = part.partition(":")
            if not sep or not left.strip() or not right.strip():
                raise self.error(name, f"{part!r} is not a from:to pair")
            out[left.strip()] = right.strip()
        return out

    def choice(self, name: str, allowed: Sequence[str], default: Any = _MISSING) -> str:
        """One of ``allowed`` (compared case-insensitively, as Connect's validators do)."""
        value = self.text(name, default)
        for option in allowed:
            if str(value).lower() == option.lower():
                return option
        raise self.error(name, "not one of " + ", ".join(allowed))

    def boolean(self, name: str, default: bool) -> bool:
        """``true`` or ``false``."""
        value = self.text(name, None)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise self.error(name, "not one of true, false")
        return value.lower() == "true"

    def integer(self, name: str, default: Any = _MISSING) -> int:
        """A whole number."""
        value = self.text(name, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.error(name, "not a whole number") from None
