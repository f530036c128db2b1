"""The Avro record format: the container-file writer and upload, Avro schemas as Arrow types,
Confluent wire-format values decoded, and Avro data rendered as JSON.

The Avro container's block framing (what the ``.index.json`` indexes) is part of the block
file format: :mod:`blockgz.blocks.avro`."""
