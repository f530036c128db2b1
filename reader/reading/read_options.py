"""The options of :func:`blockgz.reader.open_archive`, declared once, and the check of a reader's
names.

A reader takes the archive's options: the S3 settings (:data:`blockgz.store.settings.
STORE_OPTIONS`), the key layout (:data:`blockgz.archive.layout.KEY_OPTIONS`), the bytearray framing
(:data:`blockgz.blocks.framing.FRAMING_OPTIONS`), the schema registry's and its own, below. A
name close to a declared one is an error with a "did you mean", as in the export; a name no
part of blockgz declares is named in one warning; an export's whole config is accepted (its
sink options mean nothing to a reader, and are ignored).

>>> ARCHIVE_OPTIONS.read({"prefetch": "4"}, "prefetch")
4
>>> check_reader_options({"prefech": "4", "topics.dri": "x"}, "open_archive")
Traceback (most recent call last):
...
blockgz.errors.ConfigError: open_archive: prefech: not a setting blockgz knows; did you mean \
prefetch?; topics.dri: not a setting blockgz knows; did you mean topics.dir?
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import blockgz.registry  # noqa: F401  (declares the registry's options, which readers take)
from blockgz.option_defs import OPTIONS, OptionDef, OptionSet


def _reader(name: str, kind: Any, default: Any, doc: str, **more: Any) -> OptionDef:
    return OptionDef(name, kind, default, doc, "reader", **more)


ARCHIVE_OPTIONS = OptionSet(
    _reader("prefetch", "int", 2, "blocks fetched ahead while records are consumed", low=0),
    _reader(
        "scan.unindexed",
        "flag",
        False,
        "stream `.gz` objects that have no index from their start instead of failing",
    ),
    _reader(
        "format.json.envelope",
        "flag",
        True,
        "records the export wrapped in its envelope come back with their key, headers and "
        "timestamp; `false` returns the lines as stored",
    ),
    _reader(
        "catalog",
        "flag",
        True,
        "where listing a partition's prefix finds nothing or more than a page, the exports' "
        "catalogs say which objects hold an offset; `false` lists only",
    ),
    _reader(
        "committed",
        "flag",
        True,
        "where an export's manifests cover a partition, read only the objects they committed; "
        "`false`: every object the listing finds",
    ),
)


def check_reader_options(
    options: Mapping[str, Any] | Iterable[str],
    where: str,
    *,
    owners: tuple[str, ...] = ("reader",),
    ignore_case: bool = False,
) -> list[str]:
    """Raise :class:`~blockgz.errors.ConfigError` for names that look like typos of declared
    ones; return (and warn of) the names no part of blockgz declares."""
    return OPTIONS.check(options, owners, where, ignore_case=ignore_case)
