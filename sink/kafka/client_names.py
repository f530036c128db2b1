"""Which ``kafka.*`` names the Kafka client knows, and what a mistyped one was meant to be.

The ``kafka.*`` settings of an export go to librdkafka (confluent-kafka), which refuses an
unknown name only once a client is made, deep inside the job. This module checks the names
first, before Spark starts: a name librdkafka knows, or a Java client security name that
:mod:`blockgz.kafka.security` translates, is accepted; any other is an error in one line, with
a "did you mean" when a known name is close (a case slip always is). Names are exact, as
librdkafka's and Connect's are.

>>> kafka_name_problem("kafka.bootstrap.server")
'kafka.bootstrap.server: not a Kafka client setting; did you mean kafka.bootstrap.servers?'
>>> kafka_name_problem("kafka.Fetch.Wait.Max.Ms")
'kafka.Fetch.Wait.Max.Ms: not a Kafka client setting; did you mean kafka.fetch.wait.max.ms?'
>>> kafka_name_problem("kafka.fetch.wait.max.ms") is None
True
"""

from __future__ import annotations

import ctypes
import difflib
import functools
import glob
import logging
import os

from blockgz.kafka.security import JAVA_SECURITY_NAMES
from blockgz.option_defs import TYPO_CUTOFF

log = logging.getLogger("blockgz.kafka")

PREFIX = "kafka."
#: Java consumer names whose librdkafka name is spelt otherwise (the Spark Kafka source's
#: users know the Java one; the export's other clients are librdkafka's).
_JAVA_SPELLINGS = {"fetch.max.wait.ms": "fetch.wait.max.ms"}
#: A name no librdkafka has: set after the name probed, so no client is ever made.
_SENTINEL = "blockgz.no.such.property"


@functools.cache
def librdkafka_names() -> frozenset[str]:
    """Every property name of the librdkafka that confluent-kafka bundles (empty when its
    table cannot be read; :func:`is_client_name` then asks librdkafka name by name)."""
    try:
        return frozenset(_parse_table(_properties_table()))
    except (OSError, AttributeError, IndexError, UnicodeDecodeError) as exc:
        log.debug("cannot read librdkafka's property table (%s)", exc)
        return frozenset()


def _properties_table() -> str:
    """librdkafka's own property table (``rd_kafka_conf_properties_show``), as text."""
    import confluent_kafka

    libs = os.path.dirname(confluent_kafka.__file__) + ".libs"
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*")))
    library = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    libc = ctypes.CDLL(None)
    libc.tmpfile.restype = ctypes.c_void_p
    libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    for name in ("fflush", "rewind", "fclose"):
        getattr(libc, name).argtypes = [ctypes.c_void_p]
    library.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    handle = libc.tmpfile()
    if not handle:
        raise OSError("tmpfile() failed")
    try:
        library.rd_kafka_conf_properties_show(handle)
        libc.fflush(handle)
        libc.rewind(handle)
        chunks, buffer = [], ctypes.create_string_buffer(65536)
        while read := libc.fread(buffer, 1, len(buffer), handle):
            chunks.append(buffer.raw[:read])
        return b"".join(chunks).decode()
    finally:
        libc.fclose(handle)


def _parse_table(text: str) -> list[str]:
    """The property names of a markdown table as librdkafka prints it."""
    names = []
    for line in text.splitlines():
        first = line.split("|", 1)[0].strip()
        if "|" in line and first and first != "Property" and not first.startswith("-"):
            names.append(first)
    return names


def _probe(name: str) -> bool:
    """Whether librdkafka accepts ``name``, asked without making a client."""
    import confluent_kafka

    try:
        confluent_kafka.Producer({name: "0", _SENTINEL: "0"})
    except Exception as exc:  # any answer but "no such property" means the name is known
        return f'property: "{name}"' not in str(exc)
    return True  # pragma: no cover (the sentinel is always refused)


def is_client_name(name: str) -> bool:
    """Whether ``name`` (no ``kafka.`` prefix) is a setting blockgz's Kafka client takes."""
    if name in JAVA_SECURITY_NAMES:
        return True
    known = librdkafka_names()
    return name in known if known else _probe(name)


def kafka_name_problem(key: str) -> str | None:
    """The one-line error for the ``kafka.*`` option ``key``, or ``None`` when it is fine."""
    name = key[len(PREFIX) :]
    if is_client_name(name):
        return None
    close = suggest(name)
    hint = f"; did you mean {PREFIX}{close}?" if close else " (librdkafka's names are taken)"
    return f"{key}: not a Kafka client setting{hint}"


def suggest(name: str) -> str | None:
    """The known client name ``name`` is probably a slip of (case first, then spelling)."""
    if name in _JAVA_SPELLINGS:
        return _JAVA_SPELLINGS[name]
    pool = sorted(librdkafka_names() | JAVA_SECURITY_NAMES | {"bootstrap.servers"})
    folded = {candidate.lower(): candidate for candidate in pool}
    if name.lower() in folded:
        return folded[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(folded), 1, TYPO_CUTOFF)
    return folded[close[0]] if close else None
