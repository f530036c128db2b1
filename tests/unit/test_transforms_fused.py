"""A chain compiled for a topic (Chain.fused) writes exactly what the chain run record by record
writes: the same value bytes, topic, key, headers and objects; a value it cannot take goes
back to the chain, which names the transform."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blockgz.sink.records import KafkaRecord
from blockgz.sink.transforms import build_chain
from blockgz.sink.transforms.chain import reads_headers
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.sink.write.transforming import RecordTransformer
from testkit.batches import arrow_batches

K = "org.apache.kafka.connect.transforms."
P = K + "predicates."
THREE = {
    "transforms": "insert,replace,route",
    "transforms.insert.type": K + "InsertField$Value",
    "transforms.insert.static.field": "dc",
    "transforms.insert.static.value": "eu-1",
    "transforms.replace.type": K + "ReplaceField$Value",
    "transforms.replace.exclude": "pad",
    "transforms.replace.renames": "user:user_id",
    "transforms.route.type": K + "RegexRouter",
    "transforms.route.regex": "orders-(.*)",
    "transforms.route.replacement": "archived-$1",
}
#: Chains that compile, each stressing one part of the fused way.
CHAINS = {
    "three": THREE,
    "record fields, renamed last": {
        "transforms": "ins,rep",
        "transforms.ins.type": K + "InsertField$Value",
        "transforms.ins.offset.field": "off",
        "transforms.ins.timestamp.field": "ts",
        "transforms.ins.topic.field": "user_id",
        "transforms.ins.partition.field": "p!",
        "transforms.rep.type": K + "ReplaceField$Value",
        "transforms.rep.renames": "user:user_id",
    },
    "two renames, include": {
        "transforms": "rep",
        "transforms.rep.type": K + "ReplaceField$Value",
        "transforms.rep.include": 'user,pad,a"b',
        "transforms.rep.renames": "user:pad,pad:user",
    },
    "predicates": {
        **THREE,
        "transforms.insert.predicate": "tomb",
        "transforms.insert.negate": "true",
        "transforms.replace.predicate": "other",
        "predicates": "tomb,other",
        "predicates.tomb.type": P + "RecordIsTombstone",
        "predicates.other.type": P + "TopicNameMatches",
        "predicates.other.pattern": "nope",
    },
}
#: A predicate the fused way cannot answer per topic: the chain runs record by record.
BY_RECORD = {
    "predicates": "h",
    "predicates.h.type": P + "HasHeaderKey",
    "predicates.h.name": "never",
    "transforms.route.predicate": "h",
    "transforms.route.negate": "true",
}

keys = st.sampled_from(["user", "user_id", "pad", "dc", 'a"b', "é", "x"])
leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
leaves |= st.sampled_from(['"user":', ',"user":1', "user_id", 1.5, 1e300])
json_values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4)
)


def transformer(options: dict[str, str]) -> RecordTransformer:
    found = RecordTransformer.of(SinkSettings.from_options({"path": "/tmp/unused", **options}))
    assert found is not None
    return found


def by_chain(tr: RecordTransformer, record: KafkaRecord) -> tuple[str, bytes] | str:
    """What the chain's records give: (topic, value bytes), or the error's text."""
    try:
        out = tr._apply(record, tr.to_connect(record))
    except Exception as exc:
        return str(exc)
    assert out is not None
    return out.topic, out.value


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(CHAINS)), values=st.lists(json_values, min_size=1, max_size=5))
def test_fused_values_are_the_chains_values(name, values):
    tr = transformer(CHAINS[name])
    plan = tr.chain.fused("orders-eu")
    assert plan is not None and plan.kernels
    raw = [json.dumps(v).encode() for v in values]
    records = [KafkaRecord("orders-eu", 3, 10 + i, 7, None, v) for i, v in enumerate(raw)]
    expected = [by_chain(tr, r) for r in records]
    # Record by record (field partitioners, converters): the fused way or the chain's.
    assert [by_chain_or_apply(tr, r) for r in records] == expected
    # Whole batches: every value the chain's bytes, or None (then the records take apply()).
    batch = arrow_batches(records)[0]
    batched = tr.transform_json_values(plan, raw, batch)
    if any(isinstance(e, str) for e in expected):
        assert batched is None
    elif batched is None:  # only for what is no map (JSON null is a tombstone to the chain)
        assert any(type(v) is not dict for v in values)
    else:
        assert [(plan.topic, v) for v in batched] == expected


def by_chain_or_apply(tr: RecordTransformer, record: KafkaRecord) -> tuple[str, bytes] | str:
    try:
        out = tr.apply(record)
    except Exception as exc:
        return str(exc)
    assert out is not None
    if out.value is not None:  # (JSON null is a tombstone to the transforms)
        assert out.json() == orjson.loads(out.value)  # what partitioners read is written
    return out.topic, out.value


def test_what_does_not_compile():
    assert build_chain({**THREE, **BY_RECORD}).fused("orders-eu") is None
    timestamp_router = {"transforms": "r", "transforms.r.type": K + "TimestampRouter"}
    assert build_chain(timestamp_router).fused("t") is None
    key_side = {**THREE, "transforms.insert.type": K + "InsertField$Key"}
    assert build_chain(key_side).fused("t") is None
    routed = build_chain({**THREE, "transforms": "route"}).fused("orders-us")
    assert routed is not None and (routed.topic, routed.kernels) == ("archived-us", ())


@pytest.mark.parametrize("extra", [{}, {"store.kafka.keys": "true", "store.kafka.headers": "true"}])
def test_whole_batches_write_the_objects_record_by_record_writes(tmp_path, extra):
    values = [{"user": f"u{n}", "pad": "x" * n, "n": n, "nested": {"user": 1}} for n in range(30)]
    records = [
        KafkaRecord("orders-eu", 0, n, 1000 + n, b"k%d" % n, json.dumps(v).encode(), [("h", b"v")])
        for n, v in enumerate(values)
    ]
    options = {"flush.size": "7", **extra, **THREE}
    runs = {}
    for name, more in (("whole", {}), ("single", BY_RECORD)):
        config = SinkSettings.from_options({"path": str(tmp_path / name), **options, **more})
        runs[name] = write_task(config, iter(arrow_batches(records, [12])))
    whole, single = runs["whole"], runs["single"]
    assert [f.key for f in whole.files] == [f.key for f in single.files]
    for f in whole.files:
        assert (tmp_path / "whole" / f.key).read_bytes() == (
            tmp_path / "single" / f.key
        ).read_bytes()
    assert whole.next_offsets == single.next_offsets == {"orders-eu": {0: 30}}
    first = next(f for f in whole.files if f.role == "value")
    line = (tmp_path / "whole" / first.key).read_bytes().splitlines()[0]
    assert orjson.loads(line) == {"user_id": "u0", "n": 0, "nested": {"user": 1}, "dc": "eu-1"}


def test_a_tombstone_predicate_compiles_only_with_a_kernel():
    """JSON null is a tombstone to the chain: only a kernel (which takes maps only) sends such
    a record back to the chain, so a chain of routers under RecordIsTombstone does not fuse."""
    tombstones = {
        "transforms.route.predicate": "tomb",
        "predicates": "tomb",
        "predicates.tomb.type": P + "RecordIsTombstone",
    }
    assert build_chain({**THREE, **tombstones, "transforms": "route"}).fused("orders-eu") is None
    assert build_chain({**THREE, **tombstones}).fused("orders-eu").topic == "orders-eu"


def test_a_batch_the_chain_rejects_whole_goes_to_the_dead_letter_queue(tmp_path):
    records = [KafkaRecord("orders-eu", 0, n, 5, None, b"[%d]" % n) for n in range(3)]
    options = {"path": str(tmp_path), **THREE, "errors.tolerance": "all"}
    config = SinkSettings.from_options({**options, "blockgz.deadletterqueue.store": "true"})
    message = write_task(config, iter(arrow_batches(records)))
    assert message.dead_letters == {"orders-eu": {0: 3}} and message.files == []
    assert message.next_offsets == {"orders-eu": {0: 3}}


def test_only_a_chain_that_touches_headers_has_the_source_read_them():
    assert not reads_headers({}) and not reads_headers(THREE)
    assert not reads_headers(CHAINS["predicates"])  # TopicNameMatches, RecordIsTombstone
    assert reads_headers({**THREE, **BY_RECORD})  # HasHeaderKey
    assert reads_headers({**THREE, "transforms.route.type": K + "DropHeaders"})
    assert reads_headers({**THREE, "transforms.route.type": "io.debezium.transforms.X"})
