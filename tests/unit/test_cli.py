"""The blockgz command line, driven like a user would (CliRunner and a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.sample import events_bytes


@pytest.fixture
def events(tmp_path):
    path = tmp_path / "events.json"
    path.write_bytes(events_bytes(500))
    return path


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


def test_compress_seek_cat_verify(events):
    result = run("compress", events, "--block-size", "16KiB", "--first-offset", "100")
    assert result.exit_code == 0, result.output
    assert "500 records" in result.stderr
    gz = events.with_suffix(".json.gz")
    lines = events.read_bytes().splitlines()

    result = run("seek", "--offset", "342", "--count", "2", gz)
    assert result.stdout_bytes.splitlines() == lines[242:244]

    result = run(
        "seek",
        "--offset",
        "342",
        "--count",
        "1",
        "--output",
        "json",
        events.with_suffix(".json.index.json"),
    )
    assert json.loads(result.stdout) == {"offset": 342, "value": json.loads(lines[242])}

    assert run("cat", gz).stdout_bytes == events.read_bytes()
    result = run("verify", gz)
    assert result.exit_code == 0 and "ok" in result.stderr


def test_a_sidecar_path_names_its_object_under_the_hidden_or_the_old_name(events):
    run("compress", events, "--block-size", "16KiB")
    gz = events.with_suffix(".json.gz")
    hidden, old = gz.with_name(".events.json.index.json"), gz.with_name("events.json.index.json")
    assert hidden.exists() and not old.exists()
    line = events.read_bytes().splitlines()[7] + b"\n"
    for target in (hidden, old):  # the old name is still a way to say "this object"
        assert run("seek", "--offset", "7", "--count", "1", target).stdout_bytes == line
    hidden.rename(old)  # an archive written before sidecars were hidden
    for target in (gz, hidden, old):
        assert run("seek", "--offset", "7", "--count", "1", target).stdout_bytes == line
        result = run("verify", target)
        assert result.exit_code == 0 and ": ok," in result.stderr
    assert run("cat", old).stdout_bytes == events.read_bytes()


def test_verify_scan_reads_an_object_without_index_whole(events, tmp_path):
    import gzip

    gz = tmp_path / "plain.json.gz"
    gz.write_bytes(gzip.compress(events.read_bytes()))
    result = run("verify", gz)
    assert result.exit_code == 1 and "no index sidecar" in result.stderr
    result = run("verify", "--scan", gz)
    assert result.exit_code == 0, result.output
    assert f"{gz}: ok, read whole (no index), 500 records" in result.stderr
    gz.write_bytes(gzip.compress(events.read_bytes())[:-9])  # trailer cut off
    result = run("verify", "--scan", gz)
    assert result.exit_code == 1 and f"{gz}: cannot be read whole" in result.stderr


def test_verify_topic_names_every_object_and_every_problem(tmp_path):
    from blockgz.store import LocalStore
    from testkit.archives import build_partition

    build_partition(LocalStore(tmp_path), objects=3, records_per_object=40)
    folder = tmp_path / "topics/orders/partition=0"
    (folder / ".orders+0+0000000040.json.index.json").unlink()
    (folder / "orders+0+0000000080.json.gz.bak").write_bytes(b"vm")
    (folder / "orders+0+0000000081.json").write_bytes(b"plain\n")  # plain: read whole
    result = run("verify", "--topic", "orders", tmp_path)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert sum(": ok, " in line for line in lines) == 3  # two indexed, one plain
    assert any("orders+0+0000000040.json.gz: no index sidecar" in line for line in lines)
    assert any(line.startswith("stray: ") and line.count(".bak") == 1 for line in lines)
    assert "orders+0+0000000081.json: ok, read whole (plain, no index by design), 1 records" in (
        result.stderr
    )
    assert lines[-1] == "4 objects: 3 ok, 2 problem(s)"
    result = run("verify", "--topic", "orders", "--scan", tmp_path)
    assert (
        result.exit_code == 1 and result.stderr.splitlines()[-1] == "4 objects: 4 ok, 1 problem(s)"
    )


def test_compress_from_stdin_needs_output(events, tmp_path):
    assert run("compress", "-").exit_code == 2
    out = tmp_path / "stdin.json.gz"
    result = run("compress", "-", "-o", out, "--preset", "small", input=events.read_bytes())
    assert result.exit_code == 0, result.output
    assert run("cat", out).stdout_bytes == events.read_bytes()


def test_index_rebuilds_a_sidecar(events, tmp_path):
    import gzip

    gz = tmp_path / "plain.json.gz"
    gz.write_bytes(gzip.compress(events.read_bytes()))
    assert run("index", gz, "--first-offset", "9").exit_code == 0
    assert (
        run("seek", "--offset", "9", "--count", "1", gz).stdout_bytes
        == events.read_bytes().splitlines()[0] + b"\n"
    )


def test_errors_are_one_line_without_traceback(events, tmp_path):
    run("compress", events)
    gz = events.with_suffix(".json.gz")
    result = run("seek", "--offset", "100000", gz)
    assert result.exit_code == 1
    assert (
        result.stderr.strip() == f"error: {gz}: offset 100000 is past the end: last offset is 499"
    )
    assert "Traceback" not in result.output

    result = run("compress", events, "--block-size", "huge")
    assert result.exit_code == 2 and "KiB, MiB, GiB" in result.stderr

    raw = bytearray(gz.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    gz.write_bytes(bytes(raw))
    result = run("verify", gz)
    assert result.exit_code == 1 and "bad: " in result.stderr and "block 0" in result.stderr


def test_debug_shows_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "blockgz.cli",
            "--debug",
            "seek",
            "--offset",
            "1",
            str(tmp_path / "nope.gz"),
        ],
        capture_output=True,
        text=True,
    )
    assert (
        proc.returncode == 1 and "Traceback" in proc.stderr and "ObjectNotFoundError" in proc.stderr
    )


@pytest.mark.parametrize(
    "command", ["compress", "seek", "cat", "ls", "index", "verify", "export", "quickstart"]
)
def test_every_command_has_help_with_examples(command):
    result = run(command, "--help")
    assert result.exit_code == 0 and ("Examples:" in result.output or "Example:" in result.output)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("s3.compression.type=lz4", ["s3.compression.type", "none, gzip, blockgzip, zstd"]),
        ("partitioner.class=weekly", ["partitioner.class", "daily", "hourly"]),
        ("behavior.on.null.values=drop", ["fail, ignore, write"]),
        ("startingOffsets=newest", ["startingOffsets", "earliest, latest, s3"]),
        ("flush.szie=3", ["flush.szie", "did you mean flush.size?"]),
        ("flush.size=0", ["flush.size", "1 or more", "leave it out for no limit"]),
        ("timezone=Mars/Base", ["timezone", "a Java short id such as PST"]),
    ],
)
def test_export_config_errors_are_one_line_before_spark_starts(tmp_path, line, words):
    config = tmp_path / "bad.properties"
    config.write_text(
        "name=bad\ntopics=t\nkafka.bootstrap.servers=127.0.0.1:1\ns3.bucket.name=b\n" + line + "\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "blockgz.cli", "export", str(config), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    error_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(error_lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "SparkSession" not in proc.stderr
    assert len((proc.stdout + proc.stderr).strip().splitlines()) <= 3
    for word in words:
        assert word in error_lines[0]


# -- a user's first hour: nothing found is an error that says where it looked ------------------
def _export(root, topic="events", *, topics_dir="topics", path=None, partition=0):
    """A small export as the sink lays it out: objects, sidecars and one manifest."""
    from blockgz.archive.layout import Layout, default_partition
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.store import LocalStore
    from blockgz.written.files import WrittenFile
    from blockgz.written.sidecars import sidecar_key
    from blockgz.written.upload import BlockGzipUpload

    store, layout = LocalStore(root), Layout(topics_dir=topics_dir)
    directory = path or default_partition(partition)
    key = layout.data_key("", f"{topic}/{directory}", topic, partition, 0, ".json.gz")
    with BlockGzipUpload(store, key) as out:
        for n in range(10):
            out.write(b'{"n": %d}' % n, n)
    done = WrittenFile(
        key, topic, partition, directory, 0, 9, 10, out.bytes_written, 90, sidecar_key(key)
    )
    ManifestLog(store, "", layout, "job").write(0, files=[done], offsets={topic: {0: 10}})
    return store


def short_failure(*args) -> str:
    """Run the CLI; it must fail with exit 1 and at most 3 lines, and return the output."""
    import time

    started = time.monotonic()
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert time.monotonic() - started < 10
    lines = result.output.strip().splitlines()
    assert 1 <= len(lines) <= 3 and "Traceback" not in result.output, result.output
    return result.output


def test_verify_of_a_topic_that_is_not_there_fails_saying_where(tmp_path):
    _export(tmp_path)
    out = short_failure("verify", "--topic", "nonexistent", tmp_path)
    assert "no archived objects of topic 'nonexistent'" in out
    assert f"{tmp_path}/topics/nonexistent" in out and "topics.dir='topics'" in out


def test_cat_of_a_partition_with_no_objects_fails_saying_where(tmp_path):
    _export(tmp_path, path="country=DE")  # a field partitioner's directory
    out = short_failure("cat", "--topic", "events", "--partition", "1", tmp_path)
    assert "partition 1" in out and f"{tmp_path}/topics/events/partition=1" in out


def test_ls_learns_topics_dir_from_the_manifests(tmp_path):
    _export(tmp_path, topics_dir="bgz")
    result = run("ls", tmp_path)
    assert result.exit_code == 0, result.output
    assert "bgz/events/partition=0/events+0+0000000000.json.gz" in result.stdout
    assert (
        run(
            "seek",
            "--topic",
            "events",
            "--partition",
            "0",
            "--offset",
            "3",
            "--count",
            "1",
            tmp_path,
        ).stdout
        == '{"n": 3}\n'
    )


def test_ls_of_the_topics_dir_itself_hints_at_the_export_above(tmp_path):
    _export(tmp_path, topics_dir="bgz")
    out = short_failure("ls", tmp_path / "bgz")
    assert "no data objects" in out
    assert f"{tmp_path}/ holds export 'job' with topics.dir='bgz'" in out


def test_seek_scan_streams_a_plain_gzip_object(tmp_path):
    import gzip

    key = tmp_path / "events+0+0000000100.json.gz"
    key.write_bytes(gzip.compress(b"".join(b'{"n": %d}\n' % n for n in range(100, 110))))
    assert "no index sidecar" in short_failure("seek", "--offset", "105", key)
    result = run("seek", "--offset", "105", "--count", "2", "--scan", key)
    assert result.exit_code == 0 and result.stdout == '{"n": 105}\n{"n": 106}\n'
    assert "past the end" in short_failure("seek", "--offset", "500", "--scan", key)


# -- Avro objects ---------------------------------------------------------------------------------
AVRO_SCHEMA = {
    "type": "record",
    "name": "event",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "blob", "type": "bytes"},
    ],
}


def write_avro_archive(root, *, indexed: bool = True) -> list[str]:
    """Two Avro objects of topic t, partition 0 (offsets 0-49 and 50-99), small blocks."""
    from blockgz.formats.avro.upload import AvroUpload
    from blockgz.store import LocalStore

    store, keys = LocalStore(root), []
    for start in (0, 50):
        key = f"topics/t/partition=0/t+0+{start:010d}.avro"
        with AvroUpload(store, key, AVRO_SCHEMA, block_size=256, indexed=indexed) as out:
            for n in range(start, start + 50):
                out.write({"n": n, "at": 1_700_000_000_000 + n, "blob": b"\x00\x01"}, n)
        keys.append(key)
    return keys


def test_seek_cat_ls_verify_on_avro_objects(tmp_path):
    keys = write_avro_archive(tmp_path)
    result = run(
        "seek",
        "--offset",
        "48",
        "--count",
        "3",
        "--topic",
        "t",
        "--partition",
        "0",
        "--stats",
        tmp_path,
    )
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["n"] for d in docs] == [48, 49, 50]
    assert docs[0]["at"] == "2023-11-14T22:13:20.048000+00:00" and docs[0]["blob"] == "AAE="
    assert "ranged GET" in result.stderr

    result = run("seek", "--offset", "7", "--count", "1", "--output", "json", tmp_path / keys[0])
    assert json.loads(result.stdout)["offset"] == 7
    assert json.loads(result.stdout)["value"]["n"] == 7

    result = run("cat", tmp_path / keys[1])
    assert [json.loads(line)["n"] for line in result.stdout.splitlines()] == list(range(50, 100))
    result = run("cat", "--topic", "t", "--partition", "0", tmp_path)
    assert len(result.stdout.splitlines()) == 100

    result = run("ls", tmp_path)
    assert result.exit_code == 0 and "t+0+0000000050.avro" in result.stdout
    assert "no index" not in result.stdout
    result = run("verify", "--topic", "t", tmp_path)
    assert result.exit_code == 0 and result.stderr.count(": ok,") == 2


def test_avro_without_index_is_read_by_streaming(tmp_path):
    """Confluent's own Avro files (no sidecar) are read from the start of each object."""
    write_avro_archive(tmp_path, indexed=False)
    result = run(
        "seek", "--offset", "60", "--count", "2", "--topic", "t", "--partition", "0", tmp_path
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["n"] for line in result.stdout.splitlines()] == [60, 61]
    result = run("ls", tmp_path)
    assert "(no index)" in result.stdout


def test_one_avro_object_without_index_is_decoded_by_its_format(tmp_path):
    """seek --scan, cat and verify --scan of one object: its format (by its name) decodes it."""
    path = tmp_path / write_avro_archive(tmp_path, indexed=False)[1]
    result = run("seek", "--scan", "--offset", "98", path)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["n"] for line in result.stdout.splitlines()] == [98, 99]
    result = run("cat", path)
    assert [json.loads(line)["n"] for line in result.stdout.splitlines()] == list(range(50, 100))
    result = run("verify", "--scan", path)
    assert result.exit_code == 0 and "read whole (no index), 50 records" in result.stderr


def test_verify_names_a_corrupt_avro_block(tmp_path):
    keys = write_avro_archive(tmp_path)
    path = tmp_path / keys[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    result = run("verify", path)
    assert result.exit_code == 1
    assert "bad:" in result.stderr and "block" in result.stderr


@pytest.mark.parametrize("below", ["topics", "topics/events"])
def test_an_archive_opens_from_its_topics_directory_or_a_topic_directory(tmp_path, below):
    _export(tmp_path)
    result = run("seek", "--topic", "events", "--partition", "0", "--offset", "3", "--count", "1",
                 tmp_path / below)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == '{"n": 3}\n'
    assert "events+0+0000000000.json.gz" in run("ls", tmp_path / below).stdout


def test_json_output_gives_json_values_of_json_objects_and_strings_of_others(tmp_path):
    """--output json: the values of a JSON-format archive or object are JSON values (one per
    record, not escaped text); a bytearray object's values stay strings even when they look
    like JSON, and binary ones are value_base64. The format decides, not each record."""
    from blockgz.written.upload import BlockGzipUpload

    store = _export(tmp_path)
    archive = ["--topic", "events", "--partition", "0", tmp_path]
    for args in (["seek", "--offset", "3", "--count", "2"], ["cat"]):
        result = run(*args, "--output", "json", *archive)
        assert result.exit_code == 0, result.output
        docs = [json.loads(line) for line in result.stdout.splitlines()]
        assert docs[:2] == [
            {"offset": n, "value": {"n": n}}
            for n in range(docs[0]["offset"], docs[0]["offset"] + 2)
        ]
    key = "topics/events/partition=0/events+0+0000000000.json.gz"
    result = run("seek", "--offset", "9", "--output", "json", tmp_path / key)
    assert json.loads(result.stdout) == {"offset": 9, "value": {"n": 9}}
    with BlockGzipUpload(store, "raw/b+0+0000000000.bin.gz") as out:
        for value in (b'{"n": 0}', b"plain", b"\xff\x00"):
            out.write(value)
    for args in (["seek", "--offset", "0"], ["cat"]):
        result = run(*args, "--output", "json", tmp_path / "raw/b+0+0000000000.bin.gz")
        docs = [json.loads(line) for line in result.stdout.splitlines()]
        assert docs == [
            {"offset": 0, "value": '{"n": 0}'},
            {"offset": 1, "value": "plain"},
            {"offset": 2, "value_base64": "/wA="},
        ], args
    assert "JSON value itself" in run("seek", "--help").stdout
