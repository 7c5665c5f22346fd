"""analyst_kql: a query an analyst typed (``kql QUERY``), run as their own read with the service's limits.

Never the model's: the query is internal (no tool offers it) and only the ``kql`` command runs it, for analysts the
access policy lets hunt. Before anything is sent, the text is read as Kusto's lexer reads it (``sentinel.kql_text``:
strings, verbatim and multi-line strings, comments, bracket-quoted names, Unicode format characters as whitespace)
and refused, deny by default, when it: is a management command (a statement whose first token is "." and a name,
whatever whitespace or zero-width characters come before), a request option (``set``); reaches another workspace,
app, resource, cluster or database (``workspace()``, ``app()``, ``resource()``, ``cluster()``, ``database()``,
``external_table()``, in any quoting: ``['workspace']("x")``) or outside Log Analytics (``externaldata``, ``evaluate``
plugins that call out or run code); holds a second query (only ``let``, ``declare`` or ``alias`` may come first;
statements split at ``;`` outside brackets, so a function body's ``;`` is its own); or holds an unfilled placeholder
(``{{StartTimeISO}}``, ``{start}``) that a hunting tool would have replaced. A trailing ``| render ...`` is dropped
and the analyst told. The API timespan covers the query's own lookbacks (``ago(14d)``, ``now(-14d)``, a ``let``-bound
timespan used in ``ago()``), up to ``MAX_LOOKBACK``, and the analyst is told when it was widened or capped.
What runs is the text (less a trailing render), then ``| take`` one row past the cap (so a cut is known) and the rows
packed as ``Row`` bags, so the response contract is the hunt's. Syntax is the service's to judge: the bot has no
Kusto parser at run time (tests check this reading against Microsoft's), and its error, with the line and position,
is shown as the service gives it (the text goes first and unchanged, so the position is the analyst's).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import kql_lookback, kql_text
from bot.sentinel.hunt.model import parse_window, span_text
from bot.sentinel.kql_text import COMMENT, NAME, PUNCT, STRING, Token, Unterminated
from bot.sentinel.params import DETAIL_LOOKBACK, InvalidParameter
from bot.sentinel.queries.hunt import decode
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec

ROW_CAP = 100
MAX_QUERY_CHARS = 28_000  # about what a Teams message holds; the command is read whole up to it (teams.routes)
DEFAULT_WINDOW = timedelta(hours=24)
MAX_LOOKBACK = DETAIL_LOOKBACK  # the longest time range sent for a query's own lookbacks (90 days)
LOOKBACK_MARGIN = timedelta(hours=1)  # the service's "now" is a little later than the bot's

# Functions that reach another workspace, app, resource, cluster or database, or outside data; evaluate plugins that
# call out of the service or run code there.
_CROSS = frozenset({"workspace", "app", "resource", "cluster", "database", "external_table", "materialized_view",
                    "adx", "arg"})
_OUTSIDE = frozenset({"externaldata", "external_data"})
_PLUGINS = frozenset({"http_request", "http_request_post", "sql_request", "cosmosdb_sql_request", "mysql_request",
                      "postgresql_request", "azure_digital_twins_query_request", "python", "r"})
_FIRST = frozenset({"let", "declare", "alias"})
_PLACEHOLDER = re.compile(r"\{\{\s*[A-Za-z_][\w.]*\s*\}\}")


@dataclass(frozen=True)
class Guarded:
    """An analyst's query the guard let through: what is sent, the longest lookback it writes, what to tell them."""

    text: str
    lookback: timedelta | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnalystQuery:
    text: str
    window: timedelta
    notes: tuple[str, ...] = ()  # told with the result (a chart left out, the time range widened)

    tool = "analyst_kql"

    @property
    def timespan(self) -> timedelta:
        return self.window

    def parameters(self) -> dict[str, Any]:
        # The full text: the audit trail records what the analyst ran.
        return {"query": self.text, "time_window": span_text(self.window)}


def parse_text(value: object) -> Guarded:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameter("query", "is required: the KQL to run, e.g. kql SigninLogs | take 10")
    text = value.strip().rstrip(";").rstrip()
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidParameter("query", f"is {len(text)} characters; at most {MAX_QUERY_CHARS}")
    try:
        return guard(text)
    except _Refused as problem:
        raise InvalidParameter("query", str(problem)) from None


def make(query: Guarded, window: timedelta) -> AnalystQuery:
    """The query with the time range its own lookbacks need: the window asked for, widened to the longest lookback
    the text writes (at most MAX_LOOKBACK), and a note saying so."""
    notes = list(query.notes)
    needed = query.lookback + LOOKBACK_MARGIN if query.lookback else None
    if needed is not None and needed > window:
        widened = min(needed, MAX_LOOKBACK)
        notes.append(f"Your query looks back {_days(query.lookback)}: the time range sent with it was widened from "
                     f"{_days(window)} to {_days(widened)}" + (
                         ", the most the bot sends (rows older than that are not read)." if needed > MAX_LOOKBACK
                         else "."))
        window = widened
    return AnalystQuery(query.text, window, tuple(notes))


def _days(span: timedelta | None) -> str:
    seconds = int((span or timedelta()).total_seconds())
    if seconds % 86400 == 0:
        return f"{seconds // 86400} day{'s' if seconds != 86400 else ''}"
    return f"{seconds / 3600:g} hours"


class _Refused(ValueError):
    """Why the bot will not send a query."""


def refusal(text: str) -> str | None:
    """Why the bot will not send ``text``, or None."""
    try:
        guard(text)
    except _Refused as problem:
        return str(problem)
    return None


def guard(text: str) -> Guarded:
    """``text`` as it will be sent, or ``_Refused`` saying why not."""
    try:
        toks = kql_text.tokens(text)
    except Unterminated:
        raise _Refused("it has a string or comment that does not end; close it and try again") from None
    _no_placeholders(text, toks)
    statements = kql_text.statements(toks)
    for statement in statements:
        _one_statement(statement)
    if any(s[0].word not in _FIRST for s in statements[:-1]):
        # Each tabular statement returns its own result, and the row cap applies to the last one only.
        raise _Refused("one query at a time: only let (or declare) statements may come before it")
    code = kql_text.code(toks)
    _stays_inside(code)
    sent, notes = _without_render(text, statements[-1] if statements else [], code)
    return Guarded(sent, kql_lookback.lookback(statements), notes)


def _no_placeholders(text: str, toks: list[Token]) -> None:
    """A placeholder in the code or a string (where a hunting tool fills it in), not in a comment."""
    uncommented = "".join(" " * len(t.text) if t.kind == COMMENT else t.text for t in toks)
    found = _PLACEHOLDER.search(uncommented)
    placeholder = found[0] if found else None
    code = kql_text.code(toks)
    for a, b, c in zip(code, code[1:], code[2:], strict=False):
        if placeholder is None and a.text == "{" and b.kind == NAME and c.text == "}" and a.end == b.start \
                and b.end == c.start:  # "{start}" in the code
            placeholder = text[a.start:c.end]
    if placeholder is not None:
        raise _Refused(f"{placeholder} is a placeholder a hunting tool fills in: put a value in its place (for a time, "
                       "e.g. ago(7d) or datetime(2026-12-01)) and send the query again")


def _one_statement(statement: list[Token]) -> None:
    first = statement[0]
    if first.kind == PUNCT and first.text == "." and len(statement) > 1 and statement[1].kind == NAME:
        raise _Refused("management commands (a statement starting with \".\") are not run from Teams: use the Azure "
                       "portal with your own role")
    if first.word == "set":
        raise _Refused("request options (set ...) are the bot's to choose: its row cap and time limits apply to your "
                       "query")


def _stays_inside(code: list[Token]) -> None:
    for index, token in enumerate(code):
        after = code[index + 1] if index + 1 < len(code) else None
        if token.word in _CROSS and after is not None and after.text == "(":
            raise _Refused(f"{token.word}() reaches another workspace, app, resource, cluster or database; the bot "
                           "reads only its own workspace")
        if token.word in _OUTSIDE:
            raise _Refused(f"{token.word} reads data from outside the workspace; the bot reads only its own workspace "
                           "(for a list of your own, upload it as a watchlist and read it with _GetWatchlist('name'))")
        if token.word == "evaluate":
            plugin = _plugin(code, index + 1)
            if plugin in _PLUGINS:
                raise _Refused(f"evaluate {plugin} calls out of Log Analytics or runs code there; the bot does not "
                               "send it")


def _plugin(code: list[Token], at: int) -> str:
    """The plugin an ``evaluate`` names, past its hints (``hint.distribution = per_node``)."""
    while at + 2 < len(code) and code[at].word.startswith("hint") and code[at + 1].text in (".", "="):
        at += 1
        while at < len(code) and code[at].text != "=":
            at += 1
        at += 2  # "=" and its value
    return code[at].word if at < len(code) else ""


def _without_render(text: str, last: list[Token], code: list[Token]) -> tuple[str, tuple[str, ...]]:
    """The text less a trailing ``| render ...`` (render ends a query: it may only be its last operator), and the
    note that says so. A render anywhere else is refused."""
    renders = [t for i, t in enumerate(code) if t.word == "render" and i and code[i - 1].text == "|"]
    if not renders:
        return text, ()
    cut = _top_level_pipe_before_render(last)
    later = [t for t in last if cut is not None and t.start > cut.start and t.text == "|"]
    if len(renders) > 1 or cut is None or later:  # render ends a query: nothing may follow it
        raise _Refused("render draws a chart in the portal; leave it out (the bot shows the rows)")
    chart = " ".join(text[cut.end:last[-1].end].split())
    chart = chart if len(chart) <= 60 else chart[:59] + "…"
    return text[:cut.start].rstrip(), (f"The chart ({chart}) was left out: the bot shows the rows.",)


def _top_level_pipe_before_render(statement: list[Token]) -> Token | None:
    depth = 0
    for index, token in enumerate(statement):
        if token.kind == PUNCT and token.text in "([{":
            depth += 1
        elif token.kind == PUNCT and token.text in ")]}":
            depth -= 1
        elif token.text == "|" and depth == 0 and index + 1 < len(statement) and statement[index + 1].word == "render":
            return token
    return None


def code_only(text: str) -> str | None:
    """``text`` with every string literal's and comment's contents blanked (same length), or None when one does not
    end."""
    try:
        toks = kql_text.tokens(text)
    except Unterminated:
        return None
    return "".join(" " * len(t.text) if t.kind in (STRING, COMMENT) else t.text for t in toks)


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
    make=make,
    kql=_kql,
    result=(("Row", "dynamic"), ("TotalMatched", "long")),
    keys=("Row",),
    decode=decode,
    demo=_demo,
    internal=True,
    row_cap=ROW_CAP,
)
