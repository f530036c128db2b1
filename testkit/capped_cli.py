"""The ``blockgz`` CLI with a producer that stops for good after a number of records.

``python -m testkit.capped_cli <cap> <blockgz arguments...>`` runs ``blockgz`` whose
``confluent_kafka.Producer`` takes ``cap`` records and then blocks in its next ``produce()``
until the process is killed (librdkafka's own threads still deliver what was taken). A test
that SIGKILLs a replay or restore mid-way waits for some records to arrive and kills it: with a
cap below the archive's size the run cannot finish first, however loaded the machine is (a kill
timed by polling alone raced the run's end).

>>> capped_producer(3).__mro__[1].__name__
'Producer'
"""

from __future__ import annotations

import sys
import threading
from typing import Any


def capped_producer(cap: int) -> type:
    """A ``confluent_kafka.Producer`` subclass whose ``produce()`` blocks after ``cap`` records."""
    from confluent_kafka import Producer

    taken = 0
    never = threading.Event()

    class CappedProducer(Producer):
        def produce(self, *args: Any, **kwargs: Any) -> None:
            nonlocal taken
            if taken >= cap:
                never.wait()  # until SIGKILL; releases the GIL, so deliveries go on
            super().produce(*args, **kwargs)  # a BufferError (queue full) is not counted
            taken += 1

    return CappedProducer


def main(argv: list[str]) -> None:
    import confluent_kafka

    from blockgz.cli import main as blockgz

    confluent_kafka.Producer = capped_producer(int(argv[0]))  # blockgz imports it at call time
    blockgz(argv[1:], prog_name="blockgz")


if __name__ == "__main__":
    main(sys.argv[1:])
