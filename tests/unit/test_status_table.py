"""``blockgz status``'s table printed without rich's per-cell layout (issue 44: rich took ~30 s
for 10,000 partitions): the same text as rich's own table, or rich itself where it would wrap."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from blockgz.cli.status import _print_plain_table

HEADERS = ("topic", "partition", "lag", "last commit")
ROWS = [
    ("t", "0", "3 (held 2)", "2026-12-05 06:39:14Z (16m40s ago)"),
    ("a-longer-topic-é", "12", "-", "-"),
]


def _rich(rows, width: int = 200, encoding: str = "utf-8") -> str:
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")
    console = Console(width=width, file=out)
    table = Table(*HEADERS)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return _text(out)


def _text(out: io.TextIOWrapper) -> str:
    out.flush()
    return out.buffer.getvalue().decode(out.encoding)  # type: ignore[attr-defined]


@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], []])
@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_the_plain_table_is_riches_table(rows, encoding):
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")
    assert _print_plain_table(Console(width=200, file=out), HEADERS, rows)
    assert _text(out) == _rich(rows, encoding=encoding)


def test_a_table_wider_than_the_console_is_left_to_rich():
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    assert not _print_plain_table(Console(width=40, file=out), HEADERS, ROWS)
    assert _text(out) == ""
