"""Connect's data as the transforms see it: the record and its schemas and structs
(:mod:`~blockgz.sink.transforms.connect.record`), values to and from JsonConverter's
schema-and-payload JSON and Avro, Connect's ``Values`` text parsing, and Java's date patterns.

Nothing here knows a transform; the transforms one level up build on it.
"""
