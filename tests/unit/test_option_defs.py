"""Options declared once (blockgz.option_defs): what is produced from the declarations, the
readers' checks, the routing bug of groupIdPrefix, and the check that only declared options
are read."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from blockgz import option_defs
from blockgz.cli import main
from blockgz.cli.option_sets import ALL_OPTIONS
from blockgz.cli.options import readme_with_tables
from blockgz.errors import ConfigError
from blockgz.option_defs import OptionDef, OptionRegistry
from blockgz.options import Options
from blockgz.reader import open_archive
from blockgz.reader.restore.send import restore_options
from blockgz.sink.jobconfig.config import ExportSettings, split_options
from blockgz.sink.jobconfig.settings_names import CONFLUENT_S3_OPTIONS, KNOWN, READ, check_keys

#: Confluent's S3 sink options (kafka-connect-storage-cloud 12.x: its connector, storage and
#: partitioner tables, with the Connect error settings it documents), as written down before
#: the declarations: the declared Confluent options must be exactly these.
CONFLUENT_TABLE = frozenset(
    [
        "allow.optional.map.keys",
        "avro.codec",
        "aws.access.key.id",
        "aws.secret.access.key",
        "behavior.on.null.values",
        "connect.meta.data",
        "directory.delim",
        "enable.conditional.writes",
        "enhanced.avro.schema.support",
        "errors.deadletterqueue.context.headers.enable",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.topic.replication.factor",
        "errors.tolerance",
        "file.delim",
        "filename.offset.zero.pad.width",
        "flush.size",
        "format.bytearray.extension",
        "format.bytearray.separator",
        "format.class",
        "headers.format.class",
        "json.decimal.format",
        "keys.format.class",
        "locale",
        "max.files.scan.limit",
        "max.write.duration.ms",
        "parquet.codec",
        "partition.duration.ms",
        "partition.field.name",
        "partitioner.class",
        "partitioner.max.open.files",
        "path.format",
        "report.null.values.to.dlq",
        "retry.backoff.ms",
        "rotate.file.on.partition.change",
        "rotate.interval.ms",
        "rotate.schedule.interval.ms",
        "s3.acl.canned",
        "s3.bucket.name",
        "s3.compression.level",
        "s3.compression.type",
        "s3.credentials.provider.class",
        "s3.credentials.provider.sts.region",
        "s3.credentials.provider.sts.role.arn",
        "s3.credentials.provider.sts.role.external.id",
        "s3.credentials.provider.sts.role.session.name",
        "s3.elastic.buffer.enable",
        "s3.elastic.buffer.init.capacity",
        "s3.http.send.expect.continue",
        "s3.object.behavior.on.tagging.error",
        "s3.object.tagging",
        "s3.object.tagging.key.value.pairs",
        "s3.part.retries",
        "s3.part.size",
        "s3.path.style.access.enabled",
        "s3.proxy.password",
        "s3.proxy.url",
        "s3.proxy.user",
        "s3.region",
        "s3.retry.backoff.ms",
        "s3.schema.partition.affix.type",
        "s3.send.digest",
        "s3.sse.customer.key",
        "s3.sse.kms.key.id",
        "s3.ssea.name",
        "s3.wan.mode",
        "schema.compatibility",
        "schemas.cache.config",
        "shutdown.timeout.ms",
        "storage.class",
        "store.kafka.headers",
        "store.kafka.keys",
        "store.url",
        "timestamp.extractor",
        "timestamp.field",
        "timezone",
        "tombstone.encoded.partition",
        "topics.dir",
    ]
)


def job(**extra: str) -> dict[str, str]:
    return {
        "name": "s3-sink",
        "topics": "orders",
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "s3.bucket.name": "archive",
        "flush.size": "3",
        **extra,
    }


# -- the named bug: groupIdPrefix -------------------------------------------------------------
def test_group_id_prefix_reaches_the_source_and_nothing_is_warned(caplog):
    with caplog.at_level(logging.WARNING):
        config = ExportSettings.from_mapping(job(groupIdPrefix="archiver"))
    assert config.source_options["groupIdPrefix"] == "archiver"
    assert config.source.group_id_prefix == "archiver"
    assert "groupIdPrefix" not in config.sink_options
    assert not [r for r in caplog.records if "groupIdPrefix" in r.getMessage()]


def test_every_option_the_source_declares_is_routed_to_it():
    declared = {d.name for d in ALL_OPTIONS if d.owner == "source" and not d.prefix}
    declared -= {"subscribe", "subscribePattern", "assign"}  # the topics are named by `topics`
    source, sink, _ = split_options(Options(job(**dict.fromkeys(declared, "1"))))
    assert declared <= source.keys()
    assert not declared & sink.keys()


def test_job_options_go_neither_to_the_source_nor_to_the_sink():
    source, sink, spark = split_options(Options(job(**{"blockgz.preflight": "false"})))
    assert "blockgz.preflight" not in source | sink | spark


# -- the lists produced from the declarations ---------------------------------------------------
def test_the_declared_confluent_options_are_confluents_table():
    assert CONFLUENT_S3_OPTIONS == CONFLUENT_TABLE


def test_a_typo_of_any_declared_export_option_is_caught():
    with pytest.raises(ConfigError, match=r"groupIdPrefx: .*did you mean groupIdPrefix"):
        check_keys(["groupIdPrefx"])
    assert "blockgz.lease.takeover" in READ and "s3.upload.concurrency" in KNOWN


def test_every_declared_default_passes_its_own_validation():
    for d in ALL_OPTIONS:
        if d.kind == "choice":
            assert d.default in d.allowed, d.name
        if d.kind == "int" and d.default is not None and d.low is not None:
            # The default may sit outside the range only as "not set" (-1, 0: off).
            assert d.default >= d.low or d.default in (0, -1), d.name
        d.read({})  # a missing option gives the default without an error


def test_a_name_is_declared_once_per_owner():
    registry = OptionRegistry()
    registry.declare(OptionDef("x", "int", 1, "", "reader"))
    registry.declare(OptionDef("x", "int", 1, "", "reader"))  # the same again: fine
    registry.declare(OptionDef("x", "flag", True, "", "sink"))  # another owner's: fine
    with pytest.raises(ValueError, match=r"declared twice"):
        registry.declare(OptionDef("x", "int", 2, "", "reader"))


def test_a_declaration_reads_its_type_default_and_range():
    retries = ALL_OPTIONS.get("s3.part.retries", "store")
    assert retries.read({}) == 3 and retries.read({"s3.part.retries": "7"}) == 7
    with pytest.raises(ConfigError, match=r"s3.part.retries: 101 is out of range; allowed: 1..100"):
        retries.read({"s3.part.retries": "101"})


# -- readers check their options ------------------------------------------------------------------
def test_open_archive_refuses_typos_naming_the_key_and_a_suggestion(tmp_path):
    with pytest.raises(ConfigError) as raised:
        open_archive(str(tmp_path), {"prefech": "4", "topics.dri": "x"})
    message = str(raised.value)
    assert "prefech: not a setting blockgz knows; did you mean prefetch?" in message
    assert "topics.dri: not a setting blockgz knows; did you mean topics.dir?" in message


def test_open_archive_takes_an_export_config_and_warns_of_what_it_does_not_read(tmp_path, caplog):
    # A reader knows the option sets below it (READER_OPTION_SETS), whatever else the process
    # imported: the export's own options are ignored with one warning, as unknown names are.
    options = {**job(), "prefetch": "4", "s3.region": "eu-west-1", "my.own.setting": "1"}
    options.pop("s3.bucket.name")
    with caplog.at_level(logging.WARNING), open_archive(str(tmp_path), options) as archive:
        assert archive.prefetch == 4
    warned = [r.getMessage() for r in caplog.records if "does not read" in r.getMessage()]
    assert warned == [
        "open_archive: ignoring settings it does not read: "
        "flush.size, kafka.bootstrap.servers, my.own.setting, topics"
    ]


def test_the_spark_reader_refuses_typos_in_lower_cased_names(tmp_path):
    from blockgz.reader.spark.archive_source import ArchiveReadSource

    source = ArchiveReadSource()
    # Spark lower-cases a data source's option names.
    source.options = {"path": str(tmp_path), "blockgz.split.sise": "1", "value.format": "json"}
    with pytest.raises(ConfigError, match=r"blockgz.split.sise: .*did you mean blockgz.split.size"):
        source.schema()


def test_restore_and_replay_refuse_typos_and_split_the_producers_settings():
    assert restore_options({"kafka.acks": "all", "committed": "false"}) == (
        {"committed": "false"},
        {"acks": "all"},
    )
    with pytest.raises(ConfigError, match=r"restore: prefech: .*did you mean prefetch"):
        restore_options({"prefech": "4"})
    with pytest.raises(ConfigError, match=r"replay: prefech: .*did you mean prefetch"):
        restore_options({"prefech": "4"}, "replay")


# -- only declared options are read ----------------------------------------------------------------
def test_a_read_of_an_undeclared_option_by_blockgz_code_is_recorded():
    assert option_defs.track_reads  # tests/conftest.py turns it on for every test
    opts = Options({"no.such.option": "1"})
    product = {"__name__": "blockgz.sink.write.fake", "opts": opts}
    plugin = {"__name__": "my_plugin", "opts": opts}
    exec("opts.text('no.such.option'); opts.flag('s3.send.digest', False)", product)
    exec("opts.text('my.plugin.option')", plugin)  # a user's plugin reads its own options
    recorded = set(option_defs.UNDECLARED_READS)
    option_defs.UNDECLARED_READS.clear()  # else the autouse check fails this test
    assert recorded == {("blockgz.sink.write.fake", "no.such.option")}


def test_a_typed_read_that_disagrees_with_its_declaration_is_recorded():
    opts = Options({})
    product = {"__name__": "blockgz.fake", "opts": opts}
    exec("opts.integer('s3.part.retries', 3, low=1, high=100)", product)  # as declared
    assert not option_defs.UNDECLARED_READS
    exec("opts.integer('s3.part.retries', 5, low=1, high=100)", product)  # another default
    exec("opts.flag('s3.part.retries', False)", product)  # another type
    recorded = sorted(option_defs.UNDECLARED_READS)
    option_defs.UNDECLARED_READS.clear()
    assert [name.split(" read as")[0] for _, name in recorded] == ["s3.part.retries"] * 2


# -- marked tables and the command (the docs' options reference: tests/unit/test_docs.py) -----
def test_marked_option_tables_are_made_from_the_declarations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- options:store -->\nstale\n<!-- /options:store -->\ny\n", "utf-8")
    result = CliRunner().invoke(main, ["options", "--readme", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert "stale" not in text and text.startswith("x\n") and text.endswith("y\n")
    assert "| `s3.part.retries` | `3` | attempts per request, the first included |" in text
    assert readme_with_tables(text) == text  # made again, nothing changes


def test_options_command_lists_filters_and_prints_markdown():
    runner = CliRunner()
    listed = runner.invoke(main, ["options", "--owner", "source", "group"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.startswith("groupIdPrefix  (source, spark, text, default: blockgz-")
    assert "flush.size" not in listed.output
    markdown = runner.invoke(main, ["options", "--markdown", "--owner", "store"])
    assert "| `s3.part.retries` | `3` | attempts per request, the first included |" in (
        markdown.output
    )
    refused = runner.invoke(main, ["options", "--all", "storage"])
    assert "storage.class  (sink, confluent, text, refused" in refused.output
    assert "Examples:" in runner.invoke(main, ["options", "--help"]).output


@pytest.mark.parametrize(
    ("given", "bytes_"), [("3000", 3000), ("32MiB", 32 * 2**20), ("1 GB", 10**9)]
)
def test_the_spark_readers_split_size_takes_a_unit(given, bytes_):
    from blockgz.options import as_options
    from blockgz.reader.spark.archive_source import SPARK_READ_OPTIONS

    opts = as_options({"blockgz.split.size": given})
    assert SPARK_READ_OPTIONS.read(opts, "blockgz.split.size") == bytes_
