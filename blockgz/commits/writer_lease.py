"""One writer per archive: the export job's lease, ``<prefix>_blockgz/<job>/lease.json``.

An export takes the lease before it touches the archive and keeps it while it runs; a second
export of the same job refuses to start, in one line naming the holder. The lease is written
with conditional puts (:meth:`~blockgz.store.base.ObjectStore.put_if`: S3's
``If-None-Match: *`` to create and ``If-Match: <etag>`` to renew or take over; an exclusive
create and a locked compare-and-rename on a local disk) and read back after each write.

Policy:

* the holder renews it every third of its time to live (``blockgz.lease.ttl.ms``) and checks
  it with a conditional renew before each batch manifest, stopping in one line
  (:class:`~blockgz.errors.LeaseLostError`) if another export has taken it;
* a later export refuses (:class:`~blockgz.errors.LeaseHeldError`) unless the lease was
  released (a clean stop), expired, is held by a dead process on this host (a SIGKILLed run
  restarted on the same machine), or ``blockgz.lease.takeover=true`` is given;
* expiry compares the writer's clock with the reader's: clocks must agree to well within the
  time to live.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> first = Lease(store, "_blockgz/job/lease.json", checkpoint="/ckpt/a")
>>> first.acquire().pid == os.getpid()
True
>>> second = Lease(store, "_blockgz/job/lease.json", checkpoint="/ckpt/b")
>>> second.acquire()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.LeaseHeldError: another export of this job holds ...
>>> first.release()
>>> second.acquire().checkpoint
'/ckpt/b'
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from blockgz.archive.job_keys import JobKeys
from blockgz.errors import (
    CorruptManifestError,
    LeaseHeldError,
    LeaseLostError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)
from blockgz.store.base import ObjectStore

log = logging.getLogger("blockgz.lease")

#: ``blockgz.lease.ttl.ms``'s default: a holder that stops renewing loses it after a minute.
DEFAULT_TTL_MS = 60_000
#: Tries of take-over rounds when other writers keep changing the lease under us.
_ROUNDS = 5


def lease_key(layout: JobKeys, prefix: str, job_name: str) -> str:
    """``<prefix><manifest dir>/<job>/lease.json``, beside the job's manifests.

    >>> from blockgz.archive.layout import Layout
    >>> lease_key(Layout(), "exports/", "s3-sink")
    'exports/_blockgz/s3-sink/lease.json'
    """
    return layout.lease_key(prefix, job_name)


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as ``lease.json`` records it (times are epoch seconds)."""

    host: str
    pid: int
    checkpoint: str
    since: float
    token: str
    expires: float
    #: Counts the writers that took the lease, one up at each take-over.
    generation: int = 1
    #: The process's start time (Linux ``/proc``), to tell a reused pid from the holder.
    started: str = ""
    released: bool = False

    def to_json(self) -> bytes:
        doc = asdict(self)
        doc["since_utc"] = _utc(self.since)
        doc["expires_utc"] = _utc(self.expires)
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, *, source: str = "lease") -> Holder:
        try:
            doc = json.loads(data)
            return cls(
                host=str(doc["host"]),
                pid=int(doc["pid"]),
                checkpoint=str(doc.get("checkpoint", "")),
                since=float(doc["since"]),
                token=str(doc["token"]),
                expires=float(doc["expires"]),
                generation=int(doc.get("generation", 1)),
                started=str(doc.get("started", "")),
                released=bool(doc.get("released", False)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz lease ({exc})") from exc

    def describe(self) -> str:
        """``host h pid 12 (checkpoint /c) since 2026-11-25T19:00:00Z``."""
        return (
            f"host {self.host} pid {self.pid} (checkpoint {self.checkpoint or '?'}) "
            f"since {_utc(self.since)}"
        )


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def process_started(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat``),
    or ``""`` where unknown; with the pid it names one process for the life of the machine.

    >>> process_started(os.getpid()) != ""
    True
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return ""
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def pid_alive(pid: int, started: str = "") -> bool:
    """Whether process ``pid`` runs on this host (and, given ``started``, is the same one).

    >>> pid_alive(os.getpid(), process_started(os.getpid())), pid_alive(os.getpid(), "1")
    (True, False)
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    if started:
        now = process_started(pid)
        return now in ("", started)
    return True


def takeover_reason(
    current: Holder,
    *,
    now: float,
    host: str,
    alive: Callable[[int, str], bool] = pid_alive,
    force: bool = False,
) -> str | None:
    """Why ``current``'s lease may be taken now, or ``None`` if it may not.

    >>> h = Holder("h1", 7, "/c", since=0.0, token="t", expires=100.0)
    >>> takeover_reason(h, now=50.0, host="h2") is None
    True
    >>> takeover_reason(h, now=101.0, host="h2")
    'it expired at 1970-01-01T00:01:40Z'
    >>> takeover_reason(h, now=50.0, host="h1", alive=lambda pid, started: False)
    'its process 7 on this host is gone'
    """
    if current.released:
        return "it was released"
    if now >= current.expires:
        return f"it expired at {_utc(current.expires)}"
    if current.host == host and not alive(current.pid, current.started):
        return f"its process {current.pid} on this host is gone"
    if force:
        return "blockgz.lease.takeover=true"
    return None


class Lease:
    """The lease at ``key`` of ``store``, as taken (or checked) by this process.

    A sink task's driver process checks it with :meth:`for_token` and :meth:`renew`; the
    export takes it with :meth:`acquire`, keeps it with :meth:`keep` and lets it go with
    :meth:`release`.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        checkpoint: str = "",
        ttl_ms: int = DEFAULT_TTL_MS,
        token: str | None = None,
        clock: Callable[[], float] = time.time,
        host: str | None = None,
        alive: Callable[[int, str], bool] = pid_alive,
    ):
        self.store = store
        self.key = key
        self.checkpoint = checkpoint
        self.ttl = ttl_ms / 1000
        self.token = token or secrets.token_hex(8)
        self.clock = clock
        self.host = host or socket.gethostname()
        self.alive = alive
        self.holder: Holder | None = None

    @classmethod
    def for_token(
        cls, store: ObjectStore, key: str, token: str, *, ttl_ms: int = DEFAULT_TTL_MS
    ) -> Lease:
        """The lease as another process of the holder sees it (the sink's commit)."""
        return cls(store, key, token=token, ttl_ms=ttl_ms)

    def _read(self) -> tuple[Holder, str] | None:
        try:
            data, tag = self.store.get_versioned(self.key)
        except ObjectNotFoundError:
            return None
        return Holder.from_json(data, source=self.store.url(self.key)), tag

    def _mine(self, generation: int, since: float | None = None) -> Holder:
        now = self.clock()
        return Holder(
            host=self.host,
            pid=os.getpid(),
            checkpoint=self.checkpoint,
            since=now if since is None else since,
            token=self.token,
            expires=now + self.ttl,
            generation=generation,
            started=process_started(os.getpid()),
        )

    def acquire(self, *, take_over: bool = False) -> Holder:
        """Take the lease, or raise :class:`LeaseHeldError` in one line naming its holder
        and how to take over."""
        for _ in range(_ROUNDS):
            found = self._read()
            if found is None:
                mine = self._mine(1)
                try:
                    self.store.put_if(self.key, mine.to_json(), if_none_match=True)
                except PreconditionFailedError:
                    continue  # another writer created it first: look at it
                return self._confirm(mine, None)
            current, tag = found
            if current.token == self.token:
                return self._confirm(current, None)
            reason = takeover_reason(
                current, now=self.clock(), host=self.host, alive=self.alive, force=take_over
            )
            if reason is None:
                raise LeaseHeldError(self._held_message(current))
            mine = self._mine(current.generation + 1)
            try:
                self.store.put_if(self.key, mine.to_json(), if_match=tag)
            except PreconditionFailedError:
                continue  # it changed under us: look again
            return self._confirm(mine, reason, previous=current)
        raise LeaseHeldError(
            f"{self.store.url(self.key)}: other exports keep changing the lease; "
            "is another export of this job starting?"
        )

    def _confirm(self, mine: Holder, reason: str | None, previous: Holder | None = None) -> Holder:
        """Read the lease back: ours, or the one that overwrote it (a store that ignored the
        condition) holds it."""
        found = self._read()
        if found is None or found[0].token != self.token:
            holder = found[0] if found else None
            raise LeaseHeldError(
                self._held_message(holder)
                if holder
                else f"{self.store.url(self.key)}: the lease vanished as it was taken"
            )
        self.holder = found[0]
        if reason is not None and previous is not None:
            log.warning(
                "took over the lease %s of %s: %s",
                self.store.url(self.key),
                previous.describe(),
                reason,
                # an event of the export's JSON log (blockgz.sink.jobconfig.events)
                extra={"event": {"kind": "lease", "from": previous.describe(), "reason": reason}},
            )
        log.debug(
            "holding the lease %s (expires %s unless renewed)",
            self.store.url(self.key),
            _utc(self.holder.expires),
        )
        return self.holder

    def _held_message(self, current: Holder) -> str:
        return (
            f"another export of this job holds {self.store.url(self.key)}: "
            f"{current.describe()}, until {_utc(current.expires)} unless renewed; stop it, "
            "or wait until it expires (blockgz.lease.ttl.ms after its last renewal), or set "
            "blockgz.lease.takeover=true to take it over (that export then stops before its "
            "next commit)"
        )

    def renew(self, *, unless_fresh: bool = False) -> Holder:
        """Extend the lease by its time to live; raise :class:`LeaseLostError` if another
        export has it. Safe to call from several processes of the holder at once.
        ``unless_fresh``: a lease still ours that another process of the holder renewed within
        the last sixth of its time to live (the sink's commit, before each manifest) is left
        as it is: a GET, not a PUT (12.5 times its price)."""
        for _ in range(_ROUNDS):
            found = self._read()
            if found is None:
                raise LeaseLostError(
                    f"{self.store.url(self.key)}: the lease of this export is gone; stopping "
                    "before the next commit"
                )
            current, tag = found
            if current.token != self.token or current.released:
                raise LeaseLostError(
                    f"{self.store.url(self.key)}: this export lost its lease to "
                    f"{current.describe()} (generation {current.generation}); stopping before "
                    "the next commit: what was committed stays, the other export continues"
                )
            if unless_fresh and current.expires - self.clock() > self.ttl * _FRESH:
                self.holder = current
                return current
            renewed = replace(current, expires=self.clock() + self.ttl)
            try:
                self.store.put_if(self.key, renewed.to_json(), if_match=tag)
            except PreconditionFailedError:
                continue  # another process of ours renewed it, or someone took it: look again
            self.holder = renewed
            return renewed
        raise LeaseLostError(f"{self.store.url(self.key)}: could not renew the lease")

    def release(self) -> None:
        """Mark the lease released (a conditional write: only while it is still ours)."""
        try:
            found = self._read()
            if found is None or found[0].token != self.token:
                return
            current, tag = found
            done = replace(current, released=True, expires=self.clock())
            self.store.put_if(self.key, done.to_json(), if_match=tag)
            log.debug("released the lease %s", self.store.url(self.key))
        except (StoreError, CorruptManifestError) as exc:
            log.warning("could not release the lease %s: %s", self.store.url(self.key), exc)

    def keep(self, on_lost: Callable[[LeaseLostError], None]) -> LeaseKeeper:
        """Start a thread renewing the lease every third of its time to live."""
        keeper = LeaseKeeper(self, on_lost)
        keeper.start()
        return keeper


#: The share of its time to live a lease must still have for a keeper to leave it be: renewed
#: within the last sixth, it keeps at least half of it until the keeper's next round.
_FRESH = 5 / 6


class LeaseKeeper(threading.Thread):
    """Renews a lease until :meth:`stop`; calls ``on_lost`` once if it was lost."""

    def __init__(self, lease: Lease, on_lost: Callable[[LeaseLostError], None]):
        super().__init__(name="blockgz-lease", daemon=True)
        self.lease = lease
        self.on_lost = on_lost
        self._stop_event = threading.Event()
        self.lost: LeaseLostError | None = None

    def run(self) -> None:
        interval = max(0.05, self.lease.ttl / 3)
        while not self._stop_event.wait(interval):
            try:
                self.lease.renew(unless_fresh=True)  # a commit renewed it just now: no PUT
            except LeaseLostError as exc:
                self.lost = exc
                self.on_lost(exc)
                return
            except (StoreError, CorruptManifestError) as exc:  # try again next round
                log.warning("could not renew the lease %s: %s", self.lease.key, exc)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)
