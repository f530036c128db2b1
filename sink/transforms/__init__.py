"""Kafka Connect's single message transforms (SMTs), run by blockgz per record.

A connector config's ``transforms=a,b`` with ``transforms.a.type=<class>`` and
``transforms.a.<option>=...`` (and ``predicates=p``, ``predicates.p.type=...``,
``transforms.a.predicate=p``, ``transforms.a.negate=true``) is run in the write task on every
record, in the configured order, before the conversion checks and the partitioner, with
Connect's option names and semantics.

The API (stable; the differential tests against the Java transforms call it):

* :func:`build_chain` ``(config: Mapping[str, str]) -> Chain`` takes the connector config (only
  the ``transforms``/``predicates`` keys are read). A class blockgz does not run, a missing or
  bad option raises :class:`~blockgz.errors.ConfigError` in one line (listing what is allowed).
* :meth:`Chain.apply` ``(record: Record) -> Record | None`` runs the chain: a new record, or
  ``None`` when a transform (``Filter``, ``drop.tombstones``) drops it. A record that a
  transform rejects (a missing field where Connect throws) raises
  :class:`~blockgz.errors.BadRecordError`. ``Chain.apply`` never changes its argument.
* :class:`Record` is a record as Connect sees it: ``topic, partition, key, key_schema, value,
  value_schema, timestamp`` (epoch ms or ``None``) and ``headers`` (a tuple of :class:`Header`).
  Schemas are Connect schemas written as Kafka's JsonConverter writes them
  (``{"type": "struct", "fields": [{"field": "a", "type": "int32", "optional": false}],
  "optional": false, "name": ..., "version": ..., "parameters": ...}``), ``None`` for a
  schemaless key or value. Values: a struct or a schemaless map is a ``dict``; ``bytes``
  are ``bytes``; logical types hold their Connect JSON payload (``Timestamp``/``Time`` epoch
  ms, ``Date`` epoch days, ``Decimal`` unscaled big-endian bytes).
* :func:`to_connect_json` ``(schema, value) -> {"schema": ..., "payload": ...}`` and
  :func:`from_connect_json` ``(doc) -> (schema, value)`` convert to and from the envelope
  that Kafka's JsonConverter writes with ``schemas.enable=true`` (``bytes`` as base64);
  a schemaless value is written with ``"schema": None``.

>>> chain = build_chain({
...     "transforms": "add,route",
...     "transforms.add.type": "org.apache.kafka.connect.transforms.InsertField$Value",
...     "transforms.add.static.field": "origin",
...     "transforms.add.static.value": "dc1",
...     "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
...     "transforms.route.regex": "orders-(.*)",
...     "transforms.route.replacement": "archived-$1",
... })
>>> out = chain.apply(Record("orders-eu", 0, None, None, {"id": 1}, None, 0))
>>> out.topic, out.value
('archived-eu', {'id': 1, 'origin': 'dc1'})
"""

from __future__ import annotations

from blockgz.sink.transforms.chain import Chain, build_chain, transform_classes
from blockgz.sink.transforms.connect.json_converter import from_connect_json, to_connect_json
from blockgz.sink.transforms.connect.record import Header, Record

__all__ = [
    "Chain",
    "Header",
    "Record",
    "build_chain",
    "from_connect_json",
    "to_connect_json",
    "transform_classes",
]
