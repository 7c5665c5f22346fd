"""The entity investigation: detection, each evidence query's demo answer against an independent Python evaluation
of the rows written, the stories visible in the assessment, the command and the tool end to end over the demo
workspace (real client, router, registry, card and fact check), and what the fact check makes of a verdict."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.commands.parser import CommandError, parse
from bot.commands.router import CommandRouter, Route
from bot.demo.backend import DemoBackend
from bot.investigation.models import Investigation, Level
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck import check
from bot.orchestrator.factcheck.facts import Facts
from bot.orchestrator.factcheck.verdicts import VerdictFact, mismatches
from bot.orchestrator.references import References
from bot.sentinel import catalog
from bot.sentinel.client import SentinelClient
from bot.sentinel.params import InvalidParameter, TimeWindow
from bot.sentinel.queries.evidence import EVIDENCE
from bot.sentinel.queries.evidence.common import MAX_EVIDENCE_ROWS, RowList
from bot.sentinel.queries.evidence.entity import Entity, EntityKind, detect
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid
from tests.conftest import NOW
from tests.support import evidence_world as world

ENTITIES = [Entity(EntityKind.ACCOUNT, world.ALICE), Entity(EntityKind.ACCOUNT, "ALICE@contoso.com"),
            Entity(EntityKind.ACCOUNT, world.BOB), Entity(EntityKind.HOST, world.HOST),
            Entity(EntityKind.HOST, "ws-fin-042"), Entity(EntityKind.IP, world.BAD_IP),
            Entity(EntityKind.URL, world.URL), Entity(EntityKind.DOMAIN, "login-contoso.example"),
            Entity(EntityKind.HASH, "a" * 64), Entity(EntityKind.HASH, world.HASH),
            Entity(EntityKind.ACCOUNT, "nobody@contoso.com")]


@pytest.fixture
def backend(demo_backend: DemoBackend) -> DemoBackend:
    demo_backend.on_generated(lambda conn: world.insert(conn, NOW))
    return demo_backend


# detection


@pytest.mark.parametrize(("value", "kind"), [
    ("alice@contoso.com", EntityKind.ACCOUNT), ("CONTOSO\\alice", EntityKind.ACCOUNT), ("WS-FIN-042", EntityKind.HOST),
    ("203.0.113.7", EntityKind.IP), ("2001:db8::1", EntityKind.IP),
    ("d41d8cd98f00b204e9800998ecf8427e", EntityKind.HASH),
    ("A" * 40, EntityKind.HASH), (world.HASH.upper(), EntityKind.HASH), (world.URL, EntityKind.URL),
    ("login-contoso.example", EntityKind.DOMAIN),
])
def test_values_are_detected_as_their_kind(value: str, kind: EntityKind) -> None:
    entity = detect(value)
    assert entity.kind is kind
    assert entity.value == (value.lower() if kind is EntityKind.HASH else value)


@pytest.mark.parametrize(("value", "words"), [
    ("alice", "could be an account or a host"), ("", "give an account"), ("x" * 600, "characters long"),
    ("аlice@contoso.com", "non-ASCII"), ("ａｌｉｃｅ", "non-ASCII"), ("alice\n| where 1==1", "spaces or control"),
    ('x" or 1==1 or "', "spaces or control"), ("a|union *", "spaces or control"), (".drop", "not an account"),
    ("externaldata(x:string)", "not an account"), ("https://x.example/\"q", "not an account"), (42, "give an account"),
])
def test_hostile_or_ambiguous_values_are_refused_with_what_to_send(value: object, words: str) -> None:
    with pytest.raises(InvalidParameter) as refusal:
        detect(value)
    assert words in str(refusal.value)


def test_an_explicit_type_is_checked_against_the_value() -> None:
    assert detect("alice", EntityKind.ACCOUNT) == Entity(EntityKind.ACCOUNT, "alice")
    assert detect("alice", EntityKind.HOST).kind is EntityKind.HOST
    with pytest.raises(InvalidParameter, match="not a valid ip"):
        detect("alice", EntityKind.IP)


# each evidence query against an independent evaluation


def _in_window(row: dict[str, Any], window: TimeWindow, lookback: timedelta | None) -> bool:
    span = max(window.duration, lookback or timedelta(0))
    return row["TimeGenerated"] is not None and NOW - span < datetime.fromisoformat(row["TimeGenerated"]) <= NOW


def _in_baseline(row: dict[str, Any], window: TimeWindow) -> bool:
    """In the 14 days before the window (a sign-in's country is known to its account when it succeeded there)."""
    moment = datetime.fromisoformat(row["TimeGenerated"])
    return NOW - window.duration - timedelta(days=14) < moment <= NOW - window.duration


def _sorted(rows: list[dict[str, Any]], order: tuple[tuple[str, bool], ...]) -> list[dict[str, Any]]:
    for column, descending in reversed(order):
        rows = sorted(rows, key=lambda r, c=column: (r[c] is not None, r[c]), reverse=descending)
    return rows


def _same(value: str, wanted: str) -> bool:
    return (value or "").lower() == wanted.lower()


_HASH_COLUMN = {32: "MD5", 40: "SHA1", 64: "SHA256"}


def _expected(tool: str, rows_of: dict[str, list[dict[str, Any]]], entity: Entity, window: TimeWindow,
              spec_rows: RowList | None, lookback: timedelta | None) -> list[dict[str, Any]]:
    value, kind = entity.value, entity.kind.value
    if tool == "evidence_signins":
        column = {"account": "UserPrincipalName", "ip": "IPAddress"}[kind]
        keys = ("UserPrincipalName", "ResultType", "IPAddress", "Location", "AppDisplayName", "RiskLevelDuringSignIn")
        groups: dict[tuple, list[dict[str, Any]]] = {}
        known: set[tuple[str, str]] = set()  # (account, country) of a success in the baseline before the window
        for r in rows_of["SigninLogs"]:
            if _in_window(r, window, None) and _same(r[column], value):
                groups.setdefault(tuple(r[k] for k in keys), []).append(r)
            elif _in_baseline(r, window) and _same(r[column], value) and r["ResultType"] == "0":
                known.add((r["UserPrincipalName"].lower(), r["Location"]))
        out = [dict(zip(keys, key, strict=True)) | {
            "ResultDescription": min(r["ResultDescription"] for r in group), "SignIns": len(group),
            "FirstSeen": min(r["TimeGenerated"] for r in group), "LastSeen": max(r["TimeGenerated"] for r in group),
            "KnownCountry": (key[0].lower(), key[3]) in known}
            for key, group in groups.items()]
        out = _sorted(out, (("LastSeen", True), ("SignIns", True), *((k, False) for k in keys)))
        return [r | {"TotalMatched": len(out)} for r in out[:MAX_EVIDENCE_ROWS]]
    if tool == "evidence_risky_user":
        mine = [r for r in rows_of["AADRiskyUsers"]
                if _in_window(r, window, lookback) and _same(r["UserPrincipalName"], value)]
        if not mine:
            return []
        latest = max(mine, key=lambda r: r["TimeGenerated"])
        return [{k: latest[k] for k in ("UserPrincipalName", "RiskLevel", "RiskState", "RiskDetail",
                                        "RiskLastUpdatedDateTime", "TimeGenerated")}]
    if tool == "evidence_threat_intel":
        latest: dict[str, dict[str, Any]] = {}
        for r in rows_of["ThreatIntelIndicators"]:
            if (_in_window(r, window, lookback) and _same(r["ObservableValue"], value)
                    and (r["Id"] not in latest or r["TimeGenerated"] > latest[r["Id"]]["TimeGenerated"])):
                latest[r["Id"]] = r
        out = [{"Id": r["Id"], "ObservableKey": r["ObservableKey"], "ObservableValue": r["ObservableValue"],
                "Confidence": r["Confidence"], "ValidFrom": r["ValidFrom"], "ValidUntil": r["ValidUntil"],
                "Valid": bool(r["IsActive"]) and not r["Revoked"]
                and (not r["ValidFrom"] or datetime.fromisoformat(r["ValidFrom"]) <= NOW)
                and (not r["ValidUntil"] or datetime.fromisoformat(r["ValidUntil"]) > NOW), "Tags": r["Tags"]}
               for r in latest.values() if not r["IsDeleted"]]
        out = _sorted(out, (("Confidence", True), ("ValidUntil", True), ("Id", False)))
        return [r | {"TotalMatched": len(out)} for r in out[:MAX_EVIDENCE_ROWS]]
    if tool == "evidence_directory":
        out = []
        for r in rows_of["AuditLogs"]:
            initiated, targets = json.loads(r["InitiatedBy"]), json.loads(r["TargetResources"])
            by = _same(initiated.get("user", {}).get("userPrincipalName", ""), value)
            if _in_window(r, window, None) and (
                    by or any(_same(t.get("userPrincipalName", ""), value) for t in targets)):
                out.append({"TimeGenerated": r["TimeGenerated"], "OperationName": r["OperationName"],
                            "Result": r["Result"], "Initiator": initiated.get("user", {}).get("userPrincipalName")
                            or initiated.get("app", {}).get("displayName", ""),
                            "TargetResources": r["TargetResources"], "ByEntity": by})
        out = _sorted(out, (("TimeGenerated", True), ("OperationName", False)))
        return [r | {"TotalMatched": len(out)} for r in out[:MAX_EVIDENCE_ROWS]]
    assert spec_rows is not None
    table = rows_of[spec_rows.table]
    if tool == "evidence_email" and kind in ("url", "domain"):
        column = "Url" if kind == "url" else "UrlDomain"
        ids = {u["NetworkMessageId"] for u in rows_of["EmailUrlInfo"]
               if _in_window(u, window, None) and _same(u[column], value)}
        matched = [r for r in table if _in_window(r, window, None) and r["NetworkMessageId"] in ids]
    else:
        columns = list(catalog.table(spec_rows.table).entity_columns(kind))  # the one catalog of entity columns
        if kind == "hash":
            columns = [_HASH_COLUMN[len(value)]]
        matched = [r for r in table if _in_window(r, window, None) and any(_same(r[c], value) for c in columns)]
    out = [{c.name: r[c.name] if not c.kql else json.loads(r["Location"] or "{}").get("countryOrRegion", "")
            for c in spec_rows.columns} for r in matched]
    out = _sorted(out, spec_rows.order)
    return [r | {"TotalMatched": len(out)} for r in out[:MAX_EVIDENCE_ROWS]]


def _plain(rows: list[dict[str, Any]], types: dict[str, str]) -> list[dict[str, Any]]:
    return [{k: bool(v) if types.get(k) == "bool" else v for k, v in r.items()} for r in rows]


async def _incident_entities(backend: DemoBackend, title: str) -> list[tuple[str, str]]:
    """The entities of the newest generated incident with ``title`` in its title."""
    client = SentinelClient(backend)
    found = await client.run("query_incidents", {"time_window": "last_30d", "search": title, "sort": "newest"})
    assert found.records, title
    detail = await client.run("get_incident_detail", {"incident_ref": found.records[0].number})
    return [(e.type, e.value) for e in detail.records[0].entities]


async def _generated_entities(backend: DemoBackend) -> list[Entity]:
    """Accounts, hosts, IPs, URLs and hashes the generated incidents name (their evidence is in the tables)."""
    kinds = {"account": EntityKind.ACCOUNT, "host": EntityKind.HOST, "ip": EntityKind.IP, "url": EntityKind.URL,
             "filehash": EntityKind.HASH}
    out = []
    for title in ("MFA push", "Phishing email", "LSASS", "Ransomware", "TI map"):
        for kind, value in await _incident_entities(backend, title):
            if kind in kinds:
                out.append(Entity(kinds[kind], value.lower() if kind == "filehash" else value))
    return out


async def test_every_evidence_query_answers_as_a_python_evaluation_of_the_rows(backend: DemoBackend) -> None:
    compared = matched = 0
    entities = ENTITIES + await _generated_entities(backend)
    # The queries only read: the tables' rows are read back once for every evaluation (each read takes a while)
    rows_of = backend.with_database(lambda conn, now: world.insert_rows_of(conn))
    for window in (TimeWindow.LAST_24H, TimeWindow.LAST_7D, TimeWindow.LAST_30D):
        for spec, cls in EVIDENCE:
            module_rows = getattr(spec.demo, "__self__", None)  # a list query's RowList
            for entity in entities:
                if entity.kind not in cls.kinds:
                    continue
                query = cls(entity, window)

                def run(conn, now, spec=spec, query=query):
                    return spec.demo(query, conn, now, backend)
                got = backend.with_database(run)
                expected = _expected(spec.name, rows_of, entity, window, module_rows, cls.lookback)
                types = dict(spec.result)
                assert _plain(got, types) == _plain(expected, types), (spec.name, entity, window)
                assert all(set(r) == set(spec.columns) for r in got), spec.name
                compared += 1
                matched += bool(got)
    assert compared > 150 and matched > 80, (compared, matched)


# the stories, end to end


async def _investigate(backend: DemoBackend, value: str, **more: Any) -> Investigation:
    run = await ToolBox(SentinelClient(backend)).run("investigate_entity", json.dumps({"entity": value, **more}))
    assert run.ok, run.artifact
    investigation = run.artifact.records[0]
    assert isinstance(investigation, Investigation)
    return investigation


async def test_the_mfa_fatigue_account_is_assessed_high_naming_the_mfa_pattern(backend: DemoBackend) -> None:
    investigation = await _investigate(backend, world.ALICE)
    signals = {s.name: s for s in investigation.assessment.signals}
    assert investigation.assessment.level is Level.HIGH
    assert {"mfa_fatigue", "risky_user", "privileged_role", "malicious_click", "new_country"} <= set(signals)
    mfa = signals["mfa_fatigue"]
    assert "8 MFA denials" in mfa.detail and "then 1 successful" in mfa.detail and mfa.weight == 60
    signins = investigation.section("evidence_signins")
    assert signins is not None
    cited = [signins.records[int(ref[1:]) - signins.first_ref] for ref in mfa.evidence]
    assert {g.result_type for g in cited} == {"500121", "0"}
    assert "Global Administrator" in signals["privileged_role"].detail


async def test_the_malware_host_is_assessed_naming_the_process(backend: DemoBackend) -> None:
    investigation = await _investigate(backend, world.HOST, time_window="last_24h")
    signals = {s.name: s for s in investigation.assessment.signals}
    assert "malicious_process" in signals
    detail = signals["malicious_process"].detail
    assert "mimikatz.exe (credential dumping" in detail and "powershell.exe" in detail
    assert investigation.assessment.level is Level.HIGH and signals["malicious_process"].weight == 60  # alone enough


async def test_a_quiet_account_is_low_or_none_and_the_known_bad_ip_matches_threat_intel(backend: DemoBackend) -> None:
    bob = await _investigate(backend, world.BOB)
    assert bob.assessment.level is Level.NONE and not bob.assessment.signals
    ip = await _investigate(backend, world.BAD_IP)
    ti = next(s for s in ip.assessment.signals if s.name == "threat_intel_match")
    assert ti.weight == 50 and "highest confidence 90" in ti.detail and len(ti.evidence) == 1  # ind-2 expired


async def test_the_tool_refuses_bad_arguments_with_what_to_send(backend: DemoBackend) -> None:
    box = ToolBox(SentinelClient(backend))
    for arguments, words in (({"entity": "alice"}, "could be an account or a host"),
                             ({"entity": "x\" | union *"}, "spaces or control"), ({}, "give an account"),
                             ({"entity": world.ALICE, "limit": 3}, "has no parameter 'limit'"),
                             ({"entity": world.ALICE, "entity_type": "planet"}, "not one of")):
        run = await box.run("investigate_entity", json.dumps(arguments))
        assert not run.ok and words in run.artifact.message, (arguments, run.artifact)
        assert "ERROR invalid_argument" in TOOLS.text(run.artifact, lambda *_: None, arguments)


async def test_the_command_runs_an_investigation_and_its_text_card_and_facts_follow(backend: DemoBackend) -> None:
    assert parse("investigate alice@contoso.com 24h").arguments == {"entity": world.ALICE, "time_window": "last_24h"}
    assert parse("investigate alice 7d account").arguments["entity_type"] == "account"
    with pytest.raises(CommandError, match="Investigate what"):
        parse("investigate")
    with pytest.raises(CommandError, match="could not read"):
        parse("investigate alice@contoso.com yesterday")

    async def status(_: str) -> None:
        return None

    conversation = Conversation()
    routed = await CommandRouter(SentinelClient(backend), None).route(f"investigate {world.ALICE}", conversation,
                                                                      status)
    assert routed.route is Route.QUERY and routed.run is not None and routed.run.ok
    result = routed.run.artifact
    keys = {(r.kind.value, r.key) for r in conversation.references.items}
    assert ("entity", f"account:{world.ALICE}") in keys  # "that account" / [n] reach it in a follow-up
    text = TOOLS.text(result, lambda *_: None, {})
    assert "ASSESSMENT (computed by the bot" in text and "level high" in text and "signal mfa_fatigue +60" in text
    assert "## Sign-ins:" in text and "E1|" in text
    card = TOOLS.card(result, lambda *_: None, NOW)
    assert_valid(card)
    dumped = json.dumps(card)
    assert "Assessment: HIGH" in dumped and dumped.count('"Show query"') == len(result.records[0].sections)
    # every query the investigation ran is in the result's KQL ("Show query" in the Data sources footnote)
    # (the second round, the counterparties in threat intelligence, declares the values its rows touched instead)
    assert result.metadata.kql.count("let entity_wanted") == len(result.records[0].sections) - 1
    assert result.metadata.kql.count("let counterparties = pack_array(") == 1

    facts = Facts()
    facts.observe(result, NOW)
    assert facts.verdicts["alice@contoso.com"].level == "high"
    assert world.BAD_IP in facts.identifiers and "mallory@contoso.com" in facts.identifiers
    restored = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert restored.verdicts == facts.verdicts


async def test_calling_a_low_assessed_account_compromised_is_marked(backend: DemoBackend) -> None:
    result = (await ToolBox(SentinelClient(backend)).run("investigate_entity",
                                                         json.dumps({"entity": world.BOB}))).artifact
    facts = Facts()
    facts.observe(result, NOW)
    findings = check(f"{world.BOB} is compromised: rotate the password.", facts, References(), NOW)
    assert [(f.category, f.claimed, f.note) for f in findings] == [("assessment", "compromised", "assessment: none")]
    assert "assessment of account bob@contoso.com is none" in findings[0].record
    assert not check(f"There is no sign {world.BOB} was compromised.", facts, References(), NOW)
    assert check(f"The assessment for {world.BOB} is high.", facts, References(), NOW)
    alice = (await ToolBox(SentinelClient(backend)).run("investigate_entity",
                                                        json.dumps({"entity": world.ALICE}))).artifact
    facts.observe(alice, NOW)
    assert not check(f"{world.ALICE} looks compromised (assessment high).", facts, References(), NOW)



def test_a_signal_named_as_the_assessment_gives_it_is_not_a_claim_of_compromise() -> None:
    """"level low (score 15): Malicious email delivered (+15)", as the tool's text gives it and the model is told to
    report it: the signal's own words are not a claim that the domain is malicious."""
    verdict = VerdictFact("files-share.test", "domain", "low", 15, ("Malicious email delivered",),
                          "investigate_entity", NOW)
    said = ("The bot's assessment of domain files-share.test over the last 7 days: level low (score 15): Malicious "
            "email delivered (+15).")
    assert mismatches(said, [verdict]) == []
    assert [m.note for m in mismatches("files-share.test is malicious, block it.", [verdict])] == ["assessment: low"]
    assert mismatches("files-share.test: Malicious email delivered, so it is malicious.", [verdict])


async def test_a_signal_the_assessment_does_not_have_is_marked(backend: DemoBackend) -> None:
    box = ToolBox(SentinelClient(backend))
    facts = Facts()
    for entity in (world.BOB, world.ALICE):
        facts.observe((await box.run("investigate_entity", json.dumps({"entity": entity}))).artifact, NOW)
    findings = check(f"{world.BOB} had an MFA-fatigue pattern and matched threat intelligence.", facts, References(),
                     NOW)
    assert [(f.category, f.claimed) for f in findings] == [("assessment", "MFA-fatigue"),
                                                            ("assessment", "matched threat intelligence")]
    assert "no such signal in the assessment (none)" in findings[0].note
    # the signals alice's assessment has are backed; those it has not, or a denial, are not claims against it
    assert not check(f"{world.ALICE} shows an MFA fatigue pattern and was added to a privileged role.", facts,
                     References(), NOW)
    assert not check(f"There is no MFA fatigue for {world.BOB}.", facts, References(), NOW)
    # alice signed in from an address on threat intelligence: the counterparty's match backs the claim
    assert not check(f"{world.ALICE} matched threat intelligence.", facts, References(), NOW)
    assert check(f"{world.BOB} ran credential dumping.", facts, References(), NOW)


async def test_the_generated_mfa_fatigue_incident_s_account_is_assessed_naming_the_mfa_pattern(
        backend: DemoBackend) -> None:
    account = next(v for k, v in await _incident_entities(backend, "MFA push") if k == "account")
    investigation = await _investigate(backend, account, time_window="last_30d")
    mfa = next(s for s in investigation.assessment.signals if s.name == "mfa_fatigue")
    assert "MFA denials (result 500121)" in mfa.detail and mfa.evidence
    assert investigation.assessment.level in (Level.MEDIUM, Level.HIGH)
    # every row a signal rests on is in what the model reads, even past the first rows of its section
    run = await ToolBox(SentinelClient(backend)).run("investigate_entity",
                                                     json.dumps({"entity": account, "time_window": "last_30d"}))
    text = TOOLS.text(run.artifact, lambda *_: None, {})
    rows = {line.split("|")[0].split(" ")[0] for line in text.splitlines()}
    assert set(investigation.assessment.cited) <= rows, set(investigation.assessment.cited) - rows
    assert_valid(TOOLS.card(run.artifact, lambda *_: None, NOW))


@pytest.mark.parametrize("title", ["LSASS", "Ransomware", "Malware outbreak"])
async def test_the_generated_malware_incident_s_host_is_assessed_naming_the_process(backend: DemoBackend,
                                                                                     title: str) -> None:
    host = next(v for k, v in await _incident_entities(backend, title) if k == "host")
    investigation = await _investigate(backend, host, entity_type="host", time_window="last_30d")
    signal = next(s for s in investigation.assessment.signals if s.name == "malicious_process")
    processes = investigation.section("evidence_processes")
    assert processes is not None
    named = {processes.records[int(ref[1:]) - processes.first_ref].file_name for ref in signal.evidence}
    assert named and all(name in signal.detail for name in list(named)[:1]), (signal.detail, named)
    # The card shows the incidents naming the host as their numbers are written ("#14404", copied as typed).
    incidents = investigation.section("query_incidents")
    assert incidents is not None and incidents.records
    run = await ToolBox(SentinelClient(backend)).run("investigate_entity", json.dumps(
        {"entity": host, "entity_type": "host", "time_window": "last_30d"}))
    card = json.dumps(TOOLS.card(run.artifact, lambda *_: None, NOW), ensure_ascii=False)
    assert all(f" · #{i.number} · " in card for i in incidents.records[:1]) and "＃" not in card


@pytest.mark.slow
def test_the_cli_prints_every_query_an_investigation_would_run() -> None:
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "bot", "kql", "investigate_entity", "--args",
                           json.dumps({"entity": world.ALICE})], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Each query is printed under a line naming it ("// query 3 of 12: query_incidents"), in the order they run: an
    # account's other keys looked up first, with the alerts and incidents (which resolve the identity themselves).
    heads = [line.split(": ")[-1] for line in done.stdout.splitlines() if line.startswith("// query ")]
    assert heads == ["get_entity_identity", "query_alerts", "query_incidents", "evidence_threat_intel",
                     "evidence_risky_user", "evidence_risk_detections",
                     "evidence_signins", "evidence_directory", "evidence_ueba", "evidence_processes",
                     "evidence_email", "evidence_url_clicks"]
    assert all(f"// query {n} of 12: " in done.stdout for n in range(1, 13))
    # and the second round, which needs the first one's rows: said, with how to print it
    assert "one more query: evidence_counterparty_intel" in done.stdout
    refused = subprocess.run([sys.executable, "-m", "bot", "kql", "investigate_entity", "--args",
                              '{"entity": "x\\" | union *"}'], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "spaces or control characters" in refused.stderr


async def test_every_evidence_row_has_an_n_and_investigate_n_follows_it(backend: DemoBackend) -> None:
    async def status(_: str) -> None:
        return None

    conversation = Conversation()
    router = CommandRouter(SentinelClient(backend), None)
    routed = await router.route(f"investigate {world.ALICE}", conversation, status)
    assert routed.run is not None and routed.run.ok
    result, references = routed.run.artifact, conversation.references
    investigation = result.records[0]
    # the sign-ins from the attacker's address are cited by that address's [n], on the card and in the model's text
    bad_ip = references.ref_for("entity", f"ip:{world.BAD_IP}")
    assert bad_ip is not None
    signins = investigation.section("evidence_signins")
    assert signins is not None
    row = next(i for i, g in enumerate(signins.records) if g.ip == world.BAD_IP)
    card = json.dumps(TOOLS.card(result, references.ref_for, NOW), ensure_ascii=False)
    line = next(t for t in re.findall(r'"text": "([^"]*)"', card) if t.startswith(f"{signins.ref(row)} · "))
    assert line.endswith(f" · [{bad_ip}]"), "the row's E number first, the [n] of what it names last, apart"
    text = TOOLS.text(result, references.ref_for, {})
    ip_line = next(t for t in text.splitlines() if t.startswith(f"{signins.ref(row)}|"))
    assert ip_line.endswith(f"|[{bad_ip}]"), "the model reads the row as the card does: E number first, [n] last"
    # every row of every section shows a conversation reference: its own, or the entity it names, in its last column
    evidence_lines = [line for line in text.splitlines() if line.startswith("E") and "|" in line]
    assert evidence_lines and all(re.fullmatch(r"E\d+", line.split("|")[0]) for line in evidence_lines)
    assert all(re.fullmatch(r"\[\d+\]", line.split("|")[-1]) for line in evidence_lines)
    # "investigate [n]" investigates what [n] names
    follow = await router.route(f"investigate [{bad_ip}] 30d", conversation, status)
    assert follow.run is not None and follow.run.ok, follow
    followed = follow.run.artifact.records[0]
    assert (followed.entity_kind, followed.entity, followed.window) == ("ip", world.BAD_IP, "last_30d")
    alice = references.ref_for("entity", f"account:{world.ALICE}")
    assert "threat_intel_match" in {s.name for s in followed.assessment.signals}
    incident = references.assign("incident", "42", "#42 an incident")
    refused = await router.route(f"investigate [{incident}]", conversation, status)
    assert refused.route is Route.UNRESOLVED and "I can investigate an account" in (refused.text or "")
    assert alice is not None
