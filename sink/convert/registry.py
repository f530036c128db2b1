"""Schemas by id from a Confluent-compatible Schema Registry, one request per id per process.

The sink's tasks run in executor processes that outlive a micro-batch; :func:`schemas_from`
keeps one confluent-kafka ``SchemaRegistryClient`` and one parsed-schema cache per process
and registry, so a schema id costs one HTTP request however many records carry it.

>>> settings = RegistrySettings.from_options({"schema.registry.url": "http://127.0.0.1:8081"},
...                                          "value.converter")
>>> settings.client_config()["url"]
'http://127.0.0.1:8081'
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from blockgz.errors import ConfigError, RegistryError, UnknownSchemaError
from blockgz.options import as_options
from sink.convert.schemas import ValueSchema

CREDENTIAL_SOURCES = ("USER_INFO", "URL")


@dataclass(frozen=True)
class RegistrySettings:
    """Where the registry is and how to log in (Connect's AvroConverter option names)."""

    url: str
    user_info: str | None = None
    max_retries: int = 3
    retries_wait_ms: int = 1000
    timeout_s: int = 10

    @classmethod
    def from_options(cls, options: Mapping[str, Any], prefix: str) -> RegistrySettings:
        """Read ``<prefix>.schema.registry.url`` and friends (``options`` may hold them
        with or without the prefix)."""
        opts = as_options(
            {
                k[len(prefix) + 1 :] if k.startswith(prefix + ".") else k: v
                for k, v in options.items()
            }
        )
        url = opts.text("schema.registry.url")
        if not url:
            raise ConfigError(
                f"{prefix}.schema.registry.url is required with the AvroConverter "
                "(for example http://127.0.0.1:8081)"
            )
        source = opts.text("basic.auth.credentials.source", "").upper()
        user_info = opts.text("basic.auth.user.info") or opts.text(
            "schema.registry.basic.auth.user.info"
        )
        if source and source not in CREDENTIAL_SOURCES:
            raise ConfigError(
                f"{prefix}.basic.auth.credentials.source: {source!r} is not supported; allowed: "
                + ", ".join(CREDENTIAL_SOURCES)
            )
        if source == "USER_INFO" and not user_info:
            raise ConfigError(
                f"{prefix}.basic.auth.credentials.source=USER_INFO needs "
                f"{prefix}.basic.auth.user.info (user:password)"
            )
        if user_info and ":" not in user_info:
            raise ConfigError(f"{prefix}.basic.auth.user.info must be user:password")
        return cls(
            url=url.split(",")[0].strip(),
            user_info=None if source == "URL" else user_info,
            max_retries=opts.integer("max.retries", 3, low=0),
            retries_wait_ms=opts.integer("retries.wait.ms", 1000, low=0),
            timeout_s=opts.integer("request.timeout.s", 10, low=1),
        )

    def client_config(self) -> dict[str, Any]:
        """The confluent-kafka ``SchemaRegistryClient`` configuration."""
        config: dict[str, Any] = {
            "url": self.url,
            "max.retries": self.max_retries,
            "retries.wait.ms": self.retries_wait_ms,
            "timeout": self.timeout_s,
        }
        if self.user_info:
            config["basic.auth.user.info"] = self.user_info
        return config


class SchemasById:
    """Parsed value schemas by registry id, fetched once each (thread-safe)."""

    def __init__(self, settings: RegistrySettings):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.settings = settings
        self.client = SchemaRegistryClient(settings.client_config())
        self._schemas: dict[int, ValueSchema] = {}
        self._lock = threading.Lock()

    def get(self, schema_id: int) -> ValueSchema:
        """The schema registered under ``schema_id``; :class:`RegistryError` if the registry
        cannot be reached (after the client's retries), :class:`UnknownSchemaError` if it has no
        such id."""
        found = self._schemas.get(schema_id)
        if found is not None:
            return found
        with self._lock:
            found = self._schemas.get(schema_id)
            if found is None:
                found = self._fetch(schema_id)
                self._schemas[schema_id] = found
        return found

    def _fetch(self, schema_id: int) -> ValueSchema:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            registered = self.client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise UnknownSchemaError(
                    f"schema id {schema_id} is not in the registry at {self.settings.url}"
                ) from None
            raise RegistryError(
                f"the registry at {self.settings.url} answered {exc.http_status_code} for "
                f"schema id {schema_id}: {exc.error_message}"
            ) from None
        except Exception as exc:  # connection refused, timeouts: after the client's retries
            raise RegistryError(
                f"cannot reach the schema registry at {self.settings.url} for schema id "
                f"{schema_id} ({type(exc).__name__}: {exc})"
            ) from None
        kind = (registered.schema_type or "AVRO").upper()
        if kind != "AVRO":
            raise RegistryError(f"schema id {schema_id} is {kind}, not AVRO")
        try:
            return ValueSchema.from_text(registered.schema_str, schema_id=schema_id)
        except ValueError as exc:
            raise RegistryError(f"schema id {schema_id}: {exc}") from None


_CACHES: dict[tuple[int, RegistrySettings], SchemasById] = {}
_CACHES_LOCK = threading.Lock()


def schemas_from(settings: RegistrySettings) -> SchemasById:
    """This process's schema cache for a registry (one client per process and settings)."""
    import os

    key = (os.getpid(), settings)
    cache = _CACHES.get(key)
    if cache is None:
        with _CACHES_LOCK:
            cache = _CACHES.get(key)
            if cache is None:
                cache = _CACHES[key] = SchemasById(settings)
    return cache
