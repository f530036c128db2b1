"""``blockgz replay`` into a real broker (Tansu): the target topic holds the archive, once.

Tansu's high watermark lags behind batched produces (CONTRIBUTING.md's test servers), so the
replays here send one record per request (``-O kafka.batch.num.messages=1``); the product
code is the same either way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader.restore.markers import MARKER
from blockgz.reader.restore.partitioner import kafka_partition
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000
EXACT = ["-O", "kafka.batch.num.messages=1", "-O", "kafka.linger.ms=0"]


def archive_of(root, topic: str, partitions: int, count: int) -> list[KafkaRecord]:
    """An envelope archive (keys, headers and timestamps kept), with offset gaps."""
    records = []
    for p in range(partitions):
        offset = 0
        for n in range(count):
            headers = [("trace", b"t%d" % n)] if n % 3 else None
            key = None if n % 7 == 3 else b"user-%d" % (n % 13)
            records.append(
                KafkaRecord(topic, p, offset, T0 + n, key, b'{"n":%d,"p":%d}' % (n, p), headers)
            )
            offset += 1 if n % 5 else 3
    config = SinkSettings.from_options(
        {
            "path": str(root),
            "flush.size": "50",
            "s3.compression.type": "blockgzip",
            "format.json.envelope": "true",
        }
    )
    for p in range(partitions):
        write_task(config, iter(arrow_batches([r for r in records if r.partition == p])))
    return records


def read_all(kafka, topic: str) -> dict[int, list]:
    from confluent_kafka import Consumer, TopicPartition

    ends = kafka.high_watermarks(topic)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "replay-check"})
    out: dict[int, list] = {}
    try:
        for partition, end in ends.items():
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < end:
                assert time.monotonic() < deadline, f"read {len(got)} of {end}"
                got += [m for m in consumer.consume(500, timeout=2) if m.error() is None]
            out[partition] = got
    finally:
        consumer.close()
    return out


def as_replayed(message) -> tuple:
    headers = [(k, v) for k, v in (message.headers() or []) if k != MARKER]
    return message.key(), message.value(), headers or None, message.timestamp()[1]


def expected_of(record: KafkaRecord) -> tuple:
    return record.key, record.value, record.headers, record.timestamp_ms


def run_replay(*args: str):
    result = CliRunner().invoke(main, ["replay", *args], catch_exceptions=False)
    return result


def test_a_range_is_restored_with_keys_headers_and_timestamps(kafka, tmp_path):
    records = archive_of(tmp_path, "orders", 2, 120)
    kafka.create_topic("orders-restored", partitions=2)
    result = run_replay(
        str(tmp_path), "--topic", "orders", "--to-topic", "orders-restored",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "replayed 240 records of orders into orders-restored" in result.stderr
    got = read_all(kafka, "orders-restored")
    for p in (0, 1):
        assert [as_replayed(m) for m in got[p]] == [
            expected_of(r) for r in records if r.partition == p
        ]
        markers = [dict(m.headers())[MARKER] for m in got[p]]
        assert markers == [b"orders/%d/%d" % (p, r.offset) for r in records if r.partition == p]


def test_an_offset_window_of_one_partition(kafka, tmp_path):
    records = archive_of(tmp_path, "win", 2, 80)
    kafka.create_topic("win-out", partitions=2)
    result = run_replay(
        str(tmp_path), "--topic", "win", "--partition", "1", "--from-offset", "20",
        "--to-offset", "40", "--to-topic", "win-out",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_all(kafka, "win-out")
    assert got[0] == []
    wanted = [r for r in records if r.partition == 1 and 20 <= r.offset < 40]
    assert [as_replayed(m) for m in got[1]] == [expected_of(r) for r in wanted]


def test_what_the_archive_did_not_keep_is_said_not_guessed(kafka, tmp_path, caplog):
    """A plain JSON archive kept values only: the replay sends them, and says in a warning per
    kind and in its summary that timestamps, keys and headers were not kept (an envelope
    archive, as in the other tests here, says nothing of the kind)."""
    records = [KafkaRecord("bare", 0, n, T0 + n, b"k", b'{"n":%d}' % n, None) for n in range(6)]
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "flush.size": "3", "store.kafka.timestamps": "false"}
    )  # values only, as exports wrote them before timestamps were kept by default
    write_task(config, iter(arrow_batches(records)))
    kafka.create_topic("bare-out", partitions=1)
    result = run_replay(
        str(tmp_path), "--topic", "bare", "--to-topic", "bare-out",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [w.split(", so")[0] for w in warned] == [
        "bare-0: the archive kept no record timestamps",
        "bare-0: the archive kept no record keys and headers",
    ]
    caplog.clear()
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.endswith("; without timestamps (the archive kept none); without keys and "
                            "headers (the archive kept none)"), summary  # fmt: skip
    assert [m.value() for m in read_all(kafka, "bare-out")[0]] == [r.value for r in records]

    enveloped = run_replay(
        str(tmp_path / "env"), "--topic", "kept", "--to-topic", "bare-out",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    ) if archive_of(tmp_path / "env", "kept", 1, 5) else None  # fmt: skip
    assert enveloped is not None and enveloped.exit_code == 0, enveloped.output
    assert "without" not in enveloped.stderr
    assert not [r for r in caplog.records if "kept no record" in r.getMessage()]


def test_by_key_spreads_records_as_kafka_would(kafka, tmp_path):
    records = archive_of(tmp_path, "keyed", 1, 90)
    kafka.create_topic("keyed-out", partitions=3)
    result = run_replay(
        str(tmp_path), "--topic", "keyed", "--to-topic", "keyed-out", "--by-key",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_all(kafka, "keyed-out")
    for p, messages in got.items():
        for m in messages:
            source_offset = int(dict(m.headers())[MARKER].rsplit(b"/", 1)[1])
            expected = source_offset % 3 if m.key() is None else kafka_partition(m.key(), 3)
            assert p == expected
    assert sum(len(m) for m in got.values()) == len(records)


def test_a_killed_replay_resumes_without_duplicates(kafka, tmp_path):
    records = archive_of(tmp_path, "killed", 1, 400)
    kafka.create_topic("killed-out", partitions=1)
    command = [  # takes 150 records, then blocks: the kill always lands mid-way
        sys.executable, "-m", "testkit.capped_cli", "150",
        "replay", str(tmp_path), "--topic", "killed",
        "--to-topic", "killed-out", "--bootstrap-servers", kafka.bootstrap_servers,
        "-O", "kafka.batch.num.messages=1", "-O", "kafka.linger.ms=0",
        "-O", "kafka.queue.buffering.max.messages=20",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while kafka.high_watermarks("killed-out")[0] < 100:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the replay delivered nothing in 60 s"
        time.sleep(0.05)  # polling the broker with a deadline
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    delivered = kafka.high_watermarks("killed-out")[0]
    assert 100 <= delivered <= 150 < len(records), "the cap did not hold the run mid-way"
    result = run_replay(
        str(tmp_path), "--topic", "killed", "--to-topic", "killed-out",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_all(kafka, "killed-out")[0]
    assert [as_replayed(m) for m in got] == [expected_of(r) for r in records]
    assert "were there already" in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--to-topic", "same"], ["is the topic the archive holds", "--allow-same-topic"]),
        (["--to-topic", "nowhere"], ["does not exist"]),
        (["--to-topic", "narrow"], ["has 1 partitions", "--by-key"]),
        (
            ["--to-topic", "tight", "--by-key", "-O", "kafka.message.timeout.ms=5"],
            ["producer settings (-O kafka.*) were refused", "linger.ms"],
        ),
    ],
)
def test_refusals_say_why(kafka, tmp_path, args, words):
    archive_of(tmp_path, "same", 2, 10)
    for topic in {"narrow", "tight"} & set(args):
        kafka.create_topic(topic, partitions=1)
    result = run_replay(
        str(tmp_path), "--topic", "same", "--bootstrap-servers", kafka.bootstrap_servers, *args
    )
    assert result.exit_code == 1
    for word in words:
        assert word in result.stderr


def test_a_spark_replay_runs_one_task_per_partition(spark, kafka, tmp_path):
    from blockgz.reader.restore.send import SendSettings
    from blockgz.reader.restore.spark_send import send_on_spark

    records = archive_of(tmp_path, "sparky", 3, 60)
    kafka.create_topic("sparky-out", partitions=3)
    settings = SendSettings(
        topic="sparky",
        to_topic="sparky-out",
        producer={
            "bootstrap.servers": kafka.bootstrap_servers,
            "batch.num.messages": 1,
            "linger.ms": 0,
        },
    )
    [result] = send_on_spark(spark, str(tmp_path), {}, [settings])
    assert result.sent == {0: 60, 1: 60, 2: 60}
    got = read_all(kafka, "sparky-out")
    for p in range(3):
        assert [as_replayed(m) for m in got[p]] == [
            expected_of(r) for r in records if r.partition == p
        ]
    [again] = send_on_spark(spark, str(tmp_path), {}, [settings])  # a rerun: nothing twice
    assert again.sent == {0: 0, 1: 0, 2: 0} and again.skipped == {0: 60, 1: 60, 2: 60}


def test_records_the_broker_never_took_fail_the_replay_and_say_so(kafka, tmp_path):
    """Only failures are reported back (``delivery.report.only.error``): a record that
    expires in the producer (a 2 ms ``message.timeout.ms``) must still end the run
    with an error that says how many failed, never with a silent success."""
    archive_of(tmp_path, "late", 1, 200)
    kafka.create_topic("late-out", partitions=1)
    result = run_replay(
        str(tmp_path), "--topic", "late", "--to-topic", "late-out",
        "--bootstrap-servers", kafka.bootstrap_servers,
        "-O", "kafka.message.timeout.ms=2", "-O", "kafka.linger.ms=1",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "records failed" in result.stderr and "Run it again" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_replay_with_master_runs_on_a_standalone_cluster(spark_cluster, kafka, tmp_path):
    """``blockgz replay --master spark://…``: the CLI's own session on a real cluster (master,
    worker, executor JVMs apart from the driver); every partition restored once, in order."""
    records = archive_of(tmp_path / "archive", "clustered", 2, 90)
    kafka.create_topic("clustered-out", partitions=2)
    done = subprocess.run(
        [
            sys.executable, "-m", "blockgz.cli", "replay", str(tmp_path / "archive"),
            "--topic", "clustered", "--to-topic", "clustered-out",
            "--bootstrap-servers", kafka.bootstrap_servers,
            "--master", spark_cluster.master_url, *EXACT,
        ],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "replayed 180 records of clustered into clustered-out" in done.stderr
    got = read_all(kafka, "clustered-out")
    for p in (0, 1):
        assert [as_replayed(m) for m in got[p]] == [
            expected_of(r) for r in records if r.partition == p
        ]
