"""A task of many topic-partitions closes their writers several at once (issue 44): the
commit message and the listener see every file once, and a failing close still leaves
nothing of the attempt behind."""

from __future__ import annotations

from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from blockgz.sink.records import kafka_arrow_schema  # noqa: E402
from blockgz.sink.write.config import SinkSettings  # noqa: E402
from blockgz.sink.write.hooks import WriteListener  # noqa: E402
from blockgz.sink.write.task import CLOSE_THREADS, write_task  # noqa: E402

PARTITIONS = CLOSE_THREADS * 2 + 3
HEARD: list = []


class Recorder(WriteListener):
    def file_written(self, file, task):
        HEARD.append((file.key, task.files_done))


class FailsOnPartition5(WriteListener):
    def file_written(self, file, task):
        if file.partition == 5:
            raise RuntimeError("listener refused partition 5")


def batch(partition: int, offsets: range):
    rows = [
        {
            "key": None,
            "value": b'{"p": %d, "n": %d}' % (partition, o),
            "topic": "t",
            "partition": partition,
            "offset": o,
            "timestamp": None,
            "timestampType": 0,
        }
        for o in offsets
    ]
    return pa.RecordBatch.from_pylist(rows, schema=kafka_arrow_schema(False))


def _config(tmp_path: Path, listener: str) -> SinkSettings:
    return SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "s3.compression.type": "blockgzip",
            "store.kafka.timestamps": "false",
            "blockgz.write.listener": f"{__name__}:{listener}",
        }
    )


def _data_objects(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.gz") if p.is_file())


def test_every_partition_file_is_closed_once_in_order(tmp_path):
    HEARD.clear()
    batches = [batch(p, range(p, p + 3)) for p in range(PARTITIONS)]
    message = write_task(_config(tmp_path, "Recorder"), iter(batches))
    values = [f for f in message.files if f.role == "value"]
    assert [(f.partition, f.first_offset, f.records) for f in values] == [
        (p, p, 3) for p in range(PARTITIONS)
    ]
    assert sorted(k for k, _ in HEARD) == sorted(f.key for f in message.files)
    assert sorted(n for _, n in HEARD) == list(range(1, len(message.files) + 1))
    assert len(_data_objects(tmp_path)) == PARTITIONS
    assert message.next_offsets == {"t": {p: p + 3 for p in range(PARTITIONS)}}


def test_a_failing_close_leaves_no_object_of_the_attempt(tmp_path):
    batches = [batch(p, range(3)) for p in range(PARTITIONS)]
    with pytest.raises(RuntimeError, match="partition 5"):
        write_task(_config(tmp_path, "FailsOnPartition5"), iter(batches))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no object, no sidecar
