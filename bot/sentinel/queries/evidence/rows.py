"""Reading evidence rows' cells: booleans as either backend returns them (Log Analytics true/false, the demo 0/1)."""

from __future__ import annotations

from typing import Any


def as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)
