"""The ``blockgz`` command line: export, quickstart, compress, seek, cat, ls, index, verify.

One module per group of commands, all on the group in :mod:`blockgz.cli.app`:
:mod:`~blockgz.cli.files` (compress, index), :mod:`~blockgz.cli.read` (seek, cat, ls,
verify), :mod:`~blockgz.cli.export` (export, quickstart).
"""

from blockgz.cli import export, files, read  # noqa: F401 - they add their commands to main
from blockgz.cli.app import main

__all__ = ["main"]
