"""Loading user classes named ``module:Class`` (or ``module.Class``) from options.

>>> import_named("collections:OrderedDict", "option", "a class").__name__
'OrderedDict'
"""

from __future__ import annotations

import importlib
from typing import Any

from blockgz.errors import ConfigError


def import_named(spec: str, option: str, allowed: str) -> Any:
    """The object ``module:Name`` or ``module.Name`` names (ConfigError naming ``option``)."""
    if spec.lower().startswith("io.confluent."):
        raise ConfigError(f"{option}: {spec!r} is not available in blockgz; allowed: {allowed}")
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{option}: unknown value {spec!r}; allowed: {allowed}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{option}: cannot import module {module_name!r} for {spec!r} ({exc}); "
            f"allowed: {allowed}"
        ) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{option}: module {module_name!r} has no {attr!r}; allowed: {allowed}"
            )
        obj = getattr(obj, part)
    return obj


def instantiate(cls: Any, spec: str, option: str) -> Any:
    try:
        return cls()
    except TypeError as exc:
        raise ConfigError(
            f"{option}: {spec!r} must be constructible with no arguments ({exc})"
        ) from exc
