"""The Kafka broker goes away under a running export and comes back with its data.

Clients reach Tansu through :class:`testkit.tcp_proxy.TcpProxy` (the broker advertises the
proxy's address). An outage closes every connection and resets new ones until it ends: what
the export sees of a broker restarting with its log kept. (A real restart is not possible with
Tansu 0.6 here; see the proxy's docstring.) The export must ride it out — the Kafka clients
retry — and end exactly once: every offset archived once, nothing skipped.
"""

from __future__ import annotations

import time
import uuid

import pytest

from blockgz.local_servers.kafka import LocalKafka
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.running_export import archived_offsets, committed, export_while, wait_until
from testkit.s3 import s3_options
from testkit.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

PER_PARTITION = 40  # produced before the outage, and again after it
PARTITIONS = 2
OUTAGE_S = 8.0


@pytest.fixture
def kafka_behind_proxy():
    reason = LocalKafka.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with TcpProxy("127.0.0.1", 0) as proxy, LocalKafka(advertised_port=proxy.port) as kafka:
        proxy.upstream = ("127.0.0.1", kafka.port)
        yield kafka, proxy


def test_a_broker_outage_mid_export_loses_and_repeats_nothing(
    spark, kafka_behind_proxy, s3_server, bucket, tmp_path
):
    kafka, proxy = kafka_behind_proxy
    topic = "outage_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=PARTITIONS)
    kafka.produce_bulk(topic, PER_PARTITION - 1, PARTITIONS)  # + a sentinel each: exact
    job = ExportSettings.from_mapping(
        {
            "name": "broker-outage",
            "kafka.bootstrap.servers": f"127.0.0.1:{proxy.port}",
            "topics": topic,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "10",
            "blockgz.trigger.interval": "1 second",
        }
    )
    before = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    after = dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == before, alive, "the first records")
        with proxy.outage():
            # The broker stays away for OUTAGE_S (eight trigger intervals), and the export
            # keeps trying: its connection attempts are reset meanwhile.
            back = time.monotonic() + OUTAGE_S
            wait_until(
                lambda: time.monotonic() > back and proxy.refused >= 5,
                alive,
                "the outage, with the export retrying",
            )
        kafka.produce_bulk(topic, PER_PARTITION - 1, PARTITIONS)
        wait_until(lambda: committed(job, topic) == after, alive, "the records after the outage")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    seen = archived_offsets(s3_server, bucket, topic)
    expected = {(p, o) for p in range(PARTITIONS) for o in range(2 * PER_PARTITION)}
    assert set(seen) == expected
    assert max(seen.values()) == 1
