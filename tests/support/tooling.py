"""External test tools (Node packages): skip a test locally when one is missing, fail in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def missing(path: Path, install: str) -> str | None:
    """Why the tool at ``path`` cannot run, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not path.exists():
        return f"it is not installed: run `./run tests` (it runs {install})"
    return None


def require_tool(name: str, path: Path, install: str) -> None:
    reason = missing(path, install)
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} unavailable in CI: {reason}")
    pytest.skip(f"{name}: {reason}")
