"""Verdicts that follow the attack: the counterparties an entity's rows touched looked up in threat intelligence (the
second round's query, its values from log rows: invalid ones dropped, valid ones escaped literals), signals that
carry on their own, chains across sections, and alerts an analyst closed as false or benign positive discounted.
The rules on hand-made evidence here; on the generated world in test_assessment_calibration.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.investigation.assessment import assess
from bot.investigation.counterparties import Touch, lookup_values, touched
from bot.investigation.models import Level, Section
from bot.investigation.run import investigate, second_round
from bot.sentinel.client import SentinelClient
from bot.sentinel.evidence import (
    AlertIncident,
    FileEvent,
    Indicator,
    NetworkEvent,
    ProcessEvent,
    SigninGroup,
    UrlClick,
)
from bot.sentinel.models import AlertSummary, Incident, QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import COLUMNS, kql_of, make_query
from tests.conftest import NOW, SEED
from tests.support import kusto
from tests.support.demo import copied_demo
from tests.support.loganalytics_fake import RESULT_TYPES

AT = datetime(2026, 11, 20, 9, tzinfo=UTC)
C2 = "203.0.113.66"
BAD_DOMAIN = "update-check.example"


def _section(name: str, *records: Any, first: int = 1, error: str = "") -> Section:
    return Section(name, name, records, len(records), "", 0.0, error=error, first_ref=first)


def _connection(ip: str = C2, url: str = BAD_DOMAIN, action: str = "ConnectionSuccess",
                process: str = "rundll32.exe") -> NetworkEvent:
    return NetworkEvent(AT, "ws-1", action, ip, 443, url, process)


def _indicator(value: str, confidence: int = 70, valid: bool = True) -> Indicator:
    key = "ipv4-addr:value" if value[0].isdigit() else "domain-name:value"
    return Indicator(f"indicator--{value}", key, value, confidence, AT, None, valid, "Qakbot C2")


def _alert(name: str = "Suspicious access to LSASS service", severity: str = "High", alert_id: str = "a1",
           techniques: tuple[str, ...] = ("T1003.001",), tactics: tuple[str, ...] = ("CredentialAccess",),
           entities: tuple[str, ...] = ()) -> AlertSummary:
    return AlertSummary(alert_id, name, severity, "New", "MDE", AT, tactics, entities, len(entities),
                        techniques=techniques)


def _incident(number: int, status: str = "Closed", classification: str | None = "FalsePositive") -> Incident:
    return Incident(number, "t", "High", status, None, AT, AT, 1, (), (), "", classification)


def _signals(sections: list[Section], kind: str = "host") -> dict[str, Any]:
    return {s.name: s for s in assess(sections, kind).signals}


# counterparties: what a row touched, and the values looked up


def test_the_counterparties_a_row_touched_are_read_by_how_it_touched_them() -> None:
    network = _section("evidence_network", _connection(), _connection("198.51.100.9", "", "ConnectionFailed"),
                       _connection("198.51.100.10", "", "InboundConnectionAccepted"))
    signins = _section("evidence_signins", SigninGroup("a@contoso.com", "0", "", "192.0.2.7", "US", "Teams", "", 1,
                                                       AT, AT), first=4)
    click = UrlClick(AT, "a@contoso.com", "https://phish.example/login", "ClickAllowed", True, "Phish", "m1")
    clicks = _section("evidence_url_clicks", click, first=5)
    found = {(t.value, t.ref, t.touch) for t in touched([network, signins, clicks])}
    assert found == {(C2, "E1", Touch.CONTACT), (BAD_DOMAIN, "E1", Touch.CONTACT),
                     ("198.51.100.9", "E2", Touch.ATTEMPT), ("198.51.100.10", "E3", Touch.ATTEMPT),
                     ("192.0.2.7", "E4", Touch.SIGNIN), ("https://phish.example/login", "E5", Touch.CONTACT),
                     ("phish.example", "E5", Touch.CONTACT)}


def test_hostile_private_and_own_values_from_log_rows_are_never_looked_up() -> None:
    hostile = ['evil.example" | union *', "x\nSecurityAlert", "ws-fin-023", "\u202eexample.com",
               "https://ok.example/a'b", "z" * 600 + ".example"]
    local = ("10.0.0.5", "127.0.0.1", "fe80::1", "192.168.1.1")  # valid, but no feed lists them
    rows = _section("evidence_network", *(_connection("", value) for value in hostile),
                    *(_connection(ip, "") for ip in local),
                    _connection("10.1.1.1", "ok.example"), _connection("198.51.100.5", "self.example"))
    assert lookup_values([rows], own=("Self.example",)) == ("ok.example", "198.51.100.5")
    for value in hostile:  # the query itself refuses what the caller drops
        with pytest.raises(InvalidParameter):
            make_query("evidence_counterparty_intel", {"values": [value]})
    with pytest.raises(InvalidParameter):
        make_query("evidence_counterparty_intel", {"values": [f"198.51.100.{n}" for n in range(51)]})


def test_contacts_are_looked_up_first_within_the_bound() -> None:
    attempts = [_connection(f"198.51.100.{n}", "", "ConnectionFailed") for n in range(60)]
    rows = _section("evidence_network", *attempts, _connection(C2, ""))
    values = lookup_values([rows])
    assert len(values) == 50 and values[0] == C2


def test_the_second_round_queries_parse_with_their_contract_columns() -> None:
    queries = [make_query("evidence_counterparty_intel", {"values": [C2, BAD_DOMAIN, "https://x.example/a?b=1&c=%22",
                                                                     "billing@x.example", "a" * 64]}),
               make_query("evidence_alert_incidents", {"alert_ids": ["0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87", "a:1"]})]
    texts = [kql_of(q) for q in queries]
    assert 'pack_array("203.0.113.66", "update-check.example", "https://x.example/a?b=1&c=%22"' in texts[0]
    for query, result in zip(queries, kusto.check(texts), strict=True):
        assert result["ok"], (query.tool, result["errors"])
        columns = [(c["name"], c["type"]) for c in result["result_columns"]]
        assert [name for name, _ in columns] == list(COLUMNS[query.tool]), query.tool
        assert all(RESULT_TYPES.get(t, t) for _, t in columns)
    with pytest.raises(InvalidParameter):
        make_query("evidence_alert_incidents", {"alert_ids": ['a"); SecurityAlert | take 1; print("']})


async def test_the_demo_answers_the_counterparties_as_the_entity_look_up_does() -> None:
    client = SentinelClient(copied_demo(SEED, lambda: NOW))
    listed = await client.run("hunt", {"table": "ThreatIntelIndicators", "time_window": "30d",
                                        "columns": ["ObservableValue"], "take": 20})
    assert isinstance(listed, QueryResult) and listed.records
    values = sorted({str(r.value("ObservableValue")).lower() for r in listed.records})[:5]
    together = await client.run("evidence_counterparty_intel", {"values": values})
    assert isinstance(together, QueryResult)
    one_by_one = []
    for value in values:
        alone = await client.run("evidence_threat_intel", {"entity": value})
        assert isinstance(alone, QueryResult)
        one_by_one += [r.indicator_id for r in alone.records]
    assert sorted(r.indicator_id for r in together.records) == sorted(one_by_one) and one_by_one


# the counterparty signal


def test_a_connection_to_a_listed_counterparty_is_high_alone_citing_the_row_and_the_indicator() -> None:
    network = _section("evidence_network", _connection())
    intel = _section("evidence_counterparty_intel", _indicator(C2, 70), _indicator(BAD_DOMAIN, 85), first=2)
    signal = _signals([network, intel])["counterparty_intel"]
    assert signal.weight == 60 and set(signal.evidence) == {"E1", "E2", "E3"}
    assert C2 in signal.detail and "contacted E1" in signal.detail
    assert assess([network, intel], "host").level is Level.HIGH


@pytest.mark.parametrize(("row", "weight"), [
    (SigninGroup("a@contoso.com", "0", "", C2, "NG", "Teams", "", 1, AT, AT), 35),  # a sign-in from it: medium
    (SigninGroup("a@contoso.com", "50126", "", C2, "NG", "Teams", "", 9, AT, AT), 10),  # failed tries
    (_connection(C2, "", "ConnectionBlocked"), 10),
])
def test_how_the_counterparty_was_touched_sets_the_weight(row: Any, weight: int) -> None:
    name = "evidence_signins" if isinstance(row, SigninGroup) else "evidence_network"
    intel = _section("evidence_counterparty_intel", _indicator(C2), first=2)
    assert _signals([_section(name, row), intel], "account")["counterparty_intel"].weight == weight


def test_an_expired_or_unlisted_counterparty_and_an_ip_s_own_rows_are_no_signal() -> None:
    network = _section("evidence_network", _connection())
    assert "counterparty_intel" not in _signals([network, _section("evidence_counterparty_intel",
                                                                   _indicator(C2, 90, valid=False), first=2)])
    intel = _section("evidence_counterparty_intel", _indicator(BAD_DOMAIN, 90), first=2)
    assert "counterparty_intel" not in _signals([network, intel], "ip")  # what the devices behind an address did


class _Client:
    """Answers every query from the demo, but the second round's as told."""

    def __init__(self, second: QueryError | None) -> None:
        self.demo = SentinelClient(copied_demo(SEED, lambda: NOW))
        self.second = second
        self.source = "demo"
        self.asked: list[str] = []

    async def run(self, tool: str, arguments: dict[str, Any]) -> QueryResult | QueryError:
        self.asked.append(tool)
        if tool == "evidence_counterparty_intel" and self.second is not None:
            return self.second
        return await self.demo.run(tool, arguments)


async def _ti_domain_host() -> str:
    client = SentinelClient(copied_demo(SEED, lambda: NOW))
    found = await client.run("query_alerts", {"time_window": "last_7d", "search": "TI map Domain", "limit": 1})
    assert isinstance(found, QueryResult) and found.records
    return next(e.split(": ", 1)[1] for e in found.records[0].entities if e.startswith("host: "))


async def test_a_failed_counterparty_look_up_is_unknown_and_the_rest_still_stands() -> None:
    host = await _ti_domain_host()
    ok = await investigate(_Client(None), {"entity": host, "entity_type": "host"})  # type: ignore[arg-type]
    failing = _Client(QueryError("timeout", "Log Analytics did not answer in time", retry_possible=True))
    failed = await investigate(failing, {"entity": host, "entity_type": "host"})  # type: ignore[arg-type]
    assert isinstance(ok, QueryResult) and isinstance(failed, QueryResult)
    assert failing.asked.count("evidence_counterparty_intel") == 1
    good, bad = ok.records[0], failed.records[0]
    section = bad.section("evidence_counterparty_intel")
    assert section is not None and section.error and not section.records  # unknown, not "none"
    assert "failed: Log Analytics did not answer" in section.status(0)
    assert "counterparty_intel" in {s.name for s in good.assessment.signals}
    names = {s.name for s in good.assessment.signals}
    assert {s.name for s in bad.assessment.signals} == names - {"counterparty_intel"}
    assert [s.total for s in bad.sections[:-1]] == [s.total for s in good.sections[:-1]]
    assert any("Counterparties in threat intelligence" in w for w in failed.metadata.warnings)


# signals that carry on their own, and chains


@pytest.mark.parametrize("command", ["mimikatz.exe sekurlsa::logonpasswords", "vssadmin.exe delete shadows /all /quiet",
                                     "bcdedit.exe /set {default} recoveryenabled no",
                                     "rundll32.exe C:\\Windows\\System32\\comsvcs.dll, MiniDump 624 lsass.dmp full"])
def test_credential_dumping_and_recovery_sabotage_are_high_alone(command: str) -> None:
    process = ProcessEvent(AT, "ws-1", "bob", command.split()[0], command, "cmd.exe", "")
    assessment = assess([_section("evidence_processes", process)], "host")
    assert assessment.level is Level.HIGH and assessment.signals[0].weight == 60, assessment.summary


def test_encoded_powershell_alone_is_medium() -> None:
    process = ProcessEvent(AT, "ws-1", "bob", "powershell.exe", "powershell.exe -enc SQBFAFgA", "cmd.exe", "")
    assert assess([_section("evidence_processes", process)], "host").level is Level.MEDIUM


def test_mass_renames_are_ransomware_behaviour() -> None:
    renamed = [FileEvent(AT, "ws-1", "FileRenamed", f"doc{n}.docx.locked", "C:\\Users\\a", "", "locker.exe")
               for n in range(20)]
    assert _signals([_section("evidence_files", *renamed)])["mass_renames"].weight == 60
    assert "mass_renames" not in _signals([_section("evidence_files", *renamed[:19])])


@pytest.mark.parametrize(("alert", "alone"), [
    (_alert(), True),  # LSASS access, T1003
    (_alert("Ransomware behavior detected", techniques=("T1486",), tactics=("Impact",)), True),
    (_alert("An active 'Qakbot' malware was detected", techniques=("T1204.002",),
            tactics=("Execution", "CommandAndControl")), True),
    (_alert("Beaconing", "Medium", techniques=("T1071.001",), tactics=("CommandAndControl",)), False),
    (_alert("Brute force", techniques=("T1110",), tactics=("CredentialAccess",)), False),  # the tactic alone: not
    (_alert(severity="Low"), False),
])
def test_alerts_whose_techniques_say_credential_dumping_ransomware_or_active_c2_carry_alone(alert: AlertSummary,
                                                                                           alone: bool) -> None:
    assessment = assess([_section("query_alerts", alert)], "host")
    assert ("technique_alerts" in {s.name for s in assessment.signals}) is alone
    assert (assessment.level is Level.HIGH) is alone


def test_an_alert_its_process_and_the_process_s_connection_are_a_chain() -> None:
    alert = _alert("Suspicious process", "Medium", techniques=(), entities=("process: rundll32.exe payload.dll,Run",))
    process = ProcessEvent(AT, "ws-1", "bob", "rundll32.exe", "rundll32.exe payload.dll,Run", "explorer.exe", "")
    sections = [_section("query_alerts", alert), _section("evidence_processes", process, first=2),
                _section("evidence_network", _connection(process="rundll32.exe"), first=3)]
    chain = _signals(sections)["attack_chain"]
    assert chain.evidence == ("E1", "E2", "E3") and chain.weight == 20
    unrelated = [*sections[:2], _section("evidence_network", _connection(process="msedge.exe"), first=3)]
    assert "attack_chain" not in _signals(unrelated)


# alerts closed as false or benign positive


def test_alerts_of_incidents_closed_as_false_or_benign_positive_count_nothing() -> None:
    alerts = _section("query_alerts", _alert(alert_id="a1"), _alert("Other", alert_id="a2", techniques=()))
    incidents = _section("query_incidents", _incident(1), _incident(2, "Active", None), first=3)
    mapped = _section("evidence_alert_incidents", AlertIncident("a1", 1, "Closed", "FalsePositive"),
                      AlertIncident("a2", 2, "Active", ""), first=5)
    signals = _signals([alerts, incidents, mapped])
    assert "technique_alerts" not in signals  # a1's only incident was a false positive
    assert signals["high_severity_alerts"].evidence == ("E2",)
    both = _section("evidence_alert_incidents", AlertIncident("a1", 1, "Closed", "FalsePositive"),
                    AlertIncident("a1", 2, "Active", ""), first=5)
    assert "technique_alerts" in _signals([alerts, incidents, both])  # also in an open one: it counts


def test_without_the_alerts_incidents_every_incident_must_be_closed_benign() -> None:
    alerts = _section("query_alerts", _alert())
    benign = _section("query_incidents", _incident(1), _incident(2, classification="BenignPositive"), first=2)
    assert not assess([alerts, benign], "host").signals
    mixed = _section("query_incidents", _incident(1), _incident(2, classification="TruePositive"), first=2)
    assert assess([alerts, mixed], "host").level is Level.HIGH
    failed = _section("evidence_alert_incidents", error="timeout", first=4)
    assert not assess([alerts, benign, failed], "host").signals


def test_the_alerts_incidents_are_asked_only_when_an_incident_was_closed_benign() -> None:
    alerts = _section("query_alerts", _alert(alert_id="a1"), _alert(alert_id='bad"id'))
    open_only = _section("query_incidents", _incident(1, "Active", None), first=3)
    assert second_round([alerts, open_only], ()) == []
    closed = _section("query_incidents", _incident(1, "Closed", "BenignPositive"), first=3)
    assert second_round([alerts, closed], ()) == [("evidence_alert_incidents", {"alert_ids": ["a1"]})]


def test_a_push_accepted_after_an_mfa_flood_is_high_alone() -> None:
    denied = SigninGroup("a@contoso.com", "500121", "", C2, "NG", "Azure Portal", "", 6, AT, AT)
    later = AT.replace(hour=10)
    accepted = SigninGroup("a@contoso.com", "0", "", C2, "NG", "Azure Portal", "", 1, later, later)
    assessment = assess([_section("evidence_signins", denied, accepted)], "account")
    assert [(s.name, s.weight) for s in assessment.signals] == [("mfa_fatigue", 60)]
    assert assess([_section("evidence_signins", denied)], "account").level is Level.MEDIUM  # the flood alone


def test_a_new_admin_role_for_an_account_signing_in_from_a_new_country_is_high() -> None:
    from bot.sentinel.evidence import DirectoryChange

    role = DirectoryChange(AT, "Add member to role", "success", "mallory@contoso.com", ("a@contoso.com",),
                           "Global Administrator", False)
    home = SigninGroup("a@contoso.com", "0", "", "192.0.2.1", "US", "Teams", "", 3, AT, AT, known_country=True)
    away = SigninGroup("a@contoso.com", "0", "", "198.51.100.1", "RU", "Teams", "", 1, AT, AT, known_country=False)
    sections = [_section("evidence_directory", role), _section("evidence_signins", home, away, first=2)]
    signals = _signals(sections, "account")
    assert signals["attack_chain"].evidence == ("E1", "E3") and assess(sections, "account").level is Level.HIGH
    assert assess(sections[:1], "account").level is Level.MEDIUM  # the role alone
