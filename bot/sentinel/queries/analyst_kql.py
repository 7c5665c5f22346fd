"""analyst_kql: a query an analyst typed (``kql QUERY``), run as their own read with the service's limits.

Never the model's: the query is internal (no tool offers it) and only the ``kql`` command runs it, for analysts the
access policy lets hunt. Before anything is sent, the text is read outside its strings and comments and refused when
it is a management command (a statement starting with "."), a request option (``set``), reaches another workspace,
app, cluster or database (``workspace()``, ``app()``, ``cluster()``, ``database()``, ``external_table()``,
``externaldata``) or outside Log Analytics (``evaluate`` plugins that call out or run code), draws a chart
(``render``), or holds a second query (every tabular statement has its own result; only ``let`` may come first).
What runs is the text unchanged, then ``| take`` one row past the cap (so a cut is known) and the rows packed as
``Row`` bags, so the response contract is the hunt's; the timespan and the server timeout are the backend's as for
every query. Syntax is the service's to judge: the bot has no Kusto parser at run time, and its error, with the line
and position, is shown as the service gives it (the text goes first and unchanged, so the position is the analyst's).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel.hunt.model import parse_window, span_text
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries.hunt import decode
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec

ROW_CAP = 100
MAX_QUERY_CHARS = 10_000
DEFAULT_WINDOW = timedelta(hours=24)

# Functions that reach another workspace, app, cluster, database or outside data; evaluate plugins that call out of
# the service or run code there.
_CROSS = re.compile(r"\b(workspace|app|cluster|database|external_table|materialized_view|adx|arg)\s*\(")
_OUTSIDE = re.compile(r"\b(externaldata|external_data)\b")
_PLUGINS = re.compile(r"\bevaluate\s+(?:hint\.\w+\s*=\s*\w+\s+)*(http_request|http_request_post|sql_request|"
                      r"cosmosdb_sql_request|mysql_request|postgresql_request|azure_digital_twins_query_request|"
                      r"python|r)\b")
_RENDER = re.compile(r"\brender\b")


@dataclass(frozen=True)
class AnalystQuery:
    text: str
    window: timedelta

    tool = "analyst_kql"

    @property
    def timespan(self) -> timedelta:
        return self.window

    def parameters(self) -> dict[str, Any]:
        # The full text: the audit trail records what the analyst ran.
        return {"query": self.text, "time_window": span_text(self.window)}


def parse_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameter("query", "is required: the KQL to run, e.g. kql SigninLogs | take 10")
    text = value.strip().rstrip(";").rstrip()
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidParameter("query", f"is {len(text)} characters; at most {MAX_QUERY_CHARS}")
    problem = refusal(text)
    if problem:
        raise InvalidParameter("query", problem)
    return text


def refusal(text: str) -> str | None:
    """Why the bot will not send ``text``, or None. Read outside strings and comments, in any letter case."""
    code = code_only(text)
    if code is None:
        return "it has a string or comment that does not end; close it and try again"
    lowered = code.lower()
    statements = [s.strip() for s in lowered.split(";")]
    if any(s.startswith(".") for s in statements):
        return ("management commands (a statement starting with \".\") are not run from Teams: use the Azure portal "
                "with your own role")
    if any(re.match(r"set\b", s) for s in statements):
        return "request options (set ...) are the bot's to choose: its row cap and time limits apply to your query"
    if any(not re.match(r"(let|declare|alias)\b", s) for s in [s for s in statements if s][:-1]):
        # Each tabular statement returns its own result, and the row cap applies to the last one only.
        return "one query at a time: only let (or declare) statements may come before it"
    if match := _CROSS.search(lowered):
        return (f"{match[1]}() reaches another workspace, app, cluster or database; the bot reads only its own "
                "workspace")
    if match := _OUTSIDE.search(lowered):
        return f"{match[1]} reads data from outside the workspace; the bot reads only its own workspace"
    if match := _PLUGINS.search(lowered):
        return f"evaluate {match[1]} calls out of Log Analytics or runs code there; the bot does not send it"
    if _RENDER.search(lowered):
        return "render draws a chart in the portal; leave it out (the bot shows the rows)"
    return None


def code_only(text: str) -> str | None:
    """``text`` with every string literal's and comment's contents blanked (same length), or None when one does not
    end. KQL strings: "..." and '...' with backslash escapes, @"..." verbatim (a doubled quote inside), h"..." and
    H'...' obfuscated, ```...``` and ~~~...~~~ multi-line; comments: // to the end of the line."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        fence = text[i:i + 3]
        if fence in ("```", "~~~"):
            end = text.find(fence, i + 3)
            if end < 0:
                return None
            out.append(" " * (end + 3 - i))
            i = end + 3
            continue
        verbatim = text[i] == "@" and text[i + 1:i + 2] in ("'", '"')
        if text[i] in "'\"" or verbatim:
            end = _string_end(text, i + 1 if verbatim else i, verbatim)
            if end < 0:
                return None
            out.append(" " * (end - i))
            i = end
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _string_end(text: str, start: int, verbatim: bool) -> int:
    """The index just past the string literal whose opening quote is at ``start``; -1 when it does not end."""
    quote, i = text[start], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and not verbatim:
            i += 2
            continue
        if ch == quote:
            if verbatim and text[i + 1:i + 2] == quote:
                i += 2
                continue
            return i + 1
        if ch == "\n" and not verbatim:
            return -1
        i += 1
    return -1


def _kql(query: AnalystQuery) -> str:
    # The analyst's text first and unchanged (a syntax error's line and position are theirs), then the cap.
    return (f"{query.text}\n"
            f"| take {ROW_CAP + 1}\n"
            f"| project Row = pack_all(), TotalMatched = long(-1)")


def _demo(query: AnalystQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    # The kql command says so before it gets here; a direct call is a mistake, said plainly.
    raise RuntimeError(DEMO_REFUSAL)


DEMO_REFUSAL = ("The demo workspace cannot run free KQL: it is a generated SQLite database that answers only the "
                "bot's own queries. Ask in plain language (the hunt tool builds queries it can answer), or connect a "
                "real workspace (SENTINEL_WORKSPACE_ID).")

SPEC = QuerySpec(
    name=AnalystQuery.tool,
    params=(
        Param("query", parse_text, required="the KQL to run"),
        Param("time_window", lambda v: DEFAULT_WINDOW if v is None else parse_window(v), field="window"),
    ),
    make=lambda query, window: AnalystQuery(query, window),
    kql=_kql,
    result=(("Row", "dynamic"), ("TotalMatched", "long")),
    keys=("Row",),
    decode=decode,
    demo=_demo,
    internal=True,
    row_cap=ROW_CAP,
)
