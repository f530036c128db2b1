"""The sink's hooks: a listener hears every finished object; an input reader feeds the task."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from blockgz.errors import ConfigError  # noqa: E402
from blockgz.sink.records import kafka_arrow_schema  # noqa: E402
from blockgz.sink.write.config import SinkSettings  # noqa: E402
from blockgz.sink.write.hooks import WriteListener, load_input_reader, load_listener  # noqa: E402
from blockgz.sink.write.task import write_task  # noqa: E402

HEARD: list = []


class Recorder(WriteListener):
    def configure(self, options):
        self.tag = options.get("tag", "")

    def file_written(self, file, task):
        HEARD.append((self.tag, file.key, task.files_done, task.attempt))


def batch(offsets):
    rows = [
        {
            "key": None,
            "value": b'{"n": %d}' % o,
            "topic": "t",
            "partition": 0,
            "offset": o,
            "timestamp": None,
            "timestampType": 0,
        }
        for o in offsets
    ]
    return pa.RecordBatch.from_pylist(rows, schema=kafka_arrow_schema(False))


def twice(options, batches):
    """An input reader: every batch it is given, then the same offsets 100 further on."""
    for b in batches:
        yield b
        yield batch([o + 100 for o in b.column("offset").to_pylist()])


def test_the_listener_hears_each_finished_object_with_its_options(tmp_path):
    HEARD.clear()
    config = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "flush.size": "2",
            "blockgz.write.listener": f"{__name__}:Recorder",
            "blockgz.write.listener.tag": "x",
            "store.kafka.timestamps": "false",  # the value files alone
        }
    )
    message = write_task(config, iter([batch(range(5))]))
    assert [h[2] for h in HEARD] == [1, 2, 3]
    assert {h[0] for h in HEARD} == {"x"} and [h[1] for h in HEARD] == [
        f.key for f in message.files
    ]


class ObjectCounter(WriteListener):
    def file_written(self, file, task):
        HEARD.append((file.role, task.files_done, task.objects_done))


def test_objects_done_counts_value_objects_not_the_files_beside_them(tmp_path):
    HEARD.clear()
    config = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "flush.size": "2",
            "blockgz.write.listener": f"{__name__}:ObjectCounter",
        }
    )
    write_task(config, iter([batch(range(5))]))
    values = [h for h in HEARD if h[0] == "value"]
    assert [h[2] for h in values] == [1, 2, 3]
    assert [h[1] for h in HEARD] == list(range(1, 7))  # a timestamps file beside each
    assert {h[0] for h in HEARD} == {"value", "timestamps"}


def test_the_input_reader_turns_input_rows_into_records(tmp_path):
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "blockgz.input.reader": f"{__name__}:twice"}
    )
    message = write_task(config, iter([batch([0, 1])]))
    assert message.next_offsets == {"t": {0: 102}}
    assert sum(f.records for f in message.files if f.role == "value") == 4


def test_hooks_that_are_not_what_they_claim_are_config_errors():
    with pytest.raises(ConfigError, match="WriteListener"):
        load_listener("collections:OrderedDict", {})
    with pytest.raises(ConfigError, match="not a function"):
        load_input_reader(f"{__name__}:HEARD")
    assert load_input_reader("") is None
