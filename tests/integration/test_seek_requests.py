"""What a cold ``blockgz seek`` asks S3, counted on the wire (issue 44: "a seek costs at most 3
requests").

An archive written by the real write task and commit (:func:`testkit.archives.export_batches`)
on SeaweedFS, behind the logging proxy; each seek is a fresh ``blockgz seek --count 1`` command.
The prefix's heads document (``_blockgz/heads.json``) names the jobs and holds each one's head:
one GET, trusted as the record of the manifests it names, whether the job is named
(``-O name=job``) or not. A head that is behind the manifests, or missing, costs listings,
never a wrong record, and a manifest missing after the head is still a missing commit.
"""

from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from blockgz.commits.head import CatalogHead, head_key, write_head
from blockgz.errors import MissingCommitError
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord
from testkit.archives import export_batches
from testkit.s3 import s3_options
from testkit.s3_requests import S3Call, calls_of

RECORDS = 60  # one partition, offsets 0..59: 3 batches of 20 (4 of 15)
NAMED = ("-O", "name=job")
THREE = {"GetObject head": 1, "GetObject sidecar": 1, "GetObject (range) data": 1}


def _records() -> list[KafkaRecord]:
    return [KafkaRecord("ev", 0, n, 1_700_000_000_000 + n, None, b'{"n":%d}' % n)
            for n in range(RECORDS)]  # fmt: skip


@pytest.fixture
def archive(weed_proxy, weed_bucket):
    """``(url, options, the job's manifest log)``: 3 batches, no catalog root yet."""
    options = s3_options(weed_proxy.endpoint_url)
    url = f"s3://{weed_bucket}/arch"
    config = export_batches(url, _records(), "default", batches=3, every=100, **options)
    return url, options, config.manifest_log()


def _seek(proxy, url: str, options: dict[str, str], offset: int, *more: str) -> Counter[str]:
    """One cold ``blockgz seek --count 1``, its record checked; its requests by kind."""
    from blockgz.cli import main

    flags = [a for k, v in options.items() for a in ("-O", f"{k}={v}")]
    proxy.wait_idle(30)
    proxy.clear_log()
    args = ["seek", url, "--topic", "ev", "--partition", "0", "--offset", str(offset)]
    result = CliRunner().invoke(main, [*args, "--count", "1", *flags, *more])
    assert result.exit_code == 0, result.output
    assert result.stdout == f'{{"n":{offset}}}\n'
    proxy.wait_idle(30)
    return Counter(_kind(c) for c in calls_of(proxy.requests))


def _kind(call: S3Call) -> str:
    """``<operation> <what>``: head, manifest(s), jobs, sidecar, data, segment."""
    key = call.key
    if call.operation == "ListObjects":
        what = (
            "manifests"
            if key.endswith("/manifests/")
            else "jobs"
            if key.endswith("_blockgz/")
            else key
        )
    elif key.endswith(("/head.json", "/heads.json")):
        what = "head"
    elif "/manifests/" in key:
        what = "manifest"
    elif "/catalog/segments/" in key:
        what = "segment"
    else:
        what = "sidecar" if key.endswith(".index.json") else "data"
    return f"{call.operation} {what}" + (" (404)" if call.status == 404 else "")


def test_a_cold_seek_of_a_named_job_is_three_requests(archive, weed_proxy):
    url, options, _ = archive
    for offset in (0, 31, 59):  # in the first, the second and the last batch's objects
        assert _seek(weed_proxy, url, options, offset, *NAMED) == THREE


def test_a_cold_seek_without_the_job_name_is_three_requests_too(archive, weed_proxy):
    url, options, _ = archive
    for offset in (0, 42):  # the prefix's heads document names the job and holds its head
        assert _seek(weed_proxy, url, options, offset) == THREE


def test_a_second_job_under_the_prefix_is_named_by_the_heads_document(archive, weed_proxy):
    url, options, _ = archive
    other = [KafkaRecord("other", 0, n, 1_700_000_000_000 + n, None, b'{"o":%d}' % n)
             for n in range(10)]  # fmt: skip
    export_batches(url, other, "default", batches=2, every=100, name="job2", **options)
    # Both heads in one GET; the other job's head names no ev-0, and a head may be behind its
    # manifests, so that job's manifests after its head are listed (none: nothing is read).
    assert _seek(weed_proxy, url, options, 42) == {"ListObjects manifests": 1, **THREE}
    assert _seek(weed_proxy, url, options, 42, *NAMED) == THREE
    with open_archive(url, options) as reader:
        assert next(reader.seek("other", 0, 7, count=1)).value == b'{"o":7}'


def test_a_compacted_catalog_adds_the_segment_that_holds_the_offset(weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    url = f"s3://{weed_bucket}/arch"
    export_batches(url, _records(), "default", batches=4, every=2, **options)  # a root, no tail
    assert _seek(weed_proxy, url, options, 50, *NAMED) == {"GetObject segment": 1, **THREE}


def test_a_head_behind_the_manifests_is_caught_up_and_a_gap_after_it_is_refused(
    archive, weed_proxy
):
    url, options, log = archive
    keys, store = log.keys(), log.store
    bodies = [store.get(k) for k in keys]
    # As if the process died after the last manifest, before the head named it.
    write_head(log, CatalogHead(keys[1], tail=((keys[0], bodies[0]), (keys[1], bodies[1]))))
    assert _seek(weed_proxy, url, options, 10, *NAMED) == THREE  # inside the head
    past = _seek(weed_proxy, url, options, 50, *NAMED)  # past it: the manifests after it
    assert past == {"ListObjects manifests": 1, "GetObject manifest": 1, **THREE}, past
    with open_archive(url, {**options, "name": "job"}) as reader:  # to the end: through it
        assert [r.offset for r in reader.seek("ev", 0, 35)] == list(range(35, RECORDS))

    store.delete(keys[1])  # a hole after a head that stops at the first batch
    write_head(log, CatalogHead(keys[0], tail=((keys[0], bodies[0]),)))
    with open_archive(url, {**options, "name": "job"}) as reader:
        assert next(reader.seek("ev", 0, 5, count=1)).value == b'{"n":5}'  # the head's part
        with pytest.raises(MissingCommitError, match=r"00000000000000000001\.json"):
            next(reader.seek("ev", 0, 50, count=1))


def test_an_archive_without_a_head_is_read_by_listing(archive, weed_proxy):
    url, options, log = archive
    log.store.delete(head_key(log))  # as an archive written before heads
    calls = _seek(weed_proxy, url, options, 42, *NAMED)
    assert calls["GetObject head (404)"] == 1 and calls["ListObjects manifests"] == 1, calls
    assert calls["GetObject manifest"] == 3, calls  # every manifest: there is no root


def test_a_job_name_no_export_has_is_a_one_line_error_naming_the_jobs(archive):
    from blockgz.cli import main

    url, options, _ = archive
    flags = [a for k, v in {**options, "name": "jbo"}.items() for a in ("-O", f"{k}={v}")]
    args = ["seek", url, "--topic", "ev", "--partition", "0", "--offset", "3", *flags]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and result.stdout == "", result.output
    assert "name=jbo: no export job of that name" in result.output
    assert "the jobs there: job" in result.output and "Traceback" not in result.output
