"""Value converters and schemas: what a Kafka value's bytes mean before a format writes them.

* :mod:`blockgz.sink.convert.converters` — Connect's converters (Avro, JSON, String, ByteArray).
* :mod:`blockgz.sink.convert.schemas_by_id` — schemas by id from a Schema Registry, cached per
process.
* :mod:`blockgz.sink.convert.schemas` — :class:`ValueSchema`, and projection between schemas.
* :mod:`blockgz.sink.convert.connect_json` — Connect's JSON schema envelope into Avro, Avro data to
  JSON.
* :mod:`blockgz.sink.convert.evolution` — ``schema.compatibility``: rotate a file or project a
  record.
"""
