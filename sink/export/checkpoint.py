"""The export's checkpoint directory: checked before the run, its epoch, a refused write named."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from blockgz.commits.manifests import new_epoch
from blockgz.errors import CheckpointError, ExportFailed

EPOCH_FILE = "blockgz-epoch"
#: The ``readStream.format`` that read Kafka into this checkpoint (its offsets are that
#: source's).
SOURCE_FILE = "blockgz-source"


#: Below this much free space the checkpoint's file system is called full: Spark writes an
#: offset and a commit file per batch there, and blockgz its log.
MIN_CHECKPOINT_FREE = 16 * 1024 * 1024


def check_checkpoint(checkpoint: Path, *, min_free: int = MIN_CHECKPOINT_FREE) -> None:
    """Raise :class:`CheckpointError` unless ``checkpoint`` can be created and written and its
    file system has ``min_free`` bytes free.

    >>> import tempfile
    >>> check_checkpoint(Path(tempfile.mkdtemp()) / "ckpt")
    >>> check_checkpoint(Path("/proc/blockgz-ckpt"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.CheckpointError: checkpoint /proc/blockgz-ckpt: cannot write there (...); ...
    """
    problem = checkpoint_problem(checkpoint, min_free=min_free)
    if problem is not None:
        fix = "give --checkpoint (or blockgz.checkpoint.dir) a writable directory with free space"
        raise CheckpointError(f"checkpoint {checkpoint}: {problem}; {fix}")


def checkpoint_problem(checkpoint: Path, *, min_free: int = MIN_CHECKPOINT_FREE) -> str | None:
    """Why ``checkpoint`` cannot take Spark's logs (it cannot be created or written, or its
    file system has less than ``min_free`` bytes free), or ``None``."""
    import shutil

    probe = checkpoint / f".blockgz-probe-{os.getpid()}"
    try:
        checkpoint.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as out:
            out.write(b"\0" * 4096)
            out.flush()
            os.fsync(out.fileno())
        probe.unlink()
        free = shutil.disk_usage(checkpoint).free
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink()
        return f"cannot write there ({exc.strerror or exc})"
    if free < min_free:
        return (
            f"its file system has only {free // 1024:,} KiB free "
            f"(Spark writes offset and commit logs there every batch)"
        )
    return None


#: How the OS words a write that a file system refused (ENOSPC, EDQUOT, EROFS).
_DISK_REFUSED = ("No space left on device", "Disk quota exceeded", "Read-only file system")


def checkpoint_failure(checkpoint: Path, error: ExportFailed) -> ExportFailed:
    """``error``, or, when a running query died of a refused write and the checkpoint is what
    cannot take writes, an error that names the checkpoint and says how to resume.

    Spark's own words (``java.io.IOException: No space left on device``) name no file: the
    failed offset or commit log write is found by probing the checkpoint. Any other disk
    (``spark.local.dir``, the log) keeps Spark's message.

    >>> import tempfile
    >>> error = ExportFailed("java.io.IOException: No space left on device")
    >>> checkpoint_failure(Path(tempfile.mkdtemp()), error) is error  # it has room
    True
    """
    if not any(words in str(error) for words in _DISK_REFUSED):
        return error
    problem = checkpoint_problem(checkpoint)
    if problem is None:
        return error
    return ExportFailed(
        f"checkpoint {checkpoint}: {problem}: Spark could not write its offset or commit log "
        "there, so the export stopped; what it committed stays committed: free space there "
        "(or make it writable) and run again with the same --checkpoint to resume after the "
        "last committed batch"
    )


def checkpoint_epoch(checkpoint: Path) -> str:
    """The epoch of this checkpoint (created on first use): it keeps manifests of runs apart."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    path = checkpoint / EPOCH_FILE
    if path.exists():
        return path.read_text().strip()
    epoch = new_epoch()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(epoch + "\n")
    tmp.replace(path)
    return epoch


def checkpoint_source(checkpoint: Path, source: str, *, choice_of: Mapping[str, str]) -> None:
    """Record which source (``readStream.format``) reads Kafka into ``checkpoint``, or refuse
    (:class:`CheckpointError`) another one than recorded: Spark does not let a query change
    its source across a restart, and the offsets in the checkpoint are the recorded source's.
    A checkpoint from before the record (none) takes ``source``. ``choice_of`` gives the
    ``blockgz.kafka.source`` value that picks each source, for the refusal.

    >>> import tempfile
    >>> place, choices = Path(tempfile.mkdtemp()), {"kafka": "spark", "blockgz-kafka": "blockgz"}
    >>> for _ in range(2):  # the same source again: on it goes
    ...     checkpoint_source(place, "blockgz-kafka", choice_of=choices)
    >>> checkpoint_source(place, "kafka", choice_of=choices)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.CheckpointError: checkpoint ... was started with the blockgz-kafka source...
    """
    path = checkpoint / SOURCE_FILE
    if path.exists():
        recorded = path.read_text().strip()
        if recorded and recorded != source:
            raise CheckpointError(
                f"checkpoint {checkpoint} was started with the {recorded} source, and this run "
                f"would read Kafka with the {source} source (blockgz.kafka.source, or Spark's "
                "connector on the classpath or not): a query keeps its source across restarts. "
                f"Set blockgz.kafka.source={choice_of.get(recorded, 'auto')} to go on with this "
                "checkpoint, or give a new --checkpoint: a fresh checkpoint resumes each "
                "partition from what the archive's manifests committed (blockgz.resume=archive)"
            )
        return
    checkpoint.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(source + "\n")
    tmp.replace(path)
