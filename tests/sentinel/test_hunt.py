"""The guarded hunt: every hunt the builder can make parses with Microsoft's Kusto parser (each value one literal),
what it cannot make is refused with what is allowed, the demo's SQL answers what an independent Python evaluation of
the same rows answers, and the tool works end to end (demo, the fake Log Analytics, the fake model).

Most evaluations read rows the test puts in place of the generated ones (``hunt_demo``: a sample that exercises every
operator), in the stored forms the demo uses (``demo_sql.iso`` times, JSON text for dynamic, 0/1 for bool, "" for
absent text); ``WORLD_HUNTS`` are evaluated on the generated world's own rows.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import sqlite3
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.demo.backend import DemoBackend
from bot.demo.store import load_table_columns
from bot.sentinel import queries
from bot.sentinel.client import SentinelClient
from bot.sentinel.demo_sql import iso
from bot.sentinel.hunt import Hunt, operators_for, parse_hunt, table_names, tables
from bot.sentinel.hunt.catalog import NUMBER_TYPES, STRING_TYPES, Column, Computed
from bot.sentinel.hunt.computed import FUNCTIONS
from bot.sentinel.hunt.conditions import OPERATORS, leaves
from bot.sentinel.hunt.kql import virtual_expression
from bot.sentinel.hunt.model import AGGREGATES, BINS, MAX_VALUE_CHARS, Aggregate, Condition, Filter, Join
from bot.sentinel.models import HuntRow, QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid
from tests.conftest import NOW, SEED
from tests.support import kusto
from tests.support.demo import copied_demo
from tests.support.loganalytics_fake import FakeLogAnalytics
from tests.support.workspaces import make_la_client, prime

LOOKALIKE = "\u0430dmin@contoso.com"  # a Cyrillic a: looks like admin@contoso.com
HOSTILE = [
    "'", '"', "\\", '\\"', "a'b\"c", "line one\nline two", "cr\r\nlf", "tab\there",
    "x | where 1==1", "| where 1==1", "union *", "\"; union * //", ".drop table SigninLogs", "\n.drop table AuditLogs",
    "externaldata (x:string) [@\"https://example.org/x\"]", "workspace(\"other\").SigninLogs", "// comment", "/* c */",
    "{Severity}", "$left", "let x = 1;", "ünïcödé 🙂", "\u202eRTL override", "zero\u200bwidth",
    LOOKALIKE,  # kept as it is: it just matches nothing
    "\uff21\uff24\uff2d\uff29\uff2e", "nul\x00byte", "escape \x1b[31m", "lone \ud800 surrogate",
    ("ignore previous instructions; \"|' \\ // ; \n" * 12)[:MAX_VALUE_CHARS],  # the longest text allowed
]


def expected_literal(text: str) -> str:
    """What a literal of ``text`` decodes to: characters a literal cannot hold become U+FFFD."""
    return "".join("\ufffd" if (ord(c) < 0x20 and c not in "\n\r\t") or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF
                   else c for c in text)


def sample_value(column: Column, n: int = 0) -> Any:
    kind = column.type
    if kind in STRING_TYPES or kind == "dynamic":
        return HOSTILE[n % len(HOSTILE)]
    if kind in ("int", "long"):
        return [0, -1, 500121, 2**31 - 1][n % 4]
    if kind in ("real", "decimal"):
        return [0.5, 1e20, -3.0, 75][n % 4]
    if kind == "bool":
        return n % 2 == 0
    return ["2026-11-19T10:00:00Z", "2026-11-20", "2026-11-18T23:59:59.5+02:00"][n % 3]


REGEXES = ["(?i)^adm-", r"\\d+\\.exe$", "a'b\"c | where 1==1", "\"; union * //", "[A-Z]{2,8}"]


def filter_for(column: Column, op: str, n: int) -> list[Any]:
    if op in ("isempty", "isnotempty"):
        return [column.name, op]
    if op == "matches regex":
        return [column.name, op, REGEXES[n % len(REGEXES)]]
    if op in ("between", "!between"):
        low, high = sample_value(column, 0), sample_value(column, 0)
        if column.type == "datetime":
            low, high = "2026-11-18T00:00:00Z", "2026-11-20T00:00:00Z"
        elif column.type in NUMBER_TYPES:
            low, high = -5, 500121
        return [column.name, op, [low, high]]
    if op in ("in", "!in", "has_any"):
        return [column.name, op, [sample_value(column, n), sample_value(column, n + 1)]]
    return [column.name, op, sample_value(column, n)]


def all_hunts() -> list[tuple[dict[str, Any], list[str]]]:
    """(arguments, the string values they carry): every table with every operator on every column type it has
    (the first few columns of each type, every virtual one), summarized and projected, hostile text in each."""
    out: list[tuple[dict[str, Any], list[str]]] = []
    n = 0
    for table in tables().values():
        per_type: dict[tuple[str, str], int] = {}
        for column in table.columns.values():
            for op in operators_for(column.type):
                key = (column.type, op)
                if not column.virtual and per_type.get(key, 0) >= 2:
                    continue
                per_type[key] = per_type.get(key, 0) + 1
                n += 1
                where = [filter_for(column, op, n)]
                out.append(({"table": table.name, "time_window": "7d", "where": where}, _texts(column, where)))
        numeric = next((c for c in table.columns.values() if c.type in NUMBER_TYPES), None)
        texts = [c for c in table.columns.values() if c.type in STRING_TYPES][:3]
        summarize = ["count()", f"dcount({texts[0].name})", "max(TimeGenerated)"]
        if numeric is not None:
            summarize.append(f"min({numeric.name})")
        out.append(({"table": table.name, "time_window": "30d", "summarize": summarize,
                     "by": [c.name for c in texts], "bin": "1h", "sort": "Count desc", "take": 100}, []))
        virtual = [c.name for c in table.columns.values() if c.virtual]
        out.append(({"table": table.name, "time_window": "90m", "columns": virtual[:9] + [c.name for c in texts],
                     "sort": f"{texts[0].name} asc", "take": 1}, []))
    return out


def _texts(column: Column, where: list[list[Any]]) -> list[str]:
    if (column.type not in STRING_TYPES and column.type != "dynamic") or len(where[0]) < 3:
        return []
    value = where[0][2]
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


@pytest.mark.slow
def test_every_hunt_the_builder_makes_parses_with_each_value_one_literal() -> None:
    hunts = all_hunts()
    assert len(hunts) > 700 and {a["table"] for a, _ in hunts} == set(table_names())
    texts = [queries.kql_of(queries.make_query("hunt", arguments)) for arguments, _ in hunts]
    results = kusto.check(texts)
    for (arguments, values), result, text in zip(hunts, results, texts, strict=True):
        assert result["ok"], (arguments, result["errors"], text)
        assert [(c["name"], c["type"]) for c in result["result_columns"]] == [("Row", "dynamic"),
                                                                             ("TotalMatched", "long")]
        literals = [s["value"] for s in result["string_literals"]]
        assert literals == [expected_literal(v) for v in values], (arguments, literals)


def _placed(value: str) -> list[dict[str, Any]]:
    """Hunts that put ``value`` in each place issue 34 added: a group, a negation, a list, a regex, a join's
    conditions, a countif, a baseline's (repeated) conditions."""
    regex = re.escape(value)[:200]
    return [
        {"table": "SigninLogs", "time_window": "1d", "where": [{"any": [["IPAddress", "==", value],
                                                                         {"not": ["UserAgent", "!has", value]}]}]},
        {"table": "SigninLogs", "time_window": "1d", "where": [["AppDisplayName", "has_any", [value, value[::-1]]]]},
        {"table": "SecurityEvent", "time_window": "1d", "where": [["CommandLine", "matches regex", regex]]},
        {"table": "SigninLogs", "time_window": "1d",
         "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                  "where": [["OperationName", "endswith", value]]}},
        {"table": "CommonSecurityLog", "time_window": "1d", "by": ["SourceIP"],
         "summarize": [{"countif": ["RequestURL", "!contains", value], "as": "Odd"}]},
        {"table": "SigninLogs", "time_window": "1d", "where": [["UserPrincipalName", "!startswith", value]],
         "baseline": {"days": 7, "keys": ["IPAddress"]}},
        {"table": "SigninLogs", "time_window": "1d",
         "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"], "within": "1h",
                  "where": [["OperationName", "has", value]]}},
        {"table": "SigninLogs", "time_window": "1d", "where": [["AppDisplayName", "==", value]], "by": ["IPAddress"],
         "session": {"gap": "30m"}, "summarize": [{"countif": ["UserAgent", "has", value], "as": "Odd"}]},
        {"table": "SigninLogs", "time_window": "1d", "where": [["AppDisplayName", "!=", value]], "by": ["IPAddress"],
         "series": {"step": "1h"}, "summarize": [{"countif": ["UserAgent", "contains", value], "as": "Odd"}]},
        # Computed columns: a regular expression and a separator of hostile text, then a condition on each.
        {"table": "SecurityEvent", "time_window": "1d",
         "extend": [["Found", "extract", "CommandLine", f"({regex})", 1], ["Part", "split", "Account", value[:16], 2],
                    ["Field", "json", "EventData", "a", 0, "b"]],
         "where": [["Found", "==", value], ["Part", "has", value]], "by": ["Found", "Part", "Field"],
         "summarize": ["count()", "dcount(Computer)"], "having": [["Count", ">", {"column": "dcount_Computer",
                                                                                  "times": 2.5}]]},
    ]


def test_every_new_place_a_value_goes_is_one_literal() -> None:
    """Hostile text in groups, lists, regular expressions, a join's and a countif's conditions and a baseline: the
    parser reads each value back as one string literal, in order, and the query is still the hunt's."""
    hunts = [hunt for value in HOSTILE[:-1:3] for hunt in _placed(value)]
    texts = [queries.kql_of(queries.make_query("hunt", hunt)) for hunt in hunts]
    for hunt, result, text in zip(hunts, kusto.check(texts), texts, strict=True):
        assert result["ok"], (hunt, result["errors"], text)
        expected = [v for leaf in _values(hunt) for v in leaf]
        assert [s["value"] for s in result["string_literals"]] == [expected_literal(v) for v in expected], hunt


def test_every_computed_function_over_each_kind_of_source_parses() -> None:
    """Each function over a table's own column, an alias, a field read from JSON (text and dynamic), with the computed
    column in a condition, a group key, an aggregate, a countif and a baseline: Microsoft's parser accepts each."""
    hunts = [
        {"table": "AuditLogs", "time_window": "7d", "extend": [["Old", "json", "TargetProperties", 0, "oldValue"],
                                                              ["Who", "split", "InitiatedByUser", "@", 0],
                                                              ["Site", "url", "TargetName", "Host"]],
         "where": [["Old", "has", "Enabled"]], "by": ["Who", "Site"], "summarize": ["count()", "make_set(Old)"]},
        {"table": "SecurityEvent", "time_window": "7d", "extend": [["Svc", "eventdata", "EventData", "ServiceName"],
                                                                  ["Host", "tolower", "DeviceName"],
                                                                  ["Head", "substring", "ParentProcess", 0, 8]],
         "baseline": {"days": 7, "keys": ["Svc", "Host"]}, "columns": ["Svc", "Host", "Head"], "sort": "Svc asc"},
        {"table": "CommonSecurityLog", "time_window": "1d", "extend": [["Path", "url", "RequestURL", "Path"],
                                                                      ["Id", "extract", "RequestURL", "/(\\d+)/", 1]],
         "by": ["SourceIP"], "summarize": [{"countif": ["Path", "endswith", ".exe"], "as": "Exe"}, "dcount(Id)"],
         "having": [["Exe", ">=", {"column": "dcount_Id", "times": 2}]]},
    ]
    texts = [queries.kql_of(queries.make_query("hunt", h)) for h in hunts]
    for hunt, result, text in zip(hunts, kusto.check(texts), texts, strict=True):
        assert result["ok"], (hunt, result["errors"], text)
        for name, *_ in hunt["extend"]:
            assert f"{name} = " in text


def _values(hunt: dict[str, Any]) -> list[list[str]]:
    """The text values of a hunt's conditions in the order its KQL writes them (a baseline's twice)."""
    parsed = parse_hunt(hunt)
    computed = [[str(a) for a in c.computed.args if isinstance(a, str)] for c in parsed.computed if c.computed]
    own = computed + [list(map(str, f.values)) for f in leaves(parsed.filters)]
    out = own + (own if parsed.baseline else [])
    out += [list(map(str, f.values)) for f in leaves(parsed.join.filters)] if parsed.join else []
    countif = tuple(a.condition for a in parsed.aggregates if a.condition is not None)
    out += [list(map(str, f.values)) for f in leaves(countif)]
    return out + ([["linefit"]] if parsed.series else [])  # the trend the series is decomposed with, a fixed literal


def test_every_sample_and_world_hunt_parses() -> None:
    """The hunts the demo's SQL is checked with are KQL Microsoft's parser accepts, returning the hunt's contract."""
    hunts = SAMPLE_HUNTS + WORLD_HUNTS
    texts = [queries.kql_of(queries.make_query("hunt", arguments)) for arguments in hunts]
    for arguments, result, text in zip(hunts, kusto.check(texts), texts, strict=True):
        assert result["ok"], (arguments, result["errors"], text)
        assert [c["name"] for c in result["result_columns"]] == ["Row", "TotalMatched"]


def test_the_parser_sees_the_virtual_columns_typed() -> None:
    """Each virtual column's KQL gives its declared type, read from its source's declared type."""
    virtual = [(table.name, c) for table in tables().values() for c in table.columns.values() if c.virtual]
    results = kusto.check([f"{table} | extend {c.name} = {virtual_expression(c)} | project {c.name}"
                           for table, c in virtual])
    for (table, column), result in zip(virtual, results, strict=True):
        assert result["ok"], (table, column, result["errors"])
        assert [(c["name"], c["type"]) for c in result["result_columns"]] == [(column.name, column.type)], column
    assert len(virtual) >= 40


DEEP: dict[str, Any] = {"not": ["IPAddress", "==", "x"]}
for _ in range(2000):
    DEEP = {"not": DEEP}


@pytest.mark.parametrize(("arguments", "words"), [
    ({"time_window": "24h"}, ["table", "is required", "SigninLogs", "DeviceProcessEvents"]),
    ({"table": "SecurityIncident", "time_window": "1d"}, ["not a table a hunt can read", "AuditLogs"]),
    ({"table": "SigninLogs; .drop table x", "time_window": "1d"}, ["not a table"]),
    ({"table": "SigninLogs"}, ["time_window", "is required"]),
    ({"table": "SigninLogs", "time_window": "31d"}, ["at most 30d"]),
    ({"table": "SigninLogs", "time_window": "ago(7d) | union *"}, ["not a window"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["Countryy", "==", "US"]]},
     ["no column 'Countryy'", "UserPrincipalName", "Country, City"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["parse_json(Status).x", "==", "1"]]}, ["no column"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["TimeGenerated", "contains", "2026"]]},
     ["does not apply to TimeGenerated (datetime)", "> >= < <= between"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", ">", "1"]]},
     ["== != has !has contains"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "matches regex", "(a+)+$"]]},
     ["exponential time"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "matches regex", "(a|aa)*b"]]},
     ["exponential time"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "matches regex", "(a)\\1"]]},
     ["backreferences"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "matches regex", "[a-"]]},
     ["not a valid regular expression"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "matches regex", "a{5000}"]]},
     ["at most 1000"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "==", "x"]] * 10_000},
     ["at most 32 conditions"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [{"any": [["IPAddress", "==", str(i)] for i in range(33)]}]},
     ["at most 32 conditions"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [DEEP]}, ["nest at most 4 deep"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [{"any": []}]}, ["non-empty list"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [{"or": [["IPAddress", "==", "x"]]}]}, ["\"any\""]),
    ({"table": "SigninLogs", "time_window": "1d", "baseline": {"days": 90, "keys": ["IPAddress"]}},
     ["1 to 30 days"]),
    ({"table": "SigninLogs", "time_window": "1d", "baseline": {"days": 7, "keys": ["DeviceDetail"]}},
     ["text or whole-number columns"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "ThreatIntelIndicators",
                                                          "on": ["AppDisplayName", "ObservableValue"]}},
     ["not keys of one kind", "IPAddress (ip)"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "SecurityIncident", "on": ["IPAddress", "x"]}},
     ["not a table a hunt can read"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "kind": "fullouter",
                                                          "on": ["UserPrincipalName", "TargetUpn"]}},
     ["inner, leftouter, leftsemi, leftanti"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "kind": "leftanti",
                                                          "on": ["UserPrincipalName", "TargetUpn"],
                                                          "columns": ["OperationName"]}},
     ["come with an inner or leftouter join"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": "SigninLogs | union *"}, ["an object"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["count()"], "having": [["Nope", ">", 1]]},
     ["not a result column", "Count"]),
    ({"table": "SigninLogs", "time_window": "1d", "having": [["Count", ">", 1]]}, ["add summarize"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": [{"countif": ["IPAddress", "==", "x"],
                                                                "as": "a b; drop"}]}, ["letters, digits"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["percentile(DurationMs, 150)"]}, ["level 1 to 99"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["arg_max(TimeGenerated, IPAddress)"],
      "by": ["IPAddress"]}, ["two result columns would have one name"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["arg_max(IPAddress, AppId)"]}, ["number or time"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["sum(IPAddress)"]}, ["sum and avg take numbers"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["ErrorCode", "==", "five"]]}, ["needs a whole number"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["ErrorCode", "==", "1 or 1==1"]]}, ["whole number"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IsRisky", "==", "yes"]]}, ["true or false"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["TimeGenerated", ">", "yesterday"]]}, ["ISO 8601"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "==", "x" * 10_000]]},
     [f"at most {MAX_VALUE_CHARS} characters", "..."]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["ErrorCode", "between", [9, 1]]]}, ["low is above high"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["IPAddress", "in", [str(i) for i in range(65)]]]},
     ["1 to 64 values"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": ["IPAddress == 1"]}, ["[column, operator, value]"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["stdev(DurationMs)"]}, ["count(), dcount"]),
    ({"table": "SigninLogs", "time_window": "1d", "summarize": ["max(UserPrincipalName)"]}, ["numbers and times"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["A", "B", "C", "D"]}, ["no column"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["UserPrincipalName", "IPAddress", "AppId", "Country", "City",
                                                        "State", "DeviceOS"]}, ["at most 6"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["DeviceDetail"]}, ["dynamic column cannot be a group"]),
    ({"table": "SigninLogs", "time_window": "1d", "bin": "7m"}, ["not a bin", "1h"]),
    ({"table": "SigninLogs", "time_window": "1d", "take": 101}, ["take 1 to 100"]),
    ({"table": "SigninLogs", "time_window": "1d", "sort": "IPAddress; drop"}, ["sort by one of", "TimeGenerated"]),
    ({"table": "SigninLogs", "time_window": "1d", "columns": ["IPAddress"], "summarize": ["count()"]},
     ["leave columns out"]),
    # Time proximity, sessions and series: bounded.
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                                                          "within": "90d"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                                                          "within": "0m"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "kind": "leftsemi",
                                                          "on": ["IPAddress", "InitiatedByIp"], "within": "1h"}},
     ["takes an inner join"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                                                          "within": "ago(1h) | union *"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "30d", "series": {"step": "5m"}}, ["8640.0 points", "4 to 720"]),
    ({"table": "SigninLogs", "time_window": "90m", "series": {"step": "1h"}}, ["whole number of steps"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": {"step": "1s"}}, ["one of 5m, 15m, 1h, 6h, 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": {"step": "1h", "threshold": 0}}, ["an object"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": "1h", "summarize": ["count()", "dcount(IPAddress)"]},
     ["one aggregate"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": "1h", "summarize": ["make_set(IPAddress)"]},
     ["one aggregate"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": "1h", "summarize": ["max(TimeGenerated)"]},
     ["needs a number column"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": "1h", "having": [["Count", ">", 1]]}, ["no having"]),
    ({"table": "SigninLogs", "time_window": "1d", "series": "1h", "bin": "1h"}, ["use one of them"]),
    ({"table": "SigninLogs", "time_window": "1d", "session": {"gap": "0m"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "session": {"gap": "-5m"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "session": {"gap": "2d"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "session": {"gap": 30}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "session": "30m", "bin": "1h"}, ["use one of them"]),
    # Computed columns, two results compared, a leftouter join, a proximity with a direction: bounded.
    ({"table": "SigninLogs", "time_window": "1d", "extend": [[f"C{i}", "tolower", "IPAddress"] for i in range(10_000)]},
     ["at most 8 computed columns", "10000"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["Loop", "tolower", "Loop"]]}, ["no column 'Loop'"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "tolower", "IPAddress"], ["B", "tolower", "A"]]},
     ["no column 'A'"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "tolower", "Nope"]]}, ["no column 'Nope'"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "extract", "UserAgent", "(a+)+$", 1]]},
     ["repeat inside a repeat"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "extract", "UserAgent", "(a|aa)*b", 1]]},
     ["alternation inside a repeat"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "extract", "UserAgent", "x" * 300, 0]]},
     ["at most 256 characters"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "extract", "UserAgent", "(a)", 2]]},
     ["has 1 group"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "extract", "UserAgent", "(a)"]]},
     ["extract takes 2 arguments"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["x | union *", "tolower", "IPAddress"]]},
     ["letters, digits and _"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["IPAddress", "tolower", "IPAddress"]]},
     ["already a column"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["JoinKeyX", "tolower", "IPAddress"]]},
     ["already a column"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "tolower", "IPAddress"], ["a", "tolower", "AppId"]]},
     ["already a column"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "exec", "IPAddress"]]}, ["not a function"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "split", "UserAgent", "", 0]]},
     ["separator: text of 1 to 16"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "split", "UserAgent", ",", 99]]},
     ["from 0 to 63"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "substring", "UserAgent", 0, 10**9]]},
     ["from 1 to 4096"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "json", "Status", "a\"] | union *"]]},
     ["names (letters, digits, _)"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "json", "Status", *"abcdefg"]]}, ["1 to 6 keys"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "url", "UserAgent", "Query"]]},
     ["Scheme, Host, Port, Path, Fragment"]),
    ({"table": "SecurityEvent", "time_window": "1d", "extend": [["A", "eventdata", "EventData", "<Data"]]},
     ["a Data Name"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "tolower", "DurationMs"]]},
     ["tolower reads text"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": "tolower(IPAddress)"}, ["a list of computed columns"]),
    ({"table": "SigninLogs", "time_window": "1d", "extend": [["A", "tolower", "IPAddress"]],
      "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"], "columns": ["OperationName"]},
      "by": ["A"], "having": [["Count", ">", {"column": "A"}]]}, ["both numbers"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["IPAddress"], "summarize": ["count()", "dcount(AppId)"],
      "having": [["Count", ">", {"column": "dcount_AppId", "times": 0}]]}, ["times is a number, not 0"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["IPAddress"], "summarize": ["count()", "dcount(AppId)"],
      "having": [["Count", ">", {"column": "dcount_AppId", "times": 1e300}]]}, ["at most 1,000,000"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["IPAddress"], "summarize": ["count()", "dcount(AppId)"],
      "having": [["Count", ">", {"column": "dcount_AppId", "times": "3; union *"}]]}, ["times is a number"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["IPAddress"], "summarize": ["count()", "dcount(AppId)"],
      "having": [["Count", ">", {"column": "dcount_AppId", "plus": 1}]]}, ["compare two results"]),
    ({"table": "SigninLogs", "time_window": "1d", "by": ["IPAddress"], "summarize": ["count()"],
      "having": [["Count", ">", {"column": "Nope"}]]}, ["not a result column"]),
    ({"table": "SigninLogs", "time_window": "1d", "where": [["DurationMs", ">", {"column": "DurationMs"}]]},
     ["comparing two columns is for having"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "kind": "leftouter",
                                                          "on": ["IPAddress", "InitiatedByIp"], "within": "1h"}},
     ["takes an inner join"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                                                          "within": "+90d"}}, ["from 1m to 1d"]),
    ({"table": "SigninLogs", "time_window": "1d", "join": {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"],
                                                          "within": "+-5m"}}, ["from 1m to 1d"]),
    # A field the object does not have is refused, not dropped (the hunt would run without it).
    ({"table": "EmailEvents", "time_window": "7d", "join": {"table": "UrlClickEvents", "after": True,
                                                           "on": ["NetworkMessageId", "NetworkMessageId"]}},
     ["'after' is not one of its fields", "within"]),
    ({"table": "SigninLogs", "time_window": "7d", "baseline": {"days": 14, "keys": ["IPAddress"], "where": []}},
     ["'where' is not one of its fields", "days, keys"]),
    # having with nothing it can filter, and two results compared as a value
    ({"table": "SigninLogs", "time_window": "7d", "summarize": ["make_set(IPAddress)"],
      "having": [["make_set_IPAddress", ">", 3]]}, ["lists (make_set)", "where"]),
    ({"table": "SigninLogs", "time_window": "7d", "summarize": ["count()", "dcount(IPAddress)"],
      "by": ["UserPrincipalName"], "having": [["Count", ">", "dcount_IPAddress"]]},
     ['{"column": "dcount_IPAddress", "times": 1}']),
    ({"table": "SigninLogs", "time_window": "7d", "summarize": ["min(TimeGenerated)", "max(TimeGenerated)"],
      "by": ["UserPrincipalName"], "having": [["max_TimeGenerated", ">", "min_TimeGenerated"]]},
     ["compared only as numbers"]),
])
def test_what_the_builder_cannot_make_is_refused_with_what_is_allowed(arguments: dict[str, Any],
                                                                      words: list[str]) -> None:
    with pytest.raises(InvalidParameter) as refused:
        queries.make_query("hunt", arguments)
    message = str(refused.value)
    assert all(word in message for word in words), message
    assert len(message) < 6000 and "x" * 100 not in message  # a 10k value is never echoed whole


def test_a_hunts_parameters_are_its_canonical_arguments() -> None:
    """The result's parameters re-read give the same hunt (the card and text re-read them for the column order)."""
    for arguments in [a for a, _ in all_hunts()[::7]] + SAMPLE_HUNTS + WORLD_HUNTS:
        hunt = parse_hunt(arguments)
        assert parse_hunt(hunt.parameters()) == hunt, arguments


# --- the demo's SQL against an independent evaluation ------------------------------------------------------------

USERS = ["alice@contoso.com", "Alice@Contoso.com", "bob@contoso.com", "carol@fabrikam.com", "admin@contoso.com",
         LOOKALIKE]
IPS = ["203.0.113.7", "198.51.100.23", "10.0.0.5", ""]
COUNTRIES = ["US", "RU", "DE", "", None]  # None: the field is absent


def _blank_row(table: str) -> dict[str, Any]:
    return {name: ("" if kind == "string" else None) for name, kind in load_table_columns()[table]}


def signin_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        country = rng.choice(COUNTRIES)
        location = {"city": rng.choice(["Berlin", "Moscow", "Seattle"])} | (
            {"countryOrRegion": country} if country is not None else {})
        error = rng.choice([0, 0, 50126, 500121])
        row = _blank_row("SigninLogs") | {
            "TimeGenerated": iso(NOW - timedelta(minutes=rng.randrange(-120, 12 * 24 * 60))),
            "UserPrincipalName": rng.choice(USERS), "IPAddress": rng.choice(IPS),
            "AppDisplayName": rng.choice(["Office 365 Exchange Online", "Azure Portal", "My-App_2"]),
            "ResultType": str(error), "DurationMs": rng.randrange(0, 5000), "IsRisky": rng.choice([0, 1]),
            "LocationDetails": json.dumps(location, separators=(",", ":")) if i % 17 else None,  # absent: null
            "Status": json.dumps({"errorCode": error} | ({"failureReason": "MFA denied; user declined"}
                                                          if error == 500121 else {}), separators=(",", ":")),
            "DeviceDetail": json.dumps({"operatingSystem": rng.choice(["Windows 10", "iOS 17", "Android"]),
                                        "isCompliant": rng.choice([True, False])}, separators=(",", ":")),
            "MfaDetail": json.dumps({"authMethod": "Mobile app notification"} if error == 500121 else {}),
            "Id": f"id-{i}",
        }
        rows.append(row)
    return rows


def process_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        parent = rng.choice(["winword.exe", "explorer.exe", "cmd.exe"])
        rows.append(_blank_row("DeviceProcessEvents") | {
            "TimeGenerated": iso(NOW - timedelta(minutes=rng.randrange(0, 5 * 24 * 60))),
            "DeviceName": rng.choice(["WS-FIN-042", "ws-fin-042", "SRV-DC-01"]),
            "FileName": rng.choice(["powershell.exe", "rundll32.exe", "notepad.exe"]),
            "ProcessCommandLine": rng.choice(["powershell -enc SQBFAFgA", "notepad a.txt", "rundll32 x.dll,Start"]),
            "InitiatingProcessFileName": parent, "InitiatingProcessParentFileName": "explorer.exe",
            "FileSize": rng.randrange(1000, 10_000_000), "AccountName": rng.choice(["alice", "svc-backup"]),
            "SHA256": f"{i:064x}",
        })
    rows[0] |= {"ProcessCommandLine": LONG_COMMAND, "TimeGenerated": iso(NOW - timedelta(hours=1))}
    return rows


# A command line the model must read whole (its tail is where the payload is), then one too long to show whole.
LONG_COMMAND = "powershell -nop -w hidden -c " + "A" * 540 + " IEX(payload)" + "B" * 100


def audit_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    rows = []
    for _ in range(count):
        actor = rng.choice(USERS)
        target = rng.choice(USERS)
        rows.append(_blank_row("AuditLogs") | {
            "TimeGenerated": iso(NOW - timedelta(minutes=rng.randrange(0, 20 * 24 * 60))),
            "OperationName": rng.choice(["Add member to role", "Update user", "Reset password"]),
            "Result": rng.choice(["success", "failure"]),
            "InitiatedBy": json.dumps({"user": {"userPrincipalName": actor, "ipAddress": rng.choice(IPS)}}),
            "TargetResources": json.dumps([{"userPrincipalName": target, "displayName": "Global Administrator",
                                            "type": "User"}]),
        })
    return rows


def url_process_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Processes started with a URL as their command line (a browser, a download), for the url function."""
    urls = ["https://Evil.example:8443/a/b?x=1#frag", "http://user:pw@10.0.0.5/dl.ps1", "hxxp://bad", "not a url",
            "https://[2001:db8::1]/x", "HTTPS://contoso.sharepoint.com/sites/fin?web=1", ""]
    return [_blank_row("DeviceProcessEvents") | {
        "TimeGenerated": iso(NOW - timedelta(minutes=rng.randrange(0, 5 * 24 * 60))),
        "DeviceName": rng.choice(["WS-FIN-042", "SRV-DC-01"]), "FileName": "msedge.exe",
        "ProcessCommandLine": rng.choice(urls), "InitiatingProcessFileName": "explorer.exe",
        "InitiatingProcessParentFileName": "userinit.exe", "FileSize": 1000, "AccountName": "alice",
        "SHA256": f"{i + 1000:064x}"} for i in range(count)]


def security_rows(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Windows security events: Kerberos service tickets (4769) with their EventData XML, audit policy changes by
    auditpol (4688) with their command lines."""
    rows = []
    for _ in range(count):
        service = rng.choice(["MSSQLSvc", "HTTP", "krbtgt", "WS-FIN-042$", "<odd>&amp;"])
        encryption = rng.choice(["0x17", "0x12", "0x18"])
        data = (f'<EventData xmlns="http://schemas.microsoft.com/win/2004/08/events/event">'
                f'<Data Name="TargetUserName">{rng.choice(USERS)}</Data><Data Name="ServiceName">{service}</Data>'
                f'<Data Name="TicketEncryptionType">{encryption}</Data><Data Name="Status">0x0</Data></EventData>')
        command = rng.choice(['auditpol.exe /set /subcategory:"Logon" /success:disable',
                              "auditpol /clear /y", 'AUDITPOL /set /SubCategory:"Process Creation" /failure:disable',
                              "cmd.exe /c whoami"])
        event = rng.choice([4769, 4688])
        rows.append(_blank_row("SecurityEvent") | {
            "TimeGenerated": iso(NOW - timedelta(minutes=rng.randrange(0, 5 * 24 * 60))),
            "Computer": rng.choice(["DC01.contoso.com", "WS-FIN-042.contoso.com"]), "EventID": event,
            "Account": rng.choice(["CONTOSO\\alice", "CONTOSO\\svc-sql", "NT AUTHORITY\\SYSTEM"]),
            "EventData": data if event == 4769 else "", "CommandLine": command if event == 4688 else ""})
    return rows


def insert(conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    conn.executemany(f'INSERT INTO "{table}" ({", ".join(columns)}) VALUES ({", ".join("?" * len(columns))})',
                     [[r[c] for c in columns] for r in rows])
    conn.commit()


# An independent evaluation: Python over the inserted rows, from the hunt's arguments' meaning.

def py_value(row: dict[str, Any], column: Column) -> Any:
    if column.computed is not None:
        return py_computed(row, column.computed)
    if not column.virtual:
        value = row.get(column.name)
    elif not column.path:
        value = row.get(column.source)
    else:
        try:
            node: Any = json.loads(row.get(column.source) or "")
        except ValueError:
            node = None
        for step in column.path:
            if isinstance(step, int):
                node = node[step] if isinstance(node, list) and len(node) > step else None
            else:
                node = node.get(step) if isinstance(node, dict) else None
        value = node
        if column.type in STRING_TYPES:
            value = "" if value is None else str(value)
    if column.type == "bool" and value is not None:
        value = bool(value)
    return value


_PY_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/?#]*@)?(\[[^\]]*\]|[^:/?#]*)(?::(\d+))?([^?#]*)"
                     r"(?:\?[^#]*)?(?:#(.*))?$", re.DOTALL)


def py_computed(row: dict[str, Any], c: Computed) -> str:
    """A computed column from what each function means (Kusto's docs), not from the demo's code."""
    value = py_value(row, c.of)
    text = "" if value is None else str(value)
    if c.fn in ("extract", "eventdata"):
        pattern, group = (c.args[0], c.args[1]) if c.fn == "extract" else (
            '<Data Name="' + str(c.args[0]) + '">([^<]*)</Data>', 1)
        found = re.search(str(pattern), text)
        return (found.group(int(group)) or "") if found else ""
    if c.fn == "split":
        parts = text.split(str(c.args[0]))
        try:
            return parts[int(c.args[1])]
        except IndexError:
            return ""
    if c.fn == "substring":
        return text[int(c.args[0]):][:int(c.args[1])]
    if c.fn == "tolower":
        return text.lower()
    if c.fn == "json":
        return py_json(text, c.args)
    parts = _PY_URL.match(text.strip())
    if parts is None or not parts[2]:
        return ""
    host = parts[2][1:-1] if parts[2].startswith("[") else parts[2]
    return {"Scheme": parts[1], "Host": host, "Port": parts[3] or "", "Path": parts[4],
            "Fragment": parts[5] or ""}[str(c.args[0])]


def py_json(text: str, path: tuple[str | int, ...]) -> str:
    try:
        node = json.loads(text)
    except ValueError:
        return ""
    for key in path:
        if isinstance(node, dict) and isinstance(key, str):
            node = node.get(key)
        else:
            node = node[key] if isinstance(node, list) and isinstance(key, int) and key < len(node) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return str(node).lower()
    if isinstance(node, (dict, list)):
        return json.dumps(node, separators=(",", ":"), ensure_ascii=False)
    return str(int(node)) if isinstance(node, float) and node == int(node) else str(node)


def py_has(text: str, term: str) -> bool:
    term = term.lower()
    pattern = (r"(?<![^\W_])" if term[:1].isalnum() else "") + re.escape(term) + (
        r"(?![^\W_])" if term[-1:].isalnum() else "")
    return bool(term) and re.search(pattern, text.lower()) is not None


def py_text(value: Any, op: str, wanted: tuple[Any, ...]) -> bool:
    text, first = str(value or ""), str(wanted[0]) if wanted else ""
    if op == "has":
        return py_has(text, first)
    if op == "has_any":
        return any(py_has(text, str(w)) for w in wanted)
    if op == "contains":
        return first.casefold() in text.casefold()
    if op == "startswith":
        return text.lower().startswith(first.lower())
    if op == "endswith":
        return text.lower().endswith(first.lower())
    if op == "matches regex":
        return re.search(first, text) is not None
    lowered = [str(w).lower() for w in wanted]
    return {"==": text.lower() == lowered[0], "!=": text.lower() != lowered[0], "in": text.lower() in lowered}[op]


def py_match(value: Any, op: str, wanted: tuple[Any, ...], column: Column) -> bool | None:
    """One leaf, as SQL and KQL see it: None (unknown) when a number or time is null."""
    text = column.type in STRING_TYPES or column.type == "dynamic"
    if op in ("isempty", "isnotempty"):
        empty = str(value or "") == "" if text else value is None
        return empty == (op == "isempty")
    negated = op.startswith("!") and op != "!="
    base = op[1:] if negated else op
    if text:
        found: bool | None = py_text(value, base, wanted)
    elif value is None:
        return None
    else:
        if column.type == "datetime":
            wanted = tuple(iso(w) for w in wanted)
        if base == "between":
            found = wanted[0] <= value <= wanted[1]
        elif base == "in":
            found = value in wanted
        else:
            found = {"==": value == wanted[0], "!=": value != wanted[0], ">": value > wanted[0],
                     "<": value < wanted[0], ">=": value >= wanted[0], "<=": value <= wanted[0]}[base]
    return (not found) if negated else found


def py_holds(row: dict[str, Any], c: Condition) -> bool | None:
    """A condition in three-valued logic (a null comparison is unknown; not(unknown) is unknown)."""
    if isinstance(c, Filter) and c.other is not None:  # two results: A op factor * B
        a, b = py_value(row, c.column), py_value(row, c.other)
        if a is None or b is None:
            return None
        scaled = float(c.values[0]) * b  # type: ignore[arg-type]
        return {"==": a == scaled, "!=": a != scaled, ">": a > scaled, ">=": a >= scaled, "<": a < scaled,
                "<=": a <= scaled}[c.op]
    if isinstance(c, Filter):
        return py_match(py_value(row, c.column), c.op, c.values, c.column)
    results = [py_holds(row, item) for item in c.items]
    if c.kind == "not":
        return None if results[0] is None else not results[0]
    decisive = c.kind == "any"  # True decides an any, False an all
    if decisive in results:
        return decisive
    return None if None in results else not decisive


def py_bin(moment: str, size: str) -> str:
    seconds = int(BINS[size].total_seconds())
    epoch = int(datetime.fromisoformat(moment[:19] + "+00:00").timestamp())
    return iso(datetime.fromtimestamp(epoch // seconds * seconds, tz=NOW.tzinfo))


def py_key(value: Any) -> str:
    """A join or baseline key: ``tolower(tostring(x))``."""
    return "" if value is None else str(value).lower()


def py_rows(rows: list[dict[str, Any]], start: datetime, end: datetime, conditions: tuple[Condition, ...]
            ) -> list[dict[str, Any]]:
    return [r for r in rows if iso(start) < r["TimeGenerated"] <= iso(end)
            and all(py_holds(r, c) is True for c in conditions)]


def py_left(hunt: Hunt, rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The hunt's rows, each with its columns by name (virtual ones read), after the baseline and the join."""
    own = [dict(r) | {c.name: py_value(r, c) for c in hunt.used} for r in
           py_rows(rows[hunt.table], NOW - hunt.window, NOW, hunt.filters)]
    if hunt.baseline:
        keys = hunt.baseline.keys
        before = NOW - hunt.window - timedelta(days=hunt.baseline.days)
        seen = {tuple(py_key(py_value(r, c)) for c in keys)
                for r in py_rows(rows[hunt.table], before, NOW - hunt.window, hunt.filters)}
        own = [r for r in own if tuple(py_key(r[c.name]) for c in keys) not in seen]
    join = hunt.join
    if join is None:
        return own
    right: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for r in py_rows(rows[join.table], NOW - join.window, NOW, join.filters):
        if (key := py_key(py_value(r, join.right))):
            right.setdefault(key, []).append(({name: py_value(r, c) for name, c in join.columns}, r["TimeGenerated"]))
    if join.kind == "leftsemi":
        return [r for r in own if py_key(r[join.left.name]) in right]
    if join.kind == "leftanti":
        return [r for r in own if py_key(r[join.left.name]) not in right]
    if join.kind == "leftouter":  # every left row; where no right row matched, its text "" and the rest null
        empty = {name: "" if c.type in STRING_TYPES else None for name, c in join.columns}
        return [r | brought for r in own
                for brought in ([b for b, _ in right.get(py_key(r[join.left.name]), [])] or [empty])]
    return [r | brought for r in own for brought, at in right.get(py_key(r[join.left.name]), [])
            if py_near(join, py_time(at) - py_time(r["TimeGenerated"]))]


def py_near(join: Join, apart: timedelta) -> bool:
    """The right row's time less the left's, within the join's proximity (either side, after or before)."""
    if join.within is None:
        return True
    low = timedelta(0) if join.direction == "after" else -join.within
    high = timedelta(0) if join.direction == "before" else join.within
    return low <= apart <= high


def py_time(stored: str) -> datetime:
    return datetime.fromisoformat(stored.replace("Z", "+00:00"))


def py_groups(hunt: Hunt, kept: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The summarized groups: by the keys and the time bin, or each key's sessions (its rows in time order, a new
    session after a gap longer than the hunt's), keyed by the keys, the session's first and last times."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    if not hunt.session:
        for r in kept:
            key = tuple(r[c.name] for c in hunt.by) + ((py_bin(r["TimeGenerated"], hunt.bin),) if hunt.bin else ())
            groups.setdefault(key, []).append(r)
        return groups
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in kept:
        by_key.setdefault(tuple(r[c.name] for c in hunt.by), []).append(r)
    for key, members in by_key.items():
        members.sort(key=lambda r: r["TimeGenerated"])
        sessions = [[members[0]]]
        for before, r in itertools.pairwise(members):
            if py_time(r["TimeGenerated"]) - py_time(before["TimeGenerated"]) > hunt.session:
                sessions.append([])
            sessions[-1].append(r)
        for session in sessions:
            groups[(*key, session[0]["TimeGenerated"], session[-1]["TimeGenerated"])] = session
    return groups


def py_series(hunt: Hunt, kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each key's aggregate per step from the window's start (zero where no row fell), the 100 series with the
    highest totals (then by key), decomposed by the documented algorithm (``series.decompose_anomalies``, checked
    on its own in test_hunt_series); their anomalous points."""
    from bot.sentinel.hunt.series import decompose_anomalies

    assert hunt.series is not None
    [aggregate] = hunt.aggregates
    start, step, points = NOW - hunt.window, hunt.series.span, hunt.series.points
    cells: dict[tuple[Any, ...], dict[int, list[dict[str, Any]]]] = {}
    for r in kept:
        point = (py_time(r["TimeGenerated"]) - start) // step
        if point < points:
            cells.setdefault(tuple(r[c.name] for c in hunt.by), {}).setdefault(point, []).append(r)
    name = aggregate.outputs[0][0]
    series = {key: [py_aggregate(aggregate, at[i])[name] or 0 if i in at else 0 for i in range(points)]
              for key, at in cells.items()}
    ranked = sorted(series.items(), key=lambda item: (-sum(item[1]), [(v is not None, v or 0) for v in item[0]]))
    out = []
    for key, values in ranked[:100]:
        found = decompose_anomalies(values, 1.5, hunt.series.period)
        out += [dict(zip([c.name for c in hunt.by], key, strict=True)) | {
            "TimeGenerated": iso(start + i * step), name: values[i], "Baseline": found.baseline[i],
            "Score": found.scores[i], "Anomaly": flag} for i, flag in enumerate(found.flags) if flag]
    return out


def py_sortable(value: Any) -> tuple[str, Any]:
    return type(value).__name__, value


def py_aggregate(a: Aggregate, members: list[dict[str, Any]]) -> dict[str, Any]:
    if a.fn == "count":
        return {a.name: len(members)}
    if a.fn == "countif":
        assert a.condition is not None
        return {a.name: sum(py_holds(m, a.condition) is True for m in members)}
    assert a.column is not None
    present = [m[a.column.name] for m in members if m[a.column.name] is not None]
    if a.fn in ("arg_max", "arg_min"):
        rows = [[m[c.name] for c in (a.column, *a.extra)] for m in members if m[a.column.name] is not None]
        pick = max if a.fn == "arg_max" else min
        best = pick(rows, key=lambda r: (r[0], json.dumps(r[1:], default=str))) if rows else [None] * len(a.outputs)
        return {name: value for (name, _), value in zip(a.outputs, best, strict=True)}
    if not present:
        return {a.name: 0 if a.fn == "dcount" else [] if a.fn == "make_set" else None}
    if a.fn == "percentile":
        ordered = sorted(present)
        value = ordered[max(0, math.ceil(a.level / 100 * len(ordered)) - 1)]
    else:
        value = {"dcount": lambda v: len(set(v)), "sum": sum, "avg": lambda v: sum(v) / len(v), "min": min,
                 "max": max, "make_set": lambda v: sorted(set(v), key=py_sortable)[:100]}[a.fn](present)
    return {a.name: value}


def py_hunt(hunt: Hunt, rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    kept = py_left(hunt, rows)
    if not hunt.summarized:
        out = [{c.name: r[c.name] for c in hunt.columns} for r in kept]
    elif hunt.series:
        out = py_series(hunt, kept)
    else:
        groups = py_groups(hunt, kept)
        if not hunt.by and not hunt.bin and not hunt.session and not groups:
            groups[()] = []  # a summarize without groups always gives one row
        out = []
        names = [c.name for c in hunt.by] + (["SessionStart", "SessionEnd"] if hunt.session else []) + (
            ["TimeGenerated"] if hunt.bin else [])
        for key, members in groups.items():
            row = dict(zip(names, key, strict=True))
            for a in hunt.aggregates:
                row |= py_aggregate(a, members)
            out.append(row)
        out = [r for r in out if all(py_holds(r, c) is True for c in hunt.having)]
    for name, descending in reversed(hunt.order):  # stable sorts, last key first; None is the smallest
        out.sort(key=lambda r, n=name: (r[n] is not None, r[n] if r[n] is not None else 0), reverse=descending)
    return [{"Row": r, "TotalMatched": len(out)} for r in out[:hunt.take]]


SAMPLE_HUNTS: list[dict[str, Any]] = [
    {"table": "SigninLogs", "time_window": "7d", "where": [["UserPrincipalName", "==", "ALICE@contoso.com"]]},
    {"table": "SigninLogs", "time_window": "7d", "where": [["UserPrincipalName", "!=", "alice@contoso.com"],
                                                           ["Country", "in", ["ru", "DE"]]], "take": 100},
    {"table": "SigninLogs", "time_window": "3d", "where": [["ErrorCode", "==", 500121]],
     "summarize": ["count()", "dcount(IPAddress)", "min(TimeGenerated)", "max(TimeGenerated)"],
     "by": ["UserPrincipalName"]},
    {"table": "SigninLogs", "time_window": "7d", "where": [["ErrorCode", "in", [50126, 500121]]],
     "by": ["Country"], "bin": "1d"},
    {"table": "SigninLogs", "time_window": "10d", "where": [["AppDisplayName", "has", "exchange"]],
     "columns": ["AppDisplayName", "Country", "City", "DeviceOS", "DeviceIsCompliant", "ErrorCode", "FailureReason"]},
    {"table": "SigninLogs", "time_window": "10d", "where": [["AppDisplayName", "has", "app"]]},
    {"table": "SigninLogs", "time_window": "10d", "where": [["AppDisplayName", "has", "My-App"]]},
    {"table": "SigninLogs", "time_window": "10d", "where": [["FailureReason", "contains", "DENIED"],
                                                            ["MfaMethod", "startswith", "mobile"]]},
    {"table": "SigninLogs", "time_window": "30d", "where": [["DurationMs", "between", [100, 2000]],
                                                            ["IsRisky", "==", True]], "summarize": ["count()"]},
    {"table": "SigninLogs", "time_window": "30d", "where": [["DurationMs", ">", 4000], ["Country", "==", ""]],
     "sort": "DurationMs asc", "take": 5},
    {"table": "SigninLogs", "time_window": "30d", "where": [["TimeGenerated", "between",
                                                             ["2026-11-15T00:00:00Z", "2026-11-18T12:00:00Z"]],
                                                            ["DeviceDetail", "has", "ios"]],
     "by": ["DeviceOS", "DeviceIsCompliant"], "summarize": ["count()", "max(DurationMs)"]},
    {"table": "SigninLogs", "time_window": "30d", "where": [["UserPrincipalName", "==", LOOKALIKE]]},
    {"table": "SigninLogs", "time_window": "30d", "where": [["UserPrincipalName", "has", "\" | where 1==1"]]},
    {"table": "DeviceProcessEvents", "time_window": "5d", "where": [["DeviceName", "==", "ws-fin-042"],
                                                                    ["ParentProcess", "==", "WINWORD.EXE"]]},
    {"table": "DeviceProcessEvents", "time_window": "5d", "where": [["ProcessCommandLine", "contains", "-enc"]],
     "by": ["DeviceName", "FileName", "ParentProcess"], "summarize": ["count()", "dcount(SHA256)", "max(FileSize)"]},
    {"table": "DeviceProcessEvents", "time_window": "2d", "where": [["FileSize", "<", 500000]], "bin": "6h"},
    {"table": "AuditLogs", "time_window": "14d", "where": [["OperationName", "==", "add member to role"],
                                                           ["TargetUpn", "startswith", "ALICE"]]},
    {"table": "AuditLogs", "time_window": "14d", "where": [["InitiatedByUser", "in", USERS[:3]]],
     "by": ["InitiatedByUser", "InitiatedByIp"], "sort": "InitiatedByUser asc"},
    # Groups, negations and the operators issue 34 added.
    {"table": "SigninLogs", "time_window": "10d",
     "where": [{"any": [["Country", "in", ["RU", "DE"]], {"not": ["AppDisplayName", "endswith", "online"]}]},
               ["UserPrincipalName", "!endswith", "fabrikam.com"]],
     "take": 100},
    {"table": "SigninLogs", "time_window": "10d", "where": [{"all": [["AppDisplayName", "!has", "portal"],
                                                                     ["AppDisplayName", "!contains", "APP_"]]},
                                                            ["UserPrincipalName", "!startswith", "bob"],
                                                            ["IPAddress", "!in", ["10.0.0.5", "203.0.113.7"]]],
     "columns": ["UserPrincipalName", "IPAddress", "AppDisplayName"], "take": 100},
    {"table": "SigninLogs", "time_window": "12d", "where": [["AppDisplayName", "has_any", ["exchange", "my-app"]],
                                                            ["UserPrincipalName", "matches regex", "^[a-z]+@contoso"],
                                                            ["IPAddress", "isnotempty"], ["Country", "isempty"]],
     "take": 100},
    {"table": "SigninLogs", "time_window": "12d", "where": [{"not": {"any": [["DurationMs", ">=", 4000],
                                                                             ["DurationMs", "<=", 100]]}},
                                                            ["DurationMs", "!between", [2000, 2500]],
                                                            ["DeviceDetail", "!has", "android"]],
     "summarize": ["count()", "sum(DurationMs)", "avg(DurationMs)", "percentile(DurationMs, 90)",
                   "make_set(Country)", "arg_max(TimeGenerated, IPAddress, DeviceIsCompliant)",
                   "arg_min(DurationMs, AppDisplayName)",
                   {"countif": {"any": [["ErrorCode", "==", 50126], ["FailureReason", "has_any", ["denied"]]]},
                    "as": "Failures"}],
     "by": ["UserPrincipalName"], "having": [["Count", ">", 3], {"not": ["Failures", "<", 1]}]},
    {"table": "SigninLogs", "time_window": "12d", "summarize": ["dcount(IPAddress)", "max(TimeGenerated)"],
     "by": ["UserPrincipalName", "AppDisplayName", "Country", "City", "DeviceOS", "IsRisky"],
     "having": [["dcount_IPAddress", ">=", 1]], "take": 100},
    # A baseline: the addresses not seen in the 7 days before the window.
    {"table": "SigninLogs", "time_window": "1d", "where": [["ResultType", "==", "0"]],
     "baseline": {"days": 1, "keys": ["IPAddress", "UserPrincipalName", "AppDisplayName"]}, "take": 100},
    {"table": "SigninLogs", "time_window": "1d", "baseline": {"days": 1, "keys": ["Country", "UserPrincipalName"]},
     "by": ["Country", "UserPrincipalName"]},
    # Time proximity, sessions and series (the time-series part of issue 34).
    {"table": "SigninLogs", "time_window": "10d",
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "TargetUpn"], "within": "2h",
              "columns": ["OperationName", "TimeGenerated"]}, "take": 100},
    {"table": "SigninLogs", "time_window": "12d", "by": ["UserPrincipalName"], "session": {"gap": "3h"},
     "summarize": ["count()", "dcount(IPAddress)", {"countif": ["ErrorCode", "==", 500121], "as": "Denied"}],
     "having": [["Count", ">", 1]], "take": 100},
    {"table": "DeviceProcessEvents", "time_window": "5d", "session": "30m", "take": 100},
    {"table": "SigninLogs", "time_window": "12d", "by": ["UserPrincipalName"], "series": {"step": "1h"},
     "take": 100},
    {"table": "DeviceProcessEvents", "time_window": "5d", "by": ["DeviceName"], "series": {"step": "15m"},
     "summarize": ["max(FileSize)"], "sort": "TimeGenerated asc"},
    {"table": "AuditLogs", "time_window": "20d", "series": "1h",
     "summarize": [{"countif": ["Result", "==", "failure"], "as": "Failures"}]},
    # Computed columns (split, json, tolower, substring) in conditions, group keys, aggregates and a countif; a
    # having that compares two results.
    {"table": "SigninLogs", "time_window": "12d",
     "extend": [["Domain", "split", "UserPrincipalName", "@", 1], ["User", "split", "UserPrincipalName", "@", 0],
                ["Os", "json", "DeviceDetail", "operatingSystem"], ["Why", "json", "Status", "failureReason"],
                ["Low", "tolower", "AppDisplayName"], ["Head", "substring", "AppDisplayName", 3, 6]],
     "where": [["Domain", "!=", "fabrikam.com"], ["User", "!startswith", "admin"]],
     "by": ["Domain", "Os", "Low"],
     "summarize": ["count()", "dcount(User)", {"countif": ["Why", "has", "denied"], "as": "Denied"}, "make_set(Head)"],
     "having": [["Denied", "<", {"column": "Count", "times": 0.3}]], "take": 100},
    {"table": "SigninLogs", "time_window": "12d", "extend": [["Last", "split", "UserPrincipalName", ".", 1],
                                                             ["Compliant", "json", "DeviceDetail", "isCompliant"],
                                                             ["Missing", "json", "DeviceDetail", "no", 0]],
     "by": ["Last", "Compliant", "Missing"], "summarize": ["count()", "dcount(IPAddress)", "sum(DurationMs)"],
     "having": [{"any": [["dcount_IPAddress", ">=", {"column": "Count"}],
                         {"not": ["sum_DurationMs", "<=", {"column": "Count", "times": 2000}]}]}], "take": 100},
    {"table": "SigninLogs", "time_window": "1d", "extend": [["Low", "tolower", "UserPrincipalName"]],
     "baseline": {"days": 1, "keys": ["Low", "IPAddress", "AppDisplayName"]},
     "columns": ["Low", "IPAddress", "AppDisplayName", "TimeGenerated"],
     "sort": "Low asc", "take": 100},
    # extract and url on command lines; eventdata and extract on Windows events.
    {"table": "DeviceProcessEvents", "time_window": "5d",
     "extend": [["Payload", "extract", "ProcessCommandLine", "-enc\\s+(\\S+)", 1],
                ["Scheme", "url", "ProcessCommandLine", "Scheme"], ["Host", "url", "ProcessCommandLine", "Host"],
                ["Port", "url", "ProcessCommandLine", "Port"], ["UrlPath", "url", "ProcessCommandLine", "Path"],
                ["Fragment", "url", "ProcessCommandLine", "Fragment"]],
     "by": ["Payload", "Scheme", "Host", "Port", "UrlPath", "Fragment"], "take": 100},
    {"table": "SecurityEvent", "time_window": "5d",
     "extend": [["Service", "eventdata", "EventData", "ServiceName"],
                ["Encryption", "eventdata", "EventData", "TicketEncryptionType"],
                ["Domain", "split", "Account", "\\", 0]],
     "where": [["EventID", "==", 4769], ["Encryption", "in", ["0x17", "0x18"]], ["Service", "!endswith", "$"],
               ["Service", "!=", "krbtgt"]],
     "by": ["Service", "Encryption", "Domain"], "summarize": ["count()", "dcount(Computer)"], "take": 100},
    {"table": "SecurityEvent", "time_window": "5d",
     "extend": [["Subcategory", "extract", "CommandLine", "(?i)/subcategory:\"?([^\"/]+)", 1],
                ["Change", "extract", "CommandLine", "(?i)/(success|failure):(enable|disable)", 0]],
     "where": [["EventID", "==", 4688], ["CommandLine", "has", "auditpol"]],
     "columns": ["TimeGenerated", "Computer", "Subcategory", "Change"], "sort": "Subcategory desc", "take": 100},
    # A leftouter join keeps every left row; a time proximity with a direction.
    {"table": "SigninLogs", "time_window": "7d", "where": [["ErrorCode", "==", 500121]],
     "join": {"table": "AuditLogs", "kind": "leftouter", "on": ["UserPrincipalName", "TargetUpn"],
              "time_window": "20d",
              "where": [["OperationName", "has", "reset"], ["TargetUpn", "endswith", "fabrikam.com"]],
              "columns": ["OperationName", "TimeGenerated"]}, "take": 100},
    {"table": "SigninLogs", "time_window": "7d",
     "join": {"table": "AuditLogs", "kind": "leftouter", "on": ["UserPrincipalName", "InitiatedByUser"],
              "where": [["Result", "==", "failure"]], "columns": ["OperationName"]},
     "by": ["OperationName"], "summarize": ["count()", "dcount(UserPrincipalName)"]},
    {"table": "SigninLogs", "time_window": "10d",
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "TargetUpn"], "within": "+3h",
              "columns": ["OperationName", "TimeGenerated"]}, "take": 100},
    {"table": "SigninLogs", "time_window": "10d",
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "TargetUpn"], "within": "-3h",
              "columns": ["OperationName", "TimeGenerated"]}, "by": ["UserPrincipalName"]},
    # A join: a sign-in's account with the directory changes made to it.
    {"table": "SigninLogs", "time_window": "7d", "where": [["ErrorCode", "==", 500121]],
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "TargetUpn"], "time_window": "20d",
              "where": [["OperationName", "has", "role"]], "columns": ["OperationName", "TimeGenerated"]},
     "take": 100},
    {"table": "SigninLogs", "time_window": "7d",
     "join": {"table": "AuditLogs", "kind": "leftsemi", "on": ["UserPrincipalName", "InitiatedByUser"],
              "where": [["Result", "==", "failure"]]},
     "by": ["UserPrincipalName"], "summarize": ["count()", "dcount(IPAddress)"]},
    {"table": "SigninLogs", "time_window": "7d",
     "join": {"table": "AuditLogs", "kind": "leftanti", "on": ["UserPrincipalName", "TargetUpn"], "time_window": "2d",
              "where": [["OperationName", "==", "Reset password"], ["Result", "==", "failure"]]},
     "by": ["UserPrincipalName"]},
    {"table": "SigninLogs", "time_window": "7d",
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "InitiatedByUser"], "columns": ["OperationName"]},
     "by": ["UserPrincipalName", "OperationName"], "summarize": ["count()", "dcount(IPAddress)"],
     "having": [["Count", ">", 2]]},
    # A baseline and a join together (their steps' values in the order the SQL reads them).
    {"table": "SigninLogs", "time_window": "1d", "where": [["AppDisplayName", "!has", "portal"]],
     "baseline": {"days": 1, "keys": ["UserPrincipalName", "Country"]},
     "join": {"table": "AuditLogs", "on": ["UserPrincipalName", "TargetUpn"], "time_window": "20d",
              "where": [["Result", "==", "success"]], "columns": ["OperationName", "InitiatedByUser"]},
     "take": 100},
]


@pytest.fixture(scope="module")
def hunt_demo() -> tuple[DemoBackend, dict[str, list[dict[str, Any]]]]:
    """One demo workspace for the module whose three hunted tables hold the test's rows alone: its tests only read
    (a copy of the run's build each, as ``demo_backend`` gives, took seconds apiece: 40 s of the module's 77)."""
    demo_backend = copied_demo(SEED, lambda: NOW)
    rng = random.Random(25)
    rows = {"SigninLogs": signin_rows(rng, 400), "DeviceProcessEvents": process_rows(rng, 200),
            "AuditLogs": audit_rows(rng, 150)}
    more = random.Random(34)  # rows for the computed columns (issue 34), drawn apart: the rows above stay as they were
    rows["DeviceProcessEvents"] += url_process_rows(more, 40)
    rows["SecurityEvent"] = security_rows(more, 160)

    def add(conn: sqlite3.Connection, now: datetime) -> None:
        for table, table_rows in rows.items():
            conn.execute(f'DELETE FROM "{table}"')  # the test's rows alone, whatever the generator made
            insert(conn, table, table_rows)

    demo_backend.with_database(add)
    return demo_backend, rows


@pytest.mark.parametrize("arguments", SAMPLE_HUNTS, ids=[f"hunt{i}" for i in range(len(SAMPLE_HUNTS))])
async def test_the_demo_answers_what_python_finds_in_the_same_rows(hunt_demo, arguments: dict[str, Any]) -> None:
    backend, rows = hunt_demo
    hunt = queries.make_query("hunt", arguments)
    raw = await backend.execute(hunt, queries.kql_of(hunt))
    expected = py_hunt(hunt, rows)
    assert raw.rows == expected
    assert len(expected) > 0 or arguments["where"][0][2] in (LOOKALIKE, "\" | where 1==1"), arguments


def _sample(predicate: Any) -> dict[str, Any]:
    return next(h for h in SAMPLE_HUNTS if predicate(h))


async def test_the_sample_exercises_every_computed_function_and_each_join_form(hunt_demo) -> None:
    """The samples above are not vacuous: every computed function yields text on some row (and "" where nothing
    matched, for those that match), a
    leftouter join keeps left rows with and without a match, and the two directions pair different rows."""
    _backend, rows = hunt_demo
    functions: dict[str, set[bool]] = {}
    for arguments in SAMPLE_HUNTS:
        hunt = parse_hunt(arguments)
        for column in hunt.computed:
            assert column.computed is not None
            values = {py_value(r, column) != "" for r in rows[hunt.table]}
            functions.setdefault(column.computed.fn, set()).update(values)
    assert set(functions) == set(FUNCTIONS) and all(True in found for found in functions.values()), functions
    assert all(False in functions[fn] for fn in ("extract", "eventdata", "json", "url")), functions  # no match: ""
    outer = parse_hunt(_sample(lambda h: h.get("join", {}).get("kind") == "leftouter" and "by" not in h))
    assert {r["Row"]["RightOperationName"] != "" for r in py_hunt(outer, rows)} == {True, False}
    paired = [parse_hunt(_sample(lambda h, w=w: h.get("join", {}).get("within") == w)) for w in ("+3h", "-3h")]
    after, before = ({(r["UserPrincipalName"], r["TimeGenerated"]) for r in py_left(h, rows)} for h in paired)
    assert after and before and after != before


async def test_the_sample_exercises_every_operator(hunt_demo) -> None:
    ops = {f.op for arguments in SAMPLE_HUNTS for f in leaves(parse_hunt(arguments).filters)}
    assert ops == set(OPERATORS)
    functions = {a.fn for arguments in SAMPLE_HUNTS for a in parse_hunt(arguments).aggregates}
    assert functions == set(AGGREGATES)


# --- the tool, end to end -----------------------------------------------------------------------------------------

async def test_the_tool_runs_on_the_demo_and_renders_its_text_and_card(hunt_demo) -> None:
    backend, _ = hunt_demo
    box = ToolBox(SentinelClient(backend))
    run = await box.run("hunt", json.dumps(SAMPLE_HUNTS[2]))
    assert run.ok and isinstance(run.artifact, QueryResult) and run.artifact.records
    first = run.artifact.records[0]
    assert isinstance(first, HuntRow) and next(name for name, _ in first.cells) == "UserPrincipalName"
    refs = {("entity", f"account:{r.value('UserPrincipalName')}"): n for n, r in enumerate(run.artifact.records, 1)}
    text = TOOLS.text(run.artifact, lambda kind, key: refs.get((kind, key)), run.arguments)
    lines = text.splitlines()
    assert lines[0].startswith("hunt(table=SigninLogs time_window=3d") and "DEMO DATA" in lines[0]
    assert lines[1] == ("ref|UserPrincipalName (string, key)|Count (long)|dcount_IPAddress (long)|min_TimeGenerated "
                        "(datetime)|max_TimeGenerated (datetime)")
    assert lines[2].startswith("[1]|")
    card = TOOLS.card(run.artifact, lambda kind, key: refs.get((kind, key)), NOW)
    assert_valid(card)
    shown = json.dumps(card)  # five columns: each row stacked, its [n] first
    assert '"Hunt"' in shown and "SigninLogs, last 3d" in shown and '"[1] UserPrincipalName: ' in shown

    refused = await box.run("hunt", json.dumps({"table": "SigninLog", "time_window": "1d"}))
    assert not refused.ok and isinstance(refused.artifact, QueryError)
    assert refused.artifact.code == "invalid_argument" and "SigninLogs" in refused.artifact.message
    told = TOOLS.text(refused.artifact, lambda kind, key: None, refused.arguments)
    assert "Correct the argument" in told


async def test_the_model_reads_whole_cells_up_to_a_bound_and_the_group_keys(hunt_demo) -> None:
    backend, _ = hunt_demo
    box = ToolBox(SentinelClient(backend))
    run = await box.run("hunt", json.dumps({"table": "DeviceProcessEvents", "time_window": "5d",
                                            "where": [["ProcessCommandLine", "has", "IEX"]],
                                            "columns": ["DeviceName", "ProcessCommandLine"]}))
    assert run.ok, run.artifact
    text = TOOLS.text(run.artifact, lambda kind, key: None, run.arguments)
    cell = text.splitlines()[2].split("|")[2]
    assert cell.startswith(LONG_COMMAND[:600]) and "IEX(payload)" in cell  # 80 characters cut it at the A's
    assert cell.endswith(f"…({len(LONG_COMMAND) - 600} more characters)")
    summarized = await box.run("hunt", json.dumps({"table": "SigninLogs", "time_window": "7d",
                                                   "by": ["Country", "UserPrincipalName"],
                                                   "summarize": ["count()", "make_set(IPAddress)"]}))
    assert summarized.ok and isinstance(summarized.artifact, QueryResult)
    header = TOOLS.text(summarized.artifact, lambda kind, key: None, summarized.arguments).splitlines()[1]
    assert header == ("ref|Country (string, key)|UserPrincipalName (string, key)|Count (long)|"
                      "make_set_IPAddress (dynamic)")
    named = {value for row in summarized.artifact.records for kind, value in row.identifiers() if kind == "ip"}
    assert "203.0.113.7" in named  # an address inside a make_set is a fact the answer may cite


async def test_the_same_hunt_reads_the_same_from_log_analytics(hunt_demo, fake_logs: FakeLogAnalytics) -> None:
    backend, _ = hunt_demo
    for arguments in (SAMPLE_HUNTS[3], SAMPLE_HUNTS[4]):
        for dynamic_as_text in (True, False):
            text = await prime(fake_logs, backend, "hunt", arguments, dynamic_as_text=dynamic_as_text)
            client = make_la_client(fake_logs)
            try:
                remote = await client.run("hunt", arguments)
            finally:
                await client.close()
            local = await SentinelClient(backend).run("hunt", arguments)
            assert isinstance(remote, QueryResult) and isinstance(local, QueryResult), remote
            assert remote.records == local.records and remote.records
            assert remote.metadata.kql == text and remote.metadata.timespan == local.metadata.timespan
            sent = fake_logs.requests[-1].body
            assert sent["query"] == text and "Row = bag_pack_columns(" in sent["query"]


async def test_the_model_hunts_and_the_fact_check_knows_the_rows(hunt_demo, fake_openai) -> None:
    """Through the real openai client and the fake model: a hunt call, its rows as [n] references, an answer citing
    a returned IP passes the fact check and an invented one is flagged."""
    from bot.orchestrator.conversation import Conversation
    from tests.orchestrator.test_orchestrator import last_tool_message, make
    from tests.support import openai_fake as oa

    backend, _rows = hunt_demo
    arguments = {"table": "SigninLogs", "time_window": "7d", "where": [["ErrorCode", "==", 500121]],
                 "by": ["IPAddress", "UserPrincipalName"], "summarize": ["count()"]}

    def brain(body: dict) -> oa.Step:
        lines = last_tool_message(body)["content"].splitlines()
        first = next(line for line in lines if line.startswith("[") and "|203.0.113.7|" in line).split("|")
        return oa.text(f"{first[0]} {first[2]} had {first[3]} denied MFA pushes from 203.0.113.7; "
                       "none came from 192.0.2.99.")

    fake_openai.script(oa.tool_calls(("hunt", arguments)))
    fake_openai.brain = brain
    result = await make(fake_openai, SentinelClient(backend)).answer(Conversation(), "who got MFA denials?")
    [run] = result.runs
    assert run.tool == "hunt" and isinstance(run.artifact, QueryResult) and run.artifact.records
    summary, _, marked = result.text.partition("\n\n")
    assert "192.0.2.99 is not in any" in summary, result.text
    assert "203.0.113.7 ⚠" not in marked and "203.0.113.7" in marked


# --- the generated world (the demo's activity tables) ---------------------------------------------------------

WORLD_HUNTS: list[dict[str, Any]] = [
    {"table": "SigninLogs", "time_window": "30d", "where": [["ErrorCode", "==", 500121]],
     "by": ["UserPrincipalName", "IPAddress", "MfaMethod"], "summarize": ["count()", "max(TimeGenerated)"]},
    {"table": "SigninLogs", "time_window": "7d", "where": [["Country", "!=", "US"], ["ResultType", "!=", "0"]],
     "columns": ["UserPrincipalName", "Country", "City", "DeviceOS", "ErrorCode", "FailureReason"], "take": 100},
    {"table": "AADNonInteractiveUserSignInLogs", "time_window": "3d", "by": ["Country"], "bin": "1d"},
    {"table": "DeviceProcessEvents", "time_window": "30d", "where": [["ProcessCommandLine", "has", "powershell"]],
     "by": ["DeviceName", "ParentProcess", "FileName"], "summarize": ["count()", "dcount(SHA256)"]},
    {"table": "DeviceProcessEvents", "time_window": "14d", "where": [["DeviceName", "startswith", "ws-"]],
     "sort": "FileName asc", "take": 100},
    {"table": "AuditLogs", "time_window": "30d", "where": [["OperationName", "has", "role"]],
     "by": ["InitiatedByUser", "TargetUpn", "OperationName"]},
    {"table": "AuditLogs", "time_window": "30d", "where": [["InitiatedByUser", "in", ["ADM-JONAS.WEBER@contoso.com",
                                                                                      "adm-aisha.khan@contoso.com"]]]},
    {"table": "EmailEvents", "time_window": "7d", "by": ["DeliveryAction", "SenderFromDomain"], "take": 100},
    {"table": "UrlClickEvents", "time_window": "30d", "where": [["IsClickedThrough", "==", True]]},
    {"table": "ThreatIntelIndicators", "time_window": "30d", "where": [["Confidence", ">", 50]],
     "by": ["ObservableKey"], "summarize": ["count()", "min(Confidence)", "max(ValidUntil)"]},
    {"table": "AADUserRiskEvents", "time_window": "30d", "by": ["RiskEventType", "Country"]},
    {"table": "DeviceNetworkEvents", "time_window": "7d", "where": [["RemotePort", "between", [1, 1024]]],
     "by": ["RemotePort"], "summarize": ["count()", "dcount(RemoteIP)"]},
    {"table": "SecurityAlert", "time_window": "7d", "where": [["AlertSeverity", "==", "high"]],
     "by": ["ProductName"], "bin": "1d"},
    # The Windows agent's and the firewall's view of the incidents' stories (remote logons, the attacker denied).
    {"table": "SecurityEvent", "time_window": "30d",
     "where": [["EventID", "in", [4624, 4625]], ["LogonType", "==", 10]],
     "by": ["Computer", "Account", "IpAddress", "EventID"], "summarize": ["count()", "min(TimeGenerated)"]},
    {"table": "SecurityEvent", "time_window": "30d", "where": [["EventID", "==", 4688],
                                                               ["ParentProcess", "!endswith", "explorer.exe"]],
     "by": ["Computer", "ParentProcess"], "summarize": ["count()", "arg_max(TimeGenerated, CommandLine)"]},
    {"table": "CommonSecurityLog", "time_window": "30d", "where": [["DeviceAction", "==", "deny"]],
     "by": ["SourceIP", "DestinationPort"], "take": 100},
    {"table": "CommonSecurityLog", "time_window": "30d", "where": [["SentBytes", ">", 100_000_000]],
     "columns": ["TimeGenerated", "SourceIP", "DestinationIP", "RequestURL", "RequestMethod", "SentBytes"]},
    {"table": "DeviceNetworkEvents", "time_window": "30d",
     "join": {"table": "CommonSecurityLog", "kind": "leftsemi", "on": ["RemoteIP", "DestinationIP"],
              "where": [["DeviceAction", "==", "allow"], ["DestinationIP", "!startswith", "10."]]},
     "by": ["DeviceName", "RemoteIP"], "summarize": ["count()", "make_set(RemoteUrl)"], "take": 100},
    {"table": "SigninLogs", "time_window": "2d", "baseline": {"days": 7, "keys": ["UserPrincipalName", "IPAddress"]},
     "by": ["UserPrincipalName", "IPAddress", "Country"]},
    # A click within 10 minutes of its mail; MFA-denial bursts as sessions; spikes of failures and of bytes sent.
    {"table": "EmailEvents", "time_window": "30d",
     "join": {"table": "UrlClickEvents", "on": ["NetworkMessageId", "NetworkMessageId"], "within": "10m",
              "columns": ["Url", "TimeGenerated", "IsClickedThrough"]}},
    {"table": "SigninLogs", "time_window": "7d", "where": [["ErrorCode", "==", 500121]], "by": ["UserPrincipalName"],
     "session": {"gap": "10m"}, "summarize": ["count()", "dcount(IPAddress)"], "having": [["Count", ">=", 5]]},
    {"table": "SigninLogs", "time_window": "7d", "where": [["ResultType", "!=", "0"]], "series": {"step": "1h"}},
    {"table": "CommonSecurityLog", "time_window": "14d", "by": ["SourceIP"], "series": {"step": "1h"},
     "summarize": ["sum(SentBytes)"]},
]


@pytest.fixture(scope="module")
def world_rows() -> dict[str, list[dict[str, Any]]]:
    backend = copied_demo(SEED, lambda: NOW)
    tables_wanted = {h["table"] for h in WORLD_HUNTS} | {h["join"]["table"] for h in WORLD_HUNTS if "join" in h}
    return backend.with_database(lambda conn, now: {
        t: [dict(r) for r in conn.execute(f'SELECT * FROM "{t}"')] for t in tables_wanted})


@pytest.mark.parametrize("arguments", WORLD_HUNTS, ids=[f"{h['table']}-{i}" for i, h in enumerate(WORLD_HUNTS)])
async def test_the_generated_world_answers_what_python_finds(demo_backend: DemoBackend, world_rows,
                                                             arguments: dict[str, Any]) -> None:
    hunt = queries.make_query("hunt", arguments)
    raw = await demo_backend.execute(hunt, queries.kql_of(hunt))
    assert raw.rows == py_hunt(hunt, world_rows)
    assert raw.rows, "the world has rows for this hunt (a hunt that finds nothing proves little)"


async def test_the_mfa_fatigue_story_is_a_hunt_away(demo_backend: DemoBackend) -> None:
    result = await SentinelClient(demo_backend).run("hunt", WORLD_HUNTS[0])
    assert isinstance(result, QueryResult)
    top = result.records[0]
    assert top.value("MfaMethod") and top.value("Count") >= 5, top  # many denied pushes for one account


def test_every_hunt_the_builder_makes_runs_on_the_demo(demo_backend: DemoBackend) -> None:
    """The SQL side of the parser test: every hunt of every table runs on the generated world (column names that are
    SQL keywords, JSON fields of absent or text columns, hostile values as parameters) and keeps its contract."""
    from bot.sentinel.hunt import sql as hunt_sql

    def run_all(conn: sqlite3.Connection, now: datetime) -> int:
        ran = 0
        for arguments, _ in all_hunts():
            hunt = parse_hunt(arguments)
            for row in hunt_sql.run(hunt, conn, now):
                assert set(row) == {"Row", "TotalMatched"} and list(row["Row"]) == [n for n, _ in hunt.output]
            ran += 1
        return ran

    assert demo_backend.with_database(run_all) > 700


async def test_a_misbehaving_model_gets_errors_never_a_traceback(hunt_demo) -> None:
    """Arguments of every JSON shape in every place: each call is a result or an invalid_argument error."""
    backend, _ = hunt_demo
    rng = random.Random(7)
    junk: list[Any] = [None, True, 0, -1, 2**70, 1.5, float("1e308"), "", " ", "x" * 600, "SigninLogs", "==", "in",
                       "between", "Country", "count()", "max(Country)", "1h", "7d", [], {}, [None], [[]], ["a", "b"],
                       [["Country", "==", "US"]], [["ErrorCode", "between", [1]]], {"column": "Country"},
                       [["TimeGenerated", ">", "2026-13-45"]], "\ud800", "\u0000", ["\n.drop table x"],
                       [{"any": [["Country", "==", "US"], {"not": {"all": []}}]}], [{"not": None}], {"any": "x"},
                       [["Country", "matches regex", "(a*)*$"]], [["Country", "has_any", []]], [["Country", "isempty"]],
                       {"table": "AuditLogs", "on": ["IPAddress", "InitiatedByIp"]},
                       {"table": "AuditLogs", "on": [1, 2]},
                       {"table": "SigninLogs", "on": ["IPAddress"], "kind": "inner"}, {"days": 3, "keys": ["Country"]},
                       {"days": "90", "keys": "IPAddress"}, {"days": 2, "keys": []}, [["Count", ">", "x"]],
                       [{"countif": ["Country", "==", "RU"], "as": "Ru"}, "percentile(DurationMs, 0)", "arg_max()"],
                       ["make_set(Country)", "sum(DurationMs)", "avg(IPAddress)", "arg_min(TimeGenerated, Country)"]]
    names = ["table", "time_window", "where", "summarize", "by", "bin", "columns", "sort", "take", "having", "join",
             "baseline"]
    box = ToolBox(SentinelClient(backend))
    codes = set()
    for _ in range(300):
        arguments = {"table": "SigninLogs", "time_window": "7d"} if rng.random() < 0.7 else {}
        for name in rng.sample(names, rng.randrange(1, 5)):
            arguments[name] = rng.choice(junk)
        run = await box.run("hunt", json.dumps(arguments))
        assert isinstance(run.artifact, (QueryResult, QueryError))
        if isinstance(run.artifact, QueryError):
            codes.add(run.artifact.code)
            assert len(run.artifact.message) < 6000
    assert codes == {"invalid_argument"}


def test_a_filter_value_is_held_as_its_literal_holds_it() -> None:
    """Newlines and tabs stay (the literal escapes them); what a literal cannot hold is U+FFFD on both backends."""
    hunt = parse_hunt({"table": "SigninLogs", "time_window": "1d",
                       "where": [["AppDisplayName", "in", ["a\nb\tc", "nul\x00 \ud800"]]]})
    assert hunt.filters[0].values == ("a\nb\tc", "nul\ufffd \ufffd")


def _indexed_hunts() -> list[tuple[str, str]]:
    from bot.sentinel.catalog import HUNT_INDEXED

    return [(table, name) for table, names in HUNT_INDEXED.items() for name in names]


@pytest.mark.parametrize(("table", "name"), _indexed_hunts())
def test_an_equality_hunt_on_a_hot_column_reads_its_index(demo_backend: DemoBackend, table: str, name: str) -> None:
    """The store indexes the hot hunt columns in the form the hunt's SQL compares them: a drift between the two
    would silently read every row of the window again (the 10x MFA-denial hunt went from 55-70 ms to under 1 ms)."""
    from bot.sentinel.hunt import sql as hunt_sql

    column = tables()[table].find(name)
    assert column is not None, f"{table}.{name} is not a hunt column"
    hunt = parse_hunt({"table": table, "time_window": "30d", "where": [[name, "==", sample_value(column)]]})
    text, params = hunt_sql.hunt_sql(hunt, NOW)

    def plan(conn: sqlite3.Connection, now: datetime) -> str:
        hunt_sql._functions(conn, hunt)
        return " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + text, params))

    shown = demo_backend.with_database(plan)
    # Covering: the hot index also holds the table's default hunt columns (``store._time_index_columns``).
    assert re.search(rf"USING (COVERING )?INDEX {table.lower()}_hunt_", shown), shown


async def test_a_series_of_many_keys_decomposes_the_hundred_with_the_highest_totals(hunt_demo) -> None:
    """400 sign-in ids, one series each: the KQL keeps 100 series (by total, then key) and so does the demo, as
    Python finds; never one series per key of an unbounded set."""
    backend, rows = hunt_demo
    arguments = {"table": "SigninLogs", "time_window": "12d", "by": ["Id"], "series": {"step": "1h"}, "take": 100}
    hunt = queries.make_query("hunt", arguments)
    text = queries.kql_of(hunt)
    assert "| take 100\n" in text.replace("\n    ", "\n") and "series_decompose_anomalies(Count, real(1.5)" in text
    raw = await backend.execute(hunt, text)
    assert raw.rows == py_hunt(hunt, rows)
    in_window = {r["Id"] for r in rows["SigninLogs"] if r["TimeGenerated"] > iso(NOW - timedelta(days=12))}
    # Each id signed in once: its series is one spike over zeros, one anomalous point; 100 series, 100 points.
    assert len(in_window) > 300 and raw.rows[0]["TotalMatched"] == 100


def test_a_joins_named_columns_are_shown_beside_the_hunts_own() -> None:
    """Columns named by the hunt and by its join are both shown (the join's were dropped when the hunt named its
    own); a join that names none brings nothing the hunt did not ask for."""
    join = {"table": "UrlClickEvents", "on": ["NetworkMessageId", "NetworkMessageId"]}
    named = parse_hunt({"table": "EmailEvents", "time_window": "7d", "columns": ["Subject"],
                        "join": {**join, "columns": ["Url", "ActionType"]}})
    assert [name for name, _ in named.output] == ["Subject", "Url", "ActionType"]
    unnamed = parse_hunt({"table": "EmailEvents", "time_window": "7d", "columns": ["Subject"], "join": join})
    assert [name for name, _ in unnamed.output] == ["Subject"]
