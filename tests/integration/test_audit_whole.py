"""Issue 41, "one audit", on Apache Kafka + SeaweedFS: a real export, then damage done the way
it happens in real buckets, then what ``audit``, ``verify``, the readers and ``restore`` say.

* (6) another topic's object put in ``topics/orders/partition=0/``: ``audit`` and ``verify
  --topic orders`` exit 2 naming it; blockgz's Spark reader does not count its rows;
* (7) one deleted manifest: ``audit`` prints one line naming it and exits 2; ``seek``,
  ``records()`` and ``restore --dry-run`` fail naming it instead of silently losing its
  records; ``audit --repair`` re-commits its objects and everything reads again;
* (10) ``verify --topic`` with a deleted object exits 2, checks the companions (timestamps
  files) and names every bad sidecar, not just the first;
* (4) an object and its sidecar swapped for a same-size object of another partition: a plain
  ``audit`` (SeaweedFS keeps each object's CRC-32) and ``audit --deep`` name it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.errors import ArchiveIntegrityError, MissingCommitError
from blockgz.reader import open_archive
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from blockgz.written.sidecars import sidecar_key
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

PER_PARTITION = 60


@dataclass
class Exported:
    """A finished export of ``topics`` (2 partitions, 60 records each) into ``url``."""

    url: str
    options: dict[str, str]
    topics: list[str]
    name: str
    kafka: object

    @property
    def store(self):
        return open_store(self.url, self.options)[0]

    def flags(self) -> list[str]:
        return [a for k, v in self.options.items() for a in ("-O", f"{k}={v}")]

    def cli(self, *args: str):
        """``blockgz <args[0]> <url> <flags> <args[1:]>`` through click."""
        result = CliRunner().invoke(main, [args[0], self.url, *self.flags(), *args[1:]])
        assert "Traceback" not in result.output, result.output
        return result

    def key(self, topic: str, partition: int, start: int) -> str:
        return f"topics/{topic}/partition={partition}/{topic}+{partition}+{start:010d}.json.gz"

    def manifests(self) -> list[str]:
        prefix = f"_blockgz/{self.name}/manifests/"
        return sorted(info.key for info in self.store.list(prefix))


def _value(topic: str, p: int, n: int) -> bytes:
    return b'{"topic":"%s","p":%d,"n":"%03d"}' % (topic.encode(), p, n)


@pytest.fixture
def exported(spark, kafka, s3_server, bucket, tmp_path) -> Exported:
    """``orders_*`` and ``pay_*``: 2 partitions of 60 records, exported in batches of 40
    records (3 manifests), block-GZIP objects of 10 records, each with its timestamps file."""
    run = uuid.uuid4().hex[:6]
    topics = [f"orders_{run}", f"pay_{run}"]
    for topic in topics:
        kafka.create_topic(topic, partitions=2)
        for p in (0, 1):
            records = [(b"k%d" % n, _value(topic, p, n)) for n in range(PER_PARTITION)]
            kafka.produce(topic, records, partition=p)
    options = s3_options(s3_server.endpoint_url)
    name = f"whole-{run}"
    job = ExportSettings.from_mapping(
        {
            "name": name,
            "topics": ",".join(topics),
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            "flush.size": "10",
            "s3.compression.type": "blockgzip",
            "maxOffsetsPerTrigger": "80",
            **options,
        }
    )
    run_export(job, checkpoint=tmp_path / "ckpt", once=True, spark=spark,
               install_signal_handlers=False)  # fmt: skip
    done = Exported(f"s3://{bucket}", options, topics, name, kafka)
    assert len(done.manifests()) >= 3
    assert done.cli("audit", "--deep").exit_code == 0
    return done


def _damage_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("damage: ")]


# -- 6. a foreign object ---------------------------------------------------------------------------
def test_another_topics_object_in_the_folder_is_named_and_not_counted(spark, exported):
    orders, pay = exported.topics
    store = exported.store
    foreign = f"topics/{orders}/partition=0/{pay}+0+0000000000.json.gz"
    store.put(foreign, store.get(exported.key(pay, 0, 0)))
    store.put(sidecar_key(foreign), store.get(sidecar_key(exported.key(pay, 0, 0))))

    result = exported.cli("audit", "--topic", orders)
    assert result.exit_code == 2, result.output
    (line,) = _damage_lines(result.stdout)
    assert line.startswith(f"damage: {orders}-0 {foreign}: is {pay}-0's object (by its name)")

    result = exported.cli("verify", "--topic", orders)
    assert result.exit_code == 2, result.output
    assert any(foreign in line for line in _damage_lines(result.stderr))

    frame = spark.read.format("blockgz").options(**exported.options).load(exported.url)
    rows = frame.where(f"topic = '{orders}'").select("partition", "value").collect()
    assert len(rows) == 2 * PER_PARTITION
    assert not [r for r in rows if pay.encode() in bytes(r.value)]


# -- 7. a deleted manifest -------------------------------------------------------------------------
def test_a_deleted_manifest_is_one_line_readers_refuse_and_repair_recommits(exported):
    orders, _ = exported.topics
    store = exported.store
    first = exported.manifests()[0]
    store.delete(first)  # the batch that committed offsets 0.. of every partition

    result = exported.cli("audit")
    assert result.exit_code == 2, result.output
    (line,) = _damage_lines(result.stdout)
    assert line.startswith(f"damage: {first}: the manifest is gone from the job's sequence")
    assert not [x for x in result.stdout.splitlines() if x.startswith("warning: ")]

    seek = exported.cli("seek", "--topic", orders, "--partition", "0", "--offset", "0")
    assert seek.exit_code != 0 and first in seek.output and "missing commit" in seek.output
    with (
        open_archive(exported.url, exported.options) as archive,
        pytest.raises(MissingCommitError, match=first),
    ):
        list(archive.records(orders))
    brokers = ["--bootstrap-servers", exported.kafka.bootstrap_servers]
    dry = exported.cli("restore", orders, "--suffix", "_out", "--dry-run", *brokers)
    assert dry.exit_code != 0 and first in dry.output, dry.output

    repaired = exported.cli("audit", "--repair")
    assert "repaired: re-committed" in repaired.stdout, repaired.output
    assert first in exported.manifests()
    again = exported.cli("audit", "--deep")
    assert again.exit_code == 0, again.output
    seek = exported.cli("seek", "--topic", orders, "--partition", "0", "--offset", "0",
                        "--count", "1")  # fmt: skip
    assert seek.exit_code == 0 and seek.stdout_bytes == _value(orders, 0, 0) + b"\n"
    with open_archive(exported.url, exported.options) as archive:
        assert sorted((p, r.offset) for p, r in archive.records(orders)) == [
            (p, n) for p in (0, 1) for n in range(PER_PARTITION)
        ]
    dry = exported.cli("restore", orders, "--suffix", "_out", "--dry-run", "--output", "json",
                       *brokers)  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["records"] == 2 * PER_PARTITION


# -- 10. verify --topic ---------------------------------------------------------------------------
def test_verify_names_a_deleted_object_and_every_bad_sidecar(exported):
    orders, _ = exported.topics
    store = exported.store
    store.delete(exported.key(orders, 0, 10))
    listed = [info.key for info in store.list(f"topics/{orders}/partition=1/")]
    assert not [k for k in listed if ".timestamps." in k]  # kept in the sidecars (issue 44)
    tampered = [exported.key(orders, 1, 30), exported.key(orders, 1, 50)]
    for key in tampered:  # a changed time range: records of a window would be skipped
        doc = json.loads(store.get(sidecar_key(key)))
        doc["chunks"][0]["min_timestamp"] -= 60_000
        store.put(sidecar_key(key), json.dumps(doc).encode())

    result = exported.cli("verify", "--topic", orders)
    assert result.exit_code == 2, result.output
    damage = _damage_lines(result.stderr)
    assert len(damage) == 3, result.stderr
    assert any(exported.key(orders, 0, 10) in x and "it is gone" in x for x in damage)
    for key in tampered:
        assert any(key in x and "its sidecar" in x for x in damage)


# -- 4. a swapped object ---------------------------------------------------------------------------
def test_a_swapped_object_is_caught_by_audit_and_audit_deep(exported):
    orders, _ = exported.topics
    store = exported.store
    sizes = {
        (p, info.key.rsplit("+", 1)[1]): info.size
        for p in (0, 1)
        for info in store.list(f"topics/{orders}/partition={p}/")
        if not info.key.rsplit("/", 1)[1].startswith(".")
    }
    same = [name for (p, name), size in sizes.items() if p == 0 and sizes.get((1, name)) == size]
    assert same, sizes  # values differ by one digit: some objects compress to the same size
    start = int(same[0].split(".")[0])
    mine, theirs = exported.key(orders, 0, start), exported.key(orders, 1, start)
    store.put(mine, store.get(theirs))
    store.put(sidecar_key(mine), store.get(sidecar_key(theirs)))

    for deep in ((), ("--deep",)):
        result = exported.cli("audit", *deep)
        assert result.exit_code == 2, result.output
        assert any(mine in x for x in _damage_lines(result.stdout)), result.stdout
    with (
        open_archive(exported.url, exported.options) as archive,
        pytest.raises(ArchiveIntegrityError) as exc,
    ):
        list(archive.seek(orders, 0, start))
    assert f"{orders}+0+{start:010d}" in str(exc.value)  # the object's, or its sidecar's, key
