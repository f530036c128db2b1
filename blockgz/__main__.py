"""``python -m blockgz``: the ``blockgz`` command."""

from blockgz.cli import main

main()
