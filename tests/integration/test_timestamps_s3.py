"""The record timestamps (``store.kafka.timestamps``, on by default) on a real S3 server
(SeaweedFS), counted at the server by the logging proxy. Since issue 44 they are kept in each
value object's ``.index.json`` sidecar: a seek, a time window and ``--output json`` read the
sidecar and the blocks only, the same requests as a raw seek. An archive written before
(``file``: a hidden timestamps file beside each value object) still reads: a seek never GETs
that file, a time window and ``--output json`` do.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader import open_archive
from blockgz.sink.write import companions
from testkit.archives import export_batches, input_records
from testkit.s3 import s3_options


def _gets(proxy) -> list[str]:
    """The keys of the GETs the server served (listings left out)."""
    return [
        unquote(r.path) for r in proxy.requests if r.method == "GET" and "list-type" not in r.query
    ]


def _stamps(paths: list[str]) -> list[str]:
    return [p for p in paths if ".timestamps." in p and ".index." not in p]


@pytest.fixture(params=["sidecar", "file"])
def kept_in(request, monkeypatch) -> str:
    """Where the export keeps the timestamps: the sidecar, or (as before issue 44) a file."""
    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", request.param == "sidecar")
    return request.param


def test_a_seek_gets_no_timestamps_file_and_a_time_window_does(weed_proxy, weed_bucket, kept_in):
    options = s3_options(weed_proxy.endpoint_url)
    files = 1 if kept_in == "file" else 0  # timestamps files a read with timestamps GETs
    records = input_records(300, partitions=1)
    url = f"s3://{weed_bucket}/arch"
    export_batches(
        url, records, "default", batches=3, **options, **{"store.kafka.timestamps": "true"}
    )
    target = records[150]

    weed_proxy.clear_log()
    with open_archive(url, options) as archive:
        got = list(archive.seek("ev", 0, target.offset, count=3))
    assert [r.offset for r in got] == [r.offset for r in records[150:153]]
    assert {r.timestamp for r in got} == {None}  # not asked for
    served = _gets(weed_proxy)
    assert served and _stamps(served) == [], served
    assert not any(".timestamps." in p for p in served)  # nor its sidecar

    weed_proxy.clear_log()
    low, high = target.timestamp_ms, target.timestamp_ms + 1
    with open_archive(url, options) as archive:
        window = list(archive.records("ev", [0], from_time=low, to_time=high))
    assert [(r.offset, r.timestamp) for _, r in window] == [(target.offset, target.timestamp_ms)]
    assert (len(_stamps(_gets(weed_proxy))) >= 1) == bool(files)

    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    where = ["--endpoint-url", weed_proxy.endpoint_url, "-O", "s3.region=us-east-1",
             "--offset", str(target.offset), "--count", "1", "--topic", "ev", "--partition", "0",
             url]  # fmt: skip
    weed_proxy.clear_log()
    raw = CliRunner(env=env).invoke(main, ["seek", *where])
    assert raw.exit_code == 0, raw.output
    assert raw.stdout_bytes == target.value + b"\n"
    raw_gets = _gets(weed_proxy)
    assert _stamps(raw_gets) == []
    weed_proxy.clear_log()
    as_json = CliRunner(env=env).invoke(main, ["seek", "--output", "json", *where])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["timestamp"] == target.timestamp_ms
    json_gets = _gets(weed_proxy)
    assert len(_stamps(json_gets)) == files
    # With the timestamps in the sidecar, a seek that prints them costs what a raw one does.
    assert len(json_gets) == len(raw_gets) + (2 * files if files else 0), (raw_gets, json_gets)


def test_the_spark_reader_gives_the_kept_timestamps(spark, weed_proxy, weed_bucket, kept_in):
    """blockgz's Spark reader over a default archive: the ``timestamp`` column comes from the
    sidecars (or, in an older archive, the hidden file beside the values, read with the
    blocks), and a filter on it keeps exactly the records stamped inside."""
    options = s3_options(weed_proxy.endpoint_url)
    records = input_records(200, partitions=1)
    url = f"s3://{weed_bucket}/arch"
    export_batches(
        url, records, "default", batches=2, **options, **{"store.kafka.timestamps": "true"}
    )
    frame = spark.read.format("blockgz").options(**options).load(url)
    rows = frame.select("offset", "timestamp").collect()
    got = {r.offset: int(r.timestamp.timestamp() * 1000) for r in rows}
    assert got == {r.offset: r.timestamp_ms for r in records}
    low = records[50].timestamp_ms
    inside = frame.where(f"timestamp >= timestamp_millis({low})").select("offset").collect()
    assert sorted(r.offset for r in inside) == sorted(
        r.offset for r in records if r.timestamp_ms >= low
    )
