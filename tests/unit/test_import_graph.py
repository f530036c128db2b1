"""The dependency rules of the README's "Where things are", checked on the import graph so they
stay true.

Every ``import`` and ``from ... import`` in the product's source is read with :mod:`ast`,
including imports inside functions (a lazy import is still an edge), so an import moved into a
function to dodge a cycle is still a cycle.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Folder → the package it installs as (setup.py's package_dir: sink/ is blockgz.sink).
PACKAGES = {"blockgz": "blockgz", "sink": "blockgz.sink", "reader": "blockgz.reader"}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if root == ROOT and parts:
        parts[0] = PACKAGES.get(parts[0], parts[0])
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path, root).split(".")
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


@functools.cache  # parsed once per session: every rule reads the same graph
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
        # blockgz is the base: only the CLI launches the sink and the reader (lazily), and the
        # Spark session whose format("blockgz") joins the sink's writer and the reader's scan.
        (
            "blockgz",
            "blockgz.sink",
            ("blockgz.cli", "blockgz.spark_session", "blockgz.sink", "blockgz.reader"),
        ),
        (
            "blockgz",
            "blockgz.reader",
            ("blockgz.cli", "blockgz.spark_session", "blockgz.sink", "blockgz.reader"),
        ),
        # Nothing imports the folders by their old top-level names.
        ("blockgz", "sink", ()),
        ("blockgz", "reader", ()),
        # The format knows nothing of stores, keys or manifests.
        ("blockgz.blocks", "blockgz.store", ()),
        ("blockgz.blocks", "blockgz.objects", ()),
        ("blockgz.blocks", "blockgz.archive", ()),
        ("blockgz.store", "blockgz.objects", ()),
        ("blockgz.store", "blockgz.archive", ()),
        # The archive's keys and commit log sit on the format and the stores, below the rest.
        ("blockgz.archive", "blockgz.objects", ()),
        ("blockgz.archive", "blockgz.commits", ()),
        ("blockgz.archive", "blockgz.cli", ()),
        ("blockgz.reader", "blockgz.sink", ()),
        ("blockgz.sink", "blockgz.reader", ()),
        # The sink's writer does not know the Kafka source (the source sits above it: it holds
        # partial files back by the writer's rotation rules; see ARCHITECTURE.md's layers).
        ("blockgz.sink.write", "blockgz.sink.kafka", ()),
        ("blockgz.sink.partitioning", "blockgz.sink.write", ()),
        ("blockgz.sink.partitioning", "blockgz.sink.kafka", ()),
        # Only the export job (and the session that registers both sources) sits on top.
        ("blockgz.sink.write", "blockgz.sink.export", ()),
        ("blockgz.sink.kafka", "blockgz.sink.export", ()),
        ("blockgz.sink.partitioning", "blockgz.sink.export", ()),
        # The job's config is read below the job that runs it; the job does not call the CLI.
        ("blockgz.sink.jobconfig", "blockgz.sink.export", ()),
        ("blockgz.sink", "blockgz.cli", ()),
        ("blockgz", "testkit", ()),
        ("blockgz", "tests", ()),
    ],
)
def test_no_import_runs_the_wrong_way(source, target, exceptions):
    assert violations(source, target, except_modules=exceptions) == []


def project_edges(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each module's imports of other project modules (``from p import name`` counts as an
    import of ``p.name`` when that is a module, else of ``p``)."""
    return {
        module: {name for name in names if name in modules and name != module}
        for module, names in modules.items()
    }


def first_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``edges`` (``[a, b, ..., a]``), or ``None``: :mod:`graphlib` finds it."""
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_module_imports_itself_through_others():
    """No import cycle between project modules, at module level or inside a function."""
    assert first_cycle(project_edges(graph())) is None


def test_the_cycle_check_sees_a_cycle_held_apart_by_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    modules = {name: imports_of(tmp_path / f"{name}.py", tmp_path) for name in ("a", "b")}
    cycle = first_cycle(project_edges(modules))
    assert cycle is not None and set(cycle) == {"a", "b"}


@pytest.mark.parametrize(
    ("package", "order"),
    [
        (
            "blockgz.archive",
            [
                "timestamps_keys", "object_ref", "job_keys", "layout",
                "deviantart", "reader_layout", "partition_offsets", "versions",
            ],
        ),
        (
            "blockgz.commits",
            [
                "cluster_snapshots", "manifests", "intents", "head", "catalog", "manifest_sequence",
                "recovery", "manifest_log", "writer_lease",
            ],
        ),
    ],
)  # fmt: skip
def test_the_archive_packages_import_one_way(package, order):
    """The keys (``blockgz.archive``) and the commit log on them (``blockgz.commits``), each in
    the order the package docstring gives: each module imports only modules listed before it."""
    edges = project_edges(graph())
    later = {
        f"{package}.{name}": {f"{package}.{n}" for n in order[i:]} for i, name in enumerate(order)
    }
    assert set(later) == {m for m in edges if m.startswith(f"{package}.")}
    assert {m: edges[m] & after for m, after in later.items() if edges[m] & after} == {}


def test_the_rules_see_lazy_imports(tmp_path):
    path = ROOT / "blockgz" / "cli" / "export.py"
    assert any(
        within(name, "blockgz.sink") for name in imports_of(path)
    )  # imported inside a command


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
    assert not {"numpy", "isal", "deflate", "boto3", "blockgz.blocks.writer"} & loaded


def test_the_sinks_data_source_loads_only_what_validating_its_options_needs():
    """Spark builds the writer in a Python process of its own when a query plans its first
    batch: writing (executors) and committing (the driver) load their modules where they run."""
    loaded = python_loads("import blockgz.sink.write.datasource")
    writing = {"blockgz.sink.write.task", "blockgz.sink.write.partition_writer", "boto3"}
    committing = {"blockgz.sink.write.commit", "blockgz.sink.iceberg.table", "pyiceberg"}
    assert not (writing | committing) & loaded
    assert "blockgz.sink.write.config" in loaded  # the options are still checked there


def test_cli_help_loads_neither_the_sink_nor_the_reader():
    loaded = python_loads(
        "from click.testing import CliRunner\n"
        "from blockgz.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0"
    )
    heavy = {"blockgz.sink", "blockgz.reader", "pyspark", "boto3", "numpy", "rich.table"}
    assert not heavy & loaded


# -- the layers of ARCHITECTURE.md ----------------------------------------------------------------

ARCHITECTURE = ROOT / "ARCHITECTURE.md"
#: The folders' installed names, the mapped ones first (``blockgz.sink.write`` is the sink's).
ROOT_PACKAGES = ("blockgz.sink", "blockgz.reader", "blockgz")
#: A row of the layer table: ``| 3 | `blockgz.option_defs` | ... |``.
LAYER_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([\w.]+)`\s*\|", re.MULTILINE)


def package_of(module: str) -> str:
    """The package of the layering that ``module`` belongs to: a folder directly under a root
    (its subfolders with it), a module directly in a root, or the root itself."""
    for root in ROOT_PACKAGES:
        if within(module, root):
            rest = module[len(root) + 1 :].split(".") if module != root else []
            return f"{root}.{rest[0]}" if rest else root
    raise ValueError(f"{module} is in none of {ROOT_PACKAGES}")


def test_a_package_is_a_folder_under_a_root_or_a_module_in_one():
    assert package_of("blockgz.formats.avro.writer") == "blockgz.formats"
    assert package_of("blockgz.sink.write.task") == "blockgz.sink.write"
    assert package_of("blockgz.sink.records") == "blockgz.sink.records"
    assert package_of("blockgz.errors") == "blockgz.errors"
    assert [package_of(r) for r in ROOT_PACKAGES] == list(ROOT_PACKAGES)


def package_edges(edges: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """Package -> the packages it imports -> the module imports that make the edge."""
    found: dict[str, dict[str, set[str]]] = {package_of(m): {} for m in edges}
    for module, imported in edges.items():
        for name in imported:
            source, target = package_of(module), package_of(name)
            if source != target:
                found[source].setdefault(target, set()).add(f"{module} imports {name}")
    return found


def declared_layers(text: str) -> dict[str, int]:
    """Package -> its layer, from the layer table of ARCHITECTURE.md (each listed once)."""
    rows = [(package, int(layer)) for layer, package in LAYER_ROW.findall(text)]
    packages = [package for package, _ in rows]
    assert len(packages) == len(set(packages)), f"listed twice: {packages}"
    return dict(rows)


def upward_imports(packages: dict[str, dict[str, set[str]]], layers: dict[str, int]) -> list[str]:
    """The package imports that do not go to a lower layer, each with the modules behind it."""
    return sorted(
        f"{source} (layer {layers[source]}) -> {target} (layer {layers[target]}): "
        + "; ".join(sorted(why)[:3])
        for source, targets in packages.items()
        for target, why in targets.items()
        if layers[target] >= layers[source]
    )


@pytest.fixture(scope="module")
def packages() -> dict[str, dict[str, set[str]]]:
    return package_edges(project_edges(graph()))


@pytest.fixture(scope="module")
def layers() -> dict[str, int]:
    return declared_layers(ARCHITECTURE.read_text())


def test_architecture_lists_every_package_in_one_layer(packages, layers):
    assert sorted(set(packages) - set(layers)) == [], "packages missing from ARCHITECTURE.md"
    assert sorted(set(layers) - set(packages)) == [], "listed, but not in the code"


def test_every_package_imports_only_packages_below_it(packages, layers):
    """Transitively too: a chain of imports each going down never comes back up."""
    assert upward_imports(packages, layers) == []


def test_no_cycle_between_packages(packages):
    assert first_cycle({p: set(targets) for p, targets in packages.items()}) is None


def test_the_layer_check_sees_an_import_up_and_one_within_a_layer():
    modules = {"blockgz.a.x": {"blockgz.b.y"}, "blockgz.b.y": {"blockgz.c"}, "blockgz.c": set()}
    found = package_edges(modules)
    assert upward_imports(found, {"blockgz.a": 2, "blockgz.b": 3, "blockgz.c": 1}) == [
        "blockgz.a (layer 2) -> blockgz.b (layer 3): blockgz.a.x imports blockgz.b.y"
    ]
    assert len(upward_imports(found, {"blockgz.a": 2, "blockgz.b": 2, "blockgz.c": 1})) == 1
    assert upward_imports(found, {"blockgz.a": 3, "blockgz.b": 2, "blockgz.c": 1}) == []


def test_the_layer_table_is_read_whole():
    text = "| layer | package |\n|---|---|\n| 1 | `blockgz.errors` | x |\n| 12 | `blockgz.cli` |\n"
    assert declared_layers(text) == {"blockgz.errors": 1, "blockgz.cli": 12}
    with pytest.raises(AssertionError, match="listed twice"):
        declared_layers(text + "| 3 | `blockgz.cli` | z |\n")


#: A module path in ARCHITECTURE.md: dotted (``blockgz.store.s3``, or a name in a module:
#: ``blockgz.written.files.WrittenFile``) or a file (``blockgz/store/s3.py``).
DOTTED = re.compile(r"\bblockgz(?:\.\w+)+")
FILE_PATH = re.compile(r"\b(?:blockgz|sink|reader|testkit)/[\w/]+\.py\b")


def top_level_names(path: Path) -> set[str]:
    """The classes, functions and assigned names a module defines at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def missing_paths(text: str, modules: dict[str, Path]) -> list[str]:
    """The module paths named in ``text`` that name no module (nor a name a module defines)."""
    missing = [path for path in FILE_PATH.findall(text) if not (ROOT / path).exists()]
    for dotted in set(DOTTED.findall(text)):
        head, _, name = dotted.rpartition(".")
        if dotted in modules or (head in modules and name in top_level_names(modules[head])):
            continue
        missing.append(dotted)
    return sorted(missing)


def test_every_module_path_in_architecture_exists():
    modules = {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }
    text = ARCHITECTURE.read_text()
    assert len(DOTTED.findall(text)) > 60  # the data paths are read, not skipped
    assert missing_paths(text, modules) == []


def test_a_moved_module_in_architecture_is_reported():
    here = Path(__file__)
    modules = {"blockgz.x": here}
    text = "`blockgz.x` `blockgz.x.test_a_moved_module_in_architecture_is_reported` blockgz.gone"
    assert missing_paths(text + " `blockgz/nowhere.py` blockgz.x.nothing", modules) == [
        "blockgz.gone",
        "blockgz.x.nothing",
        "blockgz/nowhere.py",
    ]
