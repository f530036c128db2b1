"""What a seek pays for reading only what was committed (issue 41): requests and time with the
checks of :mod:`blockgz.objects.committed` and without.

A committed read (``committed=true``, the default) of an archive with manifests now checks the
sidecar's bytes against the manifest's ``index_size``/``index_crc32`` and what it says against
the entry, each ranged GET's ``Content-Range`` size, and the CRC-32 of every whole block
fetched. "Without" is the same read with the manifest entries taken off the refs the catalog
gives (so no check runs): the code path of a reader before the checks.

The archive: one partition of ``--records`` JSON events (:func:`blockgz.sample.events`)
exported through the real write task in 4 batches (a manifest each, the catalog compacted),
blockgzip with the default block size (1 MiB of records), written to SeaweedFS. Seeks to random
offsets go through :class:`testkit.s3.FaultProxy`, which logs every request, with
``--latency-ms`` added to each (20: a round trip to S3 in the region; 0: loopback, where the
checks' CPU shows most). Cold:
a new ``open_archive`` per seek (listings, catalog, index, block); warm: one archive, its index
cached (the catalog segment and the ranged GET of the block). The modes alternate round by round::

    PYTHONPATH=. .venv/bin/python -m benchmarks.seek_checks --records 400000 --rounds 15
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

BUCKET = "seek-checks"
TOPIC = "ev"


def write_archive(url: str, options: dict[str, str], records: int) -> None:
    """``records`` records of ``ev``/0 through the real write task, 4 manifests."""
    from blockgz.sample import events
    from blockgz.sink.records import KafkaRecord
    from testkit.archives import export_batches

    rows = [
        KafkaRecord(TOPIC, 0, n, 1_700_000_000_000 + n, b"k%d" % n, value)
        for n, value in enumerate(events(records))
    ]
    export_batches(url, rows, "default", batches=4, every=2, **{
        "flush.size": str(records // 4), "s3.compression.block.records": "0",
        "store.kafka.timestamps": "true", **options,
    })  # fmt: skip


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Committed refs without their manifest entries: the reads run no check."""
    from blockgz.reader.reading import catalog_source

    real = catalog_source.refs_of

    def bare(files, layout):
        return [
            replace(r, committed=None,
                    companions=tuple(replace(c, committed=None) for c in r.companions))
            for r in real(files, layout)
        ]  # fmt: skip

    catalog_source.refs_of = bare
    try:
        yield
    finally:
        catalog_source.refs_of = real


def seek_once(archive, offset: int) -> bytes:
    record = next(archive.seek(TOPIC, 0, offset, count=1))
    assert record.offset == offset, (record.offset, offset)
    return record.value


def measure(url, options, proxy, offsets, rounds) -> dict[str, dict[str, list]]:
    """Per mode, the cold and warm seeks' seconds and request counts, modes interleaved."""
    from blockgz.reader import open_archive

    out = {mode: {"cold": [], "warm": [], "cold_requests": [], "warm_requests": []}
           for mode in ("checked", "unchecked")}  # fmt: skip
    warm = {}
    for mode in out:
        with unchecked() if mode == "unchecked" else contextlib.nullcontext():
            warm[mode] = open_archive(url, options)
            seek_once(warm[mode], offsets[0])  # listing, catalog and first index cached
    for n in range(rounds):
        offset = offsets[n % len(offsets)]
        for mode in out if n % 2 else reversed(list(out)):
            guard = unchecked() if mode == "unchecked" else contextlib.nullcontext()
            with guard:
                proxy.clear_log()
                started = time.perf_counter()
                with open_archive(url, options) as archive:
                    value = seek_once(archive, offset)
                out[mode]["cold"].append(time.perf_counter() - started)
                out[mode]["cold_requests"].append(_requests(proxy))
                seek_once(warm[mode], offset)  # this object's index cached
                proxy.clear_log()
                started = time.perf_counter()
                assert seek_once(warm[mode], offset) == value
                out[mode]["warm"].append(time.perf_counter() - started)
                out[mode]["warm_requests"].append(_requests(proxy))
    for archive in warm.values():
        archive.close()
    return out


def _requests(proxy) -> str:
    """``GET 3, LIST 1, ranged GET 1`` of the proxy's log."""
    kinds = Counter(
        "LIST" if "list-type" in r.query
        else "ranged GET" if r.header("range")
        else r.method
        for r in proxy.requests
    )  # fmt: skip
    return ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))


def cpu_costs(url: str, options: dict[str, str]) -> dict[str, float]:
    """Microseconds of the checks alone on this archive's first object: the sidecar's CRC and
    claims, and one block's CRC."""
    import timeit

    from blockgz.blocks.index import BlockIndex
    from blockgz.objects.committed import CommittedRanges, check_sidecar, check_sidecar_bytes
    from blockgz.reader import open_archive

    with open_archive(url, options) as archive:
        ref = archive.objects(TOPIC, 0)[0]
        entry = ref.committed
        data = archive.store.get(ref.index_key)
        index = BlockIndex.from_json(data)
        chunk = index.chunks[len(index.chunks) // 2]
        block = archive.store.get_range(ref.key, chunk.byte_offset, chunk.byte_end)
        ranges = CommittedRanges(archive.store, ref.key, entry.size, index.chunks)
        n = 200
        sidecar = timeit.timeit(lambda: check_sidecar_bytes("u", entry, data), number=n) / n
        claims = timeit.timeit(lambda: check_sidecar("u", "u", entry, index), number=n) / n
        crc = timeit.timeit(lambda: ranges.check_blocks(chunk.byte_offset, block), number=n) / n
    return {
        f"sidecar CRC-32 ({len(data) / 1e3:.0f} KB)": sidecar * 1e6,
        f"sidecar claims ({len(index.chunks)} chunks)": claims * 1e6,
        f"one block's CRC-32 ({len(block) / 1e3:.0f} KB)": crc * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[20.0, 0.0])
    args = parser.parse_args()

    from blockgz.local_servers.seaweed import SeaweedS3
    from testkit.s3 import FaultProxy, s3_options

    rng = random.Random(41)
    offsets = [rng.randrange(args.records) for _ in range(args.rounds)]
    with SeaweedS3() as s3:
        s3.client().create_bucket(Bucket=BUCKET)
        url = f"s3://{BUCKET}"
        started = time.perf_counter()
        write_archive(url, s3_options(s3.endpoint_url), args.records)
        print(f"archive: {args.records:,} records in {time.perf_counter() - started:.1f} s")
        for name, micros in cpu_costs(url, s3_options(s3.endpoint_url)).items():
            print(f"  {name}: {micros:.1f} µs")
        for latency in args.latency_ms:
            with FaultProxy(s3.endpoint_url, latency_s=latency / 1000) as proxy:
                options = s3_options(proxy.endpoint_url)
                results = measure(url, options, proxy, offsets, args.rounds)
            print(f"latency {latency:g} ms per request, {args.rounds} seeks each:")
            for mode, got in results.items():
                for kind in ("cold", "warm"):
                    seconds = got[kind]
                    print(
                        f"  {mode:9} {kind}: median {statistics.median(seconds) * 1e3:.2f} ms "
                        f"(min {min(seconds) * 1e3:.2f}); requests: "
                        f"{Counter(got[kind + '_requests']).most_common(1)[0][0]}"
                    )


if __name__ == "__main__":
    main()
