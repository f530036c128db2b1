"""The export job's lease: one writer per archive (:mod:`blockgz.commits.writer_lease`), taken
and lost."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from blockgz.commits.writer_lease import Lease, lease_key
from blockgz.errors import LeaseLostError
from blockgz.sink.jobconfig.config import ExportSettings

log = logging.getLogger("blockgz.export")


def take_lease(job: ExportSettings, checkpoint: Path) -> Lease:
    """Take the job's lease (:mod:`blockgz.commits.writer_lease`) or raise :class:`LeaseHeldError`
    naming
    its holder."""
    store, prefix = job.sink.make_store()
    lease = Lease(
        store,
        lease_key(job.sink.layout, prefix, job.name),
        checkpoint=str(checkpoint.resolve()),
        ttl_ms=job.lease_ttl_ms,
    )
    lease.acquire(take_over=job.lease_takeover)
    return lease


def stop_on_lost_lease(lost: LeaseLostError, stop: threading.Event) -> None:
    """Stop the query; :func:`~blockgz.sink.export.job.run_export` then raises ``lost`` (the
    one line the CLI prints)."""
    log.debug("%s", lost)
    stop.set()
