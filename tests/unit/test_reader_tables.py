"""The reader for analytics code: whole topics with offset or time windows, Arrow and pandas."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit import archives
from testkit.archives import export_batches, input_records
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000


def envelope_archive(root, count: int = 40) -> list[KafkaRecord]:
    records = []
    for p in range(2):
        for n in range(count):
            headers = [("trace", b"%d" % n)] if n % 2 else None
            value = b'{"n":%d}' % n  # as the envelope writes it back
            records.append(
                KafkaRecord("ev", p, 10 + n * 2, T0 + n * 1000, b"k%d" % n, value, headers)
            )
    config = SinkSettings.from_options(
        {
            "path": str(root),
            "flush.size": "9",
            "s3.compression.type": "blockgzip",
            "format.json.envelope": "true",
        }
    )
    for p in range(2):
        write_task(config, iter(arrow_batches([r for r in records if r.partition == p])))
    return records


def test_read_arrow_gives_kafka_columns_with_what_the_archive_kept(tmp_path):
    records = envelope_archive(tmp_path)
    with open_archive(str(tmp_path)) as archive:
        table = archive.read_arrow("ev", 1, start=20, end=30)
    expected = [r for r in records if r.partition == 1 and 20 <= r.offset < 30]
    assert table.column_names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    assert table.column("offset").to_pylist() == [r.offset for r in expected]
    assert table.column("key").to_pylist() == [r.key for r in expected]
    assert table.column("value").to_pylist() == [r.value for r in expected]
    stamps = table.column("timestamp").cast("int64").to_pylist()
    assert stamps == [r.timestamp_ms * 1000 for r in expected]
    headers = table.column("headers").to_pylist()
    assert headers == [
        None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers]
        for r in expected
    ]
    assert set(table.column("partition").to_pylist()) == {1}


def test_to_pandas(tmp_path):
    envelope_archive(tmp_path)
    with open_archive(str(tmp_path)) as archive:
        frame = archive.to_pandas("ev", 0)
    assert len(frame) == 40 and frame["offset"].iloc[0] == 10


def test_records_of_a_whole_topic_with_offset_and_time_windows(tmp_path):
    records = envelope_archive(tmp_path)
    with open_archive(str(tmp_path)) as archive:
        assert archive.partitions("ev") == [0, 1]
        everything = [(p, r.offset) for p, r in archive.records("ev")]
        window = [(p, r.offset) for p, r in archive.records("ev", start=15, end=21)]
        timed = [
            (p, r.offset)
            for p, r in archive.records("ev", [1], from_time=T0 + 5000, to_time=T0 + 8000)
        ]
        past_the_end = list(archive.records("ev", start=10_000))
    assert everything == [(r.partition, r.offset) for r in records]
    assert window == [(p, o) for p in (0, 1) for o in (16, 18, 20)]
    assert timed == [(1, 20), (1, 22), (1, 24)]
    assert past_the_end == []


def test_times_are_iso_text_datetimes_or_epoch_ms(tmp_path):
    """ISO-8601 with Z or an offset, naive text and naive datetimes (UTC), aware datetimes and
    epoch ms all name the same window; anything else is a ConfigError naming the parameter."""
    import datetime as dt

    from blockgz.reader.restore.send import SendSettings

    envelope_archive(tmp_path)
    low = dt.datetime.fromtimestamp((T0 + 5000) / 1000, dt.UTC)
    high = low + dt.timedelta(seconds=3)
    forms = [
        (T0 + 5000, T0 + 8000),
        (low, high),
        (low.replace(tzinfo=None), high.replace(tzinfo=None)),
        (low.isoformat().replace("+00:00", "Z"), high.isoformat().replace("+00:00", "Z")),
        (low.astimezone(dt.timezone(dt.timedelta(hours=5))).isoformat(), high.isoformat()),
        (low.replace(tzinfo=None).isoformat(), str(T0 + 8000)),
    ]
    with open_archive(str(tmp_path)) as archive:
        for from_time, to_time in forms:
            got = [
                r.offset
                for _, r in archive.records("ev", [1], from_time=from_time, to_time=to_time)
            ]
            assert got == [20, 22, 24], (from_time, to_time)
            blocks = archive.record_blocks("ev", [1], from_time=from_time, to_time=to_time)
            assert [r.offset for _, block in blocks for r in block] == [20, 22, 24]
        for bad in ("yesterday", 1.5, True, dt.date(2025, 11, 20)):
            with pytest.raises(ConfigError, match=r"from_time=.*ISO-8601.*datetime.*epoch"):
                archive.records("ev", from_time=bad)  # at the call, not at the first record
        with pytest.raises(ConfigError, match=r"to_time=.*ISO-8601"):
            archive.record_blocks("ev", to_time="2025-13-01")
    settings = SendSettings("ev", "out", from_time=low, to_time="2023-11-14T22:13:28Z")
    assert (settings.from_time, settings.to_time) == (T0 + 5000, T0 + 8000)


def test_a_time_window_on_an_archive_without_timestamps_says_so(tmp_path):
    export_batches(str(tmp_path), input_records(30), "field", batches=2)
    with (
        open_archive(str(tmp_path)) as archive,
        pytest.raises(ConfigError, match="kept no record timestamps"),
    ):
        next(archive.records("ev", from_time=archives.T0))


def test_a_time_window_skips_objects_outside_it_by_the_catalog(tmp_path):
    """The manifests keep each file's time range: a window past every record reads no
    object, and one inside reads only objects that can hold it."""
    records = input_records(60)
    export_batches(str(tmp_path), records, "field", batches=3)
    last = max(r.timestamp_ms for r in records)
    with open_archive(str(tmp_path)) as archive:
        archive.objects("ev", 0)  # listing and catalog read
        before = archive.store.requests.summary()
        assert list(archive.records("ev", [0], from_time=last + 1)) == []
        assert archive.store.requests.summary() == before
        since = archives.T0 + 3 * archives.HOUR
        first, end = archive.offsets_in_time("ev", 0, since, None)
    late = [r.offset for r in records if r.partition == 0 and r.timestamp_ms >= since]
    assert first <= min(late) and end > max(late)


def test_records_of_a_field_partitioned_topic_come_in_offset_order(tmp_path):
    records = input_records(120)
    export_batches(str(tmp_path), records, "field", batches=5)
    with open_archive(str(tmp_path)) as archive:
        assert archive.partitions("ev") == [0, 1]
        got = [(p, r.offset, r.value) for p, r in archive.records("ev")]
    assert got == [(r.partition, r.offset, r.value) for r in records]


def test_a_warm_seek_is_one_ranged_get(tmp_path):
    envelope_archive(tmp_path, count=400)
    with open_archive(str(tmp_path)) as archive:
        list(archive.seek("ev", 0, 20, count=1))  # cold: listing and index
        before = archive.store.requests.summary()
        assert before.startswith("1 LIST, 1 GET, 1 ranged GET")
        counts = archive.store.requests
        lists, gets, ranged = counts.lists, counts.gets, counts.ranged_gets
        (record,) = archive.seek("ev", 0, 24, count=1)  # the same object: its index is cached
    assert record.offset == 24, before
    assert (counts.lists - lists, counts.gets - gets, counts.ranged_gets - ranged) == (0, 0, 1)


def test_a_time_window_fetches_only_the_blocks_its_index_places_in_it(tmp_path):
    """Each block's time range is in the index, so a window of 15 seconds inside a 300-second
    object fetches its 5 blocks (6 when the window straddles), not the 100: the first alone (the
    first record comes after one block), the neighbouring rest in one ranged read."""
    archives.seconds_archive(str(tmp_path), 300, block_records=3, start=T0)
    with open_archive(str(tmp_path)) as archive:
        archive.first_offset("ev", 0)
        chunks = archive.index(archive.objects("ev", 0)[0]).chunks  # listed and read apart
        counts = archive.store.requests

        def window(low_s: int, high_s: int) -> tuple[list[int], int, int]:
            gets, read = counts.ranged_gets, counts.bytes_read
            got = archive.records("ev", from_time=T0 + low_s * 1000, to_time=T0 + high_s * 1000)
            offsets = [r.offset for _, r in got]
            return offsets, counts.ranged_gets - gets, counts.bytes_read - read

        got, gets, read = window(30, 45)
        straddling, gets_straddling, read_straddling = window(31, 46)
    assert got == list(range(30, 45))
    assert (gets, read) == (2, sum(c.byte_length for c in chunks[10:15]))
    assert straddling == list(range(31, 46))
    assert (gets_straddling, read_straddling) == (2, sum(c.byte_length for c in chunks[10:16]))


def test_to_pandas_of_an_avro_archive_gives_a_column_per_field(tmp_path):
    """Avro values come out as columns (nested records as dicts), read into the newest
    writer schema: records written with V1 carry the default of V2's added field."""
    import datetime as dt

    from blockgz.archive.layout import Layout
    from blockgz.formats.avro.upload import AvroUpload
    from blockgz.store import LocalStore
    from testkit.avro_data import V1, V2, avro_value_for

    store = LocalStore(tmp_path)
    for start, schema in ((0, V1), (10, V2)):
        key = Layout().data_key("", "ev/partition=0", "ev", 0, start, ".avro")
        with AvroUpload(store, key, schema, block_size=256) as out:
            offsets = range(start, start + 10)
            out.write_many([avro_value_for(0, n, schema) for n in offsets], offsets)
    with open_archive(str(tmp_path)) as archive:
        frame = archive.to_pandas("ev", 0)
        table = archive.read_arrow("ev", 0, start=8, end=12)
    assert list(frame.columns) == [
        "key", "i", "p", "country", "user", "ts", "channel",
        "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    assert frame["offset"].tolist() == list(range(20)) and frame["i"].tolist() == list(range(20))
    assert frame["channel"].tolist() == ["web"] * 10 + ["app"] * 10
    assert frame["user"][3] == avro_value_for(0, 3)["user"]
    assert frame["ts"][3] == dt.datetime.fromtimestamp(avro_value_for(0, 3)["ts"] / 1000, dt.UTC)
    assert table.column("channel").to_pylist() == ["web", "web", "app", "app"]
    assert str(table.schema.field("user").type) == "struct<tier: int32, name: string>"


def test_an_end_offset_with_a_time_window_when_object_times_are_unknown(tmp_path):
    """Objects whose time ranges the listing does not tell give no offset bound from the
    window ((0, None)); the caller's end offset still holds (it once met None in min())."""
    envelope_archive(tmp_path)
    with open_archive(str(tmp_path)) as archive:
        assert archive.offsets_in_time("ev", 1, T0 + 5000, T0 + 8000) == (0, None)
        got = [
            r.offset
            for _, r in archive.records("ev", [1], end=23, from_time=T0 + 5000, to_time=T0 + 8000)
        ]
    assert got == [20, 22]
