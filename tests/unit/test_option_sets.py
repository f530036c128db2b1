"""Every option is declared in exactly one option set, and every set is in the one visible tuple
(``blockgz.cli.option_sets.ALL_OPTION_SETS``): a set or a declaration left out fails here.

The product's modules are walked and imported (as ``tests/unit/test_doctests.py`` does), and
every module-level :class:`OptionSet` and :class:`OptionDef` found is checked against the tuple.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

from blockgz.cli.option_sets import ALL_OPTION_SETS, ALL_OPTIONS
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.reader.reading.read_options import READER_OPTION_SETS
from blockgz.sink.jobconfig.settings_names import EXPORT_OPTION_SETS

#: The product's packages (``blockgz.sink`` and ``blockgz.reader`` live in their own folders).
PACKAGES = ("blockgz", "blockgz.sink", "blockgz.reader")


def product_modules() -> list[ModuleType]:
    """Every module of the product, imported (``__main__`` modules run a command: left out)."""
    names = set(PACKAGES)
    for package in PACKAGES:
        walked = pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}.")
        names |= {info.name for info in walked if not info.name.endswith(".__main__")}
    return [importlib.import_module(name) for name in sorted(names)]


def problems(modules: Iterable[ModuleType], sets: tuple[OptionSet, ...]) -> list[str]:
    """What ``modules`` declare outside ``sets``: a set not in the tuple, a declaration in no
    set of it or in more than one."""
    listed = {id(s) for s in sets}
    found: list[str] = []
    declared: dict[int, tuple[str, OptionDef]] = {}
    for module in modules:
        for name, value in vars(module).items():
            where = f"{module.__name__}.{name}"
            if isinstance(value, OptionSet):
                if id(value) not in listed:
                    found.append(f"{where}: a set not in ALL_OPTION_SETS")
                declared.update({id(d): (f"{where}[{d.name!r}]", d) for d in value.values()})
            elif isinstance(value, OptionDef):
                declared.setdefault(id(value), (where, value))
    for where, d in declared.values():
        holders = sum(1 for s in sets if any(held is d for held in s.values()))
        if holders != 1:
            found.append(f"{where}: in {holders} sets of ALL_OPTION_SETS (one expected)")
    return sorted(found)


def test_every_declaration_is_in_exactly_one_set_of_the_tuple():
    assert problems(product_modules(), ALL_OPTION_SETS) == []


def test_a_set_left_out_of_the_tuple_is_found():
    forgotten = ModuleType("blockgz.fake_owner")
    forgotten.FAKE_OPTIONS = OptionSet(OptionDef("fake.option", "flag", False, "", "sink"))
    assert problems([forgotten], ALL_OPTION_SETS) == [
        "blockgz.fake_owner.FAKE_OPTIONS: a set not in ALL_OPTION_SETS",
        "blockgz.fake_owner.FAKE_OPTIONS['fake.option']: in 0 sets of ALL_OPTION_SETS "
        "(one expected)",
    ]


def test_each_layers_sets_are_in_the_tuple_once():
    listed = [id(s) for s in ALL_OPTION_SETS]
    assert len(listed) == len(set(listed))
    assert {id(s) for s in EXPORT_OPTION_SETS + READER_OPTION_SETS} <= set(listed)
    assert ALL_OPTIONS.get("flush.size", "sink") is not None
