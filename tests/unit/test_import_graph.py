"""The dependency rules of DESIGN.md, checked on the import graph so they stay true.

Every ``import`` and ``from ... import`` in the product's source is read with :mod:`ast`,
including imports inside functions (a lazy import is still an edge).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("blockgz", "sink", "reader")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    return {
        module_name(path): imports_of(path)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(source: str, target: str, *, except_modules: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        f"{module} imports {imported}"
        for module, imported_names in graph().items()
        if within(module, source) and not any(within(module, e) for e in except_modules)
        for imported in imported_names
        if within(imported, target)
    )


@pytest.mark.parametrize(
    ("source", "target", "exceptions"),
    [
        # blockgz is the base: only the CLI launches the sink and the reader (lazily).
        ("blockgz", "sink", ("blockgz.cli",)),
        ("blockgz", "reader", ("blockgz.cli",)),
        # The format knows nothing of stores, keys or manifests.
        ("blockgz.format", "blockgz.store", ()),
        ("blockgz.format", "blockgz.objects", ()),
        ("blockgz.format", "blockgz.archive.manifests", ()),
        ("blockgz.store", "blockgz.objects", ()),
        ("reader", "sink", ()),
        # The Kafka source and the sink's writer do not know each other.
        ("sink.kafka", "sink.write", ()),
        ("sink.write", "sink.kafka", ()),
        ("sink.partitioning", "sink.write", ()),
        ("sink.partitioning", "sink.kafka", ()),
        # Only the export job (and the session that registers both sources) sits on top.
        ("sink.write", "sink.export", ()),
        ("sink.kafka", "sink.export", ()),
        ("sink.partitioning", "sink.export", ()),
        ("blockgz", "testkit", ()),
        ("sink", "testkit", ()),
        ("reader", "testkit", ()),
        ("blockgz", "tests", ()),
        ("sink", "tests", ()),
    ],
)
def test_no_import_runs_the_wrong_way(source, target, exceptions):
    assert violations(source, target, except_modules=exceptions) == []


def test_the_rules_see_lazy_imports(tmp_path):
    path = ROOT / "blockgz" / "cli" / "export.py"
    assert any(within(name, "sink") for name in imports_of(path))  # imported inside a command


def python_loads(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(out.split())


def test_importing_the_errors_loads_no_codec_and_no_numpy():
    loaded = python_loads("import blockgz.errors")
    assert not {"numpy", "isal", "deflate", "boto3", "blockgz.format.writer"} & loaded


def test_cli_help_loads_neither_the_sink_nor_the_reader():
    loaded = python_loads(
        "from click.testing import CliRunner\n"
        "from blockgz.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0"
    )
    heavy = {"sink", "reader", "pyspark", "boto3", "numpy", "rich.table"}
    assert not heavy & loaded
