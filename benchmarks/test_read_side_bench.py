"""The read side against Spark's own JSON reader and a plain producer loop, in one run.

* **Filtered read**: ``spark.read.format("blockgz")`` for 100 offsets of a 1 GiB (times
  ``BLOCKGZ_BENCH_SCALE``) archive — 8 block-GZIP objects of one topic-partition, Confluent's
  layout — against reading the same objects whole with ``spark.read.json`` (goal ≥ 50×
  faster, ≤ 2 blocks fetched per matching object); and the same at 1 GiB *stored* (~5.5 GB
  of JSON), the size S3 shows for the archive.
* **Full scan**: both readers parse every value into the same struct and sum a field (goal
  blockgz ≥ 1.0× ``spark.read.json``; its gzip objects are one task each, blockgz splits them
  by blocks).
* **Replay**: ``blockgz.reader.restore.send.send_records`` of 1M records (times the scale) into
  Apache Kafka 4.1 (one KRaft node) against a plain confluent-kafka producer loop over the same
  values held in memory (goal ≥ 0.7×), one broker for every run, a fresh topic per run, the
  order alternating between rounds.

* **On S3**: the filtered read of the 1 GiB stored archive and the full scan again with both
  readers on S3 — SeaweedFS behind the S3 benchmarks' proxy (+20 ms per request, 80 MB/s per
  connection): blockgz through its own store (``s3://``), ``spark.read.json`` through Hadoop's
  ``s3a://`` (``hadoop-aws`` from Maven Central, :mod:`benchmarks.read_s3`). Skipped when the
  jars cannot be fetched or SeaweedFS is missing.

Run: ``make bench-read`` (writes ``results/read_side.md``); ``-k s3`` for the S3 rows alone.
"""

from __future__ import annotations

import itertools
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks import read_s3, support
from benchmarks import report as rp
from testkit.s3 import s3_options

RESULTS_PATH = Path(__file__).with_name("results") / "read_side.md"
OBJECTS = 8
ROUNDS = 3
#: A million records: the idempotent producer's start-up (0.5 to 1 s before librdkafka has a
#: producer id, whoever produces) must not be most of what is timed.
REPLAY_RECORDS = max(5_000, int(1_000_000 * support.SCALE))
VALUE_SCHEMA = "user_id STRING, items BIGINT"
RESULTS: dict[str, object] = {}
S3_BUCKET = "bench-read"
#: Why ``spark.read.json`` cannot read ``s3a://`` here (``None`` when it can).
S3A: dict[str, str | None] = {"missing": None}


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, int]:
    """``topics/bench/partition=0/`` with 8 objects cut from the cached 1 GiB seek file's
    lines (block-GZIP, 1 MiB blocks); returns the root and the record count."""
    from blockgz.objects.compress import compress_file

    root = support.CACHE_DIR / f"read-archive-{support.SEEK_FILE_BYTES}"
    done = root / "done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        directory = root / "topics" / "bench" / "partition=0"
        directory.mkdir(parents=True)
        per_object = support.SEEK_FILE_BYTES // OBJECTS
        offset = 0
        for _ in range(OBJECTS):
            part = tmp_path_factory.mktemp("part") / "part.ndjson"
            support._replicate(support.corpus_path(), part, per_object)
            name = f"bench+0+{offset:010d}.json.gz"
            index = compress_file(part, directory / name, threads=2, first_offset=offset)
            offset += index.record_count
            part.unlink()
        done.write_text(str(offset))
    return root, int(done.read_text())


@pytest.fixture(scope="module")
def stored_archive() -> tuple[Path, int]:
    """The same layout at 1 GiB *stored* (times the scale): 8 objects, each the corpus
    written over and over until its compressed size reaches an eighth (~5.5 GB of JSON)."""
    from blockgz import BlockGzipUpload
    from blockgz.store import LocalStore

    stored = max(64 << 20, int((1 << 30) * support.SCALE))
    root = support.CACHE_DIR / f"read-archive-stored-{stored}"
    done = root / "done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        corpus = support.corpus_path().read_bytes()
        pieces = _line_aligned_pieces(corpus, len(corpus) // 16)  # ~2.5 MB stored each
        store, offset = LocalStore(root), 0
        for _ in range(OBJECTS):
            key = f"topics/bench/partition=0/bench+0+{offset:010d}.json.gz"
            with BlockGzipUpload(store, key, threads=2, first_offset=offset) as out:
                for piece in itertools.cycle(pieces):
                    if out.bytes_written >= stored // OBJECTS:
                        break
                    out.write_delimited(piece)
            offset += out.index.record_count
        done.write_text(str(offset))
    return root, int(done.read_text())


def _line_aligned_pieces(data: bytes, size: int) -> list[bytes]:
    """``data`` cut after the first newline past every ``size`` bytes."""
    pieces, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start + size)
        end = len(data) if end < 0 else end + 1
        pieces.append(data[start:end])
        start = end
    return pieces


@pytest.fixture(scope="module")
def spark():
    yield from read_s3.s3a_spark("blockgz-bench-read", S3A)


@dataclass
class S3Side:
    """SeaweedFS behind the S3 benchmarks' link (+20 ms per request, 80 MB/s per connection),
    with ``s3a`` pointed at the same proxy."""

    server: object
    proxy: object
    uploaded: dict[str, tuple[str, int]] = field(default_factory=dict)

    def archive(self, name: str, root: Path) -> tuple[str, int]:
        """``root`` uploaded under ``<name>/`` (once per run, straight to the server): the
        bucket path of its root and the bytes stored."""
        if name not in self.uploaded:
            started = time.perf_counter()
            stored = read_s3.upload_tree(self.server.client(), root, S3_BUCKET, f"{name}/")
            print(f"\nuploaded {name}: {stored:,} B in {time.perf_counter() - started:.1f} s")
            self.uploaded[name] = (f"{S3_BUCKET}/{name}", stored)
        return self.uploaded[name]

    def blockgz(self, spark, path: str, **options: str):
        """``format("blockgz")`` on ``s3://path`` through the proxy."""
        options = {**s3_options(self.proxy.endpoint_url), **options}
        return spark.read.format("blockgz").options(**options).load(f"s3://{path}")


@pytest.fixture(scope="module")
def s3(spark, s3):
    """The session's SeaweedFS (benchmarks/conftest.py's ``s3``, which this fixture overrides
    in this module) behind this module's link."""
    from benchmarks import s3_support as s3b
    from benchmarks.test_s3_bench import set_nagle
    from testkit.s3 import FaultProxy

    if S3A["missing"]:
        pytest.skip(f"no s3a for spark.read.json: {S3A['missing']}")
    server = s3
    with FaultProxy(
        server.endpoint_url, latency_s=s3b.LATENCY_S, bandwidth_bps=s3b.BANDWIDTH_BPS
    ) as proxy:
        set_nagle(proxy, enabled=False)
        server.client().create_bucket(Bucket=S3_BUCKET)
        read_s3.set_hadoop_conf(spark, read_s3.s3a_conf(proxy.endpoint_url))
        yield S3Side(server, proxy)


def _timed(fn, rounds: int = ROUNDS, *, warm_up: bool = True) -> tuple[list[float], object]:
    times, result = [], None
    if warm_up:
        fn()  # the first query of a kind pays for Spark's planning caches
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return times, result


def test_filtered_read_vs_spark_json(spark, archive, benchmark):
    root, total = archive
    middle = total // 2
    blockgz_df = (
        spark.read.format("blockgz")
        .load(str(root))
        .where(
            f"topic = 'bench' AND partition = 0 AND offset >= {middle} AND offset < {middle + 100}"
        )
    )
    json_df = _spark_json(spark, root)

    def filtered():
        return blockgz_df.select("offset").collect()

    def whole():
        return json_df.count()

    filtered_times, rows = _timed(filtered)
    assert [r.offset for r in rows] == list(range(middle, middle + 100))
    whole_times, count = _timed(whole, rounds=1)
    assert count == total
    blocks = _blocks_for(root, middle, middle + 99)
    RESULTS["filtered"] = (
        statistics.median(filtered_times),
        statistics.median(whole_times),
        blocks,
    )
    benchmark.pedantic(filtered, rounds=1, iterations=1)


def test_filtered_read_of_a_1gib_stored_archive(spark, stored_archive, benchmark):
    """The goal's "1 GiB archive" read as what S3 bills and ``aws s3 ls`` shows: stored
    bytes (the row above has 1 GiB of JSON, 210 MB stored)."""
    root, total = stored_archive
    middle = total // 2
    blockgz_df = (
        spark.read.format("blockgz")
        .load(str(root))
        .where(
            f"topic = 'bench' AND partition = 0 AND offset >= {middle} AND offset < {middle + 100}"
        )
    )
    filtered_times, rows = _timed(lambda: blockgz_df.select("offset").collect())
    assert [r.offset for r in rows] == list(range(middle, middle + 100))
    json_df = _spark_json(spark, root)
    started = time.perf_counter()
    assert json_df.count() == total
    whole = time.perf_counter() - started
    stored = sum(f.stat().st_size for f in root.rglob("*.json.gz"))
    RESULTS["filtered_stored"] = (statistics.median(filtered_times), whole, total, stored)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def _spark_json(spark, root: Path | str, schema=None):
    """Spark's JSON reader on the data objects (its glob leaves the sidecars out); ``root``
    a directory or an ``s3a://`` URL."""
    reader = spark.read.option("pathGlobFilter", "*.json.gz")
    if schema:
        reader = reader.schema(schema)
    return reader.json(f"{root}/topics/bench/partition=0")


def _blocks_for(root: Path, first: int, last: int) -> int:
    from blockgz.reader import open_archive
    from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan

    with open_archive(str(root)) as archive:
        splits = plan_scan(archive, ScanFilter().with_range("offset", low=first, high=last))
        return max(len(p.chunks) for s in splits for p in s.pieces)


def test_full_scan_vs_spark_json(spark, archive, benchmark):
    root, total = archive
    blockgz_df = spark.read.format("blockgz").option("value.schema", VALUE_SCHEMA).load(str(root))
    json_df = _spark_json(spark, root, VALUE_SCHEMA)

    def scan_blockgz():
        return blockgz_df.selectExpr("count(*) AS n", "sum(value.items) AS b").collect()[0]

    def scan_json():
        return json_df.selectExpr("count(*) AS n", "sum(items) AS b").collect()[0]

    blockgz_times, ours = _timed(scan_blockgz, rounds=2)
    json_times, theirs = _timed(scan_json, rounds=2)
    assert (ours.n, ours.b) == (theirs.n, theirs.b) and ours.n == total
    RESULTS["scan"] = (statistics.median(blockgz_times), statistics.median(json_times), total)
    print(f"\nfull scan: blockgz {blockgz_times} s, spark.read.json {json_times} s")
    benchmark.pedantic(scan_blockgz, rounds=1, iterations=1)


def _timed_s3(
    proxy, fn, rounds: int = ROUNDS, *, warm_up: bool = True
) -> tuple[list[float], object, tuple[int, int]]:
    """:func:`_timed`, plus the requests and response bytes of the last round at the proxy."""
    seen = (0, 0)

    def round_():
        nonlocal seen
        proxy.wait_idle(timeout_s=60)
        proxy.clear_log()
        result = fn()
        proxy.wait_idle(timeout_s=60)
        seen = (len(proxy.requests), sum(r.response_bytes for r in proxy.requests))
        return result

    times, result = _timed(round_, rounds, warm_up=warm_up)
    return times, result, seen


def _where_middle(df, total: int):
    middle = total // 2
    return middle, df.where(
        f"topic = 'bench' AND partition = 0 AND offset >= {middle} AND offset < {middle + 100}"
    )


def test_s3_filtered_read_of_a_1gib_stored_archive(spark, s3, stored_archive, benchmark):
    """The stored row with both readers on S3: blockgz through its store (boto3), Spark's JSON
    reader through ``s3a``, both through the same proxy. The whole read counts records with a
    schema taken from the corpus (no inference pass over S3 before the clock starts; a count
    parses no field either way)."""
    root, total = stored_archive
    path, stored = s3.archive("stored", root)
    middle, blockgz_df = _where_middle(s3.blockgz(spark, path), total)
    filtered_times, rows, filtered_io = _timed_s3(
        s3.proxy, lambda: blockgz_df.select("offset").collect()
    )
    assert [r.offset for r in rows] == list(range(middle, middle + 100))
    json_df = _spark_json(spark, f"s3a://{path}", _corpus_schema(spark))
    json_df.limit(1).collect()  # warm-up: s3a's first use loads the AWS SDK's classes
    whole_times, count, whole_io = _timed_s3(s3.proxy, json_df.count, rounds=1, warm_up=False)
    assert count == total
    print(
        f"\nS3 filtered read: blockgz {filtered_times} s, {filtered_io} (requests, bytes); "
        f"spark.read.json {whole_times} s, {whole_io}"
    )
    RESULTS["s3_filtered_stored"] = (
        statistics.median(filtered_times),
        statistics.median(whole_times),
        total,
        stored,
        filtered_io,
        whole_io,
    )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def _corpus_schema(spark):
    """The schema ``spark.read.json`` infers from the corpus's first 20,000 lines."""
    with support.corpus_path().open("rb") as f:
        lines = [line.decode() for line in itertools.islice(f, 20_000)]
    return spark.read.json(spark.sparkContext.parallelize(lines)).schema


def test_s3_full_scan_vs_spark_json(spark, s3, archive, benchmark):
    """The full scan with both readers on S3 (the 1 GiB-of-JSON archive, as the local row)."""
    root, total = archive
    path, _ = s3.archive("json", root)
    blockgz_df = s3.blockgz(spark, path, **{"value.schema": VALUE_SCHEMA})
    json_df = _spark_json(spark, f"s3a://{path}", VALUE_SCHEMA)

    def scan_blockgz():
        return blockgz_df.selectExpr("count(*) AS n", "sum(value.items) AS b").collect()[0]

    def scan_json():
        return json_df.selectExpr("count(*) AS n", "sum(items) AS b").collect()[0]

    blockgz_times, ours, ours_io = _timed_s3(s3.proxy, scan_blockgz, rounds=2)
    json_times, theirs, theirs_io = _timed_s3(s3.proxy, scan_json, rounds=2)
    assert (ours.n, ours.b) == (theirs.n, theirs.b) and ours.n == total
    RESULTS["s3_scan"] = (
        statistics.median(blockgz_times),
        statistics.median(json_times),
        total,
        ours_io,
        theirs_io,
    )
    print(f"\nS3 full scan: blockgz {blockgz_times} s, spark.read.json {json_times} s")
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


def test_replay_vs_producer_loop(tmp_path, benchmark, kafka):
    """One Apache Kafka broker for every run, each run into a topic of its own, after one
    untimed loop run: a new broker's first run pays for its warm-up (the producer-id
    coordinator loading, the JIT), 5.3-6.3 s against 2.9-3.6 s for the next five, with no
    slowdown as the log fills. (On Tansu each run needed a broker of its own: it kept topics
    in memory and slowed as it filled, 1.0 s on an empty broker and 2.0 s after five runs.)"""
    from confluent_kafka import Producer

    from blockgz.reader import open_archive
    from blockgz.reader.restore.send import SendSettings, send_records

    records = archived_records(tmp_path)
    producer_settings = LOOP_SETTINGS
    times: dict[str, list[float]] = {"replay": [], "loop": []}
    warm_up(kafka, records, "replay_out_warmup")
    for round_ in range(ROUNDS):
        for case in ("loop", "replay") if round_ % 2 == 0 else ("replay", "loop"):
            topic = f"replay_out_{case}_{round_}"
            kafka.create_topic(topic, partitions=1)
            started = time.perf_counter()
            if case == "loop":
                _producer_loop(Producer, kafka.bootstrap_servers, producer_settings, records, topic)
            else:
                settings = SendSettings(
                    topic="src",
                    to_topic=topic,
                    producer={"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20},
                )
                with open_archive(str(tmp_path)) as archive:
                    assert send_records(archive, settings).total_sent == len(records)
            times[case].append(time.perf_counter() - started)
            assert kafka.high_watermarks(topic) == {0: len(records)}
    print(f"\nreplay rounds: {times}")
    RESULTS["replay"] = (statistics.median(times["replay"]), statistics.median(times["loop"]))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


#: The producer loop's settings (the peer of replay and restore): idempotent, all acks.
LOOP_SETTINGS = {"linger.ms": 20, "acks": "all", "enable.idempotence": True}


def archived_records(root) -> list:
    """:data:`REPLAY_RECORDS` lines of the corpus as the records of ``src``-0, archived (block
    GZIP, 50,000 records an object) under the folder ``root``."""
    from blockgz.sink.records import KafkaRecord
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.batches import arrow_batches

    corpus = support.corpus_path().read_bytes().rstrip(b"\n").split(b"\n")
    lines = (corpus * (REPLAY_RECORDS // len(corpus) + 1))[:REPLAY_RECORDS]
    # Stamped as a producer stamps them (CreateTime, an hour ago: inside any retention)
    stamp = int(time.time() * 1000) - 3_600_000
    records = [
        KafkaRecord("src", 0, n, stamp + n // 1000, None, v, timestamp_type=0)
        for n, v in enumerate(lines)
    ]
    config = SinkSettings.from_options(
        {"path": str(root), "flush.size": "50000", "s3.compression.type": "blockgzip"}
    )
    write_task(config, iter(arrow_batches(records)))
    return records


def warm_up(kafka, records, topic: str) -> None:
    """One untimed producer loop into ``topic`` (a topic of the caller's own: the session's
    broker is shared), which a broker's first run pays its warm-up in."""
    from confluent_kafka import Producer

    kafka.create_topic(topic, partitions=1)
    _producer_loop(Producer, kafka.bootstrap_servers, LOOP_SETTINGS, records, topic)


def _producer_loop(
    producer_class, bootstrap: str, settings: dict, records, topic: str = "out"
) -> None:
    """The peer: values only, into partition 0 of ``topic``, as fast as the client takes them."""
    producer = producer_class({"bootstrap.servers": bootstrap, **settings})
    for record in records:
        while True:
            try:
                producer.produce(topic, value=record.value, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0


LOCAL_CASES = ("filtered", "filtered_stored", "scan", "replay")
S3_CASES = ("s3_filtered_stored", "s3_scan")


def test_replay_report_alone():
    """``-k replay``: the replay row alone, for quick runs."""
    if "replay" not in RESULTS or all(k in RESULTS for k in LOCAL_CASES):
        pytest.skip("the full report covers it")
    replay_s, loop_s = RESULTS["replay"]
    print(f"\nreplay {replay_s:.2f} s vs loop {loop_s:.2f} s: {loop_s / replay_s:.2f}x")


def test_s3_report_alone():
    """``-k s3``: the S3 rows alone (printed, not written)."""
    if not any(k in RESULTS for k in S3_CASES) or all(k in RESULTS for k in LOCAL_CASES):
        pytest.skip("the full report covers it")
    lines = [*_s3_head(), "", *rp.table(HEADER, _s3_rows()), "", *_s3_io_lines()]
    print("\n" + "\n".join(lines))


HEADER = ("case", "time", "ratio", "goal", "verdict")


def _s3_head() -> list[str]:
    from benchmarks import s3_support as s3b

    return [
        "- S3 rows: both readers on SeaweedFS (`weed mini`) behind the S3 benchmarks' proxy "
        f"(+{s3b.LATENCY_S * 1e3:.0f} ms per request, {s3b.BANDWIDTH_BPS / support.MB:,.0f} MB/s "
        "per connection): blockgz through its store (boto3, `s3://`), `spark.read.json` through "
        f"`s3a://` ({read_s3.HADOOP_AWS}, AWS SDK bundle on the driver's classpath)"
    ]


def _s3_rows() -> list[list[str]]:
    rows = []
    if "s3_filtered_stored" in RESULTS:
        ours, whole, total, stored, _, _ = RESULTS["s3_filtered_stored"]
        rows.append(
            ["**S3**: filtered read, 100 offsets (blockgz, `s3://`) vs whole read "
             "(spark.read.json, `s3a://`), 1 GiB stored: "
             f"{stored / 2**30:.2f} GiB of objects, {total:,} records",
             f"{ours:.2f} s vs {whole:.2f} s", f"{whole / ours:.0f}×", "≥ 50×",
             rp.verdict(whole / ours >= 50)]
        )  # fmt: skip
    if "s3_scan" in RESULTS:
        ours, theirs, total, _, _ = RESULTS["s3_scan"]
        rows.append(
            ["**S3**: full scan, JSON parsed (blockgz `s3://` vs spark.read.json `s3a://`), "
             f"{support.size_label(support.SEEK_FILE_BYTES)} of JSON",
             f"{ours:.2f} s vs {theirs:.2f} s", f"{theirs / ours:.2f}×", "≥ 1.0×",
             rp.verdict(theirs / ours >= 1.0)]
        )  # fmt: skip
    return rows


def _s3_io_lines() -> list[str]:
    """Requests and response bytes at the proxy in each S3 case's last timed round."""
    cases = []
    if "s3_filtered_stored" in RESULTS:
        *_, ours, whole = RESULTS["s3_filtered_stored"]
        cases += [("filtered read, blockgz", ours), ("whole read, spark.read.json", whole)]
    if "s3_scan" in RESULTS:
        *_, ours, theirs = RESULTS["s3_scan"]
        cases += [("full scan, blockgz", ours), ("full scan, spark.read.json", theirs)]
    if not cases:
        return []
    return [
        "At the proxy, last timed round of each S3 case:",
        "",
        *rp.table(
            ("S3 case", "requests", "response bytes"),
            [[name, f"{n:,}", f"{b:,}"] for name, (n, b) in cases],
        ),
    ]


def test_report():
    """The table with the goals, printed and written to ``results/read_side.md``."""
    if not all(k in RESULTS for k in LOCAL_CASES):
        pytest.skip("run the whole file: the report needs every case")
    filtered, whole, blocks = RESULTS["filtered"]
    stored_filtered, stored_whole, stored_total, stored_bytes = RESULTS["filtered_stored"]
    scan_ours, scan_json, total = RESULTS["scan"]
    replay_s, loop_s = RESULTS["replay"]
    rows = [
        ["filtered read, 100 offsets (blockgz) vs whole read (spark.read.json), "
         f"{support.size_label(support.SEEK_FILE_BYTES)} of JSON",
         f"{filtered:.2f} s vs {whole:.2f} s", f"{whole / filtered:.0f}×", "≥ 50×",
         rp.verdict(whole / filtered >= 50)],
        ["the same, 1 GiB stored: "
         f"{stored_bytes / 2**30:.2f} GiB of objects, {stored_total:,} records",
         f"{stored_filtered:.2f} s vs {stored_whole:.2f} s",
         f"{stored_whole / stored_filtered:.0f}×", "≥ 50×",
         rp.verdict(stored_whole / stored_filtered >= 50)],
        ["blocks fetched for the matching object", f"{blocks}", "", "≤ 2", rp.verdict(blocks <= 2)],
        ["full scan, JSON parsed (blockgz vs spark.read.json)",
         f"{scan_ours:.2f} s vs {scan_json:.2f} s", f"{scan_json / scan_ours:.2f}×", "≥ 1.0×",
         rp.verdict(scan_json / scan_ours >= 1.0)],
        [f"replay {REPLAY_RECORDS:,} records vs a producer loop",
         f"{replay_s:.2f} s vs {loop_s:.2f} s", f"{loop_s / replay_s:.2f}×", "≥ 0.7×",
         rp.verdict(loop_s / replay_s >= 0.7)],
        *_s3_rows(),
    ]  # fmt: skip
    lines = [
        "# blockgz: the read side against spark.read.json and a producer loop",
        "",
        f"- archive: {OBJECTS} block-GZIP objects, {support.size_label(support.SEEK_FILE_BYTES)} "
        f"of JSON lines, {total:,} records, one topic-partition, local files (**S3** rows: the "
        "same objects on S3); Spark local[2,3]",
        *(_s3_head() if any(k in RESULTS for k in S3_CASES) else []),
        "- replay: into Apache Kafka 4.1 (one KRaft node on loopback, log on local disk), one "
        f"broker for the {2 * ROUNDS} runs after an untimed loop run, a topic of one partition "
        "per run",
        f"- machine: {rp.machine_line()}",
        "",
        *rp.table(HEADER, rows),
    ]
    io = _s3_io_lines()
    lines += ["", *io] if io else []
    if not support.MEANINGFUL:
        lines.insert(1, "\n**Smoke-test scale: not meaningful.**\n")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    RESULTS_PATH.write_text(text)
