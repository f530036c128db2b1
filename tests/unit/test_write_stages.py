"""Each stage of a record's way through a topic-partition's writer, alone
(:mod:`blockgz.sink.write.stages`, :mod:`blockgz.sink.write.open_files`): route → convert → place →
append → rotate."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from blockgz.errors import BadRecordError, RecordFramingError
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.open_files import OpenFiles
from blockgz.sink.write.rotation import RotationRules
from blockgz.sink.write.stages import (
    NullRoute,
    Placement,
    Rotator,
    Route,
    Run,
    append,
    append_run,
)
from blockgz.store import LocalStore


def record(offset: int = 5, value: bytes | None = b"{}", timestamp: int | None = 1000):
    return KafkaRecord("t", 0, offset, timestamp, None, value)


# -- route ---------------------------------------------------------------------------------------
def test_a_value_goes_on_whatever_the_null_behaviour():
    for behavior in ("fail", "ignore", "write"):
        assert NullRoute(behavior, "tombstone").route(record()) is Route.VALUE


def test_a_null_is_skipped_written_or_refused_by_the_null_behaviour():
    null = record(value=None)
    assert NullRoute("ignore", "tombstone").route(null) is Route.SKIP
    assert NullRoute("write", "tombstone").route(null) is Route.TOMBSTONE
    with pytest.raises(BadRecordError, match=r"behavior.on.null.values=fail.*under 'gone'"):
        NullRoute("fail", "gone").route(null)
    with pytest.raises(BadRecordError, match=r"skipped .*report.null.values.to.dlq=true"):
        NullRoute("ignore", "tombstone", report_to_dead_letters=True).route(null)


def test_the_route_of_a_config_reports_nulls_only_with_a_dead_letter_queue():
    config = SimpleNamespace(
        null_behavior="ignore",
        tombstone_partition="tomb",
        dead_letters=SimpleNamespace(report_nulls=True),
    )
    assert not NullRoute.of(config, dead_letters=False).report_to_dead_letters
    assert NullRoute.of(config, dead_letters=True).report_to_dead_letters


# -- place ---------------------------------------------------------------------------------------
SCHEMA = {
    "type": "record",
    "name": "E",
    "namespace": "ns",
    "fields": [{"name": "n", "type": "long"}],
}
WIDER = {
    "type": "record",
    "name": "E",
    "namespace": "ns",
    "fields": [{"name": "n", "type": "long"}, {"name": "m", "type": "long", "default": 0}],
}
FIXED = SimpleNamespace(encode_partition=lambda record: "partition=0")


def decoded(schema: dict, datum: dict, version: int = 1) -> KafkaRecord:
    r = record()
    r.set_decoded(ValueSchema.from_json(schema, version=version), datum)
    return r


@pytest.mark.parametrize(
    ("affix", "encoded"),
    [
        ("NONE", "partition=0"),
        ("PREFIX", "schema_name=ns.E/partition=0"),
        ("SUFFIX", "partition=0/schema_name=ns.E"),
    ],
)
def test_the_schema_affix_goes_before_or_after_the_encoded_partition(affix, encoded):
    place = Placement(FIXED, affix=affix, directory_delim="/")
    assert place.encoded(decoded(SCHEMA, {"n": 1})) == encoded


def test_an_affix_needs_a_schema_and_a_value_may_not_land_among_the_tombstones_keys():
    with pytest.raises(BadRecordError, match="needs a value schema"):
        Placement(FIXED, affix="PREFIX").encoded(record())
    tombstones = SimpleNamespace(encode_partition=lambda record: "tomb")
    place = Placement(tombstones, tombstone_partition="tomb", tombstones_keys_only=True)
    with pytest.raises(BadRecordError, match=r"is tombstone\.encoded\.partition"):
        place.encoded(record())
    assert Placement(tombstones, tombstone_partition="tomb").encoded(record()) == "tomb"


def test_another_schema_rotates_under_none_and_is_projected_under_backward():
    first, second = decoded(SCHEMA, {"n": 1}, 1), decoded(WIDER, {"n": 2, "m": 3}, 2)
    none = Placement(FIXED)
    target, rotate = none.schema(second, first.schema)
    assert (
        target is second.schema
        and rotate == "value schema (schema 'ns.E', schema.compatibility=NONE)"
    )
    backward = Placement(FIXED, compatibility="BACKWARD")
    assert backward.schema(second, None) == (second.schema, None)
    older = decoded(SCHEMA, {"n": 4}, 1)
    target, rotate = backward.schema(older, second.schema)
    assert (target, rotate) == (second.schema, None)  # kept in the newer schema ...
    backward.project(older, target)
    assert older.schema is second.schema and older.json() == {"n": 4, "m": 0}  # ... defaults


# -- append --------------------------------------------------------------------------------------
@dataclass
class FakeFile:
    key: str = "k"
    records: int = 0
    uncompressed_size: int = 0
    first_timestamp: int | None = None
    companions: Any = None
    writes: list = field(default_factory=list)
    times: list = field(default_factory=list)
    refuse: bool = False

    def write(self, data, offset, timestamp=None):
        if self.refuse:
            raise RecordFramingError("the value holds the separator")
        self.writes.append((data, offset))
        self.records += 1
        self.uncompressed_size += len(data or b"") + 1

    def write_framed(self, data, ends, offsets, timestamps=None):
        self.writes.append((bytes(data), list(ends), list(offsets)))
        self.records += len(offsets)
        self.uncompressed_size += len(data)

    def note_times(self, low, high):
        self.times.append((low, high))


def test_append_writes_the_data_and_notes_a_known_time_only():
    out = FakeFile()
    append(out, record(5, timestamp=1000), b"a")
    append(out, record(6, timestamp=-1), b"b")
    assert out.writes == [(b"a", 5), (b"b", 6)] and out.times == [(1000, 1000)]


def test_a_value_the_framing_refuses_is_the_record_s_fault():
    with pytest.raises(BadRecordError, match="holds the separator") as refused:
        append(FakeFile(refuse=True), record(5), b"a\nb")
    assert refused.value.offset == 5  # names the record


def test_a_run_is_appended_in_the_pieces_the_rotation_cuts_as_record_by_record():
    values = [b"a" * n for n in (3, 5, 2, 7, 1, 4)]
    framed = b"".join(v + b"\n" for v in values)
    ends = np.cumsum([len(v) + 1 for v in values])
    run = Run(memoryview(framed), ends, np.arange(10, 16), np.array([5, -1, 7, 8, 9, 3]))
    rotator = Rotator(RotationRules(flush_size_bytes=9))
    one_by_one, current = [], []
    size = 0
    for n, v in enumerate(values):  # what after() does record by record
        current.append(n)
        size += len(v) + 1
        if size >= 9:
            one_by_one.append(current)
            current, size = [], 0
    one_by_one.append(current)
    pieces, start = [], 0
    while start < len(values):
        out = FakeFile()
        stop = rotator.run_stop(out, run, start, len(values))
        append_run(out, run, start, stop)
        assert out.writes[0][0] == framed[run.base(start) : int(ends[stop - 1])]
        pieces.append(list(range(start, stop)))
        start = stop
    assert pieces == [p for p in one_by_one if p]
    out = FakeFile()
    append_run(out, run, 0, 3)
    assert out.times == [(5, 7)]  # the negative (unknown) stamp is left out


# -- rotate --------------------------------------------------------------------------------------
class FakeFiles:
    def __init__(self, **open_files):
        self.open = dict(open_files)
        self.log: list[str] = []

    def get(self, encoded):
        return self.open.get(encoded)

    def __len__(self):
        return len(self.open)

    def oldest(self):
        return next(iter(self.open))

    def commit(self, encoded):
        self.log.append(encoded)
        del self.open[encoded]

    def commit_all(self, reason=None, offset=None):
        self.log.append(f"all ({reason})")
        self.open.clear()


def test_a_partition_change_commits_every_open_file():
    rules = RotationRules(rotate_interval_ms=1000, rotate_on_partition_change=True)
    rotator, files = Rotator(rules), FakeFiles(a=FakeFile())
    assert rotator.before(files, "a", record())[0] is files.open["a"]
    assert rotator.before(files, "b", record()) == (None, 1000)
    assert files.log == ["all (None)"]


def test_the_record_time_past_the_interval_commits_the_file():
    rules = RotationRules(rotate_interval_ms=1000)
    rotator = Rotator(rules, timestamp=lambda r: r.timestamp_ms)
    files = FakeFiles(a=FakeFile(first_timestamp=0))
    writer, stamp = rotator.before(files, "a", record(timestamp=999))
    assert writer is files.open["a"] and stamp == 999 and files.log == []
    assert rotator.before(files, "a", record(timestamp=1000)) == (None, 1000)
    assert files.log == ["a"]


def test_a_keys_file_that_refuses_the_key_schema_rotates_all():
    refusing = SimpleNamespace(accepts=lambda r: False)
    files = FakeFiles(a=FakeFile(companions=refusing), b=FakeFile())
    assert Rotator(RotationRules()).before(files, "a", record())[0] is None
    assert files.log == ["all (key schema)"]


def test_the_oldest_open_file_makes_room_and_a_full_one_is_committed():
    rotator = Rotator(RotationRules(flush_size=2), max_open_files=2)
    files = FakeFiles(a=FakeFile(), b=FakeFile())
    assert rotator.before(files, "c", record()) == (None, None)
    assert files.log == ["a"] and list(files.open) == ["b"]
    rotator.after(files, "b", files.open["b"])
    assert files.log == ["a"]
    full = files.open["b"]
    full.records = 2
    rotator.after(files, "b", full)
    assert files.log == ["a", "b"]


def test_the_schedule_commits_everything_at_a_boundary_of_the_wall_clock():
    from blockgz.sink.write.rotation import Schedule

    now = [0.0]
    rotator = Rotator(RotationRules(), schedule=Schedule(60_000, "UTC"), clock=lambda: now[0])
    files = FakeFiles(a=FakeFile())
    rotator.on_clock(files)  # starts the clock
    now[0] = 61.0
    rotator.on_clock(files)
    assert files.log == ["all (None)"]


# -- the open files ------------------------------------------------------------------------------
@dataclass
class Closing(FakeFile):
    aborted: bool = False

    def close(self):
        return SimpleNamespace(
            key=self.key, index_key=None, first_offset=0, last_offset=1, records=2, size=3
        )

    def abort(self):
        self.aborted = True


def test_open_files_commit_report_drop_empty_and_abort(tmp_path):
    store = LocalStore(tmp_path)
    store.put("done", b"x")
    reported = []
    files = OpenFiles(store, "t", 0, on_file=reported.append)
    files.add("a", Closing(key="done", records=1))
    empty = files.add("b", Closing(key="empty"))
    files.drop_empty()
    assert empty.aborted and list(files) == ["a"]
    files.commit("a")
    assert [f.key for f in reported] == [f.key for f in files.written] == ["done"]
    open_one = files.add("c", Closing(key="c", records=1))
    assert files.abort() is True
    assert open_one.aborted and files.written == [] and len(files) == 0
    assert not (tmp_path / "done").exists()  # what the attempt committed is deleted
