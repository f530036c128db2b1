"""Every exception blockgz, sink and reader raise, under one base class.

Each subclasses :class:`BlockGzError` and, where the meaning matches, a builtin, so
callers can catch either ``BlockGzError`` or the familiar builtin. They are grouped by kind
of problem: settings, the format, the object store, Kafka records, the Kafka source, the
export job. (The Kafka and export errors live here too, so that one module holds every error
the CLI turns into a one-line message.) ::

    >>> from blockgz.errors import OffsetNotFoundError
    >>> issubclass(OffsetNotFoundError, LookupError)
    True
"""

from __future__ import annotations


class BlockGzError(Exception):
    """Base class of every error raised by blockgz, sink and reader."""


class ConfigError(BlockGzError, ValueError):
    """A setting or argument is missing or has a value outside the allowed ones."""


class MissingDependencyError(BlockGzError, ImportError):
    """An optional library needed for the requested feature is not installed."""


class IndexNotReadyError(BlockGzError, RuntimeError):
    """A writer's index was asked for before the writer was closed."""


class RecordFramingError(BlockGzError, ValueError):
    """A record cannot be framed, e.g. it contains the record separator."""


class CorruptIndexError(BlockGzError, ValueError):
    """An ``.index.json`` sidecar is not valid JSON or breaks the index rules."""


class IndexMismatchError(BlockGzError, ValueError):
    """An index and the data file it describes disagree (sizes, counts, ranges)."""


class ArchiveIntegrityError(BlockGzError, ValueError):
    """What the store holds is not what a manifest committed: an object's or sidecar's size,
    checksum or identity (topic, partition, offsets, records, times) differs from its entry.

    The message names the key and what differs (``<url>: size 1234, committed 1200``).
    """

    def __init__(self, message: str, *, key: str | None = None):
        super().__init__(message)
        self.key = key


class MissingCommitError(ArchiveIntegrityError):
    """A manifest is gone from an export's sequence (deleted): what it committed is committed
    no more, so a read would silently miss its records. The message names the manifest."""


class CorruptBlockError(BlockGzError, ValueError):
    """A block does not decompress, or decompresses to something the index did not promise."""

    def __init__(self, message: str, *, block: int | None = None, byte_offset: int | None = None):
        super().__init__(message)
        self.block = block
        self.byte_offset = byte_offset


class UnknownFormatError(BlockGzError, ValueError):
    """An object's extension names no format blockgz knows, so it is not read as records of
    any (readers report it instead of guessing)."""


class CorruptManifestError(BlockGzError, ValueError):
    """A batch manifest (or a catalog root, segment or intent) is not valid JSON or lacks what
    it holds."""


class NewerVersionError(BlockGzError):
    """A manifest or catalog root was written by a newer blockgz, in a major version this one
    cannot read: upgrade blockgz."""


class OffsetNotFoundError(BlockGzError, LookupError):
    """The requested Kafka offset is not in the file, object or archive."""


class StoreError(BlockGzError, OSError):
    """An object store operation failed after its retries."""


class ObjectNotFoundError(StoreError, FileNotFoundError):
    """The object, bucket or local path does not exist."""


class MissingIndexError(ObjectNotFoundError):
    """A gzip object has no ``.index.json`` sidecar, so it cannot be read by offset."""


class StoreAccessDeniedError(StoreError, PermissionError):
    """The object store refused the request for lack of permission."""


class PreconditionFailedError(StoreError):
    """A conditional write was refused: the object exists (create) or changed (``If-Match``)."""


class BadRecordError(BlockGzError, ValueError):
    """A Kafka record cannot be partitioned or encoded (not JSON, a missing field, a null value).

    The message names the topic, partition and offset so the record can be found again.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ):
        where = f"{topic}-{partition}@{offset}: " if topic is not None else ""
        super().__init__(where + message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class OffsetOrderError(BadRecordError):
    """Records arrived with offsets that do not increase (per writer, per topic-partition)."""


class SourceError(BlockGzError, RuntimeError):
    """The Kafka source cannot read what it was asked for (unreachable broker, unknown topic)."""


class RegistryError(BlockGzError, RuntimeError):
    """The schema registry cannot give a schema a record needs (unreachable, unknown id).

    Not the record's fault: the batch fails and is retried, it is never dead-lettered. The
    message names the record when one is known.
    """

    def __init__(self, message: str, *, record: tuple[str, int, int] | None = None):
        where = f"{record[0]}-{record[1]}@{record[2]}: " if record is not None else ""
        super().__init__(where + message)
        self.record = record


class UnknownSchemaError(RegistryError, LookupError):
    """The registry answers, but has no schema under the id a record names (a bad record)."""


class DataLossError(SourceError):
    """Offsets the job still needed are gone from Kafka (retention, topic deleted)."""


class TopicRecreatedError(SourceError):
    """A topic was deleted and recreated under its name (its Kafka topic id changed) since the
    archive recorded it: the export refuses to write the new life beside the old one."""


class PreflightError(BlockGzError, RuntimeError):
    """A check before the export starts failed: the bucket, the brokers or a topic."""


class LeaseHeldError(BlockGzError, RuntimeError):
    """Another export holds the job's lease (one writer per archive); the message names it."""


class LeaseLostError(BlockGzError, RuntimeError):
    """This export no longer holds the job's lease (it expired and another export took it)."""


class CheckpointError(BlockGzError, OSError):
    """The export's checkpoint directory cannot take Spark's logs: not writable, or full."""


class ExportFailed(BlockGzError, RuntimeError):
    """The streaming export stopped with an error; the message is the root cause."""


class ReplayError(BlockGzError, RuntimeError):
    """Replaying an archive into Kafka cannot go on: the target refuses, or a record was not
    delivered (the message says which, and that a rerun resumes where delivery stopped)."""


class RestoreError(ReplayError):
    """A restore cannot go on as asked: a target topic that does not fit, a target partition
    another restore filled, a consumer group active on the target (the message says which)."""


class JarResolutionError(BlockGzError, RuntimeError):
    """A JVM part could not be fetched from Maven Central (no network, or a wrong version)."""


class IcebergCommitError(BlockGzError, RuntimeError):
    """A batch's files could not be added to the Iceberg table (the catalog refused the commit,
    or the files do not fit the table); the archive's own commit stands, and the next batch or
    restart adds them."""


class SparkPlanError(BlockGzError, RuntimeError):
    """Spark's plan of a ``format("blockgz")`` read cannot be made safe on this session (the
    guard of :mod:`blockgz.reader.spark.plan_guard` cannot be added)."""
