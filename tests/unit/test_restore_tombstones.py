"""Tombstones where a local archive kept them (:mod:`blockgz.reader.restore.tombstones`): found with
and without a manifest, read with their exact offsets, counted by the restore plan, merged into
the partition's records in offset order; and the positions' metadata
(:mod:`blockgz.reader.restore.positions`)."""

from __future__ import annotations

import pytest

from blockgz.blocks.decode import Record
from blockgz.reader import open_archive
from blockgz.reader.reading.window_counts import Window
from blockgz.reader.restore.planning import plan_restore
from blockgz.reader.restore.positions import Position
from blockgz.reader.restore.request import RestoreRequest
from blockgz.reader.restore.tombstones import (
    kept_null_offsets,
    kept_tombstones,
    merged_blocks,
    resolved_nulls,
    tombstone_records,
)
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000


def records() -> list[KafkaRecord]:
    """Offsets 0..11 of ``t``/0; every fourth (3, 7, 11) a tombstone of its key."""
    return [
        KafkaRecord("t", 0, n, T0 + n, b"k%d" % (n % 3), None if n % 4 == 3 else b"%d" % n, None)
        for n in range(12)
    ]


def archive(root, *, keys: bool, manifest: bool) -> None:
    options = {"path": str(root), "name": "job", "flush.size": "5",
               "s3.compression.type": "blockgzip", "behavior.on.null.values": "write"}  # fmt: skip
    if keys:
        options["store.kafka.keys"] = "true"
    config = SinkSettings.from_options(options)
    message = write_task(config, iter(arrow_batches(records())))
    if manifest:
        write_manifest(config.manifest_log(), 0, [message])


@pytest.mark.parametrize("manifest", [True, False], ids=["catalog", "listing"])
def test_keys_only_tombstones_are_found_and_read_with_their_offsets(tmp_path, manifest):
    archive(tmp_path, keys=True, manifest=manifest)
    with open_archive(str(tmp_path)) as reader:
        kept = kept_tombstones(reader, "t", 0)
        assert len(kept.keys_only) == 1 and kept.kept_nulls == ()
        dead = list(tombstone_records(reader, kept.keys_only, Window()))
        assert [(r.offset, r.key, r.value, r.timestamp) for r in dead] == [
            (n, b"k%d" % (n % 3), None, T0 + n) for n in (3, 7, 11)
        ]
        assert [r.offset for r in tombstone_records(reader, kept.keys_only, Window(4, 11))] == [7]


def test_the_plan_counts_tombstones_kept_as_keys(tmp_path):
    archive(tmp_path, keys=True, manifest=True)
    with open_archive(str(tmp_path)) as reader:
        plan = plan_restore(reader, RestoreRequest(topics=("t",)))
    (part,) = plan.topics[0].partitions
    assert (part.count.records, part.tombstones, part.count.first, part.count.last) == (
        12,
        3,
        0,
        11,
    )
    assert plan.ambiguities == []


def test_nulls_kept_as_values_are_named_unless_told(tmp_path):
    archive(tmp_path, keys=False, manifest=True)
    with open_archive(str(tmp_path)) as reader:
        kept = kept_tombstones(reader, "t", 0)
        assert kept.keys_only == () and len(kept.kept_nulls) == 1
        assert kept_null_offsets(reader, kept.kept_nulls, Window()) == [3, 7, 11]
        plan = plan_restore(reader, RestoreRequest(topics=("t",)))
        told = plan_restore(reader, RestoreRequest(topics=("t",), json_null="tombstone"))
    assert plan.records == 12 and plan.topics[0].partitions[0].kept_nulls == 3
    assert plan.ambiguities == [
        "t[0]: 3 records under tombstone/ hold a null kept as a value (JSON null, or an empty "
        "record) without a keys file: the archive cannot tell a tombstone from a value that was "
        "the text null; pass --json-null=tombstone (send them as key + null value) or "
        "--json-null=value (send the bytes read)"
    ]
    assert told.ambiguities == []


def test_tombstones_are_merged_in_offset_order_and_never_share_a_block_with_values():
    values = iter([[Record(0, b"a"), Record(1, b"b"), Record(4, b"e")], [Record(9, b"j")]])
    dead = iter([Record(2, None), Record(3, None), Record(4, None), Record(12, None)])
    blocks = list(merged_blocks(values, dead))
    assert [[r.offset for r in b] for b in blocks] == [[0, 1], [2, 3], [4], [9], [12]]
    assert blocks[2][0].value == b"e"  # an offset held twice: the value's


def test_nulls_kept_as_values_go_as_told():
    block = [Record(1, b"x"), Record.kept(2, None, key=b"k"), Record(3, b"null")]
    as_dead = resolved_nulls(block, {2, 3}, "tombstone")
    assert [(r.value, r.key) for r in as_dead] == [(b"x", None), (None, b"k"), (None, None)]
    assert [r.value for r in resolved_nulls(block, {2, 3}, "value")] == [b"x", b"null", b"null"]


def test_a_position_keeps_its_fingerprint_and_landmarks():
    position = Position("fp", 40, {12: 8, 0: 0})
    assert Position.parse(position.metadata(), 40) == position
    assert Position.parse('{"blockgz.restore": "fp"}', 3) == Position("fp", 3, {})
    assert Position.parse(None, 3) is None
