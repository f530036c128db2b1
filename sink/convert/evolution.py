"""``schema.compatibility``: when a new value schema starts a new file, and when it is projected.

As Confluent's S3 sink defines the modes:

* ``NONE``: every file holds one schema; a record whose schema differs from its file's
  starts new files.
* ``BACKWARD`` / ``FULL``: files are written with the newest schema seen; a newer schema starts
  new files, an older record is projected to the newest (Avro schema resolution, defaults
  filled in).
* ``FORWARD``: the same with the oldest schema.

Unlike Confluent, the newest (or oldest) schema is remembered per topic-partition, not per open
file, so records from two producers on different schema versions do not start a file per switch
(Confluent's small-file storm): after the first newer record, older ones are projected.

"Newer" compares :attr:`ValueSchema.version`: the registry's schema id for Avro (ids grow as
schemas are registered) or the ``version`` of a Connect JSON schema.

>>> from blockgz.sink.convert.schemas import ValueSchema
>>> v1 = ValueSchema.from_json({"type": "record", "name": "r", "fields": [
...     {"name": "a", "type": "int"}]}, schema_id=1)
>>> v2 = ValueSchema.from_json({"type": "record", "name": "r", "fields": [
...     {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}]}, schema_id=2)
>>> policy = SchemaPolicy("BACKWARD")
>>> [(s.id, rotate) for s, rotate in (policy.place(v1, None), policy.place(v2, v1),
...                                    policy.place(v1, v2))]
[(1, False), (2, True), (2, False)]
"""

from __future__ import annotations

from blockgz.errors import BadRecordError
from blockgz.sink.convert.schemas import ValueSchema

COMPATIBILITIES = ("NONE", "BACKWARD", "FORWARD", "FULL")


class SchemaPolicy:
    """Decides, record by record, the schema to write with and whether to rotate first."""

    def __init__(self, mode: str = "NONE"):
        self.mode = mode
        self.target: ValueSchema | None = None

    def place(
        self, schema: ValueSchema, open_file_schema: ValueSchema | None, record=None
    ) -> tuple[ValueSchema, bool]:
        """``(schema to write the record with, rotate the open files first?)``.

        ``open_file_schema`` is the schema of the file the record would go to (``None`` when
        none is open). The caller projects the record when the first item is not ``schema``.
        """
        if self.mode == "NONE":
            return schema, open_file_schema is not None and not schema.same_as(open_file_schema)
        self._check_version(schema, record)
        if self.target is None or self._replaces(schema, self.target):
            self.target = schema
        target = self.target
        rotate = open_file_schema is not None and not target.same_as(open_file_schema)
        return target, rotate

    def _replaces(self, schema: ValueSchema, current: ValueSchema) -> bool:
        assert schema.version is not None and current.version is not None
        if self.mode == "FORWARD":
            return schema.version < current.version
        return schema.version > current.version

    def _check_version(self, schema: ValueSchema, record) -> None:
        if schema.version is None:
            message = (
                f"schema.compatibility={self.mode} compares schema versions, but {schema.label} "
                'has none (a JsonConverter envelope needs a "version"); use '
                "schema.compatibility=NONE"
            )
            raise record.fail(message) if record is not None else BadRecordError(message)
