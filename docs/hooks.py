"""MkDocs hook: the reference pages are generated from the code before each build."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_reference


def on_pre_build(config, **kwargs) -> None:
    """Write docs/reference/*.md from the option declarations and the click commands."""
    try:
        gen_reference.generate(Path(config["docs_dir"]) / "reference")
    except gen_reference.ReferenceError as e:
        raise PluginError(str(e)) from e
