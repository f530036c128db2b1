"""Object keys: the one place that builds and parses them.

The data keys follow Confluent's S3 sink, so existing Athena/Hive tables and scripts keep working::

    <prefix><topics.dir>/<topic>/<encoded partition>/<topic>+<partition>+<start offset>.<ext>

with ``directory.delim`` in place of ``/`` and ``file.delim`` in place of ``+``. Beside a
block-GZIP (or Avro) object sits its index sidecar, a hidden file: the data object's name with a
leading ``.``, minus ``.gz``, plus ``.index.json``
(:func:`~blockgz.written.sidecars.sidecar_key`), so query engines that read a topic's folder
skip it. So is the timestamps file beside a value file
(:mod:`blockgz.archive.timestamps_keys`): :func:`parse_archive_key` reads its key, which
:meth:`Layout.parse_data_key` does not take for a data object. An export's batch manifests sit
under
``<prefix><manifest dir>/<job name>/manifests/``.

A key is a data object only if its whole name parses: ``<topic>+<partition>+<start offset,
zero-padded to exactly filename.offset.zero.pad.width digits>.<known extension>`` and nothing
after (:meth:`Layout.parse_data_key`); anything else is a stray that readers ignore.

    >>> layout = Layout()
    >>> key = layout.data_key("", "orders/partition=3", "orders", 3, 1000, ".json.gz")
    >>> key
    'topics/orders/partition=3/orders+3+0000001000.json.gz'
    >>> ref = layout.parse_data_key(key, size=10)
    >>> ref.topic, ref.partition, ref.start_offset, ref.extension, ref.directory
    ('orders', 3, 1000, 'json.gz', 'topics/orders/partition=3')
    >>> from blockgz.written.sidecars import sidecar_key
    >>> sidecar_key(key)
    'topics/orders/partition=3/.orders+3+0000001000.json.index.json'
    >>> layout.parse_data_key(sidecar_key(key)) is None
    True
    >>> layout.parse_data_key(key + ".bak") is None
    True
    >>> stamps = "topics/orders/partition=3/.orders+3+0000001000.timestamps.json.gz"
    >>> layout.parse_data_key(stamps) is None
    True
    >>> ref = parse_archive_key(layout, stamps)
    >>> ref.key == stamps, ref.topic, ref.role
    (True, 'orders', 'timestamps')

The keys of what an export keeps beside its data (manifests, catalog, intents, dead letters,
lease) are :class:`~blockgz.archive.job_keys.JobKeys`' methods, which :class:`Layout` has.

The readers also read archives of DeviantArt's ``kafka-connect-s3`` connector, whose keys are
``<prefix><yyyy-MM-dd>/<topic>-<partition, 5 digits>-<first offset, 12 digits>.gz`` (the date
is the upload day); :class:`~blockgz.archive.deviantart.DeviantArtLayout` parses them
(``layout=deviantart``). Readers use either through :class:`KeyLayout`, never by its class.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from blockgz.archive.job_keys import JobKeys
from blockgz.archive.object_ref import ObjectRef
from blockgz.archive.timestamps_keys import TIMESTAMPS, is_hidden_timestamps, shown_key
from blockgz.errors import ConfigError
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.written.sidecars import is_sidecar

if TYPE_CHECKING:
    from blockgz.options import Options

DEFAULT_MANIFEST_DIR = "_blockgz"
DEFAULT_BYTEARRAY_EXTENSION = ".bin"
_READERS = ("reader", "source")
#: The key layout's options: the sink writes it, the readers (and ``startingOffsets=s3``) read it.
KEY_OPTIONS = OptionSet(
    OptionDef(
        "topics.dir",
        "raw",
        "topics",
        "the folder above the topics' folders",
        "sink",
        origin="confluent",
        also=_READERS,
    ),
    OptionDef(
        "directory.delim",
        "raw",
        "/",
        "between the folders of a key",
        "sink",
        origin="confluent",
        also=_READERS,
    ),
    OptionDef(
        "file.delim",
        "raw",
        "+",
        "between topic, partition and start offset in a file name",
        "sink",
        origin="confluent",
        also=_READERS,
    ),
    OptionDef(
        "filename.offset.zero.pad.width",
        "int",
        10,
        "digits of the start offset in a file name",
        "sink",
        origin="confluent",
        low=0,
        high=30,
        also=_READERS,
    ),
    OptionDef(
        "blockgz.manifest.dir",
        "text",
        DEFAULT_MANIFEST_DIR,
        "the folder of the job's manifests, catalog and lease",
        "sink",
        also=_READERS,
    ),
    OptionDef(
        "format.bytearray.extension",
        "raw",
        DEFAULT_BYTEARRAY_EXTENSION,
        "bytearray file extension",
        "sink",
        origin="confluent",
        also=_READERS,
    ),
)
#: The options a layout is read from (a reader given none of them learns them from manifests).
LAYOUT_OPTIONS = tuple(KEY_OPTIONS)


#: Characters a directory delimiter may not hold: escapes are made of ``%`` and hex digits, and
#: ``.``, ``-``, ``_`` occur in topic names and extensions, so a key could not be split back.
_NOT_IN_DIRECTORY_DELIM = "%._-"


_DEFAULT_PARTITION = "partition="


def default_partition(partition: int) -> str:
    """The encoded partition of Confluent's DefaultPartitioner: ``partition=<kafka partition>``."""
    return f"{_DEFAULT_PARTITION}{partition}"


def check_directory_delim(delim: str) -> str:
    """``directory.delim`` must be punctuation that no topic name or extension holds.

    >>> check_directory_delim("-")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: directory.delim: '-' is not allowed; allowed: one or more ...
    """
    if not delim or any(c.isalnum() or c in _NOT_IN_DIRECTORY_DELIM for c in delim):
        raise ConfigError(
            f"directory.delim: {delim!r} is not allowed; allowed: one or more punctuation "
            "characters other than % . - _ (default /)"
        )
    return delim


@runtime_checkable
class KeyLayout(Protocol):
    """What readers and writers ask of a key layout, whichever it is: Confluent's
    (:class:`Layout`) or DeviantArt's (:class:`~blockgz.archive.deviantart.DeviantArtLayout`)."""

    #: ``confluent`` or ``deviantart``: the ``layout`` option's value.
    kind: ClassVar[str]
    #: Whether exports of this layout keep manifests and a catalog (blockgz writes them).
    has_exports: ClassVar[bool]

    @property
    def topics_dir(self) -> str:
        """The directory every topic's directory sits in (``""``: none, or not used)."""
        ...

    def topic_prefix(self, prefix: str = "", topic: str | None = None) -> str:
        """Where one topic's objects are listed (all topics' when ``topic`` is ``None``)."""
        ...

    def partition_prefix(self, prefix: str, topic: str, partition: int) -> str:
        """Where one partition's objects are listed."""
        ...

    def topics_directory(self, prefix: str = "") -> str | None:
        """The prefix whose sub-directories are the topics; ``None`` when there is none."""
        ...

    def partition_of_directory(self, directory: str) -> int | None:
        """The Kafka partition a directory listed under a topic holds, if it tells."""
        ...

    def parse_data_key(
        self, key: str, *, size: int = -1, extension: str | None = None, any_extension: bool = False
    ) -> ObjectRef | None:
        """The :class:`ObjectRef` of a data key; ``None`` for any other key."""
        ...

    def is_bookkeeping(self, prefix: str, key: str) -> bool:
        """Whether ``key`` (no data object) is one the layout's writer keeps beside its data
        (an export's manifests, DeviantArt's cursor files): not a stray."""
        ...

    def one_copy_each(self, refs: Sequence[ObjectRef]) -> list[ObjectRef]:
        """``refs`` (sorted by topic, partition, start offset) less the copies a writer's
        restart left behind."""
        ...

    def describe(self) -> str:
        """The layout in a message: ``topics.dir='topics'`` or ``layout=deviantart``."""
        ...


@dataclass(frozen=True)
class Layout(JobKeys):
    """The key layout settings of an export (Confluent's names in brackets).

    ``topics_dir`` [``topics.dir``], ``directory_delim`` [``directory.delim``], ``file_delim``
    [``file.delim``], ``offset_pad_width`` [``filename.offset.zero.pad.width``], blockgz's
    ``manifest_dir`` [``blockgz.manifest.dir``] and ``bytearray_extension``
    [``format.bytearray.extension``], which names the extensions a data object may have.
    """

    topics_dir: str = "topics"
    directory_delim: str = "/"
    file_delim: str = "+"
    offset_pad_width: int = 10
    manifest_dir: str = DEFAULT_MANIFEST_DIR
    #: Confluent's ``format.bytearray.extension``: data objects may also end with it.
    bytearray_extension: str = DEFAULT_BYTEARRAY_EXTENSION

    def __post_init__(self) -> None:
        check_directory_delim(self.directory_delim)
        ext = self.bytearray_extension
        if not re.fullmatch(r"\.?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", ext) or ext.endswith(".gz"):
            raise ConfigError(
                f"format.bytearray.extension: {ext!r} is not allowed; allowed: a dot and letters, "
                "digits, _ or - (default .bin), not ending with .gz"
            )
        if (
            not self.file_delim
            or any(c.isdigit() for c in self.file_delim)
            or self.directory_delim in self.file_delim
        ):
            raise ConfigError(
                f"file.delim: {self.file_delim!r} is not allowed; allowed: text without digits "
                "or the directory delimiter (default +)"
            )
        if not 0 <= self.offset_pad_width <= 30:
            raise ConfigError(
                f"filename.offset.zero.pad.width: {self.offset_pad_width} is out of range; "
                "allowed: 0..30"
            )

    kind: ClassVar[str] = "confluent"
    has_exports: ClassVar[bool] = True

    def same_scope(self, other: Layout) -> bool:
        """Whether ``other`` puts data objects under the same keys (``topics.dir`` and the
        delimiters): a reader of this layout reads only exports of the same scope.

        >>> Layout().same_scope(Layout(topics_dir="withheaders"))
        False
        >>> Layout().same_scope(Layout(manifest_dir="elsewhere"))
        True
        """
        return (
            self.topics_dir,
            self.directory_delim,
            self.file_delim,
        ) == (other.topics_dir, other.directory_delim, other.file_delim)

    def to_dict(self) -> dict[str, Any]:
        """The settings under their option names, as a manifest records them (a bytearray
        extension only when it is not the default, so older manifests' bytes stay the same)."""
        out = {
            "topics.dir": self.topics_dir,
            "directory.delim": self.directory_delim,
            "file.delim": self.file_delim,
            "filename.offset.zero.pad.width": str(self.offset_pad_width),
            "blockgz.manifest.dir": self.manifest_dir,
        }
        if self.bytearray_extension != DEFAULT_BYTEARRAY_EXTENSION:
            out["format.bytearray.extension"] = self.bytearray_extension
        return out

    @classmethod
    def from_options(cls, options: Options) -> Layout:
        """Read the layout settings under their Confluent names."""
        read = KEY_OPTIONS.read
        delim = read(options, "directory.delim")  # given but empty is an error, not "/"
        return cls(
            topics_dir=read(options, "topics.dir").strip().strip(delim),  # may be ""
            directory_delim=delim,
            file_delim=read(options, "file.delim") or "+",
            offset_pad_width=read(options, "filename.offset.zero.pad.width"),
            manifest_dir=read(options, "blockgz.manifest.dir").strip("/"),
            bytearray_extension=read(options, "format.bytearray.extension")
            or DEFAULT_BYTEARRAY_EXTENSION,
        )

    # -- data objects -------------------------------------------------------------------------
    def topics_root(self, prefix: str = "") -> str:
        """``<prefix><topics.dir><delim>``: where every topic's directory starts."""
        return f"{prefix}{self.topics_dir}{self.directory_delim}" if self.topics_dir else prefix

    def topic_prefix(self, prefix: str = "", topic: str | None = None) -> str:
        """The key prefix of one topic's objects (of all topics when ``topic`` is ``None``)."""
        root = self.topics_root(prefix)
        return f"{root}{topic}{self.directory_delim}" if topic else root

    def partition_prefix(self, prefix: str, topic: str, partition: int) -> str:
        """The key prefix of one partition's objects under the default partitioner."""
        encoded = default_partition(partition)
        return f"{self.topic_prefix(prefix, topic)}{encoded}{self.directory_delim}"

    def topics_directory(self, prefix: str = "") -> str | None:
        """:meth:`topics_root`: every topic has a directory under it."""
        return self.topics_root(prefix)

    def partition_of_directory(self, directory: str) -> int | None:
        """The partition of a default partitioner's directory; ``None`` for other directories.

        >>> Layout().partition_of_directory("topics/t/partition=12/")
        12
        >>> Layout().partition_of_directory("topics/t/day=1/") is None
        True
        """
        name = directory.rstrip(self.directory_delim).rsplit(self.directory_delim, 1)[-1]
        number = name.removeprefix(_DEFAULT_PARTITION)
        return int(number) if number != name and number.isdigit() else None

    def directory_of(self, key: str) -> str:
        """The directory part of ``key``, with its delimiter (``""`` when there is none).

        >>> Layout().directory_of("topics/t/day=1/t+0+0000000500.json")
        'topics/t/day=1/'
        """
        return key[: key.rfind(self.directory_delim) + 1]

    def file_name(self, topic: str, partition: int, start_offset: int, extension: str) -> str:
        """``<topic>+<partition>+<start, zero-padded><extension>``; ``extension`` has its dot."""
        start = str(start_offset).zfill(self.offset_pad_width)
        return self.file_name_prefix(topic, partition) + start + extension

    def file_name_prefix(self, topic: str, partition: int) -> str:
        """What every object name of the topic-partition starts with: ``<topic>+<partition>+``.

        >>> Layout(file_delim="-").file_name_prefix("t", 3)
        't-3-'
        """
        return self.file_delim.join((topic, str(partition), ""))

    def is_bookkeeping(self, prefix: str, key: str) -> bool:
        """Keys under the manifest directory (``topics.dir=""`` lists them with the data)."""
        return key.startswith(self.exports_prefix(prefix))

    def one_copy_each(self, refs: Sequence[ObjectRef]) -> list[ObjectRef]:
        """Every ref: a data object's name is unique in its directory."""
        return list(refs)

    def describe(self) -> str:
        return f"topics.dir={self.topics_dir!r}"

    def data_key(
        self,
        prefix: str,
        partitioned_path: str,
        topic: str,
        partition: int,
        start_offset: int,
        extension: str,
    ) -> str:
        """The key of a data object; ``partitioned_path`` is the partitioner's
        ``<topic><delim><encoded partition>``."""
        name = self.file_name(topic, partition, start_offset, extension)
        return f"{self.topics_root(prefix)}{partitioned_path}{self.directory_delim}{name}"

    @cached_property
    def _name_pattern(self) -> re.Pattern[str]:
        # The topic is greedy: partition and start offset are the last two numbers of the name,
        # so a topic holding the delimiter (file.delim=- and topic my-topic) still parses.
        d = re.escape(self.file_delim)
        return re.compile(rf"^(?P<topic>.+){d}(?P<partition>\d+){d}(?P<start>\d+)\.(?P<ext>.+)$")

    @cached_property
    def extensions(self) -> frozenset[str]:
        """The extensions (no leading dot) a data object's name may end with: those the sink
        writes for values and their ``keys``/``headers`` companions in every registered format
        (:data:`blockgz.formats.by_name.FORMATS`), with ``.bin`` and this layout's
        ``format.bytearray.extension``; gzipped or zstd-compressed unless the format
        compresses inside.

        >>> sorted(e for e in Layout(bytearray_extension=".dat").extensions if "." not in e)
        ['avro', 'bin', 'dat', 'json']
        """
        from blockgz.blocks.codecs.families import BLOCK_CODECS
        from blockgz.formats.by_name import FORMATS

        found: set[str] = set()
        for fmt in FORMATS:
            for base in fmt.extensions(self.bytearray_extension):
                if not base:
                    continue  # a bare .gz is DeviantArt's name, not this layout's
                shapes: tuple[str, ...] = (base,)
                if not fmt.compresses_inside:
                    shapes += tuple(base + family.suffix for family in BLOCK_CODECS)
                for ext in shapes:
                    found.update((ext, f"keys.{ext}", f"headers.{ext}", f"timestamps.{ext}"))
        return frozenset(found)

    def exact_start(self, digits: str) -> bool:
        """Whether a start offset is written as the sink writes it: zero-padded to exactly
        ``offset_pad_width`` digits, more only when the number needs them.

        >>> Layout().exact_start("0000000042"), Layout().exact_start("042")
        (True, False)
        >>> Layout().exact_start("12345678901"), Layout().exact_start("00000000042")
        (True, False)
        """
        return digits == str(int(digits)).zfill(self.offset_pad_width)

    def parse_data_key(
        self, key: str, *, size: int = -1, extension: str | None = None, any_extension: bool = False
    ) -> ObjectRef | None:
        """The :class:`ObjectRef` of a data key; ``None`` for sidecars, hidden timestamps
        files (:func:`parse_archive_key` reads them), manifests, strays.

        The whole name must parse: ``<topic>+<partition>+<start>.<extension>`` with the
        partition as a plain number, the start offset padded as the sink pads it
        (:meth:`exact_start`) and an extension from :attr:`extensions`, or exactly
        ``extension`` (with its dot) when given. ``any_extension`` accepts any extension, for
        keys a manifest recorded as data objects.

        >>> layout = Layout()
        >>> [layout.parse_data_key(f"t+0+0000009999.{ext}") is None
        ...  for ext in ("json.gz", "json.gz.bak", "txt", "keys.bin.gz")]
        [False, True, True, False]
        >>> layout.parse_data_key("t+00+0000009999.json") is None
        True
        """
        if is_sidecar(key) or is_hidden_timestamps(key):
            return None
        directory, _, name = key.rpartition(self.directory_delim)
        if extension is not None:
            ext = extension.removeprefix(".")
            if not name.endswith("." + ext):
                return None
            match = self._name_pattern.match(name)
            if match is None or match["ext"] != ext:
                return None
        else:
            match = self._name_pattern.match(name)
            if match is None or not (any_extension or match["ext"] in self.extensions):
                return None
            ext = match["ext"]
        partition, start = match["partition"], match["start"]
        if partition != str(int(partition)) or not self.exact_start(start):
            return None
        return ObjectRef(
            key=key,
            topic=match["topic"],
            partition=int(partition),
            start_offset=int(start),
            extension=ext,
            directory=directory,
            size=size,
            bytearray_extension=self.bytearray_extension,
        )


def parse_archive_key(
    layout: KeyLayout, key: str, *, size: int = -1, any_extension: bool = False
) -> ObjectRef | None:
    """A data key's :class:`ObjectRef` (:meth:`KeyLayout.parse_data_key`), or a hidden
    timestamps file's (:mod:`blockgz.archive.timestamps_keys`): role ``timestamps``, its own
    (hidden) key, the topic, partition and start offset of its value file. ``None`` for any
    other key.

    >>> ref = parse_archive_key(Layout(), "d/.t+0+0000000042.timestamps.avro", size=9)
    >>> ref.key, ref.topic, ref.start_offset, ref.extension, ref.directory, ref.size
    ('d/.t+0+0000000042.timestamps.avro', 't', 42, 'timestamps.avro', 'd', 9)
    >>> parse_archive_key(Layout(), "d/.t+0+0000000042.timestamps.json.index.json") is None
    True
    """
    ref = layout.parse_data_key(key, size=size, any_extension=any_extension)
    if ref is not None or not is_hidden_timestamps(key):
        return ref
    shown = layout.parse_data_key(shown_key(key), size=size, any_extension=any_extension)
    if shown is None or shown.role != TIMESTAMPS:
        return None
    return replace(shown, key=key)
