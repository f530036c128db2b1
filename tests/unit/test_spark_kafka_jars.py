"""``blockgz.spark.kafka.jars``: which jars the export adds to ``spark.jars`` (no network here)."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.export.job import spark_conf_with_connector
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.spark_kafka import connector_jars, missing_from_spark

BASE = {"topics": "t", "kafka.bootstrap.servers": "b:9092", "s3.bucket.name": "x"}


def test_default_adds_no_jar():
    job = ExportSettings.from_mapping({**BASE, "spark.jars": "/given.jar"})
    assert job.spark_kafka_jars == "none"
    assert spark_conf_with_connector(job)["spark.jars"] == "/given.jar"


def test_the_option_is_a_job_option_not_a_sink_one():
    job = ExportSettings.from_mapping({**BASE, "blockgz.spark.kafka.jars": " AUTO "})
    assert job.spark_kafka_jars == "auto"
    assert "blockgz.spark.kafka.jars" not in job.sink_options
    assert "blockgz.spark.kafka.jars" not in job.spark_conf


def test_files_and_folders_are_used_as_given(tmp_path):
    folder = tmp_path / "connector"
    folder.mkdir()
    for name in ("b-1.0.jar", "a-2.0.jar", "notes.txt"):
        (folder / name).write_text("")
    single = tmp_path / "c-3.0.jar"
    single.write_text("")
    job = ExportSettings.from_mapping(
        {**BASE, "spark.jars": "/given.jar", "blockgz.spark.kafka.jars": f"{folder}, {single}"}
    )
    conf = spark_conf_with_connector(job)
    assert conf["spark.jars"].split(",") == [
        "/given.jar", str(folder / "a-2.0.jar"), str(folder / "b-1.0.jar"), str(single),
    ]  # fmt: skip


@pytest.mark.parametrize("value", ["/no/such/dir", "4.2", "latest"])
def test_anything_else_is_refused_naming_the_choices(value):
    with pytest.raises(ConfigError, match="none, auto, a connector version"):
        connector_jars(value)


def test_an_empty_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"holds no \.jar"):
        connector_jars(str(tmp_path))


def test_jars_pyspark_ships_are_left_out(tmp_path):
    pytest.importorskip("pyspark")
    names = ["scala-library-2.13.99.jar", "kafka-clients-3.9.2.jar", "slf4j-api-9.9.9.jar"]
    jars = [tmp_path / n for n in names]
    assert [j.name for j in missing_from_spark(jars)] == ["kafka-clients-3.9.2.jar"]


def test_a_running_held_export_sets_sparks_trigger_limits_and_a_once_run_does_not():
    """Held files with Spark's Kafka source: minOffsetsPerTrigger over the assigned
    partitions and maxTriggerDelay one trigger short of rotate.interval.ms (issue 44)."""
    from blockgz.sink.export.query import spark_holding

    job = ExportSettings.from_mapping(
        {
            **{k: v for k, v in BASE.items() if k != "topics"},
            "assign": '{"t": [0, 1, 2]}',
            "flush.size": "100",
            "rotate.interval.ms": "60000",
            "blockgz.trigger.interval": "5 seconds",
        }
    )
    found = spark_holding(job, job.source_options, once=False)
    assert found == {"minOffsetsPerTrigger": "300", "maxTriggerDelay": "55000ms"}
    assert spark_holding(job, job.source_options, once=True) == {}
    given = {**job.source_options, "maxTriggerDelay": "2m"}
    assert spark_holding(job, given, once=False) == {"minOffsetsPerTrigger": "300"}


# -- blockgz.kafka.source: which source reads Kafka ---------------------------------------------


@pytest.mark.parametrize(
    ("choice", "connector", "source"),
    [
        ("auto", True, "kafka"),
        ("auto", False, "blockgz-kafka"),
        ("blockgz", True, "blockgz-kafka"),
        ("blockgz", False, "blockgz-kafka"),
        ("spark", True, "kafka"),
    ],
)
def test_the_source_follows_the_choice_and_the_classpath(choice, connector, source):
    from blockgz.sink.export.query import kafka_source

    job = ExportSettings.from_mapping({**BASE, "blockgz.kafka.source": choice})
    assert kafka_source(job.kafka_source, connector=connector) == source


def test_spark_without_its_connector_is_refused_saying_how_to_add_it():
    from blockgz.sink.export.query import kafka_source

    with pytest.raises(ConfigError, match=r"set blockgz\.spark\.kafka\.jars .* spark-submit"):
        kafka_source("spark", connector=False)


def test_an_unknown_source_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="auto, blockgz, spark"):
        ExportSettings.from_mapping({**BASE, "blockgz.kafka.source": "java"})
    assert ExportSettings.from_mapping(BASE).kafka_source == "auto"


def test_blockgzs_source_adds_no_connector_and_says_the_jars_are_unused(tmp_path, caplog):
    jar = tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar"
    jar.write_text("")
    job = ExportSettings.from_mapping(
        {**BASE, "blockgz.kafka.source": "blockgz", "blockgz.spark.kafka.jars": str(jar)}
    )
    assert "spark.jars" not in spark_conf_with_connector(job)
    assert "blockgz.spark.kafka.jars=" in caplog.text and "is not used" in caplog.text


def test_a_checkpoint_keeps_the_source_it_was_started_with(tmp_path):
    from blockgz.errors import CheckpointError
    from blockgz.sink.export.checkpoint import SOURCE_FILE
    from blockgz.sink.export.checkpoint import checkpoint_source as record
    from blockgz.sink.export.query import CHOICE_OF

    def checkpoint_source(place, source):
        return record(place, source, choice_of=CHOICE_OF)

    old = tmp_path / "old"  # written before the source was recorded: takes this run's
    (old / "offsets").mkdir(parents=True)
    checkpoint_source(old, "kafka")
    assert (old / SOURCE_FILE).read_text() == "kafka\n"
    checkpoint_source(old, "kafka")  # the same source again: on it goes
    with pytest.raises(CheckpointError) as refused:
        checkpoint_source(old, "blockgz-kafka")
    message = str(refused.value)
    assert "started with the kafka source" in message
    assert "Set blockgz.kafka.source=spark to go on" in message
    assert "or give a new --checkpoint" in message
    assert (old / SOURCE_FILE).read_text() == "kafka\n"  # the refusal changed nothing
    fresh = tmp_path / "fresh"
    checkpoint_source(fresh, "blockgz-kafka")
    with pytest.raises(CheckpointError, match=r"blockgz\.kafka\.source=blockgz to go on"):
        checkpoint_source(fresh, "kafka")
