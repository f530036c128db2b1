"""``testkit.s3_requests`` names what boto3 sends to SeaweedFS, one call of each kind, as the
S3 bill benchmark (``benchmarks/test_s3_bill.py``) counts them on the wire."""

from __future__ import annotations

from testkit.s3_requests import TIER_FREE, TIER_GET, TIER_PUT, by_tier, calls_of


def test_every_kind_of_request_is_named_and_priced(s3_proxy, bucket):
    s3 = s3_proxy.client()
    s3.put_object(Bucket=bucket, Key="t/a+0.json.gz", Body=b"x" * 100)
    s3.head_object(Bucket=bucket, Key="t/a+0.json.gz")
    s3.get_object(Bucket=bucket, Key="t/a+0.json.gz")["Body"].read()
    s3.get_object(Bucket=bucket, Key="t/a+0.json.gz", Range="bytes=0-9")["Body"].read()
    s3.list_objects_v2(Bucket=bucket, Prefix="t/")
    s3.copy_object(Bucket=bucket, Key="t/b", CopySource={"Bucket": bucket, "Key": "t/a+0.json.gz"})
    upload = s3.create_multipart_upload(Bucket=bucket, Key="t/m")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="t/m", UploadId=upload, PartNumber=1, Body=b"y")
    s3.list_parts(Bucket=bucket, Key="t/m", UploadId=upload)
    s3.complete_multipart_upload(
        Bucket=bucket, Key="t/m", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )  # fmt: skip
    aborted = s3.create_multipart_upload(Bucket=bucket, Key="t/n")["UploadId"]
    s3.list_multipart_uploads(Bucket=bucket, Prefix="t/")
    s3.abort_multipart_upload(Bucket=bucket, Key="t/n", UploadId=aborted)
    s3.delete_object(Bucket=bucket, Key="t/b")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "t/m"}]})
    s3_proxy.wait_idle()

    calls = calls_of(s3_proxy.requests)
    assert [c.operation for c in calls] == [
        "PutObject", "HeadObject", "GetObject", "GetObject (range)", "ListObjects",
        "CopyObject", "CreateMultipartUpload", "UploadPart", "ListParts",
        "CompleteMultipartUpload", "CreateMultipartUpload", "ListMultipartUploads",
        "AbortMultipartUpload", "DeleteObject", "DeleteObjects",
    ]  # fmt: skip
    assert {c.bucket for c in calls} == {bucket}
    assert calls[0].key == "t/a+0.json.gz"  # percent-encoded on the wire, decoded here
    assert calls[4].key == "t/"  # a listing names its prefix
    assert by_tier(calls) == {TIER_PUT: 9, TIER_GET: 3, TIER_FREE: 3}
