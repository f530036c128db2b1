"""``blockgz options``: every option blockgz reads, from their declarations, as text or Markdown.

The README's option tables are this command's Markdown (``blockgz options --markdown --readme
README.md`` rewrites them; a test fails when they are stale).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import click

from blockgz.cli.app import fail_cleanly, main
from blockgz.option_defs import OWNERS

#: The README's tables: one per owner, between ``<!-- options:OWNER -->`` and
#: ``<!-- /options:OWNER -->``.
_TABLE = re.compile(r"(<!-- options:(\w+) -->\n)(.*?)(<!-- /options:\2 -->)", re.S)


def owner_table(owner: str) -> str:
    """The Markdown table of ``owner``'s options (the ones users set, in name order)."""
    from blockgz.cli.option_sets import ALL_OPTIONS
    from blockgz.option_defs import markdown_table

    chosen = [d for d in ALL_OPTIONS if d.owner == owner and d.status == "read" and not d.internal]
    return markdown_table(sorted(chosen, key=lambda d: d.name))


def readme_with_tables(text: str) -> str:
    """``text`` (the README) with each marked table made again from the declarations."""
    return _TABLE.sub(lambda m: f"{m.group(1)}{owner_table(m.group(2))}\n{m.group(4)}", text)


@main.command("options")
@click.option(
    "--owner",
    "owners",
    multiple=True,
    type=click.Choice(list(OWNERS)),
    help="Only the options of this owner (repeatable).",
)
@click.option("--markdown", is_flag=True, help="Markdown tables, one per owner, as in README.md.")
@click.option("--all", "show_all", is_flag=True, help="Also refused, warned and accepted names.")
@click.option(
    "--readme",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Rewrite the marked option tables of this README in place.",
)
@click.argument("names", nargs=-1)
@fail_cleanly
def options_command(owners, markdown, show_all, readme, names) -> None:
    """List the options blockgz reads: name, owner, origin, type, default, meaning.

    NAMES narrows the list to options whose name contains one of them.

    \b
    Examples:
      blockgz options                        # every option, as a table
      blockgz options --owner store          # the S3 settings
      blockgz options flush rotate           # names containing flush or rotate
      blockgz options --markdown --owner sink
      blockgz options --all --owner sink     # with Confluent's refused and warned options
      blockgz options --readme README.md     # make the README's tables again
    """
    from blockgz.cli.option_sets import ALL_OPTIONS
    from blockgz.option_defs import table_rows

    if readme is not None:
        readme.write_text(readme_with_tables(readme.read_text(encoding="utf-8")), "utf-8")
        click.echo(f"{readme}: option tables rewritten")
        return
    chosen = [
        d
        for d in ALL_OPTIONS
        if (not owners or d.owner in owners)
        and (show_all or (d.status == "read" and not d.internal))
        and (not names or any(n.lower() in d.name.lower() for n in names))
    ]
    if markdown:
        for owner in OWNERS:
            if any(d.owner == owner for d in chosen):
                click.echo(f"\n### {owner}\n\n{owner_table_of(chosen, owner)}")
        return
    _print_table(table_rows(chosen))


def owner_table_of(chosen, owner: str) -> str:
    from blockgz.option_defs import markdown_table

    return markdown_table(sorted((d for d in chosen if d.owner == owner), key=lambda d: d.name))


def _print_table(rows: list[tuple[str, ...]]) -> None:
    for name, owner, origin, status, kind, default, doc in rows:
        facts = [owner, origin, kind] + ([status] if status != "read" else [])
        facts.append(f"default: {default}" if default else "no default")
        click.echo(f"{name}  ({', '.join(facts)})")
        click.echo(textwrap.fill(doc, width=96, initial_indent="    ", subsequent_indent="    "))
