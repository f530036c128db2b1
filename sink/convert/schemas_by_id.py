"""Value schemas by id from a Confluent-compatible Schema Registry, one request per id per process.

The sink's tasks run in executor processes that outlive a micro-batch; :func:`schemas_from`
keeps one parsed-schema cache per process and registry on top of
:func:`blockgz.registry.schema_texts_from` (one client per process), so a schema id costs one
HTTP request however many records carry it. :class:`RegistrySettings` reads Connect's
AvroConverter option names.

>>> settings = RegistrySettings.from_options({"schema.registry.url": "http://127.0.0.1:8081"},
...                                          "value.converter")
>>> settings.client_config()["url"]
'http://127.0.0.1:8081'
"""

from __future__ import annotations

from blockgz.errors import RegistryError
from blockgz.registry import OncePerKey, RegistrySettings, per_process, schema_texts_from
from blockgz.sink.convert.schemas import ValueSchema

__all__ = ["RegistrySettings", "SchemasById", "schemas_from"]


class SchemasById:
    """Parsed value schemas by registry id, fetched once each (thread-safe)."""

    def __init__(self, settings: RegistrySettings):
        self.settings = settings
        self.texts = schema_texts_from(settings)
        self._schemas: OncePerKey[int, ValueSchema] = OncePerKey()

    def get(self, schema_id: int) -> ValueSchema:
        """The schema registered under ``schema_id``; :class:`RegistryError` if the registry
        cannot be reached (after the client's retries), :class:`UnknownSchemaError` if it has no
        such id."""
        return self._schemas.get(schema_id, lambda: self._parsed(schema_id))

    def _parsed(self, schema_id: int) -> ValueSchema:
        try:
            return ValueSchema.from_text(self.texts.get(schema_id), schema_id=schema_id)
        except ValueError as exc:
            raise RegistryError(f"schema id {schema_id}: {exc}") from exc


def schemas_from(settings: RegistrySettings) -> SchemasById:
    """This process's schema cache for a registry (one per process and settings)."""
    return per_process(SchemasById, settings)
