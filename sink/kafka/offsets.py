"""Kafka offsets as the ``blockgz-kafka`` source plans them: Spark's JSON form, where a
query starts, and how far each micro-batch reads (admission control).

Pure functions of offsets and watermarks; reading Kafka happens in :mod:`blockgz.sink.kafka.source`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from blockgz.errors import ConfigError, DataLossError, SourceError
from blockgz.sink.kafka.options import (
    EARLIEST,
    LATEST,
    SOURCE_NAME,
    Offsets,
    StartSpec,
    TopicPartition,
)

log = logging.getLogger("blockgz.kafka_source")


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical JSON form: topics sorted, partitions sorted by number, keys as strings.

    >>> offsets_to_json({("b", 10): 5, ("b", 2): 7, ("a", 0): 1})
    {'a': {'0': 1}, 'b': {'2': 7, '10': 5}}
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """The inverse of :func:`offsets_to_json` (partition keys may be strings or ints)."""
    try:
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in data.items()
            for partition, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError) as exc:
        raise SourceError(f"not a {SOURCE_NAME} offset: {data!r}") from exc


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def tp_names(tps: Sequence[TopicPartition]) -> str:
    return ", ".join(tp_name(tp) for tp in tps)


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError`, or log a warning when ``failOnDataLoss`` is false."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost; if that is expected, restart the "
            "query with failOnDataLoss=false to skip it"
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def resolve_start(
    spec: StartSpec,
    partitions: Sequence[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    every_partition: bool = False,
) -> Offsets:
    """The first offsets of a new query, from ``startingOffsets`` and the broker's offsets.

    In a JSON spec -2 means earliest and -1 latest; partitions it leaves out start at
    earliest, unless ``every_partition`` (``assign``) requires them all, as Spark does.

    >>> parts = [("t", 0), ("t", 1)]
    >>> resolve_start({("t", 0): -1}, parts, {("t", 0): 3, ("t", 1): 4}, {("t", 0): 9, ("t", 1): 8})
    {('t', 0): 9, ('t', 1): 4}
    """
    if spec == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec == "latest":
        return {tp: latest[tp] for tp in partitions}
    assert isinstance(spec, dict)
    unknown = sorted(spec.keys() - set(partitions))
    if unknown:
        raise ConfigError(
            f"startingOffsets names partitions that are not subscribed or do not exist: "
            f"{tp_names(unknown)} (existing: {tp_names(sorted(partitions)) or 'none'})"
        )
    missing = sorted(set(partitions) - spec.keys())
    if every_partition and missing:
        raise ConfigError(
            "startingOffsets JSON must give an offset for every assigned partition "
            f"(-2 = earliest, -1 = latest); missing: {tp_names(missing)}"
        )
    start: Offsets = {}
    for tp in partitions:
        offset = spec.get(tp, EARLIEST)
        start[tp] = (
            earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
        )
    return start


def manifest_start(
    manifest_options: Mapping[str, str], partitions: Sequence[TopicPartition]
) -> Offsets:
    """``startingOffsets=s3``: per partition, the next offset the sink's manifests committed.

    Partitions no manifest mentions start at earliest. (``blockgz export`` also removes
    objects of batches that never committed; this source only reads.)
    """
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.options import Options

    return ManifestLog.from_options(Options(manifest_options)).resume_point(partitions)


def split_limit(lags: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """How many records each partition may read when ``limit`` is shared by lag.

    Like Spark's Kafka source, the share is proportional to each partition's lag and every
    lagging partition gets at least one record (when ``limit`` allows), so none starves; unlike
    Spark, the sum never exceeds ``limit`` (largest remainders, ties in partition order).

    >>> split_limit({("t", 0): 900, ("t", 1): 100, ("t", 2): 0}, 100)
    {('t', 0): 90, ('t', 1): 10}
    >>> split_limit({("t", 0): 9000, ("t", 1): 1}, 100)
    {('t', 0): 99, ('t', 1): 1}
    >>> split_limit({("t", 0): 5, ("t", 1): 3}, 100)
    {('t', 0): 5, ('t', 1): 3}
    """
    lagging = {tp: lag for tp, lag in sorted(lags.items()) if lag > 0}
    total = sum(lagging.values())
    if total <= limit:
        return lagging
    if limit < len(lagging):  # one each, to the most lagging partitions
        chosen = sorted(lagging, key=lambda tp: (-lagging[tp], tp))[:limit]
        return {tp: 1 for tp in sorted(chosen)}
    shares: dict[TopicPartition, int] = {}
    remainders: dict[TopicPartition, int] = {}
    for tp, lag in lagging.items():
        shares[tp], remainders[tp] = divmod(limit * lag, total)
    starved = [tp for tp, share in shares.items() if share == 0]
    for tp in starved:
        shares[tp] = 1
    for _ in range(sum(shares.values()) - limit):  # pay for them from the largest shares
        shares[min(shares, key=lambda tp: (-shares[tp], tp))] -= 1
    leftover = limit - sum(shares.values())
    fed = sorted(set(shares) - set(starved), key=lambda tp: (-remainders[tp], tp))
    for tp in fed[:leftover]:
        shares[tp] += 1
    return shares


def plan_end(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_new: Mapping[TopicPartition, int],
    *,
    max_rows: int | None = None,
    target: Mapping[TopicPartition, int] | None = None,
    fail_on_data_loss: bool = True,
) -> Offsets:
    """The end offsets of the next micro-batch (what ``latestOffset`` returns).

    ``latest`` holds every current partition's latest offset and ``earliest_new`` the earliest
    offset of those not in ``start``. A new partition enters at its earliest offset and is
    read from the next batch on, so a batch's ranges depend only on its start and end offsets.
    Partitions that vanished, new partitions that do not start at 0 and offsets that went
    back are data loss. ``target`` (Trigger.AvailableNow) caps each partition and leaves out
    the partitions it does not know; ``max_rows`` is shared out by :func:`split_limit`.

    >>> plan_end({("t", 0): 5}, {("t", 0): 50, ("t", 1): 7}, {("t", 1): 0}, max_rows=10)
    {('t', 0): 15, ('t', 1): 0}
    """
    for tp in sorted(start.keys() - latest.keys()):
        report_data_loss(f"partition {tp_name(tp)} no longer exists", fail_on_data_loss)
    end: Offsets = {}
    for tp, newest in sorted(latest.items()):
        if target is not None and tp not in target:
            continue
        if tp not in start:
            first = earliest_new[tp]
            if first > 0:
                message = f"new partition {tp_name(tp)} starts at offset {first}, not 0"
                report_data_loss(message, fail_on_data_loss)
            end[tp] = first
        elif newest < start[tp]:
            message = (
                f"partition {tp_name(tp)}'s latest offset went back from {start[tp]} to {newest} "
                "(was the topic recreated?)"
            )
            report_data_loss(message, fail_on_data_loss)
            end[tp] = newest
        else:
            cap = newest if target is None else min(newest, target[tp])
            end[tp] = max(start[tp], cap)
    return cap_rows(start, end, max_rows)


def cap_rows(
    start: Mapping[TopicPartition, int],
    end: Offsets,
    max_rows: int | None,
    *,
    flush_size: int | None = None,
) -> Offsets:
    """``end`` with ``max_rows`` shared out by :func:`split_limit`; with ``flush_size`` (held
    partial files), a share that cuts a partition short is cut down to whole files.

    >>> cap_rows({("t", 0): 0, ("t", 1): 0}, {("t", 0): 90, ("t", 1): 10}, 50, flush_size=20)
    {('t', 0): 40, ('t', 1): 5}
    """
    if max_rows is None:
        return end
    from blockgz.sink.kafka.holding import round_to_files

    lags = {tp: end[tp] - start[tp] for tp in end if tp in start}
    for tp, admitted in split_limit(lags, max_rows).items():
        end[tp] = start[tp] + round_to_files(admitted, lags[tp], flush_size)
    return end


def check_range_start(
    tp: TopicPartition, start: int, end: int, earliest: int, fail_on_data_loss: bool
) -> int:
    """Where reading ``[start, end)`` begins, given the partition's earliest offset now.

    Offsets below ``earliest`` were deleted (retention) before being read: data loss.

    >>> check_range_start(("t", 0), 10, 20, 15, fail_on_data_loss=False)
    15
    """
    if earliest <= start:
        return start
    lost_end = min(earliest, end)
    message = (
        f"offsets [{start}, {lost_end}) of {tp_name(tp)} are no longer in Kafka "
        f"({lost_end - start} offsets lost; its earliest offset is now {earliest})"
    )
    report_data_loss(message, fail_on_data_loss)
    return min(earliest, end)
