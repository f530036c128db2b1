"""Partitioners: one settings class each, chosen through one registry; what a partitioner can
do is its own attribute (``partition_directories``), not a ``type(p) is DefaultPartitioner``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from blockgz.errors import ConfigError
from blockgz.options import Options
from blockgz.sink.partitioning.partitioners import (
    DailyPartitioner,
    DefaultPartitioner,
    FieldPartitioner,
    HourlyPartitioner,
    TimeBasedPartitioner,
)
from blockgz.sink.partitioning.settings import (
    PARTITIONERS,
    CustomSettings,
    DailySettings,
    DefaultSettings,
    FieldSettings,
    HourlySettings,
    PartitionerSettings,
    TimeBasedSettings,
)
from blockgz.sink.write.config import SinkSettings

ROOT = Path(__file__).resolve().parents[2]
TIME = {"locale": "en", "timezone": "UTC"}


@pytest.mark.parametrize(
    ("options", "settings", "partitioner"),
    [
        ({}, DefaultSettings, DefaultPartitioner),
        (
            {"partitioner.class": "FieldPartitioner", "partition.field.name": "a"},
            FieldSettings,
            FieldPartitioner,
        ),
        (
            {
                "partitioner.class": "timebased",
                "path.format": "'d'=dd",
                "partition.duration.ms": "60000",
                **TIME,
            },
            TimeBasedSettings,
            TimeBasedPartitioner,
        ),
        (
            {
                "partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner",
                **TIME,
            },
            DailySettings,
            DailyPartitioner,
        ),
        ({"partitioner.class": "HOURLY", **TIME}, HourlySettings, HourlyPartitioner),
    ],
)
def test_each_partitioner_has_its_settings_class(options, settings, partitioner):
    read = PartitionerSettings.from_options(Options(options))
    assert type(read) is settings
    assert type(read.build()) is partitioner
    assert PARTITIONERS.get(read.kind) is settings


def test_the_registry_names_confluents_partitioners():
    assert PARTITIONERS.names() == ("default", "field", "time", "daily", "hourly")
    with pytest.raises(ConfigError, match=r"partitioner.class: unknown value 'weekly'"):
        PartitionerSettings.from_options(Options({"partitioner.class": "weekly"}))


class ByKey(DefaultPartitioner):
    """Places records by their key: not one directory per Kafka partition."""

    def encode_partition(self, record):
        return f"key={record.key.decode()}"


class Mirrors(DefaultPartitioner):
    partition_directories = True


def test_partition_directories_is_said_by_each_class_and_not_inherited():
    assert DefaultPartitioner().partition_directories
    assert not ByKey().partition_directories  # a subclass may place records anywhere
    assert Mirrors().partition_directories
    field = PartitionerSettings.from_options(
        Options({"partitioner.class": "field", "partition.field.name": "a"})
    ).build()
    assert not field.partition_directories


def test_a_custom_partitioner_gets_intents_unless_it_says_otherwise(tmp_path):
    def config(cls):
        spec = f"{__name__}:{cls.__name__}"
        return SinkSettings.from_options({"path": str(tmp_path), "partitioner.class": spec})

    assert type(config(ByKey).partitioning) is CustomSettings
    assert config(ByKey).records_intents
    assert not config(Mirrors).records_intents
    assert not SinkSettings.from_options({"path": str(tmp_path)}).records_intents


def test_no_code_asks_a_partitioners_type():
    """``type(p) is DefaultPartitioner`` (four on main) became an attribute."""
    found = []
    for package in ("blockgz", "sink", "reader"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Compare)
                    and isinstance(node.left, ast.Call)
                    and getattr(node.left.func, "id", None) == "type"
                    and any("Partitioner" in ast.unparse(c) for c in node.comparators)
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
