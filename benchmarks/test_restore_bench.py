"""``blockgz restore`` against a plain confluent-kafka producer loop sending the same records.

The replay benchmark's setup (:func:`benchmarks.test_read_side_bench.test_replay_vs_producer_loop`):
1M records (times ``BLOCKGZ_BENCH_SCALE``) of the corpus in one archived partition, one Apache
Kafka 4.1 broker (one KRaft node) for every run, one untimed loop run first (a new broker's
first run pays for its warm-up), then rounds in alternating order. The restore's clock covers
what a user waits for: the plan from the archive (its index counts), the target topic created
and claimed, every record sent and flushed. Goal: ≥ 0.7× the loop's rate.

Run: ``python -m pytest benchmarks/test_restore_bench.py -s -p no:cacheprovider``.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.test_read_side_bench import (
    LOOP_SETTINGS,
    _producer_loop,
    archived_records,
    warm_up,
)

ROUNDS = 2


def test_restore_vs_producer_loop(tmp_path, kafka):
    from confluent_kafka import Producer

    from blockgz.reader import open_archive
    from blockgz.reader.restore.planning import plan_restore
    from blockgz.reader.restore.request import Rename, RestoreRequest
    from blockgz.reader.restore.restorer import RestoreSettings, restore

    records = archived_records(tmp_path)
    loop_settings = LOOP_SETTINGS
    times: dict[str, list[float]] = {"restore": [], "loop": []}
    warm_up(kafka, records, "restore_out_warmup")
    for round_ in range(ROUNDS):
        for case in ("loop", "restore") if round_ % 2 == 0 else ("restore", "loop"):
            topic = f"restore_out_{case}_{round_}"
            started = time.perf_counter()
            if case == "loop":
                kafka.create_topic(topic, partitions=1)  # the restore creates its own
                _producer_loop(Producer, kafka.bootstrap_servers, loop_settings, records, topic)
            else:
                request = RestoreRequest(topics=("src",), rename=Rename({"src": topic}))
                settings = RestoreSettings(
                    {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20}
                )
                with open_archive(str(tmp_path)) as archive:
                    plan = plan_restore(archive, request)
                    assert restore(archive, plan, settings).sent == len(records)
            times[case].append(time.perf_counter() - started)
            assert kafka.high_watermarks(topic) == {0: len(records)}
    restore_s, loop_s = statistics.median(times["restore"]), statistics.median(times["loop"])
    print(
        f"\nrestore rounds: {times}\nrestore {restore_s:.2f} s vs loop {loop_s:.2f} s "
        f"({len(records):,} records): {loop_s / restore_s:.2f}x (goal >= 0.7x)"
    )
