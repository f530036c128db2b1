"""The options of :func:`blockgz.reader.open_archive`, declared once, and the check of a reader's
names.

A reader takes the archive's options: the S3 settings (:data:`blockgz.store.settings.
STORE_OPTIONS`), the key layout (:data:`blockgz.archive.layout.KEY_OPTIONS`), the bytearray framing
(:data:`blockgz.blocks.framing.FRAMING_OPTIONS`), the schema registry's and its own, below: the
option sets of :data:`READER_OPTION_SETS`, which a reader of more options extends (the Spark
reader, the restore). A name close to one of them is an error with a "did you mean", as in the
export; the names they do not declare are named in one warning and ignored (an export's config
may be given whole: its sink's and source's options mean nothing to a reader).

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

from blockgz.archive.layout import KEY_OPTIONS
from blockgz.archive.reader_layout import READER_LAYOUT_OPTIONS
from blockgz.blocks.framing import FRAMING_OPTIONS
from blockgz.commits.manifests import JOB_NAME_OPTIONS
from blockgz.option_defs import OptionDef, OptionRegistry, OptionSet
from blockgz.registry import REGISTRY_OPTIONS
from blockgz.store import TARGET_OPTIONS
from blockgz.store.settings import STORE_OPTIONS


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


#: The option sets every reader takes: the archive's location, keys and framing, the job's
#: name, the schema registry's, and :data:`ARCHIVE_OPTIONS`.
READER_OPTION_SETS: tuple[OptionSet, ...] = (
    STORE_OPTIONS,
    TARGET_OPTIONS,
    KEY_OPTIONS,
    READER_LAYOUT_OPTIONS,
    FRAMING_OPTIONS,
    JOB_NAME_OPTIONS,
    REGISTRY_OPTIONS,
    ARCHIVE_OPTIONS,
)
READER_OPTIONS = OptionRegistry(*READER_OPTION_SETS)


def check_reader_options(
    options: Mapping[str, Any] | Iterable[str],
    where: str,
    *,
    owners: tuple[str, ...] = ("reader",),
    more: tuple[OptionSet, ...] = (),
    ignore_case: bool = False,
) -> list[str]:
    """Raise :class:`~blockgz.errors.ConfigError` for names that look like typos of the names
    :data:`READER_OPTION_SETS` and ``more`` declare; return (and warn of) the names they do not
    declare."""
    known = OptionRegistry(*READER_OPTION_SETS, *more) if more else READER_OPTIONS
    return known.check(options, owners, where, ignore_case=ignore_case)
