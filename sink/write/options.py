"""The sink's options: what each one is called, its type, default and documentation.

Declared once here (:mod:`blockgz.option_defs`); :class:`~blockgz.sink.write.config.SinkSettings`
reads them into typed settings, and the export's routing, "did you mean", ``blockgz options``
and the README's tables come from them.
"""

from __future__ import annotations

from blockgz.blocks.avro.block_index import AVRO_CODECS
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.commits.catalog import DEFAULT_EVERY
from blockgz.formats.compression import COMPRESSIONS
from blockgz.formats.json.connect_render import DECIMAL_FORMATS
from blockgz.formats.parquet.parquet_format import DEFAULT_ROW_GROUP_SIZE, PARQUET_CODECS
from blockgz.option_defs import NotDone, OptionSet, declarer
from blockgz.sink.convert.evolution import COMPATIBILITIES
from blockgz.sink.executor_env import CREDENTIALS_OPTION

#: ``s3.schema.partition.affix.type``: where ``schema_name=<name>`` goes in the encoded partition.
AFFIXES = ("NONE", "PREFIX", "SUFFIX")
NULL_BEHAVIORS = ("fail", "ignore", "write")

#: The two hooks of the sink (see :mod:`blockgz.sink.write.hooks`) and the prefixes of their
#: options.
INPUT_READER = "blockgz.input.reader"
INPUT_PREFIX = "blockgz.source."
LISTENER = "blockgz.write.listener"
LISTENER_PREFIX = "blockgz.write.listener."
#: Set by ``blockgz export`` (not by users): the token of the lease the job holds, and its
#: time to live; the driver's commit renews the lease before each manifest
#: (:mod:`blockgz.commits.writer_lease`).
LEASE_TOKEN = "blockgz.lease.token"
LEASE_TTL = "blockgz.lease.ttl.ms"
#: Set by ``blockgz export`` (not by users) for a job of one named topic: every row is that
#: topic's, so the export drops the ``topic`` column and the tasks put it back
#: (:func:`blockgz.sink.write.task.with_topic`). Spark then does not copy the name into every
#: row's Arrow batch (0.5 µs of the JVM's CPU per record on Spark's Kafka source).
INPUT_TOPIC = "blockgz.input.topic"
#: Set by ``blockgz export`` (not by users): ``module:function`` the driver's commit calls
#: before each manifest, with the ``blockgz.commit.check.*`` options (prefix removed), the
#: manifest log, the batch id and the batch's topics; it may refuse the batch (raise: the batch
#: is aborted) and returns the Kafka topic ids the manifest records
#: (:func:`blockgz.sink.kafka.lives.check_commit`).
COMMIT_CHECK = "blockgz.commit.check"
COMMIT_CHECK_PREFIX = "blockgz.commit.check."


_sink = declarer("sink", "confluent")

_BLOCKS = "(block-GZIP and Avro)"
#: The sink's own options (the key layout, framing, converters, partitioner and dead letters
#: are declared where they are read: :mod:`blockgz.archive.layout`, :mod:`blockgz.blocks.framing`,
#: :mod:`blockgz.sink.convert.converters`, :mod:`blockgz.sink.partitioning.settings`,
#: :mod:`blockgz.sink.deadletter`).
SINK_OPTIONS = OptionSet(
    _sink(
        "format.class",
        "text",
        "json",
        "`json`, `bytearray`, `avro`, `parquet`, or Confluent's "
        "`io.confluent.connect.s3.format.json.JsonFormat` / `…bytearray.ByteArrayFormat` / "
        "`…avro.AvroFormat` / `…parquet.ParquetFormat`",
    ),
    _sink("avro.codec", "choice", "null", "the Avro container's codec", allowed=AVRO_CODECS),
    _sink(
        "parquet.codec",
        "choice",
        "snappy",
        "Parquet's page compression (Confluent's values; `lzo` is not offered: pyarrow writes "
        "no LZO)",
        allowed=PARQUET_CODECS,
    ),
    _sink(
        "parquet.block.size",
        "size",
        DEFAULT_ROW_GROUP_SIZE,
        "Parquet: uncompressed bytes per row group (parquet-mr's name; its 128 MiB default is "
        "smaller here because a seek fetches one row group)",
        origin="blockgz",
        shown="4MiB",
    ),
    _sink(
        "schema.compatibility",
        "choice",
        "NONE",
        "when a new schema starts a file and when a record is projected",
        allowed=COMPATIBILITIES,
    ),
    _sink(
        "connect.meta.data",
        "flag",
        True,
        "Avro: `connect.name` on the file's record schema, as Confluent's AvroData writes it",
    ),
    _sink(
        "enhanced.avro.schema.support",
        "flag",
        True,
        "accepted; the writer's schema is always kept as registered (namespaces, enums, "
        "logical types)",
        status="warned",
        not_done=NotDone(
            "blockgz writes the value's Avro schema as it is (enum symbols and namespaces "
            "kept), as with true",
            lambda opts: opts.text("enhanced.avro.schema.support").lower() == "false",
            {"enhanced.avro.schema.support": "false"},
        ),
    ),
    _sink(
        "json.decimal.format",
        "choice",
        "BASE64",
        "JSON from schema'd values: decimals as base64 of the unscaled value, or `NUMERIC`",
        allowed=DECIMAL_FORMATS,
    ),
    _sink(
        "blockgz.avro.index",
        "flag",
        True,
        "write each `.avro` object's `.avro.index.json` block index (seekable Avro)",
        origin="blockgz",
    ),
    _sink(
        "blockgz.catalog.every",
        "int",
        DEFAULT_EVERY,
        "compact the manifests into the catalog after every this many batches (0: never); "
        "see [the catalog](#seek-on-every-layout-the-catalog)",
        low=0,
        origin="blockgz",
    ),
    _sink(
        "s3.compression.type",
        "choice",
        "none",
        "`none`, `gzip` (one gzip stream), `blockgzip` (seekable, with `.index.json`), `zstd` "
        "(one zstd frame, `.zst`), `blockzstd` (seekable zstd frames, `.index.json` and a zstd "
        "seek table)",
        allowed=COMPRESSIONS.names(),
    ),
    _sink(
        "s3.compression.level",
        "int",
        -1,
        "`-1`: zlib 6 for gzip, ISA-L 1 for blockgzip, zstd 3 for zstd, zstd 1 for blockzstd; "
        "gzip types: 0–3 ISA-L, 4–9 zlib; zstd types: the zstd level, 1–22",
        low=-1,
        high=22,
    ),
    _sink(
        "s3.compression.block.size",
        "size",
        DEFAULT_BLOCK_SIZE,
        "uncompressed bytes per block " + _BLOCKS,
        origin="blockgz",
        shown="1MiB",
    ),
    _sink(
        "s3.compression.block.records",
        "int",
        0,
        "at most this many records per block",
        low=0,
        origin="blockgz",
        shown="none",
    ),
    _sink(
        "format.json.envelope",
        "flag",
        False,
        'write `{"topic","partition","offset","timestamp","key","headers","value"}` per line '
        "(headers are read from Kafka for it: `includeHeaders` defaults to `true`)",
        origin="blockgz",
    ),
    _sink(
        "flush.size",
        "int",
        None,
        "records per file (*per file*, not per topic-partition as in Confluent); ≥ 1 as in "
        "Confluent, leave it out for no limit",
        low=1,
        hint="leave it out for no limit",
        shown="unlimited",
    ),
    _sink(
        "flush.size.bytes",
        "size",
        0,
        "uncompressed bytes per file (`64MiB`)",
        low=0,
        origin="blockgz",
        shown="unlimited",
    ),
    _sink(
        "rotate.interval.ms",
        "int",
        -1,
        "record-time span of a file, for any partitioner",
        low=-1,
        shown="off",
    ),
    _sink(
        "rotate.schedule.interval.ms",
        "int",
        -1,
        "wall-clock rotation from midnight in `timezone` (not exactly-once)",
        low=-1,
        shown="off",
    ),
    _sink(
        "rotate.file.on.partition.change",
        "flag",
        True,
        "with `rotate.interval.ms`, a record for another encoded partition than the previous "
        "one commits every open file (tombstones exempt), as Confluent",
    ),
    _sink(
        "partitioner.max.open.files",
        "int",
        -1,
        "before opening one more file, commit the oldest open one (Confluent commits all)",
        low=-1,
        shown="no limit",
    ),
    _sink(
        "s3.schema.partition.affix.type",
        "choice",
        "NONE",
        "`PREFIX` or `SUFFIX`: `schema_name=<value schema's name>` in the encoded partition "
        "(needs a converter with schemas)",
        allowed=AFFIXES,
    ),
    _sink(
        "store.kafka.keys",
        "flag",
        False,
        "also write `…+<start>.keys.<ext>` beside each value file: one entry per value "
        "record, same order, rotated, compressed (block-GZIP with its own index) and committed "
        "with it",
    ),
    _sink(
        "store.kafka.headers",
        "flag",
        False,
        "also write `…+<start>.headers.<ext>` beside each value file, as the keys",
    ),
    _sink(
        "keys.format.class",
        "text",
        "avro",
        "`avro`, `json` or `bytearray`; keys are decoded by `key.converter` when one is set, "
        "raw bytes otherwise",
    ),
    _sink("headers.format.class", "text", "avro", "`avro` or `json`"),
    _sink(
        "store.kafka.timestamps",
        "flag",
        True,
        "keep each record's Kafka timestamp and timestamp type, so a restore gives them back "
        "and time windows work on every format: in the value file's hidden `.index.json` "
        "sidecar (`blockgzip`, `blockzstd`, Avro; about 1.4 bytes a record), else in a hidden "
        "`.…+<start>.timestamps.<ext>` beside it (about 3 bytes a record compressed; archives "
        "written before the sidecar kept them still read theirs). A leading `.` hides both "
        "from Spark, DuckDB, Hive and Athena reading the topic's folder. Not written with "
        "`format.json.envelope` or Parquet, which keep them",
        origin="blockgz",
    ),
    _sink(
        "timestamps.format.class",
        "text",
        "",
        "`avro` or `json`: the format of the timestamps files",
        origin="blockgz",
        shown="the value files' format; `json` beside `bytearray`",
    ),
    _sink(
        "behavior.on.null.values",
        "choice",
        "fail",
        "`fail`, `ignore`, `write` (to `tombstone.encoded.partition`): with "
        "`store.kafka.keys`, as Confluent, only the keys (and headers) files are written "
        "there, no value file; without it, the value itself is kept (JSON `null`, an empty "
        "bytearray record)",
        allowed=NULL_BEHAVIORS,
    ),
    _sink(
        "tombstone.encoded.partition",
        "raw",
        "tombstone",
        "the encoded partition of tombstones written with `behavior.on.null.values=write`",
    ),
    _sink(
        LISTENER,
        "text",
        "",
        "`module:Class`, a `blockgz.sink.write.hooks.WriteListener` told about each finished "
        "object (in the task) and each committed batch (on the driver); its options are "
        "`blockgz.write.listener.*`",
        origin="blockgz",
        shown="none",
    ),
    _sink(
        LISTENER_PREFIX, "text", "", "the write listener's options", origin="blockgz", prefix=True
    ),
    _sink(
        INPUT_READER,
        "text",
        "",
        "`module:function` turning the task's input rows into Kafka records, with options "
        "`blockgz.source.*` (`blockgz export` sets it when tasks read Kafka themselves)",
        origin="blockgz",
        shown="none",
    ),
    _sink(INPUT_PREFIX, "text", "", "the input reader's options", origin="blockgz", prefix=True),
    _sink(
        INPUT_TOPIC,
        "text",
        "",
        "set by `blockgz export`, not by users: the one topic of rows that carry no `topic`",
        origin="blockgz",
        internal=True,
    ),
    _sink(
        LEASE_TOKEN,
        "text",
        "",
        "set by `blockgz export`, not by users: the token of the lease the job holds",
        origin="blockgz",
        internal=True,
    ),
    _sink(
        COMMIT_CHECK,
        "text",
        "",
        "set by `blockgz export`, not by users: the check before each manifest (topic ids)",
        origin="blockgz",
        internal=True,
    ),
    _sink(
        COMMIT_CHECK_PREFIX,
        "text",
        "",
        "set by `blockgz export`, not by users: the commit check's options",
        origin="blockgz",
        prefix=True,
        internal=True,
    ),
    _sink(
        CREDENTIALS_OPTION,
        "text",
        "",
        "set by `blockgz export`, not by users: the driver's AWS credentials for the tasks "
        "(blockgz.sink.executor_env)",
        origin="blockgz",
        internal=True,
    ),
)
