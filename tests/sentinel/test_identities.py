"""One identity per account and host across alerts (``entities.IdentityMap``; ``kql.identity_tables`` and
``kql.resolve_identities`` in KQL; ``AlertIdentity``/``IdentityAlias`` in the demo): the rules on small cases, the
KQL's per-entity keys and anchors evaluated against the Python on real and demo rows, and the demo's counts and
pivots merging a person named by UPN in one alert and by DOMAIN\\name or SID in another."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.demo import generator
from bot.sentinel import kql
from bot.sentinel.entities import (
    MV_EXPAND_LIMIT,
    IdentityMap,
    alert_identities,
    alert_sightings,
    entity_value,
    identity_anchor,
    identity_keys,
)
from bot.sentinel.models import QueryResult
from tests.support.kql_eval import evaluate, tostring

SAMPLES = Path(__file__).parents[1] / "data" / "sample-rows"
SID = "S-1-5-21-1004336348-1177238915-682003330-1104"
AAD = "0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87"


def _account(**fields: Any) -> dict[str, Any]:
    return {"Type": "account", **fields}


def _resolved(alerts: list[list[dict[str, Any]]]) -> list[dict[tuple[str, str], str]]:
    identities = IdentityMap()
    for alert in alerts:
        identities.learn(alert_sightings(json.dumps(alert)))
    return [alert_identities(alert_sightings(json.dumps(alert)), identities).shown for alert in alerts]


def test_a_person_named_by_upn_sid_object_id_and_domain_name_is_one_identity() -> None:
    alerts = [[_account(Name="nina", UPNSuffix="contoso.com", UserPrincipalName="Nina.Park@contoso.com", Sid=SID,
                        AadUserId=AAD)],
              [_account(Name="nina", NTDomain="CONTOSO", Sid=SID)],  # an endpoint alert: no UPN
              [_account(AadUserId=AAD.upper())],  # an identity alert: the object id alone
              [_account(Sid=SID)]]
    resolved = _resolved(alerts)
    assert all(r == {("account", "nina.park@contoso.com"): "Nina.Park@contoso.com"} for r in resolved), resolved


def test_one_alert_naming_a_person_twice_counts_once() -> None:
    alert = [_account(UserPrincipalName="nina.park@contoso.com", Sid=SID),
             {"Type": "host", "HostName": "WS1", "LoggedOnUsers": [_account(Name="nina", NTDomain="CONTOSO", Sid=SID)]}]
    assert _resolved([alert]) == [{("account", "nina.park@contoso.com"): "nina.park@contoso.com",
                                   ("host", "ws1"): "WS1"}]


def test_well_known_sids_and_null_ids_tie_nobody_together() -> None:
    # LocalSystem is S-1-5-18 on every machine: two machines' SYSTEM accounts are not one person, and the null GUID
    # some products write for "no object id" is nobody's.
    null = "00000000-0000-0000-0000-000000000000"
    alerts = [[_account(Name="SYSTEM", NTDomain="WS1", Sid="S-1-5-18", AadUserId=null)],
              [_account(Name="SYSTEM", NTDomain="WS2", Sid="S-1-5-18", AadUserId=null)],
              [_account(UserPrincipalName="bob@contoso.com", AadUserId=null)]]
    keys = [set(r) for r in _resolved(alerts)]
    assert keys == [{("account", "ws1\\system")}, {("account", "ws2\\system")}, {("account", "bob@contoso.com")}]


def test_a_device_by_host_name_fqdn_and_device_id_is_one_identity() -> None:
    alerts = [[{"Type": "host", "HostName": "WS-FIN-023", "FQDN": "ws-fin-023.corp.contoso.com",
                "MdatpDeviceId": "a87fb2d718760dda83c8c9eea2515b47a484eb8d"}],
              [{"Type": "host", "FQDN": "WS-FIN-023.corp.contoso.com"}],
              [{"Type": "host", "MdatpDeviceId": "A87FB2D718760DDA83C8C9EEA2515B47A484EB8D"}],
              [{"Type": "host", "HostName": "ws-fin-024"}]]
    assert [set(r) for r in _resolved(alerts)] == [{("host", "ws-fin-023")}] * 3 + [{("host", "ws-fin-024")}]
    assert _resolved(alerts)[1] == {("host", "ws-fin-023"): "WS-FIN-023"}  # shown by the host's own spelling


def test_other_types_are_their_lower_case_value() -> None:
    alerts = [[{"Type": "ip", "Address": "10.0.0.1"}, {"Type": "file", "Name": "Mimikatz.exe"}],
              [{"Type": "file", "Name": "mimikatz.exe"}]]
    assert _resolved(alerts) == [{("ip", "10.0.0.1"): "10.0.0.1", ("file", "mimikatz.exe"): "Mimikatz.exe"},
                                 {("file", "mimikatz.exe"): "mimikatz.exe"}]


@pytest.mark.parametrize("entity", [
    _account(UserPrincipalName="Nina@Contoso.com", Sid=SID, AadUserId=AAD,
             ObjectGuid="00000000-0000-0000-0000-000000000000"),
    _account(Name="nina", NTDomain="CONTOSO", Sid="s-1-5-21-1-2-3", PUID="10037FFE"),
    _account(Sid="S-1-5-18", Name="SYSTEM", NTDomain="NT AUTHORITY"),
    _account(Sid=SID),
    _account(AadUserId=AAD, Sid="S-1-12-1-1-2-3-4"),
    {"Type": "host", "HostName": "ws1", "FQDN": "WS1.contoso.com", "AadDeviceId": AAD, "AzureID": "/subscriptions/x"},
    {"Type": "host", "OMSAgentID": "46fe7078-61bb-4bed-9430-7ac01d91c273"},
    {"Type": "ip", "Address": "10.0.0.1"},
    _account(UserPrincipalName='a"b\\c@contoso.com', Sid=7),
])
def test_kql_keys_and_anchor_match_the_python(entity: dict[str, Any]) -> None:
    _assert_kql_matches(entity)


def _assert_kql_matches(entity: dict[str, Any]) -> None:
    value = entity_value(entity)
    if not value:
        return
    variables = {"Entity": entity, "EntityType": tostring(entity.get("Type")), "EntityKey": value.lower()}
    keys = [k for k in evaluate(kql.identity_keys_expression(), **variables) if k]
    assert tuple(dict.fromkeys(keys)) == identity_keys(entity, value), entity
    assert evaluate(kql.identity_anchor_expression(), **variables) == identity_anchor(entity, value), entity


def _entity_objects(raw: Any) -> list[dict[str, Any]]:
    items = raw if isinstance(raw, list) else json.loads(raw or "[]")
    out = []
    for top in items[:MV_EXPAND_LIMIT]:
        out.extend(e for e in evaluate(kql.nested_entities(), Top=top) if isinstance(e, dict) and e.get("Type"))
    return out


def test_kql_keys_and_anchors_on_real_and_demo_rows() -> None:
    rows: list[Any] = [json.loads((SAMPLES / "msticpy_sample_alert_with_Entities.json").read_text())["Entities"]]
    rows += [r["Entities"] for r in generator.generate(7, datetime(2026, 3, 1, tzinfo=UTC), days=4).alert_rows[:300]]
    checked = 0
    for raw in rows:
        for entity in _entity_objects(raw):
            _assert_kql_matches(entity)
            checked += entity.get("Type") in ("account", "host")
    assert checked > 300


# --- The demo: counts and pivots merge a person's spellings. ---

@pytest.fixture(scope="module")
def demo() -> tuple[Any, Any]:
    """A client on the demo workspace and a copy of the same database to look into."""
    from bot.sentinel.client import SentinelClient
    from tests.conftest import NOW, SEED
    from tests.support.demo import copied_demo, copy_of_build

    return SentinelClient(copied_demo(SEED, lambda: NOW)), copy_of_build(SEED, NOW)[0]


def _tied_account(conn: Any) -> tuple[str, str, str]:
    """A person some alerts name by UPN and others only as DOMAIN\\name (tied by SID and object id)."""
    row = conn.execute("""SELECT e.EntityValue, i.IdentityKey FROM AlertEntity AS e JOIN AlertIdentity AS i
                          ON i.AlertRowId = e.AlertRowId AND i.EntityType = e.EntityType
                          WHERE e.EntityType = 'account' AND e.EntityValue LIKE 'CONTOSO\\%'
                                AND i.IdentityKey LIKE '%@%'
                          ORDER BY e.EntityValue LIMIT 1""").fetchone()
    assert row, "the demo names some accounts as DOMAIN\\name only, as endpoint products do"
    sid = conn.execute("SELECT Key FROM IdentityAlias WHERE IdentityKey = ? AND Key LIKE 's-1-5-21-%'",
                       (row[1],)).fetchone()[0]
    return row[0], row[1], sid


async def test_top_entities_count_a_person_once_by_any_spelling(demo: tuple[Any, Any]) -> None:
    client, conn = demo
    domain_name, upn, sid = _tied_account(conn)
    result = await client.run("get_top_entities", {"time_window": "last_30d", "limit": 50})
    assert isinstance(result, QueryResult), result
    values = [(e.type, e.value.lower()) for e in result.records]
    assert len(values) == len(set(values))
    # Every domain account the endpoint alerts name as CONTOSO\\name is counted under its UPN.
    assert not [value for kind, value in values if kind == "account" and value.startswith("contoso\\")]
    answers = []
    for asked in (upn, upn.upper(), domain_name, sid):
        one = await client.run("get_top_entities", {"time_window": "last_30d", "entity": asked})
        assert isinstance(one, QueryResult) and one.records, asked
        answers.append([(e.type, e.value.lower(), e.alert_count) for e in one.records if e.type == "account"])
    assert all(a == answers[0] for a in answers) and answers[0][0][1] == upn, answers
    alerts = [await client.run("query_alerts", {"time_window": "last_30d", "entity": asked, "limit": 100})
              for asked in (upn, domain_name, sid)]
    ids = [[a.alert_id for a in r.records] for r in alerts if isinstance(r, QueryResult)]
    assert len(ids) == 3 and ids[0] == ids[1] == ids[2] and ids[0]
    # The alerts that name the person only as DOMAIN\name are among them.
    only_domain = {r[0] for r in conn.execute(
        """SELECT a.SystemAlertId FROM AlertEntity AS e JOIN SecurityAlert AS a ON a.rowid = e.AlertRowId
           WHERE e.EntityKey = ? AND NOT EXISTS (SELECT 1 FROM AlertEntity AS o WHERE o.AlertRowId = e.AlertRowId
                                                 AND o.EntityKey = ?)""", (domain_name.lower(), upn))}
    assert only_domain and only_domain & set(ids[0])


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "0.0.0.0", "::"])
def test_loopback_and_unspecified_addresses_identify_nothing(address: str) -> None:
    # Defender lists every interface of a device: its loopback address would otherwise top every count.
    entity = {"Type": "ip", "Address": address}
    assert entity_value(entity) is None
    assert evaluate(kql.entity_value_expression(), Entity=entity, EntityType="ip") == ""
    assert entity_value({"Type": "ip", "Address": "127.0.0.2"}) == "127.0.0.2"
