"""bot/ passes the linter and the type checker, and tests/ and bench/ the linter, with the settings in pyproject.toml
([tool.ruff], [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check(*command: str) -> None:
    done = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(command)}` reported problems:\n{report}", pytrace=False)


def test_ruff_finds_nothing() -> None:
    check("ruff", "check", "--no-fix", "bot", "tests", "bench")


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    check("mypy", "bot")
