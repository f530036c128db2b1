"""Things chosen by name in an option (formats, compressions, partitioners): one
:class:`Registry` each.

A lookup accepts a name or an alias (Confluent's class name), in any case, and raises
:class:`~blockgz.errors.ConfigError` naming the option and the allowed values.

>>> class Thing:
...     def __init__(self, name, *aliases):
...         self.name, self.aliases = name, aliases
>>> things = Registry("thing.class")
>>> _ = things.register(Thing("a", "com.example.A"))
>>> things.get("COM.EXAMPLE.A").name
'a'
>>> things.get("b")
Traceback (most recent call last):
...
blockgz.errors.ConfigError: thing.class: 'b' is not allowed; allowed: a, com.example.A
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from blockgz.errors import ConfigError


class Named(Protocol):
    """Anything registered by name: read-only, so class-level constants qualify."""

    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Items of one kind by name and alias, in the order they were registered."""

    def __init__(self, option: str):
        #: The option its names are given in (for error messages).
        self.option = option
        self._items: dict[str, T] = {}
        self._by_name: dict[str, T] = {}
        #: Bumped on every change, so that what is derived from the items can be cached.
        self.version = 0

    def register(self, item: T, *, replace: bool = False) -> T:
        """Add ``item`` under its name and aliases (an existing name only with ``replace``)."""
        spellings = (item.name, *item.aliases)
        taken = [s for s in spellings if s.lower() in self._by_name]
        if taken and not replace:
            raise ConfigError(f"{self.option}: {', '.join(taken)} is registered already")
        self._items[item.name] = item
        for spelling in spellings:
            self._by_name[spelling.lower()] = item
        self.version += 1
        return item

    def unregister(self, name: str) -> None:
        """Drop the item called ``name`` (and its aliases): for tests and plugins."""
        item = self._items.pop(name)
        for spelling in (item.name, *item.aliases):
            self._by_name.pop(spelling.lower(), None)
        self.version += 1

    def get(self, name: str, *, option: str | None = None) -> T:
        """The item called ``name`` (or an alias), ignoring case."""
        item = self._by_name.get(name.lower())
        if item is None:
            raise ConfigError(
                f"{option or self.option}: {name!r} is not allowed; allowed: {self.allowed()}"
            )
        return item

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def allowed(self) -> str:
        """Names first, then aliases, as error messages list them."""
        aliases = [a for item in self._items.values() for a in item.aliases]
        return ", ".join([*self._items, *aliases])

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_name
