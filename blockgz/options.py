"""Typed settings read from string options, with errors that name the key and the allowed values.

The one option reader of blockgz: the store, the sink, the Kafka source and the export job all
read their settings through :class:`Options`, mostly through each option's declaration
(:mod:`blockgz.option_defs`, which gives the type, default and range once), so every key
follows the same rules:

* a missing key, or one whose value is blank, takes the default (values are read with
  surrounding blanks stripped; :meth:`Options.get` gives the raw text, for the few settings
  where blanks are the value, such as a record separator);
* numbers are whole numbers in a stated range; sizes may carry a unit (``64MiB``);
* ``true``/``false`` and choices are matched ignoring case, and a choice comes back in the
  spelling of ``allowed`` (``aes256`` reads as ``AES256``);
* key names are exact, except for readers built with ``keys_ignore_case=True`` (Spark
  lower-cases the option names of a data source, so the Kafka source reads that way).

>>> opts = Options({"flush.size": " 3 ", "s3.ssea.name": "aes256", "kafka.acks": "all"})
>>> opts.integer("flush.size", None, low=1), opts.choice("s3.ssea.name", ("", "AES256"), "")
(3, 'AES256')
>>> opts.prefixed("kafka.")
{'acks': 'all'}
>>> opts.integer("flush.size", None, low=5)
Traceback (most recent call last):
...
blockgz.errors.ConfigError: flush.size: 3 is out of range; allowed: 5 or more
>>> parse_size("64KiB"), parse_size("1 MB")
(65536, 1000000)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from blockgz.errors import ConfigError

N = TypeVar("N", int, None)

#: Told of every read when set (the name, and how a typed getter read it): the test suite's
#: check that each option read is declared. :mod:`blockgz.option_defs` installs
#: :func:`~blockgz.option_defs.note_read` here, so this module does not import it.
read_observer: Callable[..., None] | None = None


def _note_read(name: str, **how: Any) -> None:
    if read_observer is not None:
        read_observer(name, **how)


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
    """``text`` as a number of bytes (``1MiB``, ``64 kB``, ``4096``); ints pass through."""
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


class Options(Mapping[str, str]):
    """A read-only view of string options with typed, validated getters.

    Values are kept as strings, as given; ``None`` values are dropped. It is a ``Mapping``,
    so it can be handed on (to a user's plugin, to Spark) as it is.
    """

    def __init__(self, raw: Mapping[str, Any] | None = None, *, keys_ignore_case: bool = False):
        self.keys_ignore_case = keys_ignore_case
        self._values: dict[str, str] = {}
        for key, value in (raw or {}).items():
            if value is None:
                continue
            name = str(key).strip()
            self._values[name.lower() if keys_ignore_case else name] = _text(value)

    # -- Mapping ---------------------------------------------------------------------------
    def _key(self, name: str) -> str:
        return name.lower() if self.keys_ignore_case else name

    def __getitem__(self, name: str) -> str:
        return self._values[self._key(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._key(name) in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Options({self._values!r})"

    # -- typed getters ---------------------------------------------------------------------
    def get(self, name: str, default: Any = None) -> Any:
        """The raw text of ``name`` (blanks kept), or ``default``."""
        _note_read(name, ignore_case=self.keys_ignore_case)
        return self._values.get(self._key(name), default)

    def given(self, name: str) -> bool:
        """Whether ``name`` is set to something other than blank."""
        _note_read(name, ignore_case=self.keys_ignore_case)
        return bool(self._values.get(self._key(name), "").strip())

    def text(self, name: str, default: str = "") -> str:
        """The value as stripped text; missing or blank gives ``default``."""
        _note_read(name, ignore_case=self.keys_ignore_case)
        return self._stripped(name) or default

    def _stripped(self, name: str) -> str:
        return self._values.get(self._key(name), "").strip()

    def integer(
        self,
        name: str,
        default: N,
        *,
        low: int,
        high: int | None = None,
        hint: str = "",
    ) -> int | N:
        """A whole number in ``low..high`` (``high=None``: no upper bound)."""
        how = {"kind": "int", "default": default, "low": low, "high": high}
        _note_read(name, ignore_case=self.keys_ignore_case, how=how)
        raw = self._stripped(name)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise ConfigError(f"{name}: {raw!r} is not a whole number{_hint(hint)}") from exc
        if value < low or (high is not None and value > high):
            shown = f"{low}..{high}" if high is not None else f"{low} or more"
            raise ConfigError(f"{name}: {value} is out of range; allowed: {shown}{_hint(hint)}")
        return value

    def size(self, name: str, default: N, *, low: int = 1) -> int | N:
        """A byte size such as ``1MiB`` or ``65536``, at least ``low``."""
        how = {"kind": "size", "default": default, "low": low}
        _note_read(name, ignore_case=self.keys_ignore_case, how=how)
        raw = self._stripped(name)
        if not raw:
            return default
        value = parse_size(raw, name=name)
        if value < low:
            raise ConfigError(f"{name}: {raw!r} is too small; allowed: {low} bytes or more")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """``true`` or ``false``, in any case."""
        how = {"kind": "flag", "default": default}
        _note_read(name, ignore_case=self.keys_ignore_case, how=how)
        raw = self._stripped(name)
        if not raw:
            return default
        lowered = raw.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{name}: {raw!r} is not allowed; allowed: true, false")
        return lowered == "true"

    def choice(self, name: str, allowed: tuple[str, ...], default: str) -> str:
        """One of ``allowed``, matched ignoring case and returned as spelled in ``allowed``."""
        how = {"kind": "choice", "default": default, "allowed": tuple(allowed)}
        _note_read(name, ignore_case=self.keys_ignore_case, how=how)
        raw = self._stripped(name) or default
        for candidate in allowed:
            if candidate.lower() == raw.lower():
                return candidate
        shown = ", ".join("'' (none)" if a == "" else a for a in allowed)
        raise ConfigError(f"{name}: {raw!r} is not allowed; allowed: {shown}")

    def prefixed(self, prefix: str) -> dict[str, str]:
        """The options under ``prefix``, with the prefix removed (``kafka.acks`` -> ``acks``)."""
        _note_read(prefix, ignore_case=self.keys_ignore_case, prefix=True)
        start = self._key(prefix)
        return {
            key[len(start) :]: value for key, value in self._values.items() if key.startswith(start)
        }

    def without(self, *names: str) -> Options:
        """A copy without ``names``."""
        drop = {self._key(n) for n in names}
        kept = {k: v for k, v in self._values.items() if k not in drop}
        return Options(kept, keys_ignore_case=self.keys_ignore_case)

    def merged(self, more: Mapping[str, Any]) -> Options:
        """A copy with ``more`` on top."""
        return Options({**self._values, **dict(more)}, keys_ignore_case=self.keys_ignore_case)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _hint(hint: str) -> str:
    return f" ({hint})" if hint else ""


def as_options(raw: Mapping[str, Any] | None) -> Options:
    """``raw`` as :class:`Options` (unchanged if it already is one)."""
    return raw if isinstance(raw, Options) else Options(raw)
