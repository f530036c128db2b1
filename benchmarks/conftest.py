"""Fixtures of the benchmark suite and the end-of-session report.

Inputs are cached under ``.bench-cache/`` (keyed by size and by the record generator's
source), outputs go to one temporary directory on the same disk for every tool. The local
servers (Apache Kafka, SeaweedFS, the schema registry stand-in) are started once per session,
when a benchmark first asks for one, and shared: each benchmark names its own topics and
buckets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import file_report, support
from benchmarks import report as rp
from blockgz.blocks.index import BlockIndex
from blockgz.objects.compress import compress_file
from blockgz.written.sidecars import sidecar_key
from testkit.servers import running


def pytest_report_header(config) -> list[str]:
    note = "" if support.MEANINGFUL else "  (smoke-test scale: targets NOT meaningful)"
    return [
        f"blockgz benchmarks: BLOCKGZ_BENCH_SCALE={support.SCALE:g}, corpus "
        f"{support.CORPUS_BYTES / support.MB:,.1f} MB, seek file "
        f"{support.SEEK_FILE_BYTES / support.GiB:.2f} GiB{note}",
        f"machine: {rp.machine_line()}",
    ]


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The cached NDJSON corpus (~200 MB at scale 1)."""
    return support.corpus_path()


@pytest.fixture(scope="session")
def corpus_data(corpus: Path) -> bytes:
    return corpus.read_bytes()


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """Where every compressor writes its output: one directory, same disk for all."""
    return tmp_path_factory.mktemp("bench-out")


@pytest.fixture(scope="session")
def corpus_gz(corpus: Path, workdir: Path) -> Iterator[tuple[Path, BlockIndex]]:
    """The corpus as block-GZIP with the defaults (fast, 1 MiB): read benchmarks and block cuts."""
    path = workdir / "corpus-fast-1MiB.ndjson.gz"
    index = compress_file(corpus, path, threads=2)
    yield path, index
    support.remove(path, Path(sidecar_key(str(path))))


@pytest.fixture(scope="session")
def seek_file() -> Path:
    """The cached ~1 GiB block-GZIP file (the corpus written ~5 times over)."""
    return support.seek_file_path()


@pytest.fixture(scope="session")
def kafka() -> Iterator:
    """Apache Kafka 4.1 (one KRaft node, its own JVM) for every benchmark of the session."""
    from blockgz.local_servers.apache_kafka import ApacheKafka

    yield from running(ApacheKafka)


@pytest.fixture(scope="session")
def s3() -> Iterator:
    """SeaweedFS (``weed mini``), its own process: its CPU and memory stay out of this one."""
    from blockgz.local_servers.seaweed import SeaweedS3

    yield from running(SeaweedS3)


@pytest.fixture(scope="session")
def registry() -> Iterator:
    """The Schema Registry stand-in (a thread of this process)."""
    pytest.importorskip("avro", reason="the registry stand-in needs the avro package")
    from blockgz.local_servers import LocalSchemaRegistry

    with LocalSchemaRegistry() as server:
        yield server


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The file benchmarks' report, printed and written to ``results/latest.md`` (every run:
    a smoke run's report says at its top that its numbers are not meaningful)."""
    if not support.RESULTS:
        return
    text = file_report.render(support.RESULTS)
    rp.publish_report(config, "blockgz vs peers", text, support.RESULTS_PATH, written=True)
