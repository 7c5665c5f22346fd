"""Runs KQL through Microsoft's Kusto parser (tests/kql/kusto_check.js) in one Node process per batch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.tooling import require_tool

KQL_DIR = Path(__file__).resolve().parent.parent / "kql"
SCHEMA = Path(__file__).resolve().parents[2] / "bot" / "sentinel" / "tables.json"
FUNCTIONS = KQL_DIR / "functions.json"  # workspace functions (Sentinel's _GetWatchlist) with their result columns


def require_parser() -> None:
    require_tool("Kusto parser", KQL_DIR / "node_modules" / "@kusto" / "language-service-next",
                 "npm ci --prefix tests/kql")


def check(queries: list[str]) -> list[dict[str, Any]]:
    """One result per query: ok, errors, result_columns, string_literals (see kusto_check.js)."""
    require_parser()
    lines = "".join(json.dumps({"id": i, "query": q}) + "\n" for i, q in enumerate(queries))
    done = subprocess.run(
        ["node", str(KQL_DIR / "kusto_check.js"), "--schema", str(SCHEMA), "--functions", str(FUNCTIONS)],
        input=lines, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode in (0, 1), f"kusto_check failed to run: {done.stderr[-2000:]}"
    results = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [r["id"] for r in results] == list(range(len(queries)))
    return results
