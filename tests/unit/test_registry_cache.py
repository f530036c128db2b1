"""One schema cache per process and registry, including caches built on other caches."""

from __future__ import annotations

import threading

from blockgz.registry import RegistrySettings, schema_texts_from
from blockgz.sink.convert.schemas_by_id import schemas_from


def test_the_sink_cache_builds_on_the_shared_texts_cache_without_deadlock():
    settings = RegistrySettings(url="http://127.0.0.1:9")  # never contacted: nothing fetched
    built: list[object] = []
    worker = threading.Thread(target=lambda: built.append(schemas_from(settings)), daemon=True)
    worker.start()
    worker.join(timeout=10)

    assert not worker.is_alive(), "schemas_from deadlocked on the per-process cache lock"
    assert built[0] is schemas_from(settings)
    assert built[0].texts is schema_texts_from(settings)
