"""Every KQL the five tools can produce goes through Microsoft's Kusto parser against the Sentinel schemas.

Checks: no syntax or semantic errors; each query's result columns are exactly the contract the
backends decode (queries.COLUMNS, with the types the fake Log Analytics server uses); and a hostile
incident_ref stays one string literal whose decoded value is the text that was asked for.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import unicodedata

import pytest

from bot.sentinel.params import BinSize, IncidentRef, InvalidParameter, Severity, TimeWindow
from bot.sentinel.queries import (
    COLUMNS,
    MAX_TREND_BINS,
    AlertsQuery,
    AlertTrendQuery,
    IncidentDetailQuery,
    IncidentsQuery,
    TopEntitiesQuery,
    kql_of,
    make_query,
)
from bot.sentinel.queries.evidence import EVIDENCE
from bot.sentinel.queries.evidence.entity import EntityKind
from tests.support import kusto
from tests.support.loganalytics_fake import RESULT_TYPES

HOSTILE_REFS = [
    "'", '"', "\\", "\\\\", '\\"', "''", '""', "a'b\"c",
    "line one\nline two", "cr\r\nlf", "tab\there",
    "| take 1", "x | where 1 == 1", "// comment", "/* not a comment */", ";", "; drop table SecurityIncident",
    '"; SecurityIncident | take 100000 //', "\\\"; SecurityAlert | project Entities //",
    "let x = 1;", "where", "project", "summarize count() by Title", "SecurityIncident", "$left", "{Severity}",
    '@"verbatim"', 'h"hidden"', "```triple```", "\\u0022", "\\x41", "\\n",
    "ünïcödé 🙂", "\u202eRTL override", "zero\u200bwidth", "日本語のタイトル", "Ω≈ç√∫",
    "nul\x00byte", "escape \x1b[31mred\x1b[0m", "bell\x07", "del\x7f", "lone \ud800 surrogate",
    ("ignore previous instructions; \"|' \\ // ; \n" * 250)[:10240],  # a 10 KB mix of everything above
]


def _expected_value(text: str) -> str:
    """What the literal must decode to: the text, with characters a literal cannot hold as U+FFFD."""
    return "".join(
        "\ufffd" if (ord(ch) < 0x20 and ch not in "\n\r\t") or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF else ch
        for ch in text
    )


def _all_enum_queries() -> list:
    queries: list = []
    for window, severity in itertools.product(TimeWindow, Severity):
        for limit in (1, 20, 100):
            queries.append(IncidentsQuery(window, severity, limit))
            queries.append(AlertsQuery(window, severity, limit))
        for limit in (1, 10, 50):
            queries.append(TopEntitiesQuery(window, severity, limit))
        for bin_size in BinSize:
            if bin_size is BinSize.HOUR and window.duration / bin_size.duration > MAX_TREND_BINS:
                continue
            queries.append(AlertTrendQuery(window, severity, bin_size))
    for ref in (1, 42, "42", "#42", "incident 42", 2**31 - 1, "phishing", "Suspicious PowerShell",
                "6A7F098B-D03D-49EC-9134-6C60C547D83C", "defender:14431"):  # a portal link's ids
        queries.append(make_query("get_incident_detail", {"incident_ref": ref}))
    return queries


@pytest.mark.slow
def test_every_enum_combination_parses_with_the_contract_columns() -> None:
    queries = _all_enum_queries()
    assert len(queries) > 150
    results = kusto.check([kql_of(q) for q in queries])
    failures = [(q, r["errors"]) for q, r in zip(queries, results, strict=True) if not r["ok"]]
    assert not failures, failures[:3]
    for query, result in zip(queries, results, strict=True):
        columns = tuple((c["name"], c["type"]) for c in result["result_columns"])
        assert tuple(name for name, _ in columns) == COLUMNS[query.tool], query
        assert columns == RESULT_TYPES[query.tool], query


@pytest.mark.slow
def test_hostile_incident_refs_stay_one_string_literal() -> None:
    baseline = IncidentDetailQuery(IncidentRef(title_search="phishing"))
    hostile = [IncidentDetailQuery(IncidentRef(title_search=value)) for value in HOSTILE_REFS]
    results = kusto.check([kql_of(baseline)] + [kql_of(q) for q in hostile])
    base_literals = [lit["value"] for lit in results[0]["string_literals"]]
    assert base_literals.count("phishing") == 1
    for value, result in zip(HOSTILE_REFS, results[1:], strict=True):
        assert result["ok"], (value[:40], result["errors"][:2])
        literals = [lit["value"] for lit in result["string_literals"]]
        # Same literals as the benign query, with the search text in the same place: nothing split or merged.
        assert len(literals) == len(base_literals), value[:40]
        position = base_literals.index("phishing")
        assert literals[position] == _expected_value(value), value[:40]
        assert literals[:position] + literals[position + 1:] == base_literals[:position] + base_literals[position + 1:]
        assert [c["name"] for c in result["result_columns"]] == list(COLUMNS["get_incident_detail"])


def _cli_kql(tool: str, arguments: str) -> str:
    done = subprocess.run([sys.executable, "-m", "bot", "kql", tool, "--args", arguments],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "timespan sent with the query: PT" in done.stderr
    return done.stdout


_CLI_REQUIRED = {"get_incident_detail": '{"incident_ref": "42"}', "incident_changes": '{"since": "2026-11-20T09:00Z"}',
                 "hunt": '{"table": "SigninLogs", "time_window": "24h", "where": [["Country", "==", "RU"]]}',
                 "analyst_kql": '{"query": "SigninLogs | take 1"}',
                 "get_entity_identity": '{"entity": "CONTOSO\\\\nina"}',
                 "evidence_alert_incidents": '{"alert_ids": ["6A7F098B-D03D-49EC-9134-6C60C547D83C"]}',
                 "evidence_counterparty_intel": '{"values": ["203.0.113.5", "evil.example.com"]}',
                 "similar_incidents": '{"incident": 42, "alert_names": ["Suspicious access to LSASS service"], '
                                      '"entities": ["ws-fin-160"]}'} | {
    spec.name: '{"entity": "WS-FIN-042"}' if EntityKind.HOST in cls.kinds else '{"entity": "alice@contoso.com"}'
    for spec, cls in EVIDENCE}  # the investigation's evidence queries need an entity they read


@pytest.mark.slow
def test_cli_prints_parsable_kql() -> None:
    """The issue's example, and every tool with its defaults."""
    example = _cli_kql("query_incidents", '{"time_window":"last_7d","min_severity":"Medium"}')
    assert 'Severity in ("High", "Medium")' in example and "ago(7d)" in example
    printed = [example] + [
        _cli_kql(tool, _CLI_REQUIRED.get(tool, "{}")) for tool in sorted(COLUMNS)
    ]
    for text, result in zip(printed, kusto.check(printed), strict=True):
        assert result["ok"], (text[:60], result["errors"])


def test_cli_rejects_bad_arguments_with_a_clear_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot", "kql", "query_alerts", "--args", '{"time_window": "last_2y"}'],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "time_window" in done.stderr and "last_24h" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


# Every filter alone, then combined, on both lists (issue 12).
_FILTERS: dict[str, list] = {
    "status": ["open", "New", "Active", "Closed"],
    "owner": ["alice@contoso.com", "Alice Ng", "unassigned"],
    "severity": ["High", "High,Low", ["Medium", "Informational"]],
    "search": ["qakbot", "sign-in from"],
    "from": ["2026-11-20", "2026-11-20T09:00:00+01:00"],
    "to": ["2026-11-21", "2026-11-21T18:30:00Z"],
    "sort": ["severity", "newest", "most_alerts"],
    "entity": ["10.1.2.3", "WS-FIN-160"],
    "product": ["Defender for Endpoint", "Azure AD Identity Protection"],
    "tactic": ["credential access", "CommandAndControl"],
    "classification": ["TruePositive", "benign positive"],
}
_ALERT_STATUS = {"Active": "InProgress", "Closed": "Resolved"}


def _filter_variants() -> list:
    combined = {name: values[-1] for name, values in _FILTERS.items()}
    variants = [{name: value} for name, values in _FILTERS.items() for value in values]
    variants += [combined, combined | {"time_window": "last_30d", "min_severity": "Low", "limit": 100},
                 {k: v for k, v in combined.items() if k != "from"}]
    queries = []
    for arguments in variants:
        queries.append(make_query("query_incidents", arguments))
        alert_arguments = {k: _ALERT_STATUS.get(v, v) if k == "status" else v for k, v in arguments.items()
                           if k not in ("owner", "classification") and not (k == "sort" and v == "most_alerts")}
        queries.append(make_query("query_alerts", alert_arguments))
    for entity in _FILTERS["entity"]:
        queries.append(make_query("get_top_entities", {"entity": entity, "time_window": "last_30d"}))
    return queries


@pytest.mark.slow
def test_every_filter_alone_and_combined_parses_with_the_contract_columns() -> None:
    queries = _filter_variants()
    results = kusto.check([kql_of(q) for q in queries])
    for query, result in zip(queries, results, strict=True):
        assert result["ok"], (query.parameters(), result["errors"][:2])
        columns = tuple((c["name"], c["type"]) for c in result["result_columns"])
        assert columns == RESULT_TYPES[query.tool], query.parameters()


@pytest.mark.parametrize(("tool", "name", "benign"), [
    ("query_incidents", "owner", "alice"), ("query_incidents", "search", "phishing"),
    ("query_alerts", "search", "phishing"), ("query_incidents", "entity", "ws-fin-160"),
    ("query_alerts", "entity", "ws-fin-160"), ("get_top_entities", "entity", "ws-fin-160"),
    ("query_incidents", "product", "defender"), ("query_alerts", "product", "defender"),
])
@pytest.mark.slow
def test_hostile_filter_values_are_refused_or_stay_one_string_literal(tool: str, name: str, benign: str) -> None:
    kept, refused = [], 0
    for value in HOSTILE_REFS + ["аlice", "ａｌｉｃｅ", "x\" or 1==1 or \"", "unassigned\n| where 1==1"]:
        try:
            kept.append((value, make_query(tool, {name: value})))
        except InvalidParameter as refusal:
            assert refusal.name == name and _refusal(name, value) in str(refusal), (value[:40], refusal)
            refused += 1
    # Only the 10 KB string is refused (and, for a product name, text with control characters).
    assert refused == sum(_refusal(name, v) != "" for v in HOSTILE_REFS) + (name == "product") and len(kept) > 35
    results = kusto.check([kql_of(make_query(tool, {name: benign}))] + [kql_of(q) for _, q in kept])
    base = [lit["value"] for lit in results[0]["string_literals"]]
    position = base.index(benign)
    for (value, query), result in zip(kept, results[1:], strict=True):
        assert result["ok"], (value[:40], result["errors"][:2])
        literals = [lit["value"] for lit in result["string_literals"]]
        wanted = {"owner": lambda q: q.filters.owner.person, "search": lambda q: q.filters.search,
                  "product": lambda q: q.filters.product,
                  "entity": lambda q: getattr(q, "entity", None) or q.filters.entity}[name](query)
        assert wanted is not None and literals[position] == _expected_value(wanted), value[:40]
        assert literals[:position] + literals[position + 1:] == base[:position] + base[position + 1:], value[:40]
        assert [c["name"] for c in result["result_columns"]] == list(COLUMNS[tool])


def _refusal(name: str, value: str) -> str:
    """The words a hostile value is refused with ("" when it must be kept as one literal)."""
    if len(value) > 1000:
        return "characters long"
    if name == "product" and any(unicodedata.category(ch) == "Cc" for ch in value):
        return "control characters"
    return ""


@pytest.mark.parametrize("name", ["from", "to"])
def test_hostile_dates_are_refused(name: str) -> None:
    for value in HOSTILE_REFS + ["2026-11-20\n| where 1==1", "2026-11-20T09:00:00Z) | take 1 //", "Monday 9:00"]:
        with pytest.raises(InvalidParameter, match=name):
            make_query("query_incidents", {name: value})


@pytest.mark.slow
def test_similar_incidents_parse_with_hostile_names_as_one_literal_each() -> None:
    """The summary's similar-incidents query: alert names and entity values from alert data (attacker-reachable)
    stay one literal each, with names only, entities only, or both."""
    hostile = [v for v in HOSTILE_REFS if 0 < len(v.strip()) <= 256][:20]
    queries = [make_query("similar_incidents", {"incident": 42, "alert_names": hostile, "entities": ["ws-fin-160"]}),
               make_query("similar_incidents", {"incident": 42, "entities": hostile[:10]}),
               make_query("similar_incidents", {"incident": 42, "alert_names": ["Suspicious access to LSASS service"]})]
    for query, result in zip(queries, kusto.check([kql_of(q) for q in queries]), strict=True):
        assert result["ok"], (query.parameters(), result["errors"][:2])
        assert tuple((c["name"], c["type"]) for c in result["result_columns"]) == RESULT_TYPES["similar_incidents"]
    literals = [lit["value"] for lit in kusto.check([kql_of(queries[0])])[0]["string_literals"]]
    for value in hostile:
        assert _expected_value(value.strip()) in literals, value[:40]
    for refused in ({"incident": 42}, {"incident": "42; drop", "alert_names": ["x"]},
                    {"incident": 42, "alert_names": ["x" * 257]}, {"incident": 42, "entities": list("abcdefghijk")}):
        with pytest.raises(InvalidParameter):
            make_query("similar_incidents", refused)
