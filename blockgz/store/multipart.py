"""A streaming S3 upload: parts go up in parallel while the caller keeps writing.

Memory, for a store with part size ``P`` and ``C = s3.upload.concurrency``:

    peak bytes  <=  sum over open uploads of min(bytes written, P)   (part being filled)
                  + C * P                                            (parts in flight)

The part being filled is a ``bytearray`` that grows with the data actually written, so a
small object costs its own size, not a reserved 25 MiB buffer (the elastic buffer of the
kafka-connect-storage-cloud fork). An object that never reaches ``P`` bytes is sent as
one PUT on close. Parts in flight are bounded store-wide by a semaphore: a writer that
fills a part while ``C`` are in flight waits (back-pressure) instead of buffering more.

S3 allows 10,000 parts; to stay under it the part size doubles every 1,000 parts, so a
25 MiB part size still reaches objects of many terabytes. Any failure aborts the
multipart upload, leaving no orphaned parts.

Every part carries its CRC-32 and the completion the whole object's (S3's full-object
``x-amz-checksum-crc32``), computed as the bytes are written: a server that keeps checksums
refuses a part or an object that arrived damaged, and answers a HEAD with the CRC
(:meth:`~blockgz.store.s3.S3Store.stored_crc32`). A server that refuses the checksum
arguments gets the upload without them.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from blockgz.blocks.checksum import block_crc32
from blockgz.errors import StoreError
from blockgz.store.base import Upload
from blockgz.store.digest import content_md5, crc32_header, etag_of
from blockgz.store.settings import MAX_PARTS

log = logging.getLogger("blockgz.store")
PARTS_PER_DOUBLING = 1_000


def part_size_for(part_number: int, base: int) -> int:
    """Size of part ``part_number`` (1-based): ``base``, doubling every 1,000 parts."""
    return base * 2 ** ((part_number - 1) // PARTS_PER_DOUBLING)


class MultipartUpload(Upload):
    """Write to one S3 object; :meth:`close` completes it, :meth:`abort` removes every part."""

    def __init__(self, store, key: str):
        self.key = key
        self._store = store
        self._settings = store.settings
        self._buf = bytearray()
        self._written = 0
        self._upload_id: str | None = None
        self._futures: list[Future] = []
        self._parts: dict[int, dict[str, str]] = {}
        self._parts_lock = threading.Lock()
        self._closed = False
        self._crc = 0
        #: Whether the parts and the completion carry S3 checksums (the store's choice at
        #: CreateMultipartUpload: off where the server refused them).
        self._checksums = False

    @property
    def bytes_written(self) -> int:
        return self._written

    @property
    def crc32(self) -> int:
        return self._crc

    @property
    def upload_id(self) -> str | None:
        return self._upload_id

    def write(self, data) -> int:
        if self._closed:
            raise StoreError(f"{self._store.url(self.key)}: write after close")
        self._raise_failed_part()
        n = len(data)
        self._buf += data
        self._written += n
        self._crc = block_crc32(data, self._crc)
        target = part_size_for(len(self._futures) + 1, self._settings.part_size)
        while len(self._buf) >= target:
            part = bytes(memoryview(self._buf)[:target])
            del self._buf[:target]
            self._submit_part(part)
            target = part_size_for(len(self._futures) + 1, self._settings.part_size)
        return n

    # -- parts -------------------------------------------------------------------------------
    def _start(self) -> None:
        store, key = self._store, self.key
        args = {"Bucket": store.bucket, "Key": key, **self._settings.write_args()}
        checksum = {"ChecksumAlgorithm": "CRC32", "ChecksumType": "FULL_OBJECT"}
        created, self._checksums = store.call_with_checksum(
            f"CreateMultipartUpload {store.url(key)}",
            lambda extra: store.client.create_multipart_upload(**args, **extra),
            checksum,
        )
        self._upload_id = created["UploadId"]
        log.debug("started multipart upload %s for %s", self._upload_id, store.url(key))

    def _submit_part(self, data: bytes) -> None:
        if self._upload_id is None:
            self._start()
        number = len(self._futures) + 1
        if number > MAX_PARTS:
            raise StoreError(f"{self._store.url(self.key)}: more than {MAX_PARTS} parts")
        self._store.part_slots.acquire()  # back-pressure: at most C parts in flight store-wide
        try:
            future = self._store.executor.submit(self._upload_part, number, data)
        except BaseException:
            self._store.part_slots.release()
            raise
        future.add_done_callback(lambda _: self._store.part_slots.release())
        self._futures.append(future)

    def _upload_part(self, number: int, data: bytes) -> None:
        store = self._store
        args = {
            "Bucket": store.bucket,
            "Key": self.key,
            "UploadId": self._upload_id,
            "PartNumber": number,
            "Body": data,
            **self._settings.sse_customer_args(),
        }
        if self._settings.send_digest:  # s3.send.digest: S3 refuses a part that does not match
            args["ContentMD5"] = content_md5(data)
        part: dict[str, str] = {}
        if self._checksums:  # the server checks the part, and keeps it for the whole-object CRC
            part["ChecksumCRC32"] = args["ChecksumCRC32"] = crc32_header(block_crc32(data))
        result = store.call(
            f"UploadPart {number} of {store.url(self.key)}",
            lambda: store.client.upload_part(**args),
        )
        with self._parts_lock:
            self._parts[number] = {"ETag": result["ETag"], **part}

    def _raise_failed_part(self) -> None:
        for future in self._futures:
            if future.done() and future.exception() is not None:
                self.abort()
                raise future.exception()  # type: ignore[misc]

    # -- finishing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Upload what is left and make the object visible (one PUT if it stayed small)."""
        if self._closed:
            return
        try:
            if self._upload_id is None:
                self.etag = self._store.put(self.key, bytes(self._buf))
            else:
                if self._buf or not self._futures:
                    self._submit_part(bytes(self._buf))
                for future in self._futures:
                    future.result()
                self._complete()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._buf = bytearray()

    def _complete(self) -> None:
        store = self._store
        parts = [{"PartNumber": n, **self._parts[n]} for n in sorted(self._parts)]
        whole = (
            {"ChecksumCRC32": crc32_header(self._crc), "ChecksumType": "FULL_OBJECT"}
            if self._checksums
            else {}
        )
        answer, _ = store.call_with_checksum(
            f"CompleteMultipartUpload {store.url(self.key)}",
            lambda extra: store.client.complete_multipart_upload(
                Bucket=store.bucket,
                Key=self.key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": parts},
                **self._settings.sse_customer_args(),  # SSE-C: AWS wants the key here too
                **extra,
            ),
            whole,
        )
        self.etag = etag_of(answer)

    def abort(self) -> None:
        """Cancel queued parts, wait for running ones, and abort the multipart upload."""
        if self._closed:
            return
        self._closed = True
        self._buf = bytearray()
        for future in self._futures:
            future.cancel()
        for future in self._futures:
            if not future.cancelled():
                future.exception()  # wait; errors are already being reported
        if self._upload_id is not None:
            store = self._store
            try:
                store.call(
                    f"AbortMultipartUpload {store.url(self.key)}",
                    lambda: store.client.abort_multipart_upload(
                        Bucket=store.bucket, Key=self.key, UploadId=self._upload_id
                    ),
                )
                log.warning("aborted multipart upload of %s", store.url(self.key))
            except Exception:
                log.exception(
                    "could not abort multipart upload %s of %s; an S3 lifecycle rule for "
                    "incomplete multipart uploads will remove its parts",
                    self._upload_id,
                    store.url(self.key),
                )
