"""Reading a Log Analytics query response, whatever its shape, without ever mistaking a broken answer for none.

The service answers a query with ``{"tables": [{"name", "columns", "rows"}]}`` and, for a partial
failure, an ``error`` beside the tables (``PartialError``, its cause in ``details[].innererror``); see
Microsoft Learn "Azure Monitor Log Analytics API response format". Anything else that arrives with a
200 (no tables, a table without the columns the bot asked for, rows that are not rows) is not an empty
result: ``read_table`` raises ``UnreadableResponse`` saying what was wrong, and the backend turns that
into an error the analyst sees. Rows are judged one by one: a row missing some columns keeps what it
has, a row with none of the query's identifying columns is skipped and counted.

Service limits (Microsoft Learn, Azure Monitor service limits, "Query API"): at most 500,000 records
and 64 MB of data per response; a result cut there comes back as a partial error whose inner detail
names ``E_QUERY_RESULT_SET_TOO_LARGE``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.sentinel.models import count_label
from bot.sentinel.queries import spec_of

SERVICE_MAX_ROWS = 500_000
SERVICE_MAX_MB = 64
PRIMARY_TABLE = "PrimaryResult"
MAX_DETAIL_CHARS = 90

# Metadata columns: their absence changes no field the analyst sees. SubTechniques is newer than SecurityAlert's
# other columns (responses recorded before it have none): Techniques still names each technique without it.
_QUIET_COLUMNS = frozenset({"TotalMatched", "SubTechniques"})

# Kusto's native error names (learn.microsoft.com/kusto/concepts/errors-in-native-code), as they appear
# in the innermost message of a partial error, and what each means for the rows that did come back.
_LIMITS: dict[str, tuple[str, bool]] = {
    "E_QUERY_RESULT_SET_TOO_LARGE": (
        f"Log Analytics stopped at its result limit ({SERVICE_MAX_ROWS:,} rows or {SERVICE_MAX_MB} MB)", True),
    "E_RUNAWAY_QUERY": ("the query used more resources than Log Analytics allows", True),
    "E_LOW_MEMORY_CONDITION": ("Log Analytics ran short of memory for this query", True),
    "E_QUERY_CANCELLED": ("Log Analytics cancelled part of the query", True),
    "E_OVERFLOW": ("a calculation overflowed, so some values may be wrong", False),
}
_NATIVE_NAME = re.compile(r"\bE_[A-Z_]{3,}\b")


class UnreadableResponse(ValueError):
    """A 200 response the bot cannot read as the query's result (the message says why, for the analyst)."""


@dataclass(frozen=True)
class TableRead:
    rows: list[dict[str, Any]]
    skipped: int  # rows without any identifying column
    missing: tuple[str, ...]  # expected columns the table does not have (metadata columns left out)


@dataclass(frozen=True)
class PartialDetail:
    """What a partial error says once its generic wrapper ("There were some errors...") is peeled off."""

    code: str  # the Kusto error name when one is given (E_QUERY_RESULT_SET_TOO_LARGE), else the inner code
    text: str  # the innermost message, on one line
    cut_short: bool  # rows are missing (a limit stopped the query), as opposed to values being suspect

    @property
    def service_limit(self) -> bool:
        return self.code == "E_QUERY_RESULT_SET_TOO_LARGE"

    @property
    def what(self) -> str:
        """What went wrong, in the analyst's words: the limit when it is a known one, else the service's text."""
        return _LIMITS.get(self.code, (None, True))[0] or f"Log Analytics reported: {_clip(self.text)}"

    def warning(self, rows_back: int) -> str:
        """One line for the analyst (cards show 200 characters): which limit, how many rows, what to do."""
        what = self.what
        rows = f"{count_label(rows_back, 'row')} came back"
        if not self.cut_short:
            return f"Partial result: {what} ({rows})."
        return f"Partial result: {what}; {rows}, more may be missing. Narrow the time window or raise the severity."


def read_table(tables: Sequence[Any] | None, tool: str) -> TableRead:
    """The query's rows from the response's tables, each a dict keyed by column name."""
    if not tables:
        raise UnreadableResponse("Log Analytics answered without a result table")
    table = next((t for t in tables if getattr(t, "name", None) == PRIMARY_TABLE), tables[0])
    columns = [str(c) for c in (getattr(table, "columns", None) or [])]
    spec = spec_of(tool)
    expected, keys = spec.columns, spec.keys  # a row with none of the keys means nothing: skipped, counted
    if not any(k in columns for k in keys):
        shown = ", ".join(columns[:6]) + (", ..." if len(columns) > 6 else "") if columns else "none"
        raise UnreadableResponse(
            f"Log Analytics returned a table without the {' or '.join(keys)} column the bot asked for "
            f"(columns: {_clip(shown)})")
    rows, skipped = [], 0
    for row in getattr(table, "rows", None) or []:
        record = dict(zip(columns, list(row), strict=False))  # a short row keeps the columns it has
        if all(_blank(record.get(k)) for k in keys):
            skipped += 1
            continue
        rows.append(record)
    missing = tuple(c for c in expected if c not in columns and c not in _QUIET_COLUMNS)
    return TableRead(rows=rows, skipped=skipped, missing=missing)


def partial_detail(code: str | None, message: str | None, details: Iterable[Any] | None) -> PartialDetail:
    """The informative part of a partial error: the innermost message of its details, and its Kusto name."""
    texts = [text for text in _inner_messages(details or ()) if text]
    texts = texts or [str(message or code or "no detail given")]
    inner = texts[-1]
    names = [name for text in texts for name in _NATIVE_NAME.findall(text)]
    name = next((n for n in names if n in _LIMITS), names[0] if names else str(code or ""))
    return PartialDetail(code=name, text=" ".join(inner.split()), cut_short=_LIMITS.get(name, ("", True))[1])


def _inner_messages(details: Iterable[Any]) -> Iterable[str]:
    for detail in details:
        node: Any = detail
        while isinstance(node, Mapping):
            yield str(node.get("message") or "")
            node = node.get("innererror")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _clip(text: str, width: int = MAX_DETAIL_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
