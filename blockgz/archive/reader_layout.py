"""The key layout a reader's options ask for (``layout``, ``topics.dir`` and the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
