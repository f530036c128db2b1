"""S3 failing under a running export: throttling, reset connections, a failed multipart commit.

A real ``blockgz export --once`` (its own JVM and Python workers) writes through the fault proxy
in front of SeaweedFS. 5 % of the PUTs (whole objects and multipart parts) answer 503 SlowDown,
1 % reset the connection (and one part's upload is reset whatever the draw), and the first
CompleteMultipartUpload fails. The objects are ~6 MB
of block-GZIP, so they go up as multipart uploads of 5 MiB parts. The job must finish, every
offset must be in S3 exactly once, every object must be listed by a manifest, and no multipart
upload may be left open.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import manifest_keys_of, read_exported
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
PARTITIONS, PER_PARTITION, FLUSH = 2, 15000, 5000
MIB = 1024 * 1024


def noisy_value(partition: int, i: int) -> bytes:
    """~2.4 KB of JSON that compresses to about half (random hex), numbered like the others."""
    noise = random.Random(partition * 1_000_003 + i).randbytes(1200).hex()
    return b'{"p": %d, "i": %d, "noise": "%s"}' % (partition, i, noise.encode())


def test_throttling_resets_and_a_failed_complete_leave_exactly_once_and_no_uploads(
    kafka, s3_server, s3_proxy, bucket, tmp_path
):
    topic = "s3-faults-" + bucket[-8:]
    kafka.create_topic(topic, partitions=PARTITIONS)
    kafka.produce_bulk(topic, PER_PARTITION - 1, PARTITIONS, noisy_value)  # + a sentinel each
    config = tmp_path / "job.properties"
    settings = {
        "name": "s3-faults",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_proxy.endpoint_url),
        "s3.compression.type": "blockgzip",
        "s3.part.size": str(5 * MIB),
        "flush.size": str(FLUSH),  # ~6 MB objects: two parts each
    }
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    s3_proxy.seed(12)
    s3_proxy.inject("503", times=1, method="POST", query_contains="uploadId")  # one Complete
    # At least one reset of a part whatever the draw (a run has only a few dozen PUTs).
    s3_proxy.inject("reset", times=1, method="PUT", query_contains="partNumber=2")
    s3_proxy.inject("503", times=None, method="PUT", probability=0.05)
    s3_proxy.inject("reset", times=None, method="PUT", probability=0.01 / 0.95)
    started = time.monotonic()
    done = subprocess.run(
        [BLOCKGZ, "export", str(config), "--once", "--checkpoint", str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **fake_aws_env()},
        check=False,
    )
    wall = time.monotonic() - started
    s3_proxy.clear_faults()
    assert done.returncode == 0, done.stderr[-3000:]

    requests = s3_proxy.requests
    parts = [r for r in requests if r.method == "PUT" and "partNumber=" in r.query]
    completes = [r for r in requests if r.method == "POST" and "uploadId=" in r.query]
    faulted = [r for r in requests if r.faulted]
    assert len({r.query for r in parts}) >= 2 * PARTITIONS, "the objects went up in parts"
    assert any(r.fault == "503" for r in completes), "a CompleteMultipartUpload failed"
    assert {r.fault for r in faulted} == {"503", "reset"}, "both kinds of fault fired"

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(PARTITIONS, PER_PARTITION)
    listed = manifest_keys_of(
        store, prefix, SinkSettings.from_options({"s3.bucket.name": bucket, "name": "s3-faults"})
    )
    assert exported.written == listed, "objects outside the manifests"
    uploads = s3_server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert uploads == [], "multipart uploads left open"
    print(
        f"\nS3 faults: {len(requests)} requests, {len(parts)} UploadPart, "
        f"{len(completes)} CompleteMultipartUpload; faulted 503: "
        f"{sum(r.fault == '503' for r in faulted)}, reset: "
        f"{sum(r.fault == 'reset' for r in faulted)}; export {wall:.1f} s"
    )
