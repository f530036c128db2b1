"""What the user asked a restore for: topics (names or a regex), the rename of their targets,
offset and time windows, partitions and groups, checked at the boundary.

:mod:`blockgz.reader.restore.planning` turns a :class:`RestoreRequest` into the plan.

>>> rename = Rename.parse(["orders=orders_restored"], suffix="_dr")
>>> rename.target("orders"), rename.target("payments")
('orders_restored', 'payments_dr')
>>> select_topics(["a1", "a2", "b"], [], r"a\\d")
['a1', 'a2']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from blockgz.errors import ConfigError
from blockgz.reader.reading.window_counts import Window
from blockgz.times import iso_ms

#: A Kafka topic name: what ``--rename``, ``--prefix`` and ``--suffix`` must produce.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


@dataclass(frozen=True)
class Rename:
    """Target topic names: a map of source to target names, else ``prefix + name + suffix``."""

    mapping: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    suffix: str = ""

    @classmethod
    def parse(cls, pairs: Iterable[str] = (), prefix: str = "", suffix: str = "") -> Rename:
        """``--rename SOURCE=TARGET`` (repeatable) with ``--prefix``/``--suffix``.

        >>> Rename.parse(["orders"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: --rename 'orders': write SOURCE=TARGET, e.g. ...
        """
        mapping: dict[str, str] = {}
        for pair in pairs:
            source, sep, target = pair.partition("=")
            if not sep or not source or not target:
                raise ConfigError(
                    f"--rename {pair!r}: write SOURCE=TARGET, e.g. orders=orders_restored"
                )
            if source in mapping and mapping[source] != target:
                raise ConfigError(f"--rename names two targets for {source!r}")
            mapping[source] = target
        return cls(mapping, prefix, suffix)

    def target(self, topic: str) -> str:
        name = self.mapping.get(topic) or f"{self.prefix}{topic}{self.suffix}"
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise ConfigError(
                f"target topic {name!r} (for {topic!r}) is not a Kafka topic name: use letters, "
                "digits, '.', '_' and '-', at most 249"
            )
        return name


def select_topics(archived: list[str], names: Iterable[str], regex: str | None) -> list[str]:
    """The archived topics named in ``names`` plus those ``regex`` matches whole, in order;
    a name the archive does not hold, or a selection that finds nothing, is an error."""
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in archived]
    if unknown:
        raise ConfigError(
            f"the archive holds no topic {', '.join(map(repr, unknown))}; it holds: "
            + (", ".join(archived) or "nothing")
        )
    chosen = list(names)
    if regex is not None:
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise ConfigError(f"--topics-regex {regex!r}: not a regex ({exc})") from exc
        chosen += [t for t in archived if pattern.fullmatch(t) and t not in chosen]
    if not chosen:
        raise ConfigError(
            "no topic to restore: name topics or give --topics-regex matching some of: "
            + (", ".join(archived) or "nothing (the archive is empty)")
        )
    return chosen


def parse_offset_window(text: str) -> tuple[str, int, int | None, int | None]:
    """``--offsets TOPIC:PARTITION=FROM-TO`` (either end may be left out: ``orders:0=100-``).

    >>> parse_offset_window("orders:3=100-200"), parse_offset_window("a.b:0=-50")
    (('orders', 3, 100, 200), ('a.b', 0, None, 50))
    """
    match = re.fullmatch(r"(.+):(\d+)=(\d*)-(\d*)", text.strip())
    if match is None:
        raise ConfigError(
            f"--offsets {text!r}: write TOPIC:PARTITION=FROM-TO (FROM or TO may be left out), "
            "e.g. orders:0=1000-2000"
        )
    topic, partition, start, end = match.groups()
    low, high = (int(start) if start else None), (int(end) if end else None)
    if low is not None and high is not None and high <= low:
        raise ConfigError(f"--offsets {text!r}: TO must be greater than FROM")
    return topic, int(partition), low, high


def parse_partition(text: str) -> tuple[str, int]:
    """``--partition TOPIC:PARTITION``: restore only that partition of the topic.

    >>> parse_partition("orders:3")
    ('orders', 3)
    """
    match = re.fullmatch(r"(.+):(\d+)", text.strip())
    if match is None:
        raise ConfigError(f"--partition {text!r}: write TOPIC:PARTITION, e.g. orders:3")
    return match.group(1), int(match.group(2))


@dataclass(frozen=True)
class RestoreRequest:
    """What the user asked for (the CLI's options, checked)."""

    topics: tuple[str, ...] = ()
    topics_regex: str | None = None
    rename: Rename = field(default_factory=Rename)
    from_time: int | None = None
    to_time: int | None = None
    #: ``(topic, partition) -> (start, end)``: offset windows; other partitions go whole.
    offsets: Mapping[tuple[str, int], tuple[int | None, int | None]] = field(default_factory=dict)
    #: ``(topic, partition)`` pairs: of a topic named here, only these partitions are restored.
    only: frozenset[tuple[str, int]] = frozenset()
    by_key: bool = False
    #: Regex the whole group id must match; ``None``: every group of the snapshot.
    groups_regex: str | None = None
    groups: bool = True
    #: ``--json-null``: what nulls kept as values under the tombstone directory were
    #: (``tombstone`` or ``value``); ``None``: not told, so a plan holding some refuses.
    json_null: str | None = None
    #: The export's ``tombstone.encoded.partition``: the directory tombstones are kept in.
    tombstone_directory: str = "tombstone"

    def __post_init__(self) -> None:
        """Refuse an empty time window, as an empty ``--offsets`` window is refused.

        >>> RestoreRequest(from_time=2_000, to_time=1_000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: --from-time 1970-01-01T00:00:02.000+00:00 is not before ...
        """
        low, high = self.from_time, self.to_time
        if low is not None and high is not None and high <= low:
            raise ConfigError(
                f"--from-time {iso_ms(low)} is not before --to-time {iso_ms(high)}: the window "
                "holds no record (--to-time is the end, records before it)"
            )

    def window(self, topic: str, partition: int) -> Window:
        start, end = self.offsets.get((topic, partition), (None, None))
        return Window(start, end, self.from_time, self.to_time)
