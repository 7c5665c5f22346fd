"""incident_changes (the poller's one query), get_on_call (the OnCall watchlist) and the demo's injected incidents.

Each query: its KQL passes Microsoft's Kusto parser with the contract columns (``_GetWatchlist`` declared as the
workspace function it is, tests/kql/functions.json); the demo's answer equals an independent evaluation of the
generated rows; both backends decode the same rows into the same records. Then the demo hook: an incident added
to the running workspace (in process, or by the CLI through the inbox file) is seen by every query, survives a
regeneration, and a change to it moves its TimeGenerated so the poller sees that too.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cards import result_card
from bot.commands.parser import Command, parse, with_preferences
from bot.demo import generator, oncall
from bot.demo.backend import DemoBackend
from bot.demo.inject import FIRST_NUMBER
from bot.demo.writer import DemoIncidentWriter
from bot.sentinel.changes import ChangeKind, IncidentStatus, Owner, make_change
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import ChangedIncident, OnCallEntry, QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import COLUMNS, MAX_CHANGES, kql_of, make_query
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid
from tests.conftest import NOW, SEED
from tests.support import kusto
from tests.support.demo import copied_demo
from tests.support.loganalytics_fake import RESULT_TYPES, FakeLogAnalytics
from tests.support.workspaces import make_la_client, prime


def ok(result: QueryResult | QueryError) -> QueryResult:
    assert isinstance(result, QueryResult), result
    return result


# --- KQL -----------------------------------------------------------------------------------------------------------

def test_both_queries_parse_with_the_contract_columns() -> None:
    cursors = [NOW - timedelta(minutes=5), datetime(2026, 1, 1, tzinfo=UTC), "2026-11-20T09:00:00.1234567+02:00",
               "2026-11-20"]
    queries = [make_query("incident_changes", {"since": c}) for c in cursors]
    queries += [make_query("incident_changes", {"since": NOW, "limit": 1}), make_query("get_on_call")]
    results = kusto.check([kql_of(q) for q in queries])
    for query, result in zip(queries, results, strict=True):
        assert result["ok"], (query, result["errors"][:2])
        columns = tuple((c["name"], c["type"]) for c in result["result_columns"])
        assert tuple(name for name, _ in columns) == COLUMNS[query.tool]
        assert columns == RESULT_TYPES[query.tool]
    assert 'datetime(2026-11-20T07:00:00.123456Z)' in kql_of(queries[2]), "the cursor in UTC, never user text"


def test_the_parser_knows_getwatchlist_and_only_its_columns() -> None:
    """The function schema is what makes the on-call KQL checkable: a wrong name or column still fails."""
    good, unknown_function, unknown_column = kusto.check([
        "_GetWatchlist('OnCall') | project SearchKey, _DTItemId, LastUpdatedTimeUTC, UPN, ShiftStart",
        "_GetWatchlists('OnCall') | project SearchKey",
        "_GetWatchlist('OnCall') | project Pager",
    ])
    assert good["ok"] and not unknown_function["ok"] and not unknown_column["ok"]


@pytest.mark.parametrize("since, says", [
    (None, "is required"), ("", "is required"), ("yesterday", "ISO 8601"), (datetime(2026, 11, 20), "timezone-aware"),
    ("1999-01-01T00:00Z", "out of range"), ('2026-11-20" | take 1', "ISO 8601"),
])
def test_a_bad_cursor_is_refused_with_a_clear_message(since: object, says: str) -> None:
    with pytest.raises(InvalidParameter, match=says):
        make_query("incident_changes", {} if since is None else {"since": since})


# --- incident_changes on the demo, against an independent evaluation ------------------------------------------------

def expected_changes(since: datetime, limit: int = MAX_CHANGES) -> tuple[list[dict], int]:
    """The latest row at NOW of each incident, where it is later than ``since``; ascending, capped."""
    stamp = lambda moment: moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    latest: dict[int, dict] = {}
    for row in generator.generate(SEED, NOW).incident_rows:  # sorted by time: a later row replaces an earlier one
        if stamp(since) < row["TimeGenerated"] <= stamp(NOW):
            latest[row["IncidentNumber"]] = row
    rows = sorted(latest.values(), key=lambda r: (r["TimeGenerated"], r["IncidentNumber"]))
    return rows[:limit], len(rows)


@pytest.mark.parametrize("back, limit", [(timedelta(minutes=30), MAX_CHANGES), (timedelta(hours=6), MAX_CHANGES),
                                         (timedelta(days=3), MAX_CHANGES), (timedelta(days=3), 7)])
async def test_demo_changes_equal_an_independent_evaluation(demo_client: SentinelClient, back: timedelta,
                                                            limit: int) -> None:
    result = ok(await demo_client.incident_changes(NOW - back, limit=limit))
    rows, total = expected_changes(NOW - back, limit)
    assert total > 0, "every window of the demo has changes"
    got = [(c.incident.number, c.time_generated, c.incident.status, c.incident.severity) for c in result.records]
    assert got == [(r["IncidentNumber"], datetime.fromisoformat(r["TimeGenerated"]), r["Status"], r["Severity"])
                   for r in rows]
    assert result.metadata.total == total and result.metadata.truncated == (total > limit)
    for change, row in zip(result.records, rows, strict=True):
        owner = json.loads(row["Owner"])
        assert (change.owner_object_id, change.owner_upn, change.owner_email, change.owner_assigned_to) == (
            owner["objectId"], owner["userPrincipalName"], owner["email"], owner["assignedTo"])
        assert change.description == row["Description"]
        assert change.incident.alert_count == json.loads(row["AdditionalData"])["alertsCount"]


async def test_a_poller_paging_by_its_cursor_misses_nothing(demo_client: SentinelClient) -> None:
    since, seen = NOW - timedelta(days=2), []
    while True:
        page = ok(await demo_client.incident_changes(since, limit=25))
        seen += [c.incident.number for c in page.records]
        if not page.metadata.truncated:
            break
        since = page.records[-1].time_generated
    rows, _ = expected_changes(NOW - timedelta(days=2))
    assert seen == [r["IncidentNumber"] for r in rows] and len(seen) > 25


@pytest.fixture(params=["demo", "log_analytics"])
async def client(request, demo_backend: DemoBackend, fake_logs: FakeLogAnalytics):
    if request.param == "demo":
        sentinel = SentinelClient(demo_backend)
    else:
        sentinel = make_la_client(fake_logs)
        await prime(fake_logs, demo_backend, "incident_changes", {"since": NOW - timedelta(hours=6)})
        await prime(fake_logs, demo_backend, "get_on_call", {})
    yield sentinel
    await sentinel.close()


async def test_both_backends_give_the_same_records(client: SentinelClient, demo_client: SentinelClient) -> None:
    changes = ok(await client.incident_changes(NOW - timedelta(hours=6)))
    assert changes.records == ok(await demo_client.incident_changes(NOW - timedelta(hours=6))).records
    assert all(isinstance(c, ChangedIncident) for c in changes.records) and changes.records
    roster = ok(await client.get_on_call())
    assert roster.records == ok(await demo_client.get_on_call()).records
    assert roster.metadata.warnings == ("2 on-call row(s) without a UPN or with a malformed shift time were left out.",)


# --- on_call -------------------------------------------------------------------------------------------------------

def expected_on_shift(rows: list[dict], at: datetime) -> tuple[set[str], int]:
    """UPNs on a daily shift at ``at`` (minutes since midnight, modulo a day), and the rows that cannot be read."""
    minute, on, bad = at.hour * 60 + at.minute, set(), 0
    for row in rows:
        times = [re.fullmatch(r"([01]\d|2[0-3]):([0-5]\d)", row[c]) for c in ("ShiftStart", "ShiftEnd")]
        if not (row["UPN"] or row["SearchKey"]) or not all(times):
            bad += 1
            continue
        start, end = (int(m[1]) * 60 + int(m[2]) for m in times)  # type: ignore[index]
        if (minute - start) % 1440 < ((end - start) % 1440 or 1440):
            on.add(row["UPN"])
    return on, bad


@pytest.fixture(scope="module")
def on_call_day() -> Iterator[tuple[DemoBackend, list[datetime]]]:
    """One demo workspace for the hours of a day, its clock moved from hour to hour (earliest first, so it is built
    once: a workspace built for each hour, 7 generations, took 7-14 s apiece on a loaded machine). Closed at the
    end: at 23:30 it starts building the next day, which the closing stops."""
    clock = [NOW.replace(hour=0, minute=30)]
    backend = copied_demo(SEED, lambda: clock[0])
    yield backend, clock
    asyncio.run(backend.close())


@pytest.mark.parametrize("hour", [0, 3, 7, 8, 15, 16, 23])
async def test_demo_on_call_equals_an_independent_evaluation(on_call_day: tuple[DemoBackend, list[datetime]],
                                                             hour: int) -> None:
    backend, clock = on_call_day
    at = clock[0] = NOW.replace(hour=hour, minute=30)
    result = ok(await SentinelClient(backend).get_on_call())
    rows = oncall.roster(SEED)
    on, bad = expected_on_shift(rows, at)
    assert {e.upn for e in result.records if e.on_shift} == on and len(on) >= 2
    assert len(result.records) == len(rows) - bad and bad == 2
    assert all(isinstance(e, OnCallEntry) and e.as_of == at for e in result.records)
    for entry in result.records:
        assert entry.shift_start.tzinfo is not None and entry.shift_end > entry.shift_start
        assert entry.on_shift or entry.shift_start > at, "not on shift: the next shift is later"
        assert entry.at(at + timedelta(hours=8)).on_shift == (entry.upn in expected_on_shift(
            rows, at + timedelta(hours=8))[0])


async def test_dated_shifts_and_all_rows_bad_are_not_errors(demo_backend: DemoBackend) -> None:
    client = SentinelClient(demo_backend)
    base = {"SearchKey": "x@contoso.com", "Name": "X", "UPN": "x@contoso.com", "Email": "", "Phone": "",
            "Location": "", "Team": "IR"}
    demo_backend.roster = [base | {"ShiftStart": "2026-11-20T12:00:00Z", "ShiftEnd": "2026-11-21T12:00:00Z"},
                           base | {"Name": "Y", "ShiftStart": "2026-11-19T12:00:00Z",
                                   "ShiftEnd": "2026-11-20T12:00:00Z"}]
    dated = ok(await client.get_on_call())
    assert [(e.name, e.on_shift, e.ended, e.daily) for e in dated.records] == [("X", True, False, False),
                                                                                ("Y", False, True, False)]
    demo_backend.roster = [base | {"UPN": "", "SearchKey": "", "ShiftStart": "08:00", "ShiftEnd": "16:00"},
                           base | {"ShiftStart": "8am", "ShiftEnd": "16:00"}]
    bad = ok(await client.get_on_call())
    assert bad.records == () and bad.metadata.warnings[0].startswith("2 on-call row(s)")
    assert_valid(result_card(bad, TOOLS.get("get_on_call").card, lambda kind, key: None, NOW))  # type: ignore[union-attr]


# --- the tools and the command -------------------------------------------------------------------------------------

async def test_get_on_call_is_offered_and_incident_changes_is_not(demo_client: SentinelClient) -> None:
    offered = {t.name for t in TOOLS.offered(writes=True)}
    assert "get_on_call" in offered and "incident_changes" not in offered
    box = ToolBox(demo_client)
    refused = await box.run("incident_changes", json.dumps({"since": "2026-11-20T00:00Z"}))
    assert not refused.ok and refused.artifact.code == "unknown_tool"
    run = await box.run("get_on_call", "{}")
    assert run.ok and TOOLS.status_text("get_on_call") == "Checking who is on call..."
    text = TOOLS.text(run.artifact, lambda kind, key: None, {})
    lines = text.splitlines()
    assert lines[0].startswith("get_on_call() -> 7 on the roster [DEMO DATA; warning: 2 on-call row(s)")
    assert lines[2].startswith("now|") and lines[-1] == "as_of_utc 2026-11-20 15:30"
    card = TOOLS.card(run.artifact, lambda kind, key: None, NOW)
    assert_valid(card)
    shown = json.dumps(card)
    assert "On shift now" in shown and "Grace Okonkwo" in shown and "Hugo Lambert" not in shown


async def test_a_round_the_clock_shift_says_so(demo_client: SentinelClient) -> None:
    """The demo's incident-response lead is on call all day (ShiftStart equals ShiftEnd): every rendering says
    "round the clock", none "00:00-00:00" or "until 00:00"."""
    result = ok(await demo_client.get_on_call())
    grace = next(e for e in result.records if e.name == "Grace Okonkwo")
    night = next(e for e in result.records if e.name == "Chen Wei")
    assert grace.round_the_clock and grace.hours == "round the clock"
    assert not night.round_the_clock and night.hours == "16:00-00:00 UTC"
    tool = TOOLS.get("get_on_call")
    assert tool is not None and tool.terminal is not None
    for shown in (TOOLS.text(result, lambda kind, key: None, {}), tool.terminal(result, lambda kind, key: None),
                  json.dumps(TOOLS.card(result, lambda kind, key: None, NOW))):
        line = shown.split("Grace Okonkwo")[1][:700]  # her row (the card: its JSON)
        assert "round the clock" in line.lower() and "00:00-00:00" not in shown, shown
    card = json.dumps(TOOLS.card(result, lambda kind, key: None, NOW))
    assert "Round the clock" in card and "every day" in card


@pytest.mark.parametrize("text", ["who is on call", "Who is on call?", "oncall", "/oncall", "on-call", "who's on call"])
def test_the_on_call_command(text: str) -> None:
    command = parse(text)
    assert command == Command("oncall", "get_on_call")
    assert with_preferences(command, {"time_window": "last_7d", "min_severity": "High"}) == {}


# --- injected incidents ---------------------------------------------------------------------------------------------

async def test_an_injected_incident_is_seen_by_every_query(demo_backend: DemoBackend) -> None:
    client = SentinelClient(demo_backend)
    number = await asyncio.to_thread(demo_backend.inject_incident, "Ransom note on WS-FIN-042", "High",
                                     "alice.ng@contoso.com")
    assert number == FIRST_NUMBER
    changes = ok(await client.incident_changes(NOW - timedelta(seconds=1)))
    assert [(c.incident.number, c.time_generated, c.incident.owner, c.owner_upn) for c in changes.records] == [
        (number, NOW, "Alice Ng", "alice.ng@contoso.com")]
    listed = ok(await client.run("query_incidents", time_window="last_1h", min_severity="High"))
    assert number in {i.number for i in listed.records}
    detail = ok(await client.get_incident_detail(number)).records[0]
    assert detail.incident.status == "New" and len(detail.alerts) == 1
    assert {(e.type, e.value) for e in detail.entities} == {
        ("host", "WS-FIN-042"), ("account", "lena.fischer@contoso.com"), ("ip", "203.0.113.77")}
    host = ok(await client.run("get_top_entities", time_window="last_1h", entity="ws-fin-042"))
    assert [(e.value, e.alert_count, e.high_severity_count) for e in host.records] == [("WS-FIN-042", 1, 1)]
    second = await asyncio.to_thread(demo_backend.inject_incident, "Second", "Low")
    assert second == number + 1
    with pytest.raises(InvalidParameter, match="severity"):
        demo_backend.inject_incident("Third", "Critical")


async def test_a_change_moves_the_rows_time_and_injected_incidents_survive_regeneration() -> None:
    clock = [NOW]
    backend = copied_demo(SEED, lambda: clock[0])
    client = SentinelClient(backend)
    number = await asyncio.to_thread(backend.inject_incident, "Suspicious sign-in burst", "Medium")
    writer = DemoIncidentWriter(backend)
    clock[0] = NOW + timedelta(minutes=5)
    name = ok(await client.get_incident_detail(number)).records[0].incident_id
    await writer.update(await writer.read(name), make_change(ChangeKind.STATUS, number, status=IncidentStatus.ACTIVE))
    await writer.update(await writer.read(name), make_change(
        ChangeKind.ASSIGN, number, owner=Owner(user_principal_name="emeka.obi@contoso.com")))
    moved = ok(await client.incident_changes(NOW + timedelta(minutes=1)))
    assert [(c.incident.number, c.time_generated, c.incident.status, c.incident.owner) for c in moved.records
            if c.incident.number == number] == [(number, NOW + timedelta(minutes=5), "Active", "Emeka Obi")]
    clock[0] = NOW + timedelta(days=1)  # the next day: the workspace is generated again
    after = ok(await client.get_incident_detail(number)).records[0]
    assert (after.incident.status, after.incident.owner, len(after.alerts)) == ("Active", "Emeka Obi", 1)
    await client.close()


@pytest.mark.slow
def test_the_cli_adds_incidents_a_running_bot_picks_up(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.jsonl"
    backend = copied_demo(SEED, lambda: NOW, inbox=inbox)
    client = SentinelClient(backend)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bot", "demo", "new-incident", *args, "--inbox", str(inbox)],
                              capture_output=True, text=True, timeout=60)

    added = cli("--severity", "High", "--title", 'Mimikatz on SRV-DC-01 "quoted" | take 1', "--owner", "Chen Wei")
    assert added.returncode == 0 and added.stdout.strip() == str(FIRST_NUMBER), added.stderr
    refused = cli("--severity", "Critical", "--title", "x")
    assert refused.returncode == 2 and "severity" in refused.stderr and "Traceback" not in refused.stderr
    changes = ok(asyncio.run(client.incident_changes(NOW - timedelta(seconds=1))))
    assert [(c.incident.number, c.incident.title, c.incident.owner) for c in changes.records] == [
        (FIRST_NUMBER, 'Mimikatz on SRV-DC-01 "quoted" | take 1', "Chen Wei")]
    assert backend.inject_incident("In process, through the inbox", "Low") == FIRST_NUMBER + 1
    assert cli("--title", "Third").stdout.strip() == str(FIRST_NUMBER + 2)
    numbers = [c.incident.number for c in ok(asyncio.run(client.incident_changes(NOW - timedelta(seconds=1)))).records]
    assert numbers == [FIRST_NUMBER, FIRST_NUMBER + 1, FIRST_NUMBER + 2]
    restarted = SentinelClient(copied_demo(SEED, lambda: NOW, inbox=inbox))  # a new bot reads the whole inbox
    again = ok(asyncio.run(restarted.incident_changes(NOW - timedelta(seconds=1))))
    assert [c.incident.number for c in again.records] == numbers


@pytest.mark.parametrize("wrong", ["inbx.jsonl", "no-such-folder/inbox.jsonl"])
def test_new_incident_refuses_an_inbox_no_bot_reads_and_says_where_it_wrote(
        tmp_path: Path, wrong: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped DEMO_INBOX (a file or a folder no bot created) is refused, naming the path and what to do, and
    nothing is created; the inbox a running bot reads (it creates it when it starts) takes the incident, and the
    command says where it wrote."""
    from bot.__main__ import main

    inbox = tmp_path / ".data" / "demo-inbox.jsonl"
    copied_demo(SEED, lambda: NOW, inbox=inbox)  # a bot on the demo workspace, reading this inbox
    assert inbox.is_file() and inbox.read_text(encoding="utf-8") == ""
    missing = tmp_path / ".data" / wrong
    assert main(["demo", "new-incident", "--title", "Ransomware on FIN-DB-01", "--inbox", str(missing)]) == 1
    said = capsys.readouterr()
    assert f"No demo inbox at {missing}: no bot reads it" in said.err and "start ./run" in said.err
    assert said.out == "" and not missing.exists() and not missing.parent.joinpath("inbx.jsonl").exists()
    assert main(["demo", "new-incident", "--title", "Ransomware on FIN-DB-01", "--inbox", str(inbox)]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == str(FIRST_NUMBER)
    assert f"Incident {FIRST_NUMBER} written to the demo inbox {inbox}" in said.err


def test_an_injected_incident_keeps_its_created_time_across_restarts(tmp_path: Path) -> None:
    """The inbox line says when the incident was added; each restarted bot shows that time, not its own start."""
    from bot.demo import inject

    inbox = tmp_path / "inbox.jsonl"
    added = NOW - timedelta(hours=2)
    line = inject.Injection.checked(FIRST_NUMBER, "Ransomware on FIN-DB-01", "High", None, added.isoformat())
    inbox.write_text(line.to_json() + "\n", encoding="utf-8")
    for started in (NOW, NOW + timedelta(hours=3)):
        client = SentinelClient(copied_demo(SEED, lambda started=started: started, inbox=inbox))
        detail = ok(asyncio.run(client.get_incident_detail(FIRST_NUMBER)))
        assert detail.records[0].incident.created == added, started
    # An old inbox line without a time (or a time after the bot's now) is created when the bot reads it.
    inbox.write_text('{"number": 900001, "title": "Old line", "severity": "Low", "owner": null}\n', encoding="utf-8")
    client = SentinelClient(copied_demo(SEED, lambda: NOW, inbox=inbox))
    assert ok(asyncio.run(client.get_incident_detail(FIRST_NUMBER))).records[0].incident.created == NOW


async def test_an_answer_may_cite_the_on_call_analysts_and_nobody_else(demo_client: SentinelClient) -> None:
    """The roster's records name their UPNs and emails (``NamesEntities``), so the fact check knows them."""
    from bot.orchestrator.factcheck import grounding
    from bot.orchestrator.factcheck.facts import Facts
    from bot.orchestrator.references import References

    facts = Facts()
    facts.observe(ok(await demo_client.get_on_call()), NOW)
    cited = "Adele Vance (adelev@example.com) is on call until 16:00 UTC; Isaiah Langer (isaiahl@example.com) is next."
    assert grounding.check(cited, facts, References(), NOW) == []
    [made_up] = grounding.check("Call mallory@evil.example now.", facts, References(), NOW)
    assert made_up.claimed == "mallory@evil.example"
