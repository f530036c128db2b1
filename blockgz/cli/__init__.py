"""The ``blockgz`` command line: export, status, audit, quickstart, compress, seek, cat, ls, index,
verify, restore, replay, options.

One module per group of commands, all on the group in :mod:`blockgz.cli.app`:
:mod:`~blockgz.cli.files` (compress, index), :mod:`~blockgz.cli.read` (seek, cat, ls,
verify), :mod:`~blockgz.cli.export` (export, quickstart: :mod:`~blockgz.cli.quickstart` runs
it), :mod:`~blockgz.cli.status`, :mod:`~blockgz.cli.audit`, :mod:`~blockgz.cli.restore`,
:mod:`~blockgz.cli.replay`, :mod:`~blockgz.cli.options`.
"""

from blockgz.cli import (  # noqa: F401 - commands
    audit,
    export,
    files,
    options,
    read,
    replay,
    restore,
    status,
)
from blockgz.cli.app import main

__all__ = ["main"]
