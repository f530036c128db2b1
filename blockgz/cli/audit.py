"""``blockgz audit``: is an export's archive complete and intact? Exit 0, 1 or 2.

The checks are :func:`blockgz.reader.audit.auditor.audit_job`'s; this module finds the jobs (a
config,
or every job under an archive URL), the brokers to ask about gaps, and prints one line per
finding (or JSON).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from blockgz.cli.app import collect_options, fail_cleanly, main, report_output, setting_option


@main.command()
@click.argument("target")
@click.option("--topic", "topics", multiple=True, help="Audit only this topic (repeatable).")
@click.option(
    "--deep",
    is_flag=True,
    help="Also read every object once and check every block (its checksum, or its gzip CRC) "
    "and the CRC-32 of all its bytes.",
)
@click.option(
    "--repair",
    is_flag=True,
    help="Rebuild missing or stale sidecars, re-commit a deleted manifest's objects that prove "
    "themselves, remove objects no manifest committed (not those a running export may be "
    "writing); say what cannot be repaired.",
)
@click.option(
    "--brokers",
    metavar="HOST:PORT,...",
    help="Kafka brokers to explain gaps with (a config names its own; an archive URL has none).",
)
@click.option("--no-kafka", is_flag=True, help="Leave the brokers alone: gaps stay unexplained.")
@setting_option(
    "Override a config setting (or give an S3/kafka.* setting to an archive URL), "
    "e.g. -O store.url=http://127.0.0.1:8333 (repeatable)."
)
@report_output
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Sidecars fetched and objects read at once.",
)
@fail_cleanly(status=2)
def audit(target, topics, deep, repair, brokers, no_kafka, options, output, threads) -> None:
    """Check that an export's archive is complete and intact; exit 0, 1 or 2.

    TARGET is the job's config (the file `blockgz export` takes) or an archive URL
    (s3://bucket/prefix, a directory): every job whose manifests are there is audited.

    Per topic-partition, from the catalog and one listing: every committed file (value
    objects, keys/headers/timestamps files) is there at its committed size and, where the
    server keeps one, with its committed CRC-32; its sidecar is the one committed (size,
    CRC-32, the object it names) and matches it (blocks, offsets, record count); the job's
    manifests have no hole (a deleted manifest is one line naming it); every offset from the
    first archived to the committed one is in exactly one object or in a gap the writer
    recorded or Kafka explains (retention, compaction, transaction markers: asked of the
    brokers when there are some; each explained gap is a note saying why); no two objects
    overlap; no object is left that no manifest committed, and none of another topic or
    partition sits in the folder. That costs one GET per sidecar, one HEAD per file where the
    server keeps CRC-32s, and no data; --deep reads every object once more and checks the
    CRC-32 of all its bytes.

    Exit status: 0 intact; 1 warnings (a missing or stale sidecar, a stray, an overlap, a gap
    nothing explains); 2 damage (committed records gone, truncated, corrupted or not the
    bytes committed, a deleted manifest, another topic's object in the folder) or an error.
    Each finding is one line: level, topic-partition, offsets, key, what.

    \b
    Examples:
      blockgz audit s3-sink.properties
      blockgz audit s3-sink.properties --deep --topic orders
      blockgz audit s3://bucket/exports --brokers kafka:9092 -O store.url=http://127.0.0.1:8333
      blockgz audit s3-sink.properties --repair
      blockgz audit s3-sink.json --no-kafka --output json | jq '.jobs[0].findings'
    """
    from blockgz.errors import ConfigError
    from blockgz.sink.jobconfig.config import ExportSettings
    from blockgz.sink.status.archive_jobs import archive_jobs

    overrides = collect_options(None, options)
    if brokers:
        overrides["kafka.bootstrap.servers"] = brokers
    if Path(target).is_file():
        jobs = [ExportSettings.from_file(target, overrides)]
        ask_kafka = not no_kafka
    elif "://" in target or Path(target).is_dir():
        found = overrides.get("kafka.bootstrap.servers")
        jobs = archive_jobs(target, overrides, bootstrap_servers=found or "none:0")
        ask_kafka = bool(found) and not no_kafka
        if not jobs:
            raise ConfigError(f"{target}: no export's manifests there")
    else:
        raise ConfigError(f"{target}: no such config file, and not an archive URL")
    reports = [_audit(job, topics, deep, repair, ask_kafka, threads) for job in jobs]
    audited = {t for r in reports for t in r.topics}
    missing = [t for t in topics if t not in audited]
    if missing:
        raise ConfigError(
            f"--topic {', '.join(missing)}: no export there committed anything of it "
            f"(committed: {', '.join(sorted(audited)) or 'nothing'})"
        )
    code = max(r.exit_code for r in reports)
    if output == "json":
        from blockgz.cli.json_text import dumps

        click.echo(dumps({"exit_code": code, "jobs": [r.to_dict() for r in reports]}, indent=2))
    else:
        for report in reports:
            _print(report)
    sys.exit(code)


def _audit(job, topics, deep: bool, repair: bool, ask_kafka: bool, threads: int):
    from blockgz.reader.audit.auditor import audit_job
    from blockgz.sink.export.audit_kafka import BrokerFacts

    store, prefix = job.sink.make_store()
    facts = BrokerFacts(job) if ask_kafka else None
    try:
        manifests = job.sink.manifest_log(store, prefix)
        return audit_job(
            manifests, topics=topics, deep=deep, do_repair=repair, kafka=facts, threads=threads
        )
    finally:
        if facts is not None:
            facts.close()
        store.close()


def _print(report) -> None:
    from blockgz.options import format_size
    from blockgz.reader.audit.findings import LEVELS

    how = "deep audit" if report.deep else "audit"
    kafka = f", gaps checked with {report.kafka}" if report.kafka else ", no brokers asked"
    click.echo(f"{how} of job {report.job}: {report.archive}{kafka}")
    worst: dict[tuple[str, int | None], int] = {}  # by partition: one pass over the findings
    for f in report.findings:
        worst[(f.topic, f.partition)] = max(f.level, worst.get((f.topic, f.partition), 0))
    for p in report.partitions:
        state = ("intact", "warning", "DAMAGE")[worst.get((p.topic, p.partition), 0)]
        span = "-" if p.first_offset is None else f"{p.first_offset}..{(p.committed or 0) - 1}"
        click.echo(
            f"  {p.topic}-{p.partition}: offsets {span}, committed {p.committed}, {p.objects} "
            f"objects, {p.records:,} records, {format_size(p.bytes)}: {state}"
        )
    for finding in report.findings:
        click.echo(finding.line())
    for line in report.repaired:
        click.echo(f"repair: {line}")
    counts = report.counts()
    found = ", ".join(f"{counts[name]} {name}{'s' if counts[name] != 1 else ''}"
                      for name in LEVELS.values())  # fmt: skip
    read = f", {format_size(report.bytes_read)} of objects read" if report.deep else ""
    click.echo(
        f"{len(report.partitions)} partitions, {report.objects} objects: {found}; "
        f"{report.requests}{read}; {report.seconds:.1f} s",
        err=True,
    )
