"""Value converters and schemas: what a Kafka value's bytes mean before a format writes them.

* :mod:`sink.convert.converters` — Connect's converters (Avro, JSON, String, ByteArray).
* :mod:`sink.convert.registry` — schemas by id from a Schema Registry, cached per process.
* :mod:`sink.convert.schemas` — :class:`ValueSchema`, and projection between schemas.
* :mod:`sink.convert.connect_json` — Connect's JSON schema envelope into Avro, Avro data to JSON.
* :mod:`sink.convert.evolution` — ``schema.compatibility``: rotate a file or project a record.
"""
