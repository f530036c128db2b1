"""The state of the Schema Registry stand-in: schemas, ids, subjects, levels, compatibility.

:class:`RegistryState` holds what a registry knows and decides (ids, versions, levels, whether
a schema may follow another); :mod:`blockgz.local_servers.schema_registry_api` answers the REST
endpoints from it and :mod:`blockgz.local_servers.schema_registry` serves them over HTTP.
Compatibility is checked with the Apache ``avro`` package's reader/writer checker, imported only
when a schema is parsed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from blockgz.errors import MissingDependencyError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: The compatibility levels, as the registry spells them.
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"


class RegistryApiError(Exception):
    """An error answer: HTTP status and the registry's ``error_code`` and ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryApiError:
    return RegistryApiError(404, 40401, f"Subject '{subject}' not found.")


def invalid_schema(detail: str) -> RegistryApiError:
    return RegistryApiError(422, 42201, f"Invalid schema: {detail}")


def _avro() -> tuple[ModuleType, ModuleType, ModuleType]:
    """The Apache ``avro`` modules ``schema``, ``name`` and ``compatibility``, imported lazily."""
    try:
        import avro.compatibility
        import avro.name
        import avro.schema
    except ImportError as exc:
        raise MissingDependencyError(
            "the local Schema Registry needs the avro package: pip install 'avro>=1.12'"
            " (or the [local] extra)"
        ) from exc
    return avro.schema, avro.name, avro.compatibility


@dataclass
class StoredSchema:
    """A registered schema: its global id, its text as first registered, compacted, parsed."""

    id: int
    guid: str
    text: str
    references: list[dict[str, Any]]
    key: tuple[str, tuple[tuple[str, str, int], ...]]
    parsed: Any  # avro.schema.Schema

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.text}
        if self.references:
            out["references"] = self.references
        return out


@dataclass
class Version:
    version: int
    schema_id: int
    deleted: bool = False


def query_flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").strip().lower() == "true"


def page(items: list[Any], query: Mapping[str, str]) -> list[Any]:
    """Apply the ``offset`` and ``limit`` query parameters (a negative limit means all)."""
    try:
        offset = max(int(query.get("offset", "0")), 0)
        limit = int(query.get("limit", "-1"))
    except ValueError as exc:
        raise RegistryApiError(400, 400, "offset and limit must be integers") from exc
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def check_level(level: Any) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise RegistryApiError(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )
    return level.upper()


class RegistryState:
    """The registry's state and the endpoint logic; every method runs under the caller's lock."""

    def __init__(self, default_level: str) -> None:
        self.default_level = default_level
        self.global_level = default_level
        self.subject_levels: dict[str, str] = {}
        self.schemas: dict[int, StoredSchema] = {}
        self.ids_by_key: dict[tuple[str, tuple[tuple[str, str, int], ...]], int] = {}
        self.subjects: dict[str, list[Version]] = {}

    # -- schemas ----------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], Any, Any]:
        """Validate a request's schema: its compact text, references, parsed form and id key."""
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type != "AVRO":
            raise RegistryApiError(
                422,
                42201,
                f"Invalid schema type {schema_type}: this local registry supports only AVRO",
            )
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise invalid_schema("the schema is empty")
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list):
            raise invalid_schema("references must be a list")
        references: list[dict[str, Any]] = []
        for ref in raw_refs:
            if not (
                isinstance(ref, dict)
                and isinstance(ref.get("name"), str)
                and isinstance(ref.get("subject"), str)
                and isinstance(ref.get("version"), int)
            ):
                raise invalid_schema(f"a reference needs a name, subject and version: {ref!r}")
            references.append(
                {"name": ref["name"], "subject": ref["subject"], "version": ref["version"]}
            )
        avro_schema, avro_name, _ = _avro()
        names = avro_name.Names(validate_names=True)
        seen: set[tuple[str, int]] = set()
        try:
            data = json.loads(text)
            for ref in references:
                self._load_reference(ref, names, seen, avro_schema)
            parsed = avro_schema.make_avsc_object(data, names)
            normal = json.dumps(parsed.to_json(), sort_keys=True, separators=(",", ":"))
        except RegistryApiError:
            raise
        except Exception as exc:  # json, avro.errors and whatever odd input makes avro raise
            raise invalid_schema(str(exc) or type(exc).__name__) from exc
        compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        key = (normal, tuple((r["name"], r["subject"], r["version"]) for r in references))
        return compact, references, parsed, key

    def _load_reference(
        self, ref: dict[str, Any], names: Any, seen: set[tuple[str, int]], avro_schema: ModuleType
    ) -> None:
        """Parse a referenced schema (and its own references) into ``names``."""
        try:
            version = self.find_version(ref["subject"], str(ref["version"]), deleted=True)
        except RegistryApiError as exc:
            raise invalid_schema(f"reference {ref['name']!r}: {exc.message}") from exc
        if (ref["subject"], version.version) in seen:
            return
        seen.add((ref["subject"], version.version))
        stored = self.schemas[version.schema_id]
        for inner in stored.references:
            self._load_reference(inner, names, seen, avro_schema)
        avro_schema.make_avsc_object(json.loads(stored.text), names)

    def schema(self, schema_id: str) -> StoredSchema:
        try:
            return self.schemas[int(schema_id)]
        except (ValueError, KeyError) as exc:
            raise RegistryApiError(404, 40403, f"Schema {schema_id} not found") from exc

    def schema_by_guid(self, guid: str) -> StoredSchema:
        for stored in self.schemas.values():
            if stored.guid == guid:
                return stored
        raise RegistryApiError(404, 40403, f"Schema {guid} not found")

    def intern(self, text: str, references: list[dict[str, Any]], parsed: Any, key: Any) -> int:
        """The id of an equal schema registered before, or a new id."""
        schema_id = self.ids_by_key.get(key)
        if schema_id is None:
            schema_id = max(self.schemas, default=0) + 1
            self.schemas[schema_id] = StoredSchema(
                schema_id, str(uuid.uuid4()), text, references, key, parsed
            )
            self.ids_by_key[key] = schema_id
        return schema_id

    # -- subjects and versions --------------------------------------------------------------

    def live(self, subject: str) -> list[Version]:
        return [v for v in self.subjects.get(subject, []) if not v.deleted]

    def find_version(self, subject: str, version: str, *, deleted: bool = False) -> Version:
        """Version ``version`` (a number, ``latest`` or ``-1``) of a subject."""
        versions = [v for v in self.subjects.get(subject, []) if deleted or not v.deleted]
        if not versions:
            raise subject_not_found(subject)
        if version in ("latest", "-1"):
            return versions[-1]
        try:
            number = int(version)
        except ValueError:
            number = 0
        if not 1 <= number <= 2**31 - 1:
            raise RegistryApiError(
                422,
                42202,
                f"The specified version '{version}' is not a valid version id. Allowed values "
                'are between [1, 2^31-1] and the string "latest"',
            )
        for candidate in versions:
            if candidate.version == number:
                return candidate
        raise RegistryApiError(404, 40402, f"Version {number} not found.")

    def version_body(self, subject: str, version: Version) -> dict[str, Any]:
        stored = self.schemas[version.schema_id]
        return {
            "subject": subject,
            "version": version.version,
            "id": stored.id,
            "guid": stored.guid,
            **stored.body(),
        }

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_levels:
            return self.subject_levels[subject]
        return self.global_level

    # -- compatibility ----------------------------------------------------------------------

    def incompatibilities(
        self, level: str, new: Any, olds: list[Version], *, transitive: bool | None = None
    ) -> list[str]:
        """Why ``new`` breaks ``level`` against the old versions (latest only unless transitive)."""
        if level == "NONE" or not olds:
            return []
        if transitive is None:
            transitive = level.endswith("_TRANSITIVE")
        base = level.removesuffix("_TRANSITIVE")
        for old in reversed(olds if transitive else olds[-1:]):
            stored = self.schemas[old.schema_id]
            found: list[str] = []
            if base in ("BACKWARD", "FULL"):
                found += incompatibility_messages(
                    new, stored.parsed, "the new schema cannot read data written by"
                )
            if base in ("FORWARD", "FULL"):
                found += incompatibility_messages(
                    stored.parsed, new, "data written by the new schema cannot be read by"
                )
            if found:
                return [
                    *found,
                    f"{{oldSchemaVersion: {old.version}}}",
                    f"{{oldSchema: '{stored.text}'}}",
                    f"{{compatibility: '{level}'}}",
                ]
        return []


def incompatibility_messages(reader: Any, writer: Any, what: str) -> list[str]:
    """The registry's messages for why ``reader`` cannot read ``writer``'s data (``[]``: it can)."""
    _, _, compatibility = _avro()
    result = compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is not compatibility.SchemaCompatibilityType.incompatible:
        return []
    detail = "; ".join(sorted(result.messages))
    where = ", ".join(sorted(result.locations))
    kinds = dict.fromkeys(kind.name.upper() for kind in result.incompatibilities) or {
        "INCOMPATIBLE": None
    }
    return [
        f"{{errorType:'{kind}', description:'At {where}: {what} the old schema: {detail}', "
        f"additionalInfo:'{detail}'}}"
        for kind in kinds
    ]
