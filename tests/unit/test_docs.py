"""The user docs: the reference generated from the code is whole, and the README stays a landing
page that names the test command.

``make docs`` builds the site strictly (a broken link or anchor fails it); these tests check what a
build cannot: that every declared option and every command is in the generated reference, and
that an option's documentation links only to sections the docs have.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from blockgz.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _generator()


@pytest.fixture(scope="module")
def pages(gen, tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference")
    return {p.name: p.read_text(encoding="utf-8") for p in gen.generate(out)}


def _headings(page: str) -> set[str]:
    """The anchors of a page's headings: an explicit ``{#id}`` or MkDocs' slug of the title."""
    anchors = set()
    for title in re.findall(r"^#{1,4} (.+)$", (DOCS / page).read_text(encoding="utf-8"), re.M):
        explicit = re.search(r"\{#([\w-]+)\}\s*$", title)
        if explicit:
            anchors.add(explicit.group(1))
            continue
        slug = re.sub(r"[^\w\s-]", "", title.replace("`", "").lower()).strip()
        anchors.add(re.sub(r"[\s]+", "-", slug))
    return anchors


def test_every_declared_option_is_in_the_options_reference(gen, pages):
    text = pages["options.md"]
    declared = gen.declared_options()
    assert len(declared) > 100
    for d in declared:
        if d.internal:
            continue
        name = f"`{d.name}*`" if d.prefix else f"`{d.name}`"
        assert f"| {name} |" in text, f"{d.name} is missing from docs/reference/options.md"


def test_the_options_reference_has_a_section_per_owner_with_type_and_default(pages):
    text = pages["options.md"]
    for owner in ("job", "source", "sink", "store", "registry", "reader", "replay"):
        assert f"{{#{owner}}}" in text
    row = "| `s3.part.retries` | int (1…100) | `3` | attempts per request, the first included |"
    assert row in text
    assert "| `storage.class` | refused when a config asks for it |" in text


def test_every_command_is_in_the_cli_reference_with_its_options(pages):
    text = pages["cli.md"]
    for name, command in main.commands.items():
        assert f"## blockgz {name} {{#{name}}}" in text
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and param.name != "help":
                    assert f"`{opt}`" in text, f"blockgz {name} {opt} is missing"
    assert "blockgz seek --offset 1200 events.json.gz" in text  # the examples, as code


def test_option_docs_link_only_to_sections_the_docs_have(gen):
    for anchor, target in gen.ANCHORS.items():
        page, _, fragment = target.removeprefix("../").partition("#")
        assert (DOCS / page).is_file(), f"{anchor} -> {page}: no such page"
        assert not fragment or fragment in _headings(page), f"{anchor} -> {target}: no heading"


def test_a_link_to_an_unknown_section_fails_naming_the_option(gen):
    with pytest.raises(gen.ReferenceError, match=r"option x\.y: .*#nowhere"):
        gen._links("see [there](#nowhere)", "x.y")
    assert gen._links("[Metrics](#metrics)", "n") == "[Metrics](../operating.md#metrics)"


def test_click_help_becomes_prose_and_examples_become_code(gen):
    text = "Do a thing to <topic>.\n\n\b\nExamples:\n  blockgz x --y 1\n  blockgz x -z\n"
    assert gen.help_markdown(text) == (
        "Do a thing to &lt;topic>.\n\nExamples:\n\n```console\nblockgz x --y 1\nblockgz x -z\n```"
    )


def test_the_readme_is_a_landing_page_that_names_the_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make test" in readme and "CONTRIBUTING.md" in readme
    assert "pip install" in readme and "Java 17" in readme and "make demo" in readme
    linked = re.findall(r"\]\((docs/[\w/.-]+?)(?:#[\w-]+)?\)", readme)
    assert linked
    for path in linked:
        assert (ROOT / path).is_file(), f"README links to {path}, which does not exist"
