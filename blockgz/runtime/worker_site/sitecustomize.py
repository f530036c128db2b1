"""Run at the start of every Python process whose path holds this folder: Spark's Python workers
of a session made by ``blockgz.sink.session.spark_session``. They then import pyspark and py4j
from the installed packages, not from the zip copies Spark puts first on their path (issue 44).

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-<version>-src.zip`` first on every
Python worker's ``PYTHONPATH``. Python keeps no compiled code for modules imported from a zip, so
each new worker (the streaming source's runner, the planning workers: several per query)
compiled pyspark's sources again: 0.9 CPU-s for the imports a streaming source's runner makes,
against 0.3 s from the installed package's cached byte code. When the zips are the ones inside
the installed pyspark package (pip's layout, ``<site-packages>/pyspark/python/lib/``), they hold
the code of the installed packages (py4j's only when the installed py4j has the zip's version),
so they move to the end of the path; any other ``SPARK_HOME`` keeps its zips first. Then the
next ``sitecustomize`` on the path, if any, runs as it would have without this one.
"""

from __future__ import annotations

import os
import sys


def installed_copies(path: list[str]) -> list[str]:
    """The entries of ``path`` that are zip copies of packages installed in a ``path`` folder.

    >>> site = "/v/site-packages"
    >>> lib = site + "/pyspark/python/lib"
    >>> installed_copies([lib + "/pyspark.zip", lib + "/py4j-0.10.9.9-src.zip", site])
    ['/v/site-packages/pyspark/python/lib/pyspark.zip']
    >>> installed_copies(["/opt/spark/python/lib/pyspark.zip", site])
    []
    """
    folders = {os.path.normpath(entry) for entry in path if entry and not entry.endswith(".zip")}
    copies = []
    for entry in path:
        lib, name = os.path.split(entry)
        site = os.path.dirname(os.path.dirname(os.path.dirname(lib)))
        if os.path.normpath(lib) != os.path.join(site, "pyspark", "python", "lib"):
            continue
        if site not in folders:
            continue
        if name == "pyspark.zip" or _same_py4j(site, name):
            copies.append(entry)
    return copies


def _same_py4j(site: str, name: str) -> bool:
    """``name`` is ``py4j-<version>-src.zip`` and ``site`` has py4j ``<version>`` installed."""
    if not (name.startswith("py4j-") and name.endswith("-src.zip")):
        return False
    version = name[len("py4j-") : -len("-src.zip")]
    return os.path.isdir(os.path.join(site, f"py4j-{version}.dist-info"))


def _run_next() -> None:
    """Run the ``sitecustomize`` this one shadows: the next one on the path after this folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    if here not in folders:
        return
    for folder in folders[folders.index(here) + 1 :]:
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            with open(candidate, "rb") as source:
                code = compile(source.read(), candidate, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": candidate})
            return


def main() -> None:
    """Move the installed packages' zip copies to the end of ``sys.path``, then run the next
    ``sitecustomize``."""
    copies = installed_copies(sys.path)
    if copies:
        sys.path[:] = [e for e in sys.path if e not in copies] + copies
    _run_next()


main()
