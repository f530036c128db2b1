"""Build the chain of a connector config's ``transforms`` and run it on records.

>>> build_chain({"transforms": "x", "transforms.x.type": "com.acme.Mine"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: transforms.x.type=com.acme.Mine: blockgz does not run ...
>>> build_chain({}).apply(Record("t", 0, None, None, 1, None, None)).value
1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from blockgz.errors import BadRecordError
from blockgz.sink.transforms.connect.record import Record, Rejected
from blockgz.sink.transforms.debezium import TRANSFORMS as DEBEZIUM_TRANSFORMS
from blockgz.sink.transforms.fields import TRANSFORMS as FIELD_TRANSFORMS
from blockgz.sink.transforms.fused import FusedPlan
from blockgz.sink.transforms.headers import TRANSFORMS as HEADER_TRANSFORMS
from blockgz.sink.transforms.misc import TRANSFORMS as MISC_TRANSFORMS
from blockgz.sink.transforms.options import TransformOptions
from blockgz.sink.transforms.predicates import PREDICATES, Predicate
from blockgz.sink.transforms.routers import TRANSFORMS as ROUTER_TRANSFORMS
from blockgz.sink.transforms.structure import TRANSFORMS as STRUCTURE_TRANSFORMS
from blockgz.sink.transforms.timestamps import TRANSFORMS as TIMESTAMP_TRANSFORMS

#: A transform: a function of a record to a record or ``None`` (dropped).
Transform = Callable[[Record], "Record | None"]
#: A factory: the transform's options to the transform.
Factory = Callable[[TransformOptions], Transform]

KAFKA = "org.apache.kafka.connect.transforms."
DEBEZIUM = "io.debezium.transforms."


def _registry() -> dict[str, Factory]:
    """Every class name blockgz runs (``$Key``/``$Value`` variants spelled out)."""
    found: dict[str, Factory] = {}
    kafka = (FIELD_TRANSFORMS, STRUCTURE_TRANSFORMS, ROUTER_TRANSFORMS, HEADER_TRANSFORMS,
             TIMESTAMP_TRANSFORMS, MISC_TRANSFORMS)  # fmt: skip
    for family in kafka:
        for name, factory in family.items():
            found[KAFKA + name] = factory
    for name, factory in DEBEZIUM_TRANSFORMS.items():
        found[DEBEZIUM + name] = factory
    return found


TRANSFORMS: dict[str, Factory] = _registry()


def transform_classes() -> list[str]:
    """The transform classes blockgz runs, sorted."""
    return sorted(TRANSFORMS)


def _short_names() -> str:
    return ", ".join(sorted({name.rsplit(".", 1)[1] for name in TRANSFORMS}))


@dataclass(frozen=True)
class Step:
    """One configured transform with its optional predicate."""

    name: str
    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False

    def applies(self, record: Record) -> bool:
        """Whether the transform runs on ``record`` (its predicate, negated or not)."""
        if self.predicate is None:
            return True
        return self.predicate(record) != self.negate

    def applies_to_topic(self, topic: str) -> bool | None:
        """Whether the transform runs on every record of ``topic`` with a non-null value
        (``True``/``False``), or ``None`` when that depends on more than the topic."""
        predicate = self.predicate
        if predicate is None:
            return True
        if getattr(predicate, "topic_only", False):
            return predicate(_topic_record(topic)) != self.negate
        answer = getattr(predicate, "when_value_present", None)
        return None if answer is None else answer != self.negate


class Chain:
    """The configured transforms, in order."""

    def __init__(self, steps: list[Step]):
        self.steps = steps
        self._fused: dict[str, FusedPlan | None] = {}

    def __bool__(self) -> bool:
        return bool(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def topic_only(self) -> bool:
        """Whether every step reads and changes nothing but the topic (``RegexRouter``, with
        no predicate or ``TopicNameMatches``): then all records of a topic go the same way,
        and a writer may take them a batch at a time."""
        return all(
            getattr(step.transform, "topic_only", False)
            and (step.predicate is None or getattr(step.predicate, "topic_only", False))
            for step in self.steps
        )

    def fused(self, topic: str) -> FusedPlan | None:
        """The chain compiled for ``topic``'s records with a schemaless, non-null value
        (:mod:`blockgz.sink.transforms.fused`), or ``None`` when it does not compile: a step
        reads or changes more than the topic and such a value. Worked out once per topic."""
        if topic in self._fused:
            return self._fused[topic]
        plan = self._compile(topic)
        if len(self._fused) < 10_000:
            self._fused[topic] = plan
        return plan

    def _compile(self, topic: str) -> FusedPlan | None:
        kernels = []
        assumes_value = False  # a predicate answered for a non-null value
        for step in self.steps:
            applies = step.applies_to_topic(topic)
            if applies is None:
                return None
            predicate = step.predicate
            assumes_value |= predicate is not None and not getattr(predicate, "topic_only", False)
            if not applies:
                continue
            transform = step.transform
            if getattr(transform, "topic_only", False):
                routed = transform(_topic_record(topic))
                assert routed is not None  # a router never drops a record
                topic = routed.topic
                continue
            make = getattr(transform, "value_kernel", None)
            if make is None:
                return None
            kernels.append(make(topic))
        if assumes_value and not kernels:
            # Only a kernel refuses a value that is no map (JSON null is a tombstone to the
            # chain), sending its record through the chain: without one, the answer may be
            # wrong.
            return None
        return FusedPlan(topic, tuple(kernels))

    def apply(self, record: Record) -> Record | None:
        """Run every step; ``None`` when a step drops the record."""
        current = record
        for step in self.steps:
            if not step.applies(current):
                continue
            try:
                after = step.transform(current)
            except Rejected as exc:
                raise BadRecordError(f"transform {step.name}: {exc}") from None
            if after is None:
                return None
            current = after
        return current


#: The transforms and predicates that neither read nor write a record's headers.
HEADER_BLIND = {
    *(
        f"{KAFKA}{name}{side}"
        for name in ("InsertField", "ReplaceField", "MaskField", "Cast", "ExtractField",
                     "Flatten", "HoistField", "TimestampConverter", "SetSchemaMetadata")
        for side in ("$Key", "$Value")
    ),
    *(KAFKA + name for name in ("ValueToKey", "RegexRouter", "TimestampRouter", "Filter")),
    *(KAFKA + "predicates." + name for name in ("TopicNameMatches", "RecordIsTombstone")),
}  # fmt: skip


def reads_headers(config: Mapping[str, Any]) -> bool:
    """Whether the chain of ``config`` may read or write headers (the Kafka source then has
    to read them): one of its transforms or predicates is not in :data:`HEADER_BLIND`."""
    for family in ("transforms", "predicates"):
        for name in _names(config, family):
            if _subkeys(config, f"{family}.{name}.").get("type") not in HEADER_BLIND:
                return True
    return False


def _topic_record(topic: str) -> Record:
    """A record with only a topic, for routers and predicates that read nothing else."""
    return Record(topic, None, None, None, None, None, None)


def _subkeys(config: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """The ``prefix``-ed keys, prefix dropped. Spark hands a data source its options with
    lower-cased keys, so an alias found only in lower case is read that way too."""
    found = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    if not found:
        lower = prefix.lower()
        found = {k[len(lower) :]: v for k, v in config.items() if k.startswith(lower)}
    return found


def _names(config: Mapping[str, Any], key: str) -> list[str]:
    return [n.strip() for n in str(config.get(key) or "").split(",") if n.strip()]


def build_predicates(config: Mapping[str, Any]) -> dict[str, Predicate]:
    """The configured predicates by name."""
    built: dict[str, Predicate] = {}
    for name in _names(config, "predicates"):
        opts = TransformOptions(f"predicates.{name}", _subkeys(config, f"predicates.{name}."))
        kind = opts.text("type")
        factory = PREDICATES.get(kind)
        if factory is None:
            raise opts.error(
                "type",
                "blockgz does not run this predicate; it runs "
                + ", ".join(sorted(p.rsplit(".", 1)[1] for p in PREDICATES)),
            )
        built[name] = factory(opts)
    return built


def build_chain(config: Mapping[str, Any]) -> Chain:
    """The chain of ``config``'s ``transforms`` (empty without any)."""
    predicates = build_predicates(config)
    steps = []
    for name in _names(config, "transforms"):
        opts = TransformOptions(f"transforms.{name}", _subkeys(config, f"transforms.{name}."))
        kind = opts.text("type")
        factory = TRANSFORMS.get(kind)
        if factory is None:
            raise opts.error(
                "type", f"blockgz does not run this transform; it runs {_short_names()}"
            )
        predicate_name = opts.text("predicate", None)
        predicate = None
        if predicate_name is not None:
            predicate = predicates.get(predicate_name)
            if predicate is None:
                raise opts.error(
                    "predicate",
                    "no such predicate in predicates=" + ",".join(predicates)
                    if predicates
                    else "no predicates are configured",
                )
        negate = opts.boolean("negate", False)
        steps.append(Step(name, factory(opts), predicate, negate))
    return Chain(steps)
