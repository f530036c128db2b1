"""Connect transforms: timestamps (filled in below)."""

from __future__ import annotations

from typing import Any

#: Class name (after the package) to factory.
TRANSFORMS: dict[str, Any] = {}
