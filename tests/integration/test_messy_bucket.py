"""A messy bucket on a real S3 server (SeaweedFS): every reader path sees exactly one archive.

* Two hourly exports of the same topic in one bucket, under ``topics.dir=topics`` and
  ``topics.dir=withheaders`` with other job names: a reader given one ``topics.dir`` reads
  that archive only (before, the other export's catalog added its objects: every offset twice).
* One job run twice with other batch boundaries (a second export with a lost checkpoint, as
  archives written before blockgz resumed from the archive hold them): objects that overlap.
  Every reader returns each offset once; ``verify`` reports the overlaps.

Paths: ``blockgz seek``, ``cat`` and ``ls``, ``open_archive(...).records()`` (committed and
not), the Spark reader and ``blockgz replay`` into a real broker.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader import open_archive
from testkit.archives import export_batches, input_records
from testkit.s3 import s3_options

RECORDS = input_records(150)


@pytest.fixture(scope="module")
def messy(seaweed_s3):
    """``two-dirs/``: two exports, two topics.dirs; ``doubled/``: one job written twice."""
    import uuid

    bucket = "messy-" + uuid.uuid4().hex[:12]
    seaweed_s3.client().create_bucket(Bucket=bucket)
    options = s3_options(seaweed_s3.endpoint_url)
    root = f"s3://{bucket}"
    for job, topics_dir in (("plain", "topics"), ("envelope", "withheaders")):
        export_batches(
            f"{root}/two-dirs", RECORDS, "hourly", batches=6,
            **{"name": job, "topics.dir": topics_dir, "format.json.envelope": "true"}, **options,
        )  # fmt: skip
    for epoch, batches in (("e1", 10), ("e2", 7)):
        export_batches(
            f"{root}/doubled", RECORDS, "default", batches=batches,
            **{"blockgz.epoch": epoch, "format.json.envelope": "true"}, **options,
        )  # fmt: skip
    return root, options


def _expected(partition: int, start: int = 0) -> list[tuple[int, dict]]:
    """(offset, value) of the input from ``start`` on (values parsed: the envelope keeps JSON
    values as JSON, not as the bytes they came in)."""
    return [
        (r.offset, json.loads(r.value))
        for r in RECORDS
        if r.partition == partition and r.offset >= start
    ]


def _got(records) -> list[tuple[int, dict]]:
    return [(r.offset, json.loads(r.value)) for _, r in records]


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _option_args(options: dict[str, str], **more: str) -> list[str]:
    return [arg for k, v in {**options, **more}.items() for arg in ("-O", f"{k}={v}")]


@pytest.mark.parametrize("committed", ["true", "false"])
@pytest.mark.parametrize("topics_dir", ["topics", "withheaders"])
def test_records_of_one_topics_dir_are_that_archives_only(messy, topics_dir, committed):
    root, options = messy
    opts = {**options, "topics.dir": topics_dir, "committed": committed}
    with open_archive(f"{root}/two-dirs", opts) as archive:
        for partition in (0, 1):
            assert _got(archive.records("ev", [partition])) == _expected(partition)


def test_seek_with_a_topics_dir_prints_each_offset_once(messy):
    root, options = messy
    start = next(r.offset for r in RECORDS if r.partition == 0 and r.offset >= 50)
    result = _cli(
        "seek", f"{root}/two-dirs", "--topic", "ev", "--partition", "0", "--offset", str(start),
        "--count", "4", "--output", "json", *_option_args(options, **{"topics.dir": "withheaders"}),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    offsets = [json.loads(line)["offset"] for line in result.stdout.splitlines()]
    assert offsets == [o for o, _ in _expected(0, start)[:4]]


def test_ls_with_a_topics_dir_lists_that_archive_only(messy):
    root, options = messy
    result = _cli("ls", f"{root}/two-dirs", *_option_args(options, **{"topics.dir": "withheaders"}))
    assert result.exit_code == 0, result.output
    assert "withheaders/ev/" in result.stdout and "topics/ev/" not in result.stdout


def test_records_of_a_job_written_twice_return_each_offset_once(messy):
    root, options = messy
    with open_archive(f"{root}/doubled", options) as archive:
        from blockgz.reader.reading.overlaps import find_overlaps

        assert find_overlaps(archive.objects("ev", 0), archive.index)
        for partition in (0, 1):
            assert _got(archive.records("ev", [partition])) == _expected(partition)


def test_cat_of_a_job_written_twice_prints_each_offset_once(messy):
    root, options = messy
    result = _cli(
        "cat", f"{root}/doubled", "--topic", "ev", "--partition", "1", "--output", "json",
        *_option_args(options),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    offsets = [json.loads(line)["offset"] for line in result.stdout.splitlines()]
    assert offsets == [o for o, _ in _expected(1)]


@pytest.mark.parametrize(
    ("where", "extra"), [("two-dirs", {"topics.dir": "withheaders"}), ("doubled", {})]
)
def test_the_spark_reader_counts_each_record_once(spark, messy, where, extra):
    root, options = messy
    frame = spark.read.format("blockgz").options(**options, **extra).load(f"{root}/{where}")
    rows = frame.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (r.partition, r.offset) for r in RECORDS
    )


@pytest.mark.parametrize(
    ("where", "extra"), [("two-dirs", {"topics.dir": "withheaders"}), ("doubled", {})]
)
def test_replay_sends_each_record_once(kafka, messy, where, extra):
    from tests.integration.test_replay import EXACT, read_all

    root, options = messy
    target = f"messy-{where}"
    kafka.create_topic(target, partitions=2)
    result = _cli(
        "replay", f"{root}/{where}", "--topic", "ev", "--to-topic", target,
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
        *_option_args(options, **extra),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_all(kafka, target)
    for partition in (0, 1):
        assert [json.loads(m.value()) for m in got[partition]] == [
            v for _, v in _expected(partition)
        ]


def test_verify_reports_every_overlap_and_exits_1(messy):
    root, options = messy
    with open_archive(f"{root}/doubled", options) as archive:
        expected = archive.overlaps("ev")
    assert expected
    result = _cli("verify", f"{root}/doubled", "--topic", "ev", *_option_args(options))
    assert result.exit_code == 1, result.output
    # verify is the audit's engine here (manifests commit the topic): one warning per overlap
    lines = [line for line in result.output.splitlines() if "of these offsets that" in line]
    assert len(lines) == len(expected), result.output
    assert all(
        line.startswith("warning: ") and o.first.key in line and o.second.key in line
        for o, line in zip(expected, lines, strict=True)
    )


def test_ls_counts_the_overlaps(messy):
    root, options = messy
    result = _cli("ls", f"{root}/doubled", *_option_args(options))
    assert result.exit_code == 0, result.output
    assert "overlap: " in result.stdout and "overlaps (blockgz verify" in result.output


def test_verify_of_one_topics_dir_finds_no_overlap(messy):
    root, options = messy
    result = _cli(
        "verify", f"{root}/two-dirs", "--topic", "ev",
        *_option_args(options, **{"topics.dir": "withheaders"}),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "overlap" not in result.output
