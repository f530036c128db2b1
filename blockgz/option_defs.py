"""Every option of blockgz, declared once, next to the code that reads it (like Kafka's ConfigDef).

A declaration (:class:`OptionDef`) says an option's name, type, default, documentation, allowed
values and range, who owns it (:data:`OWNERS`) and whose name it is (:data:`ORIGINS`). Each
owning module keeps its declarations in one module-level :class:`OptionSet` (a constant:
nothing is registered when a module is imported). The sets are collected where they are used,
as Connect composes ``ConfigDef``s: every one in one visible tuple,
:data:`blockgz.cli.option_sets.ALL_OPTION_SETS` (``blockgz options``, the docs' reference),
the export's in :data:`blockgz.sink.jobconfig.settings_names.EXPORT_OPTION_SETS` (the routing
of its options, the "did you mean" of an unknown name, the refused and warned lists) and the
readers' in :data:`blockgz.reader.reading.read_options.READER_OPTION_SETS`. An
:class:`OptionRegistry` built from such a tuple answers the lookups. Values are read through
the declaration (:meth:`OptionDef.read`), so the type, default and validator are written once.

>>> prefetch = OptionDef("prefetch", "int", 2, "blocks fetched ahead", "reader", low=0)
>>> prefetch.read({"prefetch": " 4 "}), prefetch.read({})
(4, 2)
>>> registry = OptionRegistry(OptionSet(prefetch))
>>> registry.suggest("prefech")
'prefetch'
>>> registry.check({"prefech": "4"}, ("reader",), "open_archive")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: open_archive: prefech: not a setting blockgz knows; did you mean ...?
"""

from __future__ import annotations

import difflib
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal

import blockgz.options as _options
from blockgz.errors import ConfigError
from blockgz.options import as_options

log = logging.getLogger("blockgz.options")

#: Who reads an option: the Kafka source, the sink, the export job, the object store, the
#: archive readers, the schema registry client, replay into Kafka.
OWNERS = ("job", "source", "sink", "store", "registry", "reader", "replay")
#: Whose name it is: Confluent's S3 sink (its table), Kafka Connect's framework, Spark's, or
#: blockgz's own.
ORIGINS = ("confluent", "connect", "spark", "blockgz")
Kind = Literal["text", "raw", "int", "size", "flag", "choice"]
KINDS = ("text", "raw", "int", "size", "flag", "choice")
#: ``read``: some part of blockgz reads it; ``refused``: an error when the config asks for it;
#: ``warned``: named in the one warning of settings blockgz does not read; ``accepted``: taken
#: without a word (Connect's framework keys).
STATUSES = ("read", "refused", "warned", "accepted")
#: Close enough to a known name to be a typo of it (difflib's ratio).
TYPO_CUTOFF = 0.85
_LOWEST = -(2**63)


@dataclass(frozen=True)
class NotDone:
    """What blockgz does not do for a Confluent option: why, and when a config asks for it."""

    reason: str
    #: Whether the options ask for what blockgz does not do (default: the key is there).
    asks: Callable[[Any], bool] | None = None
    #: A config that asks for it (the tests and the docs show it).
    example: Mapping[str, str] = field(default_factory=dict)

    def applies(self, name: str, opts: Any) -> bool:
        return name in opts and (self.asks is None or self.asks(opts))


@dataclass(frozen=True)
class OptionDef:
    """One option: its name, type, default, documentation, validator and owner."""

    name: str
    kind: Kind
    default: Any
    doc: str
    owner: str
    origin: str = "blockgz"
    #: ``choice``: the allowed values (matched ignoring case, returned as spelled here).
    allowed: tuple[str, ...] = ()
    #: ``int``/``size``: the range (``high=None``: no upper bound).
    low: int | None = None
    high: int | None = None
    #: Added to a range error, after the allowed values.
    hint: str = ""
    #: The default as the docs show it (when ``default`` reads badly: ``None``, a class).
    shown: str | None = None
    #: Other owners that read it too (the readers read the export's key layout).
    also: tuple[str, ...] = ()
    #: A name ending in ``.`` declares every option under that prefix.
    prefix: bool = False
    status: str = "read"
    #: Refused or warned: why, and when a config asks for it.
    not_done: NotDone | None = None
    #: Called with the typed value; raises :class:`ConfigError` when it is not allowed.
    validator: Callable[[Any], None] | None = None
    #: Set by blockgz itself, not by users: left out of the tables.
    internal: bool = False
    #: The option whose value decides the default (``read(..., default=...)`` then gives it).
    default_depends_on: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.status not in STATUSES:
            raise ValueError(f"{self.name}: bad kind {self.kind!r} or status {self.status!r}")
        for owner in (self.owner, *self.also):
            if owner not in OWNERS:
                raise ValueError(f"{self.name}: unknown owner {owner!r}")
        if self.origin not in ORIGINS:
            raise ValueError(f"{self.name}: unknown origin {self.origin!r}")

    @property
    def owners(self) -> tuple[str, ...]:
        return (self.owner, *self.also)

    def read(self, options: Mapping[str, Any], *, default: Any = ...) -> Any:
        """The typed value of this option in ``options`` (its default when missing or blank).

        >>> retries = OptionDef("s3.part.retries", "int", 3, "", "store", low=1)
        >>> retries.read({"s3.part.retries": "0"})
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: s3.part.retries: 0 is out of range; allowed: 1 or more
        >>> def even(n):
        ...     if n % 2:
        ...         raise ConfigError(f"parts: {n} is odd; allowed: even numbers")
        >>> OptionDef("parts", "int", 2, "", "store", low=0, validator=even).read({"parts": "3"})
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: parts: 3 is odd; allowed: even numbers
        """
        opts = as_options(options)
        if default is not ... and not self.default_depends_on:
            raise ValueError(f"{self.name}: its default is declared, not given by the reader")
        name = self.name
        default = self.default if default is ... else default
        value: Any  # of the kind's type
        if self.kind == "text":
            value = opts.text(name, default or "")
        elif self.kind == "raw":
            value = opts.get(name, default)
        elif self.kind == "int":
            low = self.low if self.low is not None else _LOWEST
            value = opts.integer(name, default, low=low, high=self.high, hint=self.hint)
        elif self.kind == "size":
            value = opts.size(name, default, low=self.low if self.low is not None else 1)
        elif self.kind == "flag":
            value = opts.flag(name, default)
        else:
            value = opts.choice(name, self.allowed, default)
        if self.validator is not None and opts.given(name):
            self.validator(value)
        return value

    @property
    def shown_default(self) -> str:
        """The default as the tables show it (Markdown)."""
        if self.shown is not None:
            return self.shown
        if self.default is None or self.default == "":
            return ""
        if isinstance(self.default, bool):
            return "`true`" if self.default else "`false`"
        return f"`{self.default}`"

    @property
    def meaning(self) -> str:
        """The documentation as the tables show it: blockgz's own marked, choices listed."""
        text = self.doc
        missing = [a for a in self.allowed if a and f"`{a}`" not in text]
        if self.kind == "choice" and missing:
            text += "; allowed: " + ", ".join(f"`{a}`" if a else "'' (none)" for a in self.allowed)
        return ("*blockgz*: " + text) if self.origin == "blockgz" else text


def declarer(owner: str, origin: str, **fixed: Any) -> Callable[..., OptionDef]:
    """A module's short way to declare its options: ``declare(name, kind, default, doc, **more)``
    with ``owner``, ``origin`` (unless ``more`` names one) and ``fixed`` filled in.

    >>> _sink = declarer("sink", "confluent")
    >>> flush = _sink("flush.size", "int", 0, "records per object", low=0)
    >>> flush.owner, flush.origin, _sink("x", "flag", False, "", origin="blockgz").origin
    ('sink', 'confluent', 'blockgz')
    """

    def declare(name: str, kind: Kind, default: Any, doc: str, **more: Any) -> OptionDef:
        origin_ = more.pop("origin", origin)
        return OptionDef(name, kind, default, doc, owner, origin=origin_, **fixed, **more)

    return declare


def _order(d: OptionDef) -> tuple[int, str]:
    return (OWNERS.index(d.owner), d.name)


class OptionRegistry:
    """The declarations of a tuple of :class:`OptionSet` (any iterables of declarations), by
    owner and name (a name may have one declaration per owner), for lookups."""

    def __init__(self, *sets: Mapping[str, OptionDef] | Iterable[OptionDef]) -> None:
        self._defs: dict[tuple[str, str], OptionDef] = {}
        self._sorted: list[OptionDef] | None = None
        #: Each name's declarations in :meth:`__iter__`'s order, built on the first lookup.
        self._by_name: dict[str, tuple[OptionDef, ...]] | None = None
        self._names: dict[tuple, frozenset[str]] = {}
        for option_set in sets:
            self.declare(*(option_set.values() if isinstance(option_set, Mapping) else option_set))

    def declare(self, *defs: OptionDef) -> tuple[OptionDef, ...]:
        """Add ``defs``; declaring the same owner and name again with other content is an error
        (the same declaration again, from a set given twice, is fine)."""
        for d in defs:
            key = (d.owner, d.name)
            if key in self._defs and self._defs[key] != d:
                raise ValueError(f"option {d.name} of {d.owner} is declared twice")
            self._defs[key] = d
        self._sorted = None
        self._by_name = None
        self._names.clear()
        return defs

    def __iter__(self):
        if self._sorted is None:
            self._sorted = sorted(self._defs.values(), key=_order)
        return iter(self._sorted)

    def get(self, name: str, owner: str | None = None) -> OptionDef | None:
        """The declaration of ``name`` (of ``owner``, or the first owner that declares it).

        >>> registry = OptionRegistry([OptionDef("n", "int", 1, "", "store")])
        >>> registry.get("n").owner, registry.get("n", "reader")
        ('store', None)
        >>> _ = registry.declare(OptionDef("n", "int", 2, "", "job"))  # declared later, found
        >>> registry.get("n").owner, registry.get("n", "store").default
        ('job', 1)
        """
        if self._by_name is None:
            by_name: dict[str, list[OptionDef]] = {}
            for d in self:
                by_name.setdefault(d.name, []).append(d)
            self._by_name = {n: tuple(ds) for n, ds in by_name.items()}
        for d in self._by_name.get(name, ()):
            if owner is None or owner in d.owners:
                return d
        return None

    def read(self, options: Mapping[str, Any], name: str, owner: str | None = None) -> Any:
        """The typed value of ``name`` (as its declaration of ``owner`` says) in ``options``.

        >>> registry = OptionRegistry([OptionDef("parts", "int", 2, "how many", "store", low=1)])
        >>> registry.read({"parts": "3"}, "parts"), registry.read({}, "parts")
        (3, 2)
        """
        found = self.get(name, owner)
        if found is None:
            raise KeyError(f"{name}: no declaration" + (f" of {owner}" if owner else ""))
        return found.read(options)

    def select(
        self, owners: Iterable[str] | None = None, statuses: Iterable[str] | None = None
    ) -> list[OptionDef]:
        """The declarations read by any of ``owners`` (all when ``None``) with a status in
        ``statuses`` (all when ``None``)."""
        wanted = set(owners) if owners is not None else None
        states = set(statuses) if statuses is not None else None
        return [
            d
            for d in self
            if (wanted is None or wanted & set(d.owners)) and (states is None or d.status in states)
        ]

    def names(
        self, owners: Iterable[str] | None = None, statuses: Iterable[str] | None = None
    ) -> frozenset[str]:
        """The exact names (prefixes left out) read by ``owners`` (cached per question)."""
        key = (
            None if owners is None else tuple(owners),
            None if statuses is None else tuple(statuses),
        )
        if key not in self._names:
            chosen = self.select(key[0], key[1])
            self._names[key] = frozenset(d.name for d in chosen if not d.prefix)
        return self._names[key]

    def prefixes(self, owners: Iterable[str] | None = None) -> tuple[str, ...]:
        return tuple(sorted({d.name for d in self.select(owners) if d.prefix}))

    def owner_of(self, name: str, *, ignore_case: bool = False) -> str | None:
        """The owner of the option ``name`` (a declared prefix counts), or ``None``."""
        found = self.find(name, ignore_case=ignore_case)
        return found.owner if found else None

    def find(self, name: str, *, ignore_case: bool = False) -> OptionDef | None:
        """The declaration that covers ``name``: its own, or the longest declared prefix."""
        fold = str.lower if ignore_case else str
        best: OptionDef | None = None
        for d in self:
            if not d.prefix and fold(d.name) == fold(name):
                return d
            longer = best is None or len(d.name) > len(best.name)
            if d.prefix and fold(name).startswith(fold(d.name)) and longer:
                best = d
        return best

    def declared(self, name: str, *, ignore_case: bool = False) -> bool:
        return self.find(name, ignore_case=ignore_case) is not None

    def suggest(self, name: str, candidates: Iterable[str] | None = None) -> str | None:
        """The declared name ``name`` is probably a typo of, or ``None``."""
        pool = sorted(candidates if candidates is not None else self.names())
        close = difflib.get_close_matches(name, pool, 1, TYPO_CUTOFF)
        return close[0] if close else None

    def check(
        self,
        options: Mapping[str, Any] | Iterable[str],
        owners: Iterable[str],
        where: str,
        *,
        ignore_case: bool = False,
    ) -> list[str]:
        """Check the names of ``options`` for a reader (``where`` names it in messages).

        A name some owner declares is accepted (a reader may be handed a whole export config);
        one close to a declared name is an error with a "did you mean"; the others are returned
        (and logged in one warning), as the export does.
        """
        owners = tuple(owners)
        fold = str.lower if ignore_case else str
        known = {fold(n) for n in self.names()}
        prefixes = tuple(fold(p) for p in self.prefixes())
        errors, unknown = [], []
        mine = {fold(n) for n in self.names(owners)}
        for key in sorted(options):
            if fold(key) in known or fold(key).startswith(prefixes):
                continue
            close = self.suggest(fold(key), mine) or self.suggest(fold(key), known)
            if close:
                errors.append(f"{key}: not a setting blockgz knows; did you mean {close}?")
            else:
                unknown.append(key)
        if errors:
            raise ConfigError(f"{where}: " + "; ".join(errors))
        if unknown:
            log.warning("%s: ignoring settings it does not read: %s", where, ", ".join(unknown))
        return unknown


def markdown_table(defs: Iterable[OptionDef]) -> str:
    """The options as a Markdown table: option, default, meaning (the README's tables).

    >>> print(markdown_table([OptionDef("prefetch", "int", 2, "blocks read ahead", "reader")]))
    | option | default | meaning |
    |---|---|---|
    | `prefetch` | `2` | *blockgz*: blocks read ahead |
    """
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for d in defs:
        name = f"`{d.name}*`" if d.prefix else f"`{d.name}`"
        meaning = d.meaning.replace("|", "\\|")
        rows.append(f"| {name} | {d.shown_default} | {meaning} |")
    return "\n".join(rows)


def table_rows(defs: Iterable[OptionDef]) -> list[tuple[str, ...]]:
    """The options as rows of plain text: name, owner, origin, status, type, default, doc."""
    return [
        (
            d.name + ("*" if d.prefix else ""),
            d.owner,
            d.origin,
            d.status,
            d.kind,
            d.shown_default.replace("`", ""),
            d.meaning.replace("`", "").replace("*blockgz*: ", ""),
        )
        for d in defs
    ]


# -- undeclared reads: found while the tests run ---------------------------------------------
#: Set by the test suite (:func:`track_reads_against`): every read of an option by blockgz's own
#: code (``blockgz``, ``sink``, ``reader``) whose name no declaration of :data:`TRACKED` covers
#: is recorded in :data:`UNDECLARED_READS`.
track_reads = False
#: The declarations reads are checked against: every option set (the test suite gives it
#: :data:`blockgz.cli.option_sets.ALL_OPTIONS`).
TRACKED = OptionRegistry()
UNDECLARED_READS: set[tuple[str, str]] = set()


def track_reads_against(registry: OptionRegistry) -> None:
    """Record, from now on, each read by product code of an option ``registry`` does not
    declare (or declares with another type, default or range): the test suite's check."""
    global track_reads, TRACKED
    TRACKED = registry
    track_reads = True


_PRODUCT = ("blockgz", "sink", "reader")
_SELF = ("blockgz.options", "blockgz.option_defs")


def note_read(
    name: str,
    *,
    ignore_case: bool = False,
    prefix: bool = False,
    how: Mapping[str, Any] | None = None,
) -> None:
    """Record a read of ``name`` by product code when no declaration covers it, or when a
    typed getter reads it with another type, default or range than its declaration says
    (``how``: what the getter was given). Tests only: nothing is done unless
    :data:`track_reads`."""
    if not track_reads:
        return
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "") in _SELF:
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    if module.split(".")[0] not in _PRODUCT:
        return  # a user's plugin reads its own options
    if prefix:
        fold = str.lower if ignore_case else str
        if any(
            fold(p).startswith(fold(name)) or fold(name).startswith(fold(p))
            for p in TRACKED.prefixes()
        ):
            return
    elif TRACKED.declared(name, ignore_case=ignore_case):
        if how is not None and not _agrees(name, how, ignore_case):
            UNDECLARED_READS.add((module, f"{name} read as {dict(how)}, not as declared"))
        return
    UNDECLARED_READS.add((module, name))


def _agrees(name: str, how: Mapping[str, Any], ignore_case: bool) -> bool:
    """Whether some declaration of ``name`` has the type, default and range of ``how``."""
    fold = str.lower if ignore_case else str
    for d in TRACKED:
        if d.prefix or fold(d.name) != fold(name) or d.kind != how["kind"]:
            continue
        declared: dict[str, Any] = {"kind": d.kind, "default": d.default}
        if d.kind == "int":
            declared.update(low=_LOWEST if d.low is None else d.low, high=d.high)
        elif d.kind == "size":
            declared.update(low=1 if d.low is None else d.low)
        elif d.kind == "choice":
            declared.update(allowed=d.allowed)
        given = dict(how)
        if d.default_depends_on:
            given["default"] = d.default
        if declared == given:
            return True
    return False


class OptionSet(Mapping[str, OptionDef]):
    """The options one module declares, by name, read through their declarations: a
    module-level constant, collected with the others in the tuples of sets (see the module's
    docstring); making one registers nothing.

    >>> group = OptionSet(OptionDef("x.size", "size", 1024, "", "store"))
    >>> group.read({"x.size": "2KiB"}, "x.size"), list(group)
    (2048, ['x.size'])
    """

    def __init__(self, *defs: OptionDef):
        self._defs: dict[str, OptionDef] = {}
        for d in defs:
            if d.name in self._defs:
                raise ValueError(f"option {d.name} is declared twice in one set")
            self._defs[d.name] = d

    def __getitem__(self, name: str) -> OptionDef:
        return self._defs[name]

    def __iter__(self):
        return iter(self._defs)

    def __len__(self) -> int:
        return len(self._defs)

    def read(self, options: Mapping[str, Any], name: str) -> Any:
        """The typed value of the declared option ``name`` in ``options``."""
        return self._defs[name].read(options)


_options.read_observer = note_read
