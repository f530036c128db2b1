"""``python -m blockgz.cli``."""

from blockgz.cli import main

main()
