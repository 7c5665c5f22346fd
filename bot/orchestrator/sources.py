"""The "Data sources" footnote, built from the tool log (never from the model's text)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.sentinel.models import QueryResult, rows_words
from bot.tools.toolbox import ToolRun


@dataclass(frozen=True)
class Source:
    tool: str
    arguments: str
    rows: int
    total: int
    elapsed_ms: float
    kql: str
    error: str | None
    demo: bool
    offset: int = 0  # a page of a list: the rows before it


    def line(self) -> str:
        outcome = f"failed ({self.error})" if self.error else rows_words(self.rows, self.total, self.offset)
        return f"{self.tool}({self.arguments}): {outcome}, {self.elapsed_ms:.0f} ms"


def sources(runs: Sequence[ToolRun]) -> list[Source]:
    out = []
    for run in runs:
        artifact = run.artifact
        if isinstance(artifact, QueryResult):
            shown_arguments, total, error, demo = (artifact.metadata.parameters, artifact.metadata.total, None,
                                                   artifact.metadata.is_demo)
        else:
            shown_arguments, total, error, demo = run.arguments, 0, artifact.code, False
        out.append(Source(
            tool=run.tool,
            arguments=", ".join(f"{k}={v}" for k, v in shown_arguments.items()),
            rows=run.rows,
            total=total,
            elapsed_ms=run.elapsed_ms,
            kql=run.kql,
            error=error,
            demo=demo,
            offset=artifact.metadata.offset if isinstance(artifact, QueryResult) else 0,
        ))
    return out


def footnote(runs: Sequence[ToolRun]) -> str:
    """One line per query that ran; empty when the answer used no data."""
    items = sources(runs)
    if not items:
        return ""
    where = " (demo workspace: generated data)" if any(s.demo for s in items) else ""
    return "Data sources" + where + ":\n" + "\n".join(f"  - {s.line()}" for s in items)


def queries_text(runs: Sequence[ToolRun]) -> str:
    """The exact KQL behind an answer, for "show query"."""
    parts = [f"// {s.line()}\n{s.kql}" for s in sources(runs) if s.kql]
    return "\n\n".join(parts) if parts else "The last answer did not run any query."
