"""An audit on SeaweedFS skips the CRC-32 HEAD of every file whose listed ETag is the one its
export recorded (issue 44), and still HEADs (and reports) a file rewritten since, or one whose
manifest recorded no ETag."""

from __future__ import annotations

import json
from collections import Counter

from testkit import damage
from testkit.s3_requests import S3Call
from tests.integration.test_audit import Bucket, _key


def _operations(proxy) -> Counter:
    return Counter(S3Call.of(r).operation for r in proxy.requests)


def _manifest_files(archive: Bucket) -> list[dict]:
    docs = [json.loads(archive.store.get(k)) for k in archive.manifest_keys()]
    return [f for doc in docs for f in doc["files"]]


def test_a_fresh_archive_is_audited_without_a_head(seaweed_s3, weed_proxy, weed_bucket):
    archive = Bucket(weed_proxy.endpoint_url, weed_bucket)
    files = _manifest_files(archive)
    listed = {o.key: o.etag for o in archive.store.list("topics/")}
    assert len(files) == 18 and all(f["etag"] == listed[f["key"]] for f in files)
    weed_proxy.clear_log()
    assert archive.audit()[0] == 0
    assert _operations(weed_proxy)["HeadObject"] == 0


def test_a_rewritten_object_of_the_same_size_is_still_headed_and_reported(
    seaweed_s3, weed_proxy, weed_bucket
):
    archive = Bucket(weed_proxy.endpoint_url, weed_bucket)
    size = archive.store.head(_key(27, 1)).size
    damage.flip_byte(archive.store, _key(27, 1))
    assert archive.store.head(_key(27, 1)).size == size
    weed_proxy.clear_log()
    code, _, lines = archive.audit()
    assert (code, lines) == (2, [f"damage checksum_mismatch ev-1 27..33 {_key(27, 1)}"])
    heads = [S3Call.of(r) for r in weed_proxy.requests if S3Call.of(r).operation == "HeadObject"]
    assert [h.key for h in heads] == [_key(27, 1)]  # only the file whose ETag moved


def test_manifests_without_etags_head_every_file(seaweed_s3, weed_proxy, weed_bucket):
    archive = Bucket(weed_proxy.endpoint_url, weed_bucket)
    damage.forget_etags(archive.store, archive.manifest_keys())
    weed_proxy.clear_log()
    assert archive.audit()[0] == 0
    assert _operations(weed_proxy)["HeadObject"] == 18
