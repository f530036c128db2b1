"""Routers, Filter, header transforms and predicates, as Connect documents them."""

from __future__ import annotations

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.transforms import Header, Record, build_chain

K = "org.apache.kafka.connect.transforms."
P = K + "predicates."


def rec(topic="orders-eu", value=None, headers=(), timestamp=1_700_000_000_000):
    return Record(topic, 0, None, None, {"v": 1} if value is None else value, None, timestamp,
                  headers)  # fmt: skip


def test_regex_router_replaces_whole_matches_only_with_java_groups():
    chain = build_chain({"transforms": "r", "transforms.r.type": K + "RegexRouter",
                         "transforms.r.regex": "(\\w+)-(\\w+)",
                         "transforms.r.replacement": "$2_$1"})  # fmt: skip
    assert chain.apply(rec("orders-eu")).topic == "eu_orders"
    assert chain.apply(rec("orders.eu")).topic == "orders.eu"


def test_timestamp_router_formats_and_rejects_records_without_timestamp():
    chain = build_chain({"transforms": "r", "transforms.r.type": K + "TimestampRouter",
                         "transforms.r.topic.format": "${topic}.${timestamp}",
                         "transforms.r.timestamp.format": "yyyy-MM"})  # fmt: skip
    assert chain.apply(rec("t")).topic == "t.2023-11"
    with pytest.raises(BadRecordError, match="timestamp missing"):
        chain.apply(rec("t", timestamp=None))


def test_filter_with_predicates_and_negate():
    base = {"transforms": "f", "transforms.f.type": K + "Filter",
            "transforms.f.predicate": "p", "predicates": "p"}  # fmt: skip
    tomb = build_chain({**base, "predicates.p.type": P + "RecordIsTombstone"})
    assert tomb.apply(Record("t", 0, None, None, None, None, None)) is None
    assert tomb.apply(rec()) is not None
    header = {**base, "predicates.p.type": P + "HasHeaderKey", "predicates.p.name": "skip"}
    assert build_chain(header).apply(rec(headers=(Header("skip", b"1"),))) is None
    negated = build_chain({**header, "transforms.f.negate": "true"})
    assert negated.apply(rec()) is None
    assert negated.apply(rec(headers=(Header("skip", b"1"),))) is not None
    topic = build_chain({**base, "predicates.p.type": P + "TopicNameMatches",
                         "predicates.p.pattern": "orders-.*"})  # fmt: skip
    assert topic.apply(rec("orders-eu")) is None and topic.apply(rec("xorders-eu")) is not None


def test_header_transforms():
    chain = build_chain({
        "transforms": "ins,drop,from",
        "transforms.ins.type": K + "InsertHeader",
        "transforms.ins.header": "source", "transforms.ins.value.literal": "dc1",
        "transforms.drop.type": K + "DropHeaders", "transforms.drop.headers": "old",
        "transforms.from.type": K + "HeaderFrom$Value", "transforms.from.fields": "v",
        "transforms.from.headers": "copied", "transforms.from.operation": "move",
    })  # fmt: skip
    out = chain.apply(rec(headers=(Header("old", b"x"), Header("keep", b"y"))))
    assert [(h.key, h.value) for h in out.headers] == [
        ("keep", b"y"),
        ("source", "dc1"),
        ("copied", 1),
    ]
    assert out.value == {}


def test_unknown_class_is_refused_in_one_line_naming_it_and_those_run():
    with pytest.raises(ConfigError) as info:
        build_chain({"transforms": "x", "transforms.x.type": "com.acme.Mask"})
    text = str(info.value)
    assert "\n" not in text and "com.acme.Mask" in text
    assert "InsertField$Value" in text and "ExtractNewRecordState" in text


def test_bad_predicate_and_option_errors_are_one_line():
    with pytest.raises(
        ConfigError,
        match="blockgz does not run this predicate; it runs "
        "HasHeaderKey, RecordIsTombstone, TopicNameMatches",
    ):
        build_chain({"predicates": "p", "predicates.p.type": "x.Y"})
    with pytest.raises(ConfigError, match=r"transforms.f.predicate=q: no such predicate"):
        build_chain({"transforms": "f", "transforms.f.type": K + "Filter",
                     "transforms.f.predicate": "q", "predicates": "p",
                     "predicates.p.type": P + "RecordIsTombstone"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"transforms.h.operation=swap: not one of move, copy"):
        build_chain({"transforms": "h", "transforms.h.type": K + "HeaderFrom$Value",
                     "transforms.h.fields": "a", "transforms.h.headers": "b",
                     "transforms.h.operation": "swap"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"transforms.r.regex: missing"):
        build_chain({"transforms": "r", "transforms.r.type": K + "RegexRouter"})


def test_chain_runs_in_order_and_does_not_change_its_input():
    chain = build_chain({
        "transforms": "hoist,insert",
        "transforms.hoist.type": K + "HoistField$Value", "transforms.hoist.field": "inner",
        "transforms.insert.type": K + "InsertField$Value", "transforms.insert.topic.field": "t",
    })  # fmt: skip
    record = rec("a", value=5)
    assert chain.apply(record).value == {"inner": 5, "t": "a"}
    assert record.value == 5
