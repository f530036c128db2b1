"""An audit on SeaweedFS skips the CRC-32 HEAD of every file whose listed ETag is the one its
export recorded (issue 44), and still HEADs (and reports) a file rewritten since, or one whose
manifest recorded no ETag."""

from __future__ import annotations

import json
import random
from collections import Counter

from blockgz.store import open_store
from blockgz.store.settings import MIB
from testkit import damage
from testkit.s3 import s3_options
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


def test_a_multipart_and_a_single_put_record_the_etag_the_listing_gives(seaweed_s3, weed_bucket):
    options = s3_options(seaweed_s3.endpoint_url, **{"s3.part.size": str(5 * MIB)})
    store, _ = open_store(f"s3://{weed_bucket}", options)
    payload = random.Random(2).randbytes(11 * MIB)
    with store.open_upload("big.bin") as big, store.open_upload("small.bin") as small:
        big.write(payload)
        small.write(payload[:100])
    assert big.upload_id is not None and small.upload_id is None  # multipart and one PUT
    listed = {o.key: o.etag for o in store.list("")}
    assert big.etag and small.etag and big.etag != small.etag
    assert listed == {"big.bin": big.etag, "small.bin": small.etag}
