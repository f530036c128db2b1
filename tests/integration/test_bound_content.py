"""Issue 41, situations 4 and 5: a reader trusts only what the manifests committed (Apache Kafka,
SeaweedFS, a real export).

4. An object and its sidecar replaced by a same-size object of another partition: ``seek``
   (one line naming the key, exit 1, no traceback; by topic and partition, and by the
   object's URL), the library's ``records()``, the Spark reader and ``restore --dry-run``
   refuse with :class:`ArchiveIntegrityError` instead of serving partition 2's values under
   partition 1's offsets and keys.
5. A sidecar with one changed ``min_timestamp``: ``records(from_time=…, to_time=…)`` and
   ``restore --from-time … --to-time … --dry-run`` refuse instead of dropping the block's
   records from the window.

Both tampers leave sizes as they were, so only the checksums the manifests now commit (and the
sidecar's own ``"object"``) tell them apart.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.errors import ArchiveIntegrityError
from blockgz.reader import open_archive
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from blockgz.written.sidecars import sidecar_key
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

#: An hour ago (whole seconds): record ``n`` of each partition is stamped ``T0 + 10 n``.
T0 = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
RECORDS = 30
LETTERS = "abc"  # partition p's values say LETTERS[p]: the same length in every partition


def _produce(kafka, topic: str) -> None:
    """``RECORDS`` records per partition of 3, keyed, with a value of one length everywhere
    and explicit timestamps."""
    from confluent_kafka import Producer

    kafka.create_topic(topic, partitions=3)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    for p, letter in enumerate(LETTERS):
        for n in range(RECORDS):
            value = b'{"p":"%s","n":"%03d"}' % (letter.encode(), n)
            producer.produce(topic, value, b"k%03d" % n, partition=p, timestamp=T0 + 10 * n)
    assert producer.flush(30) == 0


@pytest.fixture
def exported(spark, kafka, seaweed_s3, weed_bucket, tmp_path):
    """A real export of a 3-partition topic to SeaweedFS (10 records an object, keys kept):
    ``(topic, archive url, S3 options, store)``."""
    topic = "bound_" + uuid.uuid4().hex[:8]
    _produce(kafka, topic)
    options = s3_options(seaweed_s3.endpoint_url)
    settings = {
        "name": "bound-job",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": weed_bucket,
        "flush.size": "10",
        "s3.compression.type": "blockgzip",
        "store.kafka.keys": "true",
        **options,
    }
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    run_export(ExportSettings.from_file(str(config)), checkpoint=tmp_path / "ckpt", once=True,
               spark=spark, install_signal_handlers=False)  # fmt: skip
    url = f"s3://{weed_bucket}"
    store, _ = open_store(url, options)
    return topic, url, options, store


def _object(topic: str, partition: int, start: int) -> str:
    return f"topics/{topic}/partition={partition}/{topic}+{partition}+{start:010d}.json.gz"


def _cli(endpoint_url: str, *args: str):
    flags = ["--endpoint-url", endpoint_url, "-O", "s3.region=us-east-1"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    return CliRunner(env=env).invoke(main, [args[0], *flags, *args[1:]])


def _refused(result, key: str, said: str = "committed") -> None:
    """A command's one-line refusal naming ``key`` and who ``said`` what it should be: exit 1,
    no traceback, no records."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and said in lines[0], result.stderr
    assert result.stdout == ""


def _restore_dry_run(url: str, endpoint_url: str, bootstrap: str, topic: str, *window: str):
    return _cli(endpoint_url, "restore", url, topic, "--suffix", "_out", "--dry-run",
                "--bootstrap-servers", bootstrap, *window)  # fmt: skip


def test_a_swapped_object_and_sidecar_are_refused_by_every_reader(
    exported, spark, kafka, seaweed_s3
):
    topic, url, options, store = exported
    mine, theirs = _object(topic, 1, 10), _object(topic, 2, 10)
    assert store.head(mine).size == store.head(theirs).size  # a same-size swap
    with open_archive(url, options) as archive:
        before = [(r.offset, r.key, r.value) for r in archive.seek(topic, 1, 12, count=3)]
    assert before[0] == (12, b"k012", b'{"p":"b","n":"012"}')
    for key in (theirs, sidecar_key(theirs)):
        store.put(key.replace("+2+", "+1+").replace("=2/", "=1/"), store.get(key))
    name = mine.rsplit("/", 1)[1].removesuffix(".gz")  # in the object's and the sidecar's key

    _refused(_cli(seaweed_s3.endpoint_url, "seek", "--topic", topic, "--partition", "1",
                  "--offset", "12", "--count", "3", url), name)  # fmt: skip
    # the object by its URL, no manifest at hand: its sidecar names partition 2's object
    by_url = _cli(seaweed_s3.endpoint_url, "seek", "--offset", "12", f"{url}/{mine}")
    _refused(by_url, name, said="its sidecar says")
    refusal = pytest.raises(ArchiveIntegrityError, match=re.escape(name))
    with open_archive(url, options) as archive, refusal:
        list(archive.records(topic, [1]))
    frame = spark.read.format("blockgz").options(**options).load(url)
    with pytest.raises(Exception, match=re.escape(name)):
        frame.where(f"topic = '{topic}' and partition = 1").collect()
    _refused(_restore_dry_run(url, seaweed_s3.endpoint_url, kafka.bootstrap_servers, topic), name)

    with open_archive(url, options) as archive:  # the other partitions still read
        assert len(list(archive.records(topic, [0, 2]))) == 2 * RECORDS


def test_an_object_swapped_under_its_own_sidecar_is_refused(exported, seaweed_s3):
    topic, url, options, store = exported
    mine, theirs = _object(topic, 1, 20), _object(topic, 2, 20)
    assert store.head(mine).size == store.head(theirs).size
    store.put(mine, store.get(theirs))  # the sidecar stays: its block CRC-32s tell
    with open_archive(url, options) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        list(archive.seek(topic, 1, 25, count=2))
    assert "block 0 crc32" in str(caught.value) and mine in str(caught.value)


def test_a_tampered_sidecar_time_is_refused_not_a_shorter_window(exported, kafka, seaweed_s3):
    topic, url, options, store = exported
    window = {"from_time": T0, "to_time": T0 + 150}  # records n < 15
    with open_archive(url, options) as archive:
        assert len(list(archive.records(topic, [0], **window))) == 15
    sidecar = sidecar_key(_object(topic, 0, 10))  # records 10..19, stamped T0+100..T0+190
    doc = json.loads(store.get(sidecar))
    assert doc["chunks"][0]["min_timestamp"] == T0 + 100
    doc["chunks"][0]["min_timestamp"] = T0 + 160  # "nothing before T0+160 here": 5 records gone
    store.put(sidecar, json.dumps(doc, separators=(",", ":")).encode() + b"\n")

    with open_archive(url, options) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        list(archive.records(topic, [0], **window))
    assert sidecar.rsplit("/", 1)[1] in str(caught.value)
    name = sidecar.rsplit("/", 1)[1]
    result = _restore_dry_run(url, seaweed_s3.endpoint_url, kafka.bootstrap_servers, topic,
                              "--from-time", str(T0), "--to-time", str(T0 + 150))  # fmt: skip
    _refused(result, name)
