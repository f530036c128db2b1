"""Deterministic, realistic JSON event records: the demo's data and the benchmarks' corpus.

The same seed always gives the same bytes, so benchmark runs compare like with like.

    >>> rec = next(iter(events(1)))
    >>> json.loads(rec)["event_type"] in dict(_EVENT_TYPES)
    True
    >>> events_bytes(3) == events_bytes(3)
    True
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from blockgz.times import iso_ms

SEED = 20240610
_EVENT_TYPES = (
    ("page_view", 40),
    ("click", 20),
    ("search", 10),
    ("add_to_cart", 8),
    ("checkout", 4),
    ("purchase", 3),
    ("login", 5),
    ("logout", 3),
    ("error", 2),
    ("signup", 2),
    ("share", 3),
)
_COUNTRIES = ("US", "DE", "FR", "GB", "JP", "BR", "IN", "CA", "AU", "ES", "IT", "NL", "SE", "MX")
_LOCALES = ("en-US", "de-DE", "fr-FR", "en-GB", "ja-JP", "pt-BR", "hi-IN", "es-ES", "it-IT")
_SEGMENTS = ("free", "trial", "pro", "enterprise", "churned")
_CITIES = ("Berlin", "Paris", "London", "Tokyo", "Austin", "Toronto", "Sydney", "Madrid", "Milan")
_BROWSERS = ("Chrome", "Firefox", "Safari", "Edge", "Opera", "SamsungBrowser")
_OSES = (
    "Windows NT 10.0; Win64; x64",
    "Macintosh; Intel Mac OS X 10_15_7",
    "X11; Linux x86_64",
    "iPhone; CPU iPhone OS 17_1 like Mac OS X",
    "Linux; Android 14; Pixel 8",
    "iPad; CPU OS 16_6 like Mac OS X",
)
_PATHS = ("/", "/search", "/product", "/cart", "/checkout", "/account", "/help", "/blog/post")
_QUERIES = ("running shoes", "usb c cable", "coffee grinder", "desk lamp", "yoga mat", "headphones")
_ERRORS = ("timeout contacting payment gateway", "cart item out of stock", "invalid coupon code")
_CAMPAIGNS = ("spring_sale", "newsletter", "retargeting", "brand", "affiliate")


def _user_agent(rng: random.Random) -> str:
    browser = rng.choice(_BROWSERS)
    major = rng.randint(90, 125)
    return (
        f"Mozilla/5.0 ({rng.choice(_OSES)}) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"{browser}/{major}.0.{rng.randint(1000, 6000)}.{rng.randint(10, 200)} Safari/537.36"
    )


def _event(rng: random.Random, n: int, base_ms: int, types: list[str], weights: list[int]) -> dict:
    event_type = rng.choices(types, weights)[0]
    ts = base_ms + n * 37 + rng.randint(0, 36)
    user = int(rng.paretovariate(1.2) * 1000) % 5_000_000
    path = rng.choice(_PATHS)
    event = {
        "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "event_type": event_type,
        "ts": ts,
        "ts_iso": iso_ms(ts),
        "user_id": f"u{user:08d}",
        "session_id": f"s{rng.getrandbits(48):012x}",
        "country": rng.choice(_COUNTRIES),
        "locale": rng.choice(_LOCALES),
        "segment": rng.choice(_SEGMENTS),
        "city": rng.choice(_CITIES),
        "ip": ".".join(str(rng.randint(1, 254)) for _ in range(4)),
        "user_agent": _user_agent(rng),
        "url": f"https://shop.example.com{path}?utm_source={rng.choice(_CAMPAIGNS)}"
        f"&utm_medium=cpc&ref={rng.getrandbits(32):08x}",
        "amount": round(rng.lognormvariate(3, 1), 2),
        "items": rng.randint(0, 12),
        "ab": {"checkout_v2": rng.random() < 0.5, "reco_model": rng.choice(("a", "b", "c"))},
    }
    if event_type == "search":
        event["query"] = rng.choice(_QUERIES)
    elif event_type == "error":
        event["error"] = rng.choice(_ERRORS)
    elif event_type == "purchase":
        event["order_id"] = f"o-{rng.getrandbits(40):010x}"
    return event


def events(count: int, *, seed: int = SEED, start: int = 0) -> Iterator[bytes]:
    """``count`` JSON-encoded events (no newline), the same for the same seed and start."""
    rng = random.Random(seed * 1_000_003 + start)
    types = [t for t, _ in _EVENT_TYPES]
    weights = [w for _, w in _EVENT_TYPES]
    base_ms = 1_717_977_600_000  # 2024-06-10T00:00:00Z
    for n in range(start, start + count):
        yield json.dumps(_event(rng, n, base_ms, types, weights), separators=(",", ":")).encode()


def events_bytes(count: int, *, seed: int = SEED) -> bytes:
    """``count`` events as newline-delimited JSON."""
    return b"".join(e + b"\n" for e in events(count, seed=seed))


def write_corpus(path, target_bytes: int, *, seed: int = SEED) -> int:
    """Write at least ``target_bytes`` of newline-delimited events to ``path``; return records."""
    written = records = 0
    with open(path, "wb") as out:
        while written < target_bytes:
            chunk = b"".join(e + b"\n" for e in events(10_000, seed=seed, start=records))
            out.write(chunk)
            written += len(chunk)
            records += 10_000
    return records


def write_sample_objects(
    store: Any, topic: str, starts: Iterable[int], count: int = 5
) -> list[str]:
    """Small block-GZIP objects of ``topic``'s partition 0 in Confluent's layout, one per start
    offset in ``starts``, each with ``count`` records ``v<offset>``: the archive the readers'
    examples read (starts closer than ``count`` apart make objects that share offsets).

    >>> import tempfile
    >>> from blockgz.store import LocalStore
    >>> write_sample_objects(LocalStore(tempfile.mkdtemp()), "t", (0, 5))[1]
    'topics/t/partition=0/t+0+0000000005.json.gz'
    """
    from blockgz.written.upload import BlockGzipUpload

    keys = []
    for start in starts:
        key = f"topics/{topic}/partition=0/{topic}+0+{start:010d}.json.gz"
        with BlockGzipUpload(store, key, first_offset=start) as out:
            for n in range(start, start + count):
                out.write(b"v%d" % n)
        keys.append(key)
    return keys
