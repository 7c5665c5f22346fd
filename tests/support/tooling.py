"""External test tools (Node packages): skip a test locally when one is missing, fail in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

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
    if reason is not None:
        unavailable(name, reason)


def unavailable(name: str, reason: str) -> NoReturn:
    """Skip the test for want of ``name``; in CI (``CI`` set, e.g. CI=true) fail it instead."""
    if os.environ.get("CI"):
        pytest.fail(f"{name} unavailable in CI: {reason}")
    pytest.skip(f"{name}: {reason}")
