"""Connect's predicates: ``TopicNameMatches``, ``HasHeaderKey``, ``RecordIsTombstone``.

>>> from blockgz.sink.transforms.connect.record import Record
>>> p = topic_name_matches(TransformOptions("predicates.p", {"pattern": "a.*"}))
>>> p(Record("abc", 0, None, None, 1, None, None)), p(Record("xabc", 0, None, None, 1, None, None))
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from blockgz.sink.transforms.connect.record import Record
from blockgz.sink.transforms.options import TransformOptions

#: A predicate: whether a record matches.
Predicate = Callable[[Record], bool]

PACKAGE = "org.apache.kafka.connect.transforms.predicates."


def topic_name_matches(opts: TransformOptions) -> Predicate:
    """The whole topic name matches ``pattern`` (a Java regex)."""
    text = opts.text("pattern")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise opts.error("pattern", f"not a regular expression ({exc})") from None

    def matches(record: Record) -> bool:
        return pattern.fullmatch(record.topic) is not None

    matches.topic_only = True  # type: ignore[attr-defined]  # reads the topic only
    return matches


def has_header_key(opts: TransformOptions) -> Predicate:
    """The record has at least one header named ``name``."""
    name = opts.text("name")
    return lambda record: any(h.key == name for h in record.headers)


def record_is_tombstone(opts: TransformOptions) -> Predicate:
    """The record's value is null."""

    def is_tombstone(record: Record) -> bool:
        return record.value is None

    is_tombstone.when_value_present = False  # type: ignore[attr-defined]  # its answer then
    return is_tombstone


PREDICATES: dict[str, Callable[[TransformOptions], Predicate]] = {
    PACKAGE + "TopicNameMatches": topic_name_matches,
    PACKAGE + "HasHeaderKey": has_header_key,
    PACKAGE + "RecordIsTombstone": record_is_tombstone,
}
