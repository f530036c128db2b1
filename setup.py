"""Packages of the wheel: ``blockgz`` and, from the repository's top-level ``sink/`` and ``reader/``
folders, ``blockgz.sink`` and ``blockgz.reader``.

The folders stay at the top of the repository, but installing them as top-level ``sink`` and
``reader`` would let another installed package of the same name shadow them (or be shadowed).
setuptools' ``package_dir`` maps them under the project's name; pyproject.toml cannot list
mapped subpackages without naming each one, so they are found here. ``testkit/``, ``tests/``
and ``benchmarks/`` are not shipped.
"""

from setuptools import find_packages, setup

MAPPED = {"blockgz.sink": "sink", "blockgz.reader": "reader"}

packages = find_packages(include=["blockgz", "blockgz.*"])
for name, folder in MAPPED.items():
    packages += [
        name + found[len(folder) :] for found in find_packages(include=[folder, f"{folder}.*"])
    ]

setup(packages=packages, package_dir=MAPPED)
