"""Connect's routers: ``RegexRouter`` and ``TimestampRouter`` change the record's topic.

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> r = TRANSFORMS["TimestampRouter"](TransformOptions("t", {}))
>>> r(Record("t", 0, None, None, 1, None, 1_700_000_000_000)).topic
't-20231114'
"""

from __future__ import annotations

import re
from typing import Any

from blockgz.sink.transforms.connect.javadate import JavaDateFormat
from blockgz.sink.transforms.connect.record import Record, Rejected
from blockgz.sink.transforms.options import TransformOptions


def java_replacement(text: str) -> str:
    """A Java ``replaceAll`` replacement (``$1``, ``${name}``, ``\\$``) in Python's syntax."""
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif char == "$" and i + 1 < len(text) and text[i + 1] == "{":
            end = text.index("}", i)
            out.append(f"\\g<{text[i + 2 : end]}>")
            i = end + 1
        elif char == "$":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i + 1:
                raise ValueError("a $ not followed by a group number or {name}")
            out.append(f"\\g<{text[i + 1 : j]}>")
            i = j
        else:
            out.append(char.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


def regex_router(opts: TransformOptions) -> Any:
    """A topic that matches ``regex`` whole becomes ``replacement`` (with ``$1`` groups)."""
    try:
        pattern = re.compile(opts.text("regex"))
    except re.error as exc:
        raise opts.error("regex", f"not a regular expression ({exc})") from None
    try:
        replacement = java_replacement(opts.text("replacement"))
    except (ValueError, re.error) as exc:
        raise opts.error("replacement", f"not a usable replacement ({exc})") from None

    routed: dict[str, str] = {}  # a topic's new name is the same for each of its records

    def apply(record: Record) -> Record:
        topic = routed.get(record.topic)
        if topic is None:
            topic = record.topic
            if pattern.fullmatch(topic) is not None:
                # Java's matcher.replaceFirst: one replacement (sub() would also replace the
                # empty match that a pattern like "(.*)" finds at the end).
                topic = pattern.sub(replacement, topic, count=1)
            if len(routed) < 10_000:
                routed[record.topic] = topic
        return record if topic == record.topic else record.new(topic=topic)

    apply.topic_only = True  # type: ignore[attr-defined]  # reads and writes the topic only
    return apply


def timestamp_router(opts: TransformOptions) -> Any:
    """The topic becomes ``topic.format`` with ``${topic}`` and ``${timestamp}`` filled in."""
    topic_format = opts.text("topic.format", "${topic}-${timestamp}")
    date_format = JavaDateFormat(opts.text("timestamp.format", "yyyyMMdd"))

    def apply(record: Record) -> Record:
        if record.timestamp is None:
            raise Rejected(f"timestamp missing on record for topic {record.topic}")
        # Any year, as Java prints it (Julian before 1582, year of era before year 1).
        topic = topic_format.replace("${topic}", record.topic).replace(
            "${timestamp}", date_format.format_millis(record.timestamp)
        )
        return record.new(topic=topic)

    return apply


TRANSFORMS: dict[str, Any] = {"RegexRouter": regex_router, "TimestampRouter": timestamp_router}
