"""Write the reference pages from the code: docs/reference/options.md and docs/reference/cli.md.

The options come from their declarations (the one options registry, filled by the modules that
own them), the CLI from click (every command of the ``blockgz`` group: its help and its
options). ``mkdocs build`` runs this first (``docs/hooks.py``); run it alone with
``python docs/gen_reference.py``. The pages are generated, never edited: ``docs/reference/``
is git-ignored.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import click

DOCS = Path(__file__).resolve().parent
REFERENCE = DOCS / "reference"

#: Option docs written for the old single README link to its sections; where they live now.
ANCHORS = {
    "#on-a-spark-cluster": "../export.md#on-a-spark-cluster",
    "#metrics": "../operating.md#metrics",
    "#one-writer-per-archive": "../export.md#one-writer-per-archive",
    "#bad-records-and-the-dead-letter-queue": "../export.md#bad-records-and-the-dead-letter-queue",
    "#seek-on-every-layout-the-catalog": "../reading.md#seek-on-every-layout-the-catalog",
    "#an-iceberg-table-over-the-archive": "../iceberg.md",
    "#security": "../security.md",
    "#avro-and-converters": "../formats.md#avro-and-converters",
    "#exactly-once": "../export.md#exactly-once",
    "#with-sparks-kafka-source": "../export.md#with-sparks-kafka-source",
    "#object-stores-and-s3-settings": "../storage.md",
}

#: The owners, in reading order, with the heading each gets.
OWNER_TITLES = {
    "job": "The export job",
    "source": "The Kafka source",
    "sink": "The sink: formats, partitioning, rotation, errors",
    "store": "Object stores and S3",
    "registry": "Schema Registry",
    "reader": "Readers",
    "replay": "Restore and replay",
}
STATUS_TITLES = {
    "refused": "refused when a config asks for it",
    "warned": "named in the one warning of settings blockgz does not read",
    "accepted": "accepted without a word (Kafka Connect's framework keys)",
}


class ReferenceError(Exception):
    """The reference cannot be generated (an option's documentation links nowhere)."""


# -- options ---------------------------------------------------------------------------------
def declared_options() -> list:
    """Every declared option: the sets of ``blockgz.cli.option_sets.ALL_OPTION_SETS``."""
    from blockgz.cli.option_sets import ALL_OPTIONS

    return sorted(ALL_OPTIONS, key=lambda d: d.name)


def _links(text: str, name: str) -> str:
    """``text`` with its in-page links pointed at the docs page that holds each section."""

    def target(match: re.Match[str]) -> str:
        href = match.group(2)
        if not href.startswith("#"):
            return match.group(0)
        if href not in ANCHORS:
            raise ReferenceError(
                f"option {name}: its documentation links to {href}, which no docs page holds "
                "(add it to ANCHORS in docs/gen_reference.py)"
            )
        return f"[{match.group(1)}]({ANCHORS[href]})"

    return re.sub(r"\[([^\]]*)\]\(([^)]*)\)", target, text)


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def _kind(d) -> str:
    """The option's type as the table shows it, with its range."""
    if d.kind in ("int", "size") and (d.low is not None or d.high is not None):
        low = "" if d.low is None else f"{d.low}"
        high = "" if d.high is None else f"{d.high}"
        return f"{d.kind} ({low}…{high})"
    return d.kind


def options_table(defs: Iterable) -> str:
    """Markdown table: option, type, default, meaning."""
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for d in defs:
        name = f"`{d.name}*`" if d.prefix else f"`{d.name}`"
        meaning = _cell(_links(d.meaning, d.name))
        rows.append(f"| {name} | {_kind(d)} | {_cell(d.shown_default)} | {meaning} |")
    return "\n".join(rows)


def options_page(defs: list) -> str:
    """The options reference page."""
    lines = [
        "# Options",
        "",
        "Every option blockgz reads, generated from the declarations in the code (an option is",
        "declared once, next to the code that reads it: its type, default and meaning). Names",
        "of Confluent's S3 sink, Kafka Connect and Spark keep their meaning; *blockgz* marks",
        "blockgz's own. `blockgz options` prints the same list in a terminal",
        "(`blockgz options --owner store`, `blockgz options flush`).",
        "",
        "A name ending in `*` stands for every option under that prefix. A name close to a known",
        'one (`flush.szie`) is an error with a "did you mean".',
        "",
    ]
    users = [d for d in defs if d.status == "read" and not d.internal]
    for owner, title in OWNER_TITLES.items():
        chosen = [d for d in users if d.owner == owner]
        if chosen:
            lines += [f"## {title} {{#{owner}}}", "", options_table(chosen), ""]
    others = [d for d in users if d.owner not in OWNER_TITLES]
    if others:
        lines += ["## Other options {#other}", "", options_table(others), ""]
    not_read = [d for d in defs if d.status != "read"]
    if not_read:
        lines += [
            "## Options of Confluent's connector that blockgz does not read {#not-read}",
            "",
            "| option | what blockgz does | why |",
            "|---|---|---|",
        ]
        for d in sorted(not_read, key=lambda d: (d.status, d.name)):
            why = d.not_done.reason if d.not_done is not None else d.doc
            lines.append(
                f"| `{d.name}{'*' if d.prefix else ''}` | {STATUS_TITLES[d.status]} | "
                f"{_cell(_links(why, d.name))} |"
            )
        lines.append("")
    return "\n".join(lines)


# -- the CLI -----------------------------------------------------------------------------------
def _escape(text: str) -> str:
    """Help text as Markdown prose: no raw HTML, no stray emphasis."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("*", "\\*")


def help_markdown(text: str) -> str:
    """A click help text as Markdown: paragraphs as prose, ``\\b`` blocks as code."""
    text = inspect.cleandoc(text.split("\f")[0])
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        if para.startswith("\b"):
            body = para[1:].strip("\n").splitlines()
            if body and not body[0].startswith(" ") and body[0].endswith(":"):
                out.append(_escape(body[0]))
                body = body[1:]
            width = min((len(x) - len(x.lstrip()) for x in body if x.strip()), default=0)
            out.append("```console\n" + "\n".join(x[width:] for x in body) + "\n```")
        else:
            out.append(_escape(" ".join(line.strip() for line in para.splitlines())))
    return "\n\n".join(out)


def _param_row(param: click.Parameter, ctx: click.Context) -> str | None:
    """One table row for an option of a command (arguments are in the usage line)."""
    if not isinstance(param, click.Option) or param.hidden or param.name == "help":
        return None
    names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
    record = param.get_help_record(ctx)
    helptext = record[1] if record else ""
    metavar = "" if param.is_flag else param.make_metavar(ctx)
    return f"| {names} | {_cell(_escape(metavar))} | {_cell(_escape(helptext))} |"


def command_section(name: str, command: click.Command, parent: click.Context) -> str:
    """One command's section: usage, help, options."""
    ctx = click.Context(command, info_name=name, parent=parent)
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [
        f"## blockgz {name} {{#{name}}}",
        "",
        f"```text\nblockgz {name} {usage}\n```",
        "",
        help_markdown(command.help or ""),
        "",
    ]
    rows = [r for r in (_param_row(p, ctx) for p in command.get_params(ctx)) if r]
    if rows:
        lines += ["| option | value | meaning |", "|---|---|---|", *rows, ""]
    return "\n".join(lines)


def cli_page() -> str:
    """The CLI reference page: the group's help, then every command."""
    from blockgz.cli import main

    root = click.Context(main, info_name="blockgz")
    lines = [
        "# Command line",
        "",
        "Generated from the `blockgz` command itself; `blockgz COMMAND --help` prints the same.",
        "Errors are one line (`blockgz --debug COMMAND …` shows the traceback).",
        "",
        "```text\nblockgz [--debug] [--version] COMMAND [ARGS]...\n```",
        "",
        help_markdown(main.help or ""),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = sorted(main.list_commands(root))
    for name in commands:
        command = main.get_command(root, name)
        short = command.get_short_help_str(limit=120) if command else ""
        lines.append(f"| [`{name}`](#{name}) | {_cell(_escape(short))} |")
    lines.append("")
    for name in commands:
        command = main.get_command(root, name)
        if command is not None and not command.hidden:
            lines.append(command_section(name, command, root))
    return "\n".join(lines)


def generate(out: Path = REFERENCE) -> list[Path]:
    """Write the reference pages into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    pages = {"options.md": options_page(declared_options()), "cli.md": cli_page()}
    written = []
    for name, text in pages.items():
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    try:
        for page in generate():
            print(f"wrote {page}")
    except ReferenceError as e:
        sys.exit(f"error: {e}")
