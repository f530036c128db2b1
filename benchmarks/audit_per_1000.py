"""``blockgz audit`` per 1,000 objects on SeaweedFS: requests and seconds, plain and ``--deep``.

An archive of 1,000 committed block-GZIP objects (2 partitions x 5,000 records, 10 records
each, 10 batches: 10 manifests), written by the sink's write task into a fresh SeaweedFS bucket
(``testkit.archives.export_batches``), audited 3 times each way by
:func:`blockgz.reader.audit.auditor.audit_job`; the median time and the requests of one run (the
store's own counters) are printed as one JSON line per mode.

Run it on this tree and on an older one to compare (the numbers in ``benchmarks/README.md``)::

    .venv/bin/python -m benchmarks.audit_per_1000
    # the same script in a worktree of another commit, its modules first on the path:
    git worktree add /tmp/base <commit> && cp benchmarks/audit_per_1000.py /tmp/base/benchmarks/
    cd /tmp/base && PYTHONPATH=<dir with a sitecustomize pointing blockgz at /tmp/base> \\
        /work/main/.venv/bin/python -m benchmarks.audit_per_1000

Loopback SeaweedFS: the times are CPU and loopback round trips, not a region's latency; the
request counts are what a real bucket would be asked.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

from blockgz.archive.layout import Layout
from blockgz.commits.manifest_log import ManifestLog
from blockgz.local_servers.seaweed import SeaweedS3
from blockgz.reader.audit.auditor import audit_job
from blockgz.sink.records import KafkaRecord
from blockgz.store import open_store
from testkit.archives import export_batches
from testkit.s3 import s3_options

PARTITIONS = 2
PER_PARTITION = 5_000
FLUSH = 10  # records per object: 1,000 objects
ROUNDS = 3


def _records() -> list[KafkaRecord]:
    return [
        KafkaRecord("ev", p, n, 1_700_000_000_000 + n, None, b'{"p":%d,"n":%d,"pad":"%s"}'
                    % (p, n, b"x" * 64))
        for p in range(PARTITIONS)
        for n in range(PER_PARTITION)
    ]  # fmt: skip


def _counts(store) -> dict[str, int]:
    r = store.requests
    return {"LIST": r.lists, "HEAD": r.heads, "GET": r.gets, "ranged GET": r.ranged_gets}


def _measure(log: ManifestLog, deep: bool) -> dict[str, object]:
    """Median seconds of :data:`ROUNDS` audits, and the requests of one."""
    times, requests, objects = [], {}, 0
    for _ in range(ROUNDS):
        before = _counts(log.store)
        started = time.perf_counter()
        report = audit_job(log, deep=deep)
        times.append(time.perf_counter() - started)
        assert report.exit_code == 0, [f.line() for f in report.findings][:5]
        after = _counts(log.store)
        requests = {k: after[k] - before[k] for k in after}
        objects = report.objects
    per = 1000 / objects
    return {
        "mode": "audit --deep" if deep else "audit",
        "objects": objects,
        "seconds": round(statistics.median(times), 3),
        "seconds_per_1000": round(statistics.median(times) * per, 3),
        "requests": requests,
        "requests_per_1000": {k: round(v * per) for k, v in requests.items()},
    }


def main() -> None:
    with SeaweedS3() as server:
        bucket = "audit-bench-" + uuid.uuid4().hex[:8]
        server.client().create_bucket(Bucket=bucket)
        options = s3_options(server.endpoint_url)
        url = f"s3://{bucket}"
        started = time.perf_counter()
        export_batches(url, _records(), "default", batches=10, every=100,
                       **{"flush.size": str(FLUSH)}, **options)  # fmt: skip
        written = time.perf_counter() - started
        store, prefix = open_store(url, options)
        log = ManifestLog(store, prefix, Layout(), "job")
        for deep in (False, True):
            result = _measure(log, deep)
            result["archive_written_s"] = round(written, 1)
            print(json.dumps(result))


if __name__ == "__main__":
    main()
