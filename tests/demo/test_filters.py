"""The demo backend's filtered lists equal an independent evaluation in Python over the same generated rows.

Each filter alone and combined (status, owner, severity set, keyword, from/to, sort, product, tactic,
classification), on incidents and alerts: the expected rows are computed here from ``generator.generate``
output (latest row per incident or alert in the range, then the filters, then the sort), never through the
backend's SQL.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from bot.demo import generator
from bot.sentinel.client import SentinelClient
from bot.sentinel.demo_sql import iso
from bot.sentinel.entities import AlertIdentities, IdentityMap, alert_entity_values, alert_identities, alert_sightings
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.queries import make_query
from tests.conftest import NOW, SEED
from tests.support.demo import copied_demo

RANK = {"High": 0, "Medium": 1, "Low": 2}


@pytest.fixture(scope="module")
def data() -> generator.DemoData:
    return generator.generate(SEED, NOW)


@pytest.fixture(scope="module")
def client() -> SentinelClient:
    return SentinelClient(copied_demo(SEED, lambda: NOW))


def _bounds(arguments: dict[str, Any]) -> tuple[str, str | None, bool]:
    """(start, end or None, start inclusive) in storage form, from the validated query."""
    query = make_query("query_incidents", {k: v for k, v in arguments.items() if k not in ("status", "limit")})
    f = query.filters
    if not f.ranged:
        return iso(NOW - query.window.duration), None, False
    start = f.start or (f.end or NOW) - query.window.duration
    return iso(start), iso(f.end) if f.end else None, True


def _latest(rows: list[dict], key: str, start: str, end: str | None, inclusive: bool) -> list[dict]:
    """The latest row per key with TimeGenerated in the range and not after now (later rows win ties)."""
    now = iso(NOW)
    latest: dict[Any, dict] = {}
    for row in rows:
        t = row["TimeGenerated"]
        if ((t >= start if inclusive else t > start) and t <= now and (end is None or t < end)
                and (row[key] not in latest or t >= latest[row[key]]["TimeGenerated"])):
            latest[row[key]] = row
    return list(latest.values())


def _owner_matches(owner_text: str | None, wanted: str) -> bool:
    owner = json.loads(owner_text or "{}") or {}
    fields = [owner.get(k) or "" for k in ("objectId", "userPrincipalName", "email", "assignedTo")]
    fields.append((owner.get("userPrincipalName") or "").split("@")[0])
    if wanted == "unassigned":
        return not any(fields)
    return any(f.casefold() == wanted.casefold() for f in fields if f)


def _common(row: dict, arguments: dict[str, Any], severity: str, title: str, statuses: tuple[str, ...]) -> bool:
    wanted = arguments.get("severity", ["High", "Medium", "Low", "Informational"])
    wanted = set(wanted.split(",") if isinstance(wanted, str) else wanted)
    if row[severity] not in wanted:
        return False
    if "status" in arguments and row["Status"] not in statuses:
        return False
    search = arguments.get("search")
    return not search or any(search.casefold() in (row[c] or "").casefold() for c in (title, "Description"))


def _named(text: str) -> str:
    """A tactic or classification as the analyst may type it ("credential access"), compared as the table spells
    it once spaces are dropped and case ignored."""
    return text.replace(" ", "").replace("_", "").lower()


def _incident_extras(row: dict, arguments: dict[str, Any]) -> bool:
    """Product (part of any of its product names), tactic (one of its tactics) and classification."""
    extra = json.loads(row["AdditionalData"] or "{}")
    product = arguments.get("product")
    if product and not any(product.casefold() in p.casefold() for p in extra.get("alertProductNames", [])):
        return False
    if "tactic" in arguments and _named(arguments["tactic"]) not in [t.lower() for t in extra.get("tactics", [])]:
        return False
    return "classification" not in arguments or (row["Classification"] or "").lower() == _named(
        arguments["classification"])


def _alert_extras(row: dict, arguments: dict[str, Any]) -> bool:
    """Product (part of its product name, else provider name) and tactic (a whole item of its comma list)."""
    product = arguments.get("product")
    if product and product.casefold() not in (row["ProductName"] or row["ProviderName"] or "").casefold():
        return False
    tactics = [t.strip().lower() for t in (row["Tactics"] or "").split(",")]
    return "tactic" not in arguments or _named(arguments["tactic"]) in tactics


def expected_incidents(data: generator.DemoData, arguments: dict[str, Any]) -> tuple[list[int], int]:
    start, end, inclusive = _bounds(arguments)
    statuses = {"open": ("New", "Active")}.get(arguments.get("status", ""), (arguments.get("status"),))
    rows = []
    for row in _latest(data.incident_rows, "IncidentNumber", start, None, inclusive):
        created = row["CreatedTime"]
        if not (created >= start if inclusive else created > start) or (end is not None and created >= end):
            continue
        if not _common(row, arguments, "Severity", "Title", statuses):  # type: ignore[arg-type]
            continue
        if "owner" in arguments and not _owner_matches(row["Owner"], arguments["owner"]):
            continue
        if not _incident_extras(row, arguments):
            continue
        rows.append(row)

    def alerts(row: dict) -> int:
        extra = json.loads(row["AdditionalData"] or "{}")
        return int(extra.get("alertsCount", len(json.loads(row["AlertIds"] or "[]"))))

    newest = sorted(rows, key=lambda r: (r["CreatedTime"], r["IncidentNumber"]), reverse=True)
    sort = arguments.get("sort", "severity")
    if sort == "severity":
        newest.sort(key=lambda r: RANK.get(r["Severity"], 3))
    elif sort == "most_alerts":
        newest.sort(key=lambda r: (-alerts(r), RANK.get(r["Severity"], 3)))
    return [r["IncidentNumber"] for r in newest[: arguments.get("limit", 20)]], len(rows)


def expected_alerts(data: generator.DemoData, arguments: dict[str, Any]) -> tuple[list[str], int]:
    start, end, inclusive = _bounds(arguments)
    statuses = {"open": ("New", "InProgress")}.get(arguments.get("status", ""), (arguments.get("status"),))
    rows = [r for r in _latest(data.alert_rows, "SystemAlertId", start, end, inclusive)
            if _common(r, arguments, "AlertSeverity", "AlertName", statuses)  # type: ignore[arg-type]
            and _alert_extras(r, arguments)]
    ordered = sorted(rows, key=lambda r: r["SystemAlertId"])
    ordered.sort(key=lambda r: r["TimeGenerated"], reverse=True)
    if arguments.get("sort", "severity") == "severity":
        ordered.sort(key=lambda r: RANK.get(r["AlertSeverity"], 3))
    return [r["SystemAlertId"] for r in ordered[: arguments.get("limit", 20)]], len(rows)


def _owners(data: generator.DemoData) -> list[str]:
    """An owner's display name, upper-cased sign-in name and its part before "@", from the data."""
    owner = next(json.loads(r["Owner"]) for r in data.incident_rows if json.loads(r["Owner"] or "{}").get("email"))
    return [owner["assignedTo"], owner["userPrincipalName"].upper(), owner["userPrincipalName"].split("@")[0]]


FROM = iso(NOW - timedelta(days=3, hours=5))[:16] + "Z"
TO = (NOW - timedelta(days=1)).date().isoformat()
INCIDENT_VARIANTS: list[dict[str, Any]] = [
    {"time_window": "last_7d"},
    {"time_window": "last_7d", "status": "open"},
    {"time_window": "last_7d", "status": "Closed"},
    {"time_window": "last_7d", "status": "New"},
    {"time_window": "last_7d", "owner": "unassigned"},
    {"time_window": "last_7d", "severity": ["High", "Low"]},
    {"time_window": "last_30d", "search": "powershell"},
    {"time_window": "last_30d", "search": "PHISH"},
    {"from": FROM},
    {"from": FROM, "to": TO},
    {"to": TO, "time_window": "last_3d"},
    {"time_window": "last_7d", "sort": "newest"},
    {"time_window": "last_7d", "sort": "most_alerts", "limit": 50},
    {"time_window": "last_30d", "status": "open", "owner": "unassigned", "severity": ["High", "Medium"],
     "sort": "newest", "limit": 100},
    {"from": FROM, "to": TO, "status": "Closed", "search": "sign", "sort": "most_alerts"},
    {"time_window": "last_7d", "product": "defender for ENDPOINT"},
    {"time_window": "last_30d", "product": "Office 365", "limit": 100},
    {"time_window": "last_7d", "tactic": "credential access"},
    {"time_window": "last_30d", "tactic": "LateralMovement", "limit": 100},
    {"time_window": "last_30d", "classification": "true positive", "limit": 100},
    {"time_window": "last_30d", "classification": "Undetermined", "status": "Closed"},
    {"time_window": "last_30d", "product": "Defender", "tactic": "Execution", "classification": "BenignPositive",
     "severity": ["High", "Medium"], "sort": "newest", "limit": 100},
    {"from": FROM, "to": TO, "tactic": "initial_access", "product": "entra", "status": "open"},
]
ALERT_VARIANTS: list[dict[str, Any]] = [
    {"time_window": "last_24h", "status": "open"},
    {"time_window": "last_7d", "status": "Resolved"},
    {"time_window": "last_7d", "severity": "High,Low"},
    {"time_window": "last_7d", "search": "powershell"},
    {"from": FROM},
    {"from": FROM, "to": TO},
    {"to": TO},
    {"time_window": "last_7d", "sort": "newest"},
    {"time_window": "last_30d", "status": "open", "severity": ["Medium"], "search": "sign", "sort": "newest",
     "limit": 100},
    {"from": FROM, "to": TO, "status": "Resolved", "search": "a", "limit": 100},
    {"time_window": "last_7d", "product": "cloud apps"},
    {"time_window": "last_7d", "tactic": "Initial Access"},
    {"time_window": "last_30d", "tactic": "Impact", "limit": 100},
    {"time_window": "last_30d", "product": "Defender", "tactic": "execution", "status": "open", "sort": "newest"},
    {"from": FROM, "to": TO, "product": "Sentinel", "tactic": "Discovery", "limit": 100},
]


@pytest.mark.parametrize("arguments", INCIDENT_VARIANTS, ids=str)
async def test_incident_filters_equal_a_python_evaluation(arguments, data, client) -> None:
    await _compare_incidents(client, data, arguments)


async def test_owner_filters_equal_a_python_evaluation(data, client) -> None:
    for owner in _owners(data):
        await _compare_incidents(client, data, {"time_window": "last_30d", "owner": owner, "limit": 100})
        await _compare_incidents(client, data, {"time_window": "last_30d", "owner": owner, "status": "open"})


async def _compare_incidents(client: SentinelClient, data: generator.DemoData, arguments: dict[str, Any]) -> None:
    result = await client.run("query_incidents", arguments)
    assert isinstance(result, QueryResult), result
    numbers, total = expected_incidents(data, arguments)
    assert [i.number for i in result.records] == numbers, arguments
    assert result.metadata.total == max(total, len(numbers)), arguments
    assert total > 0 or "Closed" in str(arguments), f"variant matches nothing, so it tests little: {arguments}"


@pytest.mark.parametrize("arguments", ALERT_VARIANTS, ids=str)
async def test_alert_filters_equal_a_python_evaluation(arguments, data, client) -> None:
    result = await client.run("query_alerts", arguments)
    assert isinstance(result, QueryResult), result
    ids, total = expected_alerts(data, arguments)
    assert [a.alert_id for a in result.records] == ids, arguments
    assert result.metadata.total == total and total > 0, arguments


@pytest.mark.parametrize(("tool", "arguments", "words"), [
    ("query_incidents", {"from": "Monday 9:00"}, ["from", "ISO 8601"]),
    ("query_incidents", {"from": "2026-11-20", "to": "2026-11-19"}, ["to", "not after"]),
    ("query_incidents", {"status": "pending"}, ["status", "open", "Closed"]),
    ("query_incidents", {"owner": "me"}, ["owner", "signed-in"]),
    ("query_incidents", {"owner": "x" * 300}, ["owner", "256"]),
    ("query_incidents", {"search": "y" * 201}, ["search", "200"]),
    ("query_incidents", {"severity": "Low", "min_severity": "High"}, ["severity", "min_severity"]),
    ("query_incidents", {"severity": "Critical"}, ["severity", "High"]),
    ("query_alerts", {"owner": "alice"}, ["owner"]),
    ("query_alerts", {"sort": "most_alerts"}, ["sort", "newest"]),
    ("query_alerts", {"status": "Closed"}, ["status", "Resolved"]),
    ("query_incidents", {"tactic": "lateral"}, ["tactic", "MITRE", "LateralMovement", "CredentialAccess"]),
    ("query_alerts", {"tactic": "T1110"}, ["tactic", "InitialAccess", "Impact"]),
    ("query_incidents", {"classification": "malicious"}, ["classification", "TruePositive", "Undetermined"]),
    ("query_alerts", {"classification": "TruePositive"}, ["classification"]),
    ("query_incidents", {"product": "p" * 101}, ["product", "101", "at most 100"]),
    ("query_alerts", {"product": "  "}, ["product", "empty"]),
    ("query_incidents", {"product": "Defender\x00| where 1==1"}, ["product", "control characters"]),
])
async def test_bad_filters_are_tool_errors_that_say_what_to_send(tool, arguments, words, client) -> None:
    result = await client.run(tool, arguments)
    assert isinstance(result, QueryError) and result.code == "invalid_argument", result
    assert all(w in result.message for w in words), result.message


# --- Entity pivots: the same entity in any letter case is one entity. ---

def _entities(row: dict) -> set[tuple[str, str]]:
    """(type, lower-case value) of each identifiable entity of an alert row, as the KQL expands them."""
    return set(alert_entity_values(row["Entities"]))


def _spellings(row: dict) -> dict[tuple[str, str], str]:
    return alert_entity_values(row["Entities"])


def _identities(data: generator.DemoData) -> tuple[IdentityMap, list[AlertIdentities]]:
    """The identity map learned from every alert row's raw Entities, and each row resolved with it."""
    identities = IdentityMap()
    for row in data.alert_rows:
        identities.learn(alert_sightings(row["Entities"]))
    return identities, [alert_identities(alert_sightings(row["Entities"]), identities) for row in data.alert_rows]


def expected_top_entities(data: generator.DemoData, window: timedelta, limit: int,
                          entity: str | None = None) -> tuple[list[tuple], int]:
    """One entity per identity (an account or host by every spelling tied to it), as a Python evaluation."""
    _, resolved = _identities(data)
    by_id = {row["SystemAlertId"]: r for row, r in zip(data.alert_rows, resolved, strict=True)}
    wanted = ({entity.lower()} | {identity for r in resolved for _, key, identity in r.aliases
                                  if key == entity.lower()}) if entity is not None else set()
    counts: dict[tuple[str, str], dict[str, Any]] = {}
    for row in _latest(data.alert_rows, "SystemAlertId", iso(NOW - window), None, False):
        for key, spelling in by_id[row["SystemAlertId"]].shown.items():
            if entity is not None and key[1] not in wanted:
                continue
            c = counts.setdefault(key, {"alerts": 0, "high": 0, "first": row["TimeGenerated"],
                                        "last": row["TimeGenerated"], "value": spelling})
            c["alerts"] += 1
            c["high"] += row["AlertSeverity"] == "High"
            c["first"], c["last"] = min(c["first"], row["TimeGenerated"]), max(c["last"], row["TimeGenerated"])
            c["value"] = min(c["value"], spelling)
    ranked = sorted(counts.items(), key=lambda kv: (kv[0][0], kv[1]["value"]))
    ranked.sort(key=lambda kv: (kv[1]["alerts"], kv[1]["high"], kv[1]["last"]), reverse=True)
    return [(k[0], c["value"], c["alerts"], c["high"], c["first"][:19], c["last"][:19])
            for k, c in ranked[:limit]], len(counts)


def _naming(data: generator.DemoData, entity: str) -> set[str]:
    """The ids of the alerts that name ``entity`` by any spelling of its identity (a Python evaluation)."""
    _, resolved = _identities(data)
    wanted = {entity.lower()} | {i for r in resolved for _, key, i in r.aliases if key == entity.lower()}
    return {row["SystemAlertId"] for row, r in zip(data.alert_rows, resolved, strict=True)
            if any(key in wanted for _, key in r.shown)}


def _recurring_mixed_case_host(data: generator.DemoData) -> str:
    """A host named in several letter cases across the last week's alerts (the demo has some, as real data does)."""
    spellings: dict[str, set[str]] = {}
    for row in _latest(data.alert_rows, "SystemAlertId", iso(NOW - timedelta(days=7)), None, False):
        for (kind, key), spelling in _spellings(row).items():
            if kind == "host":
                spellings.setdefault(key, set()).add(spelling)
    in_incidents = {i for r in data.incident_rows for i in json.loads(r["AlertIds"] or "[]")}
    hosts = {key for r in data.alert_rows if r["SystemAlertId"] in in_incidents for kind, key in _entities(r)
             if kind == "host"}
    mixed = sorted(k for k, v in spellings.items() if len(v) > 1 and k in hosts)
    assert mixed, "the demo workspace should name some incidents' hosts in more than one letter case"
    return sorted(spellings[mixed[0]])[-1]


async def test_top_entities_group_letter_cases_as_a_python_evaluation(data, client) -> None:
    # Short windows too: a host's least spelling in the window is not its least spelling overall.
    for name, window, limit in (("last_1h", timedelta(hours=1), 10), ("last_24h", timedelta(days=1), 50),
                                ("last_7d", timedelta(days=7), 10), ("last_30d", timedelta(days=30), 50)):
        arguments = {"time_window": name, "limit": limit}
        result = await client.run("get_top_entities", arguments)
        assert isinstance(result, QueryResult), result
        rows, total = expected_top_entities(data, window, limit)
        got = [(e.type, e.value, e.alert_count, e.high_severity_count, iso(e.first_seen)[:19], iso(e.last_seen)[:19])
               for e in result.records]
        assert got == rows and result.metadata.total == total, arguments
    keys = {(e.type, e.value.lower()) for e in result.records}
    assert len(keys) == len(result.records), "one row per entity, whatever its letter case"


async def test_entity_pivots_equal_a_python_evaluation(data, client) -> None:
    host = _recurring_mixed_case_host(data)
    for asked in (host, host.lower(), f"  {host.upper()} "):
        top = await client.run("get_top_entities", {"time_window": "last_7d", "entity": asked})
        assert isinstance(top, QueryResult), top
        rows, total = expected_top_entities(data, timedelta(days=7), 10, entity=host)
        assert [(e.type, e.value, e.alert_count) for e in top.records] == [r[:3] for r in rows] and total == 1
        assert top.records[0].first_seen is not None and top.records[0].first_seen <= top.records[0].last_seen

        alerts = await client.run("query_alerts", {"time_window": "last_7d", "entity": asked, "limit": 100})
        assert isinstance(alerts, QueryResult), alerts
        start = iso(NOW - timedelta(days=7))
        naming = _naming(data, host)
        involved = [r for r in _latest(data.alert_rows, "SystemAlertId", start, None, False)
                    if r["SystemAlertId"] in naming]
        ids, _ = expected_alerts(data, {"time_window": "last_7d", "limit": 10**6})
        wanted = {r["SystemAlertId"] for r in involved}
        assert [a.alert_id for a in alerts.records] == [i for i in ids if i in wanted][:100]
        assert alerts.metadata.total == len(wanted) > 1

        incidents = await client.run("query_incidents", {"time_window": "last_30d", "entity": asked, "limit": 100})
        assert isinstance(incidents, QueryResult), incidents
        lookback = iso(NOW - timedelta(days=90))
        alert_ids = {r["SystemAlertId"] for r in data.alert_rows if lookback < r["TimeGenerated"] <= iso(NOW)
                     and r["SystemAlertId"] in naming}
        numbers, _ = expected_incidents(data, {"time_window": "last_30d", "limit": 10**6})
        latest = {r["IncidentNumber"]: r for r in _latest(data.incident_rows, "IncidentNumber",
                                                         iso(NOW - timedelta(days=30)), None, False)}
        expected = [n for n in numbers if alert_ids & set(json.loads(latest[n]["AlertIds"] or "[]"))]
        assert [i.number for i in incidents.records] == expected[:100] and incidents.metadata.total == len(expected)
        assert expected, "the recurring host should be in some incident"


def test_a_filtered_list_card_says_what_it_was_narrowed_by() -> None:
    from bot.cards.filters import titled

    assert titled("3 incidents", {"time_window": "last_24h"}) == "3 incidents"
    label = titled("3 incidents", {"status": "open", "owner": "unassigned", "severity": ["High", "Low"],
                                   "entity": "WS-FIN-160", "search": "qakbot\n| where 1==1",
                                   "from": "2026-11-20T09:00:00Z", "sort": "most_alerts"})
    assert label == ("3 incidents · open · unassigned · High/Low · involving WS-FIN-160 · “qakbot | where 1==1” · "
                     "from 2026-11-20 09:00 UTC · most alerts first")
    label = titled("2 alerts", {"product": "Defender for Endpoint", "tactic": "CredentialAccess",
                                "classification": "TruePositive"})
    assert label == "2 alerts · product Defender for Endpoint · CredentialAccess · TruePositive"
