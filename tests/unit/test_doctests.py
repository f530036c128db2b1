"""The examples in the docstrings of every shipped module (and of ``testkit``) run and hold.

pytest's ``--doctest-modules`` imports a file by its place in the repository, so
``sink/write/task.py`` would load as a second module ``sink.write.task`` beside the installed
``blockgz.sink.write.task`` (module state twice, a top-level ``sink`` importable again). This
collects the same examples by import name instead, one test per docstring.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

#: Top-level packages whose modules carry examples (``blockgz.sink`` and ``blockgz.reader`` live in
#: the repository's ``sink/`` and ``reader/`` folders, so they are walked on their own).
PACKAGES = ("blockgz", "blockgz.sink", "blockgz.reader", "testkit")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_names() -> list[str]:
    names: list[str] = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        walked = pkgutil.walk_packages(module.__path__, f"{package}.")
        # ``__main__`` modules run a command when imported.
        names += [info.name for info in walked if not info.name.endswith(".__main__")]
    return sorted(set(names))


def _examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in _module_names():
        module = importlib.import_module(name)
        found += [test for test in finder.find(module, name) if test.examples]
    return sorted(found, key=lambda test: test.name)


EXAMPLES = _examples()


def test_the_walk_finds_the_mapped_packages():
    names = _module_names()
    assert "blockgz.sink.write.task" in names
    assert "blockgz.reader.reading.archive" in names
    assert len(EXAMPLES) > 50


@pytest.mark.parametrize("example", EXAMPLES, ids=[test.name for test in EXAMPLES])
def test_docstring_example(example: doctest.DocTest):
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(example, out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)
