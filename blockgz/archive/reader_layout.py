"""The key layout a reader's options ask for (``layout``, ``topics.dir`` and the rest)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from blockgz.archive.deviantart import DeviantArtLayout
from blockgz.archive.layout import LAYOUT_OPTIONS, KeyLayout, Layout
from blockgz.errors import ConfigError
from blockgz.option_defs import OptionDef, OptionSet

if TYPE_CHECKING:
    from blockgz.options import Options

#: The option naming the key layout a reader expects, and its values (``confluent`` is the default).
LAYOUT_KIND_OPTION = "layout"
LAYOUT_KINDS = (Layout.kind, DeviantArtLayout.kind)
#: The readers' choice of key layout.
READER_LAYOUT_OPTIONS = OptionSet(
    OptionDef(
        LAYOUT_KIND_OPTION,
        "choice",
        "confluent",
        "the key layout to read: `confluent` (the export's) or `deviantart` "
        "(DeviantArt's `kafka-connect-s3` connector)",
        "reader",
        allowed=LAYOUT_KINDS,
    ),
)


def reader_layout(options: Options) -> KeyLayout | None:
    """The key layout a reader's ``options`` ask for; ``None`` when they name none.

    ``layout`` is ``confluent`` (the default: read :class:`Layout`'s options) or ``deviantart``
    (:class:`DeviantArtLayout`, which takes none of them).

    >>> from blockgz.options import Options
    >>> reader_layout(Options({"layout": "DeviantArt"}))
    DeviantArtLayout()
    >>> reader_layout(Options({})) is None, reader_layout(Options({"topics.dir": "x"})).topics_dir
    (True, 'x')
    """
    kind = READER_LAYOUT_OPTIONS.read(options, LAYOUT_KIND_OPTION)
    given = [name for name in LAYOUT_OPTIONS if options.given(name)]
    if kind == DeviantArtLayout.kind:
        if given:
            raise ConfigError(
                f"{', '.join(given)}: not used with layout=deviantart, whose keys are always "
                "<prefix><yyyy-MM-dd>/<topic>-<partition>-<offset>.gz; drop "
                + ("it" if len(given) == 1 else "them")
            )
        return DeviantArtLayout()
    return Layout.from_options(options) if given else None


#: Each layout option's :class:`Layout` field.
LAYOUT_FIELDS = {
    "topics.dir": "topics_dir",
    "directory.delim": "directory_delim",
    "file.delim": "file_delim",
    "filename.offset.zero.pad.width": "offset_pad_width",
    "blockgz.manifest.dir": "manifest_dir",
    "format.bytearray.extension": "bytearray_extension",
}


def given_layout_options(options: Options) -> frozenset[str]:
    """The layout options a reader was given (the rest it may learn from the manifests).

    >>> from blockgz.options import Options
    >>> sorted(given_layout_options(Options({"topics.dir": "x", "prefetch": "3"})))
    ['topics.dir']
    """
    return frozenset(name for name in LAYOUT_OPTIONS if options.given(name))


def differences(given: Layout, names: Iterable[str], recorded: Layout) -> list[str]:
    """The options among ``names`` whose value in ``given`` differs from ``recorded``'s.

    >>> differences(Layout(topics_dir="a"), ["topics.dir"], Layout(topics_dir="a", file_delim="-"))
    []
    >>> differences(Layout(), ["topics.dir", "file.delim"], Layout(file_delim="-"))
    ['file.delim']
    """
    return [
        name
        for name in sorted(names)
        if getattr(given, LAYOUT_FIELDS[name]) != getattr(recorded, LAYOUT_FIELDS[name])
    ]


def completed_layout(
    given: Layout, names: Iterable[str], exports: Sequence[Any], where: str
) -> Layout | None:
    """The layout of the ``exports`` under a prefix (each with ``.name`` and the ``.layout``
    its manifests recorded) that agree with ``given`` on every option in ``names`` (the ones a
    reader was given): the rest of a partial layout, taken from the manifests. ``None`` when
    there are no exports, or those that agree differ among themselves. When exports are there
    and none agrees, :class:`~blockgz.errors.ConfigError` names each option that differs and
    the value the archive was written with (``where``: the prefix, for the message).

    >>> from types import SimpleNamespace as Export
    >>> written = Layout(topics_dir="arch", file_delim="-")
    >>> completed_layout(Layout(topics_dir="arch"), ["topics.dir"], [Export(name="job",
    ...                  layout=written)], "s3://b/") == written
    True
    >>> completed_layout(Layout(topics_dir="arch"), ["topics.dir", "file.delim"],
    ...                  [Export(name="job", layout=written)], "s3://b/")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: file.delim='+' does not match the archive: export 'job' \
under s3://b/ was written with file.delim='-'; give that value or drop the option
    """
    names = list(names)
    agree = {e.layout for e in exports if not differences(given, names, e.layout)}
    if len(agree) == 1:
        return agree.pop()
    if agree or not exports:
        return None
    closest = min(exports, key=lambda e: (len(differences(given, names, e.layout)), e.name))
    differ = differences(given, names, closest.layout)
    mine = ", ".join(f"{n}={getattr(given, LAYOUT_FIELDS[n])!r}" for n in differ)
    theirs = ", ".join(f"{n}={getattr(closest.layout, LAYOUT_FIELDS[n])!r}" for n in differ)
    raise ConfigError(
        f"{mine} does not match the archive: export {closest.name!r} under {where} was "
        f"written with {theirs}; give {'that value' if len(differ) == 1 else 'those values'} "
        f"or drop the option{'s' if len(differ) > 1 else ''}"
    )
