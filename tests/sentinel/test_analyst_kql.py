"""The analyst's own KQL (``kql [window] QUERY``): refused unless the access policy lets them hunt, refused on the demo
and for management commands, request options and anything reaching past the workspace; otherwise run as written with
the service's limits (timespan, server timeout, a row cap that says when it cut), audited with its full text, and a
syntax error shown with the position the service gives. The model can never run it.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest

from bot.audit import AuditedSentinelClient
from bot.commands.parser import CommandError, parse
from bot.commands.router import CommandRouter, Route
from bot.orchestrator.conversation import Conversation
from bot.sentinel.models import HuntRow, QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import kql_of, make_query
from bot.sentinel.queries.analyst_kql import DEMO_REFUSAL, ROW_CAP, code_only, refusal
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid
from tests.conftest import NOW
from tests.support import kusto
from tests.support.loganalytics_fake import FakeLogAnalytics, table_body
from tests.support.workspaces import make_la_client

ME = "6f0c7a34-1111-4b5e-9c3d-000000000001"
SOMEONE_ELSE = "6f0c7a34-1111-4b5e-9c3d-000000000002"

REFUSED = [
    (".drop table SigninLogs", "management commands"),
    ("  .show tables", "management commands"),
    ("// a comment first\n.set-or-append T <| print 1", "management commands"),
    ("SigninLogs | take 1; .drop table AuditLogs", "management commands"),
    ("set notruncation; SigninLogs", "request options"),
    ("SET query_take_max_records=10;SigninLogs", "request options"),
    ("SigninLogs | take 100000; AuditLogs | take 1", "one query at a time"),
    ("let x = 1; SigninLogs | take 5; print x", "one query at a time"),
    ('workspace("other-workspace").SigninLogs | take 5', "workspace() reaches"),
    ('union SigninLogs, Workspace ( "x" ).SigninLogs', "workspace() reaches"),
    ('app("my-app").requests', "app() reaches"),
    ('cluster("help").database("Samples").StormEvents', "cluster() reaches"),
    ('database("other").T', "database() reaches"),
    ('external_table("x")', "external_table() reaches"),
    ("externaldata (x:string) [@\"https://example.org/x.csv\"]", "externaldata reads"),
    ('print 1 | evaluate http_request("https://example.org")', "evaluate http_request"),
    ('print 1 | evaluate sql_request("Server=x", "select 1")', "evaluate sql_request"),
    ("range x from 1 to 3 step 1 | evaluate python(typeof(*), 'result = df')", "evaluate python"),
    ("SigninLogs | render timechart | take 5", "render draws"),
    ("let chart = SigninLogs | render piechart;\nchart", "render draws"),
    # Issue 34's attack texts: a format character before a command, quoted names, resource().
    ("\u200b.show tables", "management commands"),
    ("\ufeff.show database schema", "management commands"),
    ("SigninLogs | take 1;\u2060 .drop table AuditLogs", "management commands"),
    ('resource("/subscriptions/x/resourceGroups/rg").SigninLogs | take 5', "resource() reaches"),
    ("['workspace'](\"other\").SigninLogs | take 5", "workspace() reaches"),
    ('["app"]("x").requests', "app() reaches"),
    ("SigninLogs | evaluate hint.distribution = per_node http_request('https://example.org')", "evaluate http_request"),
    ("SigninLogs | where TimeGenerated >= datetime({{StartTimeISO}})", "{{StartTimeISO}} is a placeholder"),
    ('SigninLogs | where TimeGenerated between (datetime("{{StartTime}}") .. now())', "{{StartTime}} is a placeholder"),
    ("SigninLogs | where TimeGenerated > {start}", "{start} is a placeholder"),
    ('SigninLogs | where UserPrincipalName == "alice', "does not end"),
    ("SigninLogs | where x == ```never closed", "does not end"),
]
ALLOWED = [
    'SigninLogs | where UserPrincipalName has "workspace(\\"x\\")" | take 5',
    "// .drop table x in a comment\nSigninLogs | take 1",
    "SigninLogs | where AppDisplayName == '.drop table x; set y'",
    'SigninLogs | where ResultDescription contains @"c:\\temp\\""quoted""" | take 1',
    "SigninLogs | where ResultDescription == ```multi\nline .drop``` | take 1",
    "let apps = SigninLogs | distinct AppId; SigninLogs | where AppId in (apps) | take 1;",
    "union * | where TimeGenerated > ago(1h) | summarize count() by Type",
    "SigninLogs | extend d = parse_json(tostring(DeviceDetail))[0] | take 3",
    "SigninLogs | evaluate bag_unpack(LocationDetails) | take 3",
    # A let function whose body holds a ";", and quoted names of the workspace's own tables.
    "let recent = (n:int) { let since = ago(1d); SigninLogs | where TimeGenerated > since | take n };\nrecent(5)",
    "['SigninLogs'] | where ['UserPrincipalName'] has 'workspace' | take 1",
    "SigninLogs | summarize by bin(TimeGenerated, 1h), ['resource'] = AppDisplayName | take 5",
]


@pytest.mark.parametrize(("text", "says"), REFUSED)
def test_what_the_bot_will_not_send_is_refused_with_why(text: str, says: str) -> None:
    assert says in (refusal(text) or ""), text
    with pytest.raises(InvalidParameter) as refused:
        make_query("analyst_kql", {"query": text})
    assert says in str(refused.value)


@pytest.mark.parametrize("text", ALLOWED)
def test_the_same_words_inside_strings_and_comments_are_the_analysts_business(text: str) -> None:
    assert refusal(text) is None, refusal(text)
    assert len(code_only(text) or "") == len(text)


def test_queries_longer_than_the_cap_and_empty_ones_are_refused() -> None:
    with pytest.raises(InvalidParameter, match="at most 28000"):
        make_query("analyst_kql", {"query": "SigninLogs | where x == \"" + "a" * 28_000 + "\""})
    with pytest.raises(InvalidParameter, match="is required"):
        make_query("analyst_kql", {"query": "   "})
    with pytest.raises(InvalidParameter, match="at most 30d"):
        make_query("analyst_kql", {"query": "SigninLogs", "time_window": "90d"})


def test_the_command_keeps_the_text_as_typed() -> None:
    command = parse('kql 7d SigninLogs | where UserPrincipalName == "Alice@Contoso.com"\n| take 5')
    assert command is not None and command.name == "kql" and command.tool == "analyst_kql"
    assert command.arguments == {"query": 'SigninLogs | where UserPrincipalName == "Alice@Contoso.com"\n| take 5',
                                 "time_window": "7d"}
    assert parse("KQL SigninLogs | take 1").arguments == {"query": "SigninLogs | take 1"}  # type: ignore[union-attr]
    with pytest.raises(CommandError, match="Usage: kql"):
        parse("kql")
    assert parse("kqlx is not a command") is None


@pytest.mark.slow
def test_what_runs_is_the_text_then_the_cap_and_positions_stay_the_analysts() -> None:
    """The wrapped text parses with Microsoft's parser for every allowed query (strings and comments too); a syntax
    error in the analyst's text is at the same line and column with and without the bot's lines."""
    texts = [kql_of(make_query("analyst_kql", {"query": q})) for q in ALLOWED]
    assert all(t.endswith(f"| take {ROW_CAP + 1}\n| project Row = pack_all(), TotalMatched = long(-1)") for t in texts)
    results = kusto.check(texts)
    for query, result in zip(ALLOWED, results, strict=True):
        assert result["ok"], (query, result["errors"])
        assert [(c["name"], c["type"]) for c in result["result_columns"]] == [("Row", "dynamic"),
                                                                             ("TotalMatched", "long")]
    broken = "SigninLogs\n| where UserPrincipalName = = 'x'\n| take 5"
    alone, wrapped = kusto.check([broken, kql_of(make_query("analyst_kql", {"query": broken}))])
    assert not alone["ok"] and not wrapped["ok"]
    first = (alone["errors"][0]["line"], alone["errors"][0]["column"])
    assert first == (wrapped["errors"][0]["line"], wrapped["errors"][0]["column"]) and first[0] == 2


# --- through the router, against the fake service -------------------------------------------------------------

async def _status(_: str) -> None:
    return None


def _rows(count: int) -> list[dict[str, Any]]:
    return [{"Row": {"UserPrincipalName": f"user{i}@contoso.com", "IPAddress": "203.0.113.7", "N": i},
             "TotalMatched": -1} for i in range(count)]


def _audit(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.audit for r in caplog.records if hasattr(r, "audit")]


async def test_only_analysts_the_policy_lets_hunt_run_their_own_kql(fake_logs: FakeLogAnalytics,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    client = make_la_client(fake_logs)
    try:
        for router, me in ((CommandRouter(client, None), ME), (CommandRouter(client, None, frozenset({ME})), None),
                           (CommandRouter(client, None, frozenset({ME})), SOMEONE_ELSE)):
            routed = await router.route("kql SigninLogs | take 1", Conversation(), _status, me=me)
            assert routed.route is Route.INVALID and "ALLOWED_KQL_ANALYSTS" in routed.text
    finally:
        await client.close()
    assert fake_logs.requests == []
    assert [(a["event"], a["reason"], a["query_text"]) for a in _audit(caplog)] == [
        ("kql.refused", "not_allowed", "SigninLogs | take 1")] * 3


async def test_the_demo_says_plainly_it_cannot_run_free_kql(demo_client) -> None:
    routed = await CommandRouter(demo_client, None, frozenset({ME})).route("kql SigninLogs | take 1", Conversation(),
                                                                           _status, me=ME)
    assert routed.route is Route.INVALID and routed.text == DEMO_REFUSAL and "cannot run free KQL" in routed.text


async def test_refused_text_never_reaches_the_service_and_is_audited(fake_logs: FakeLogAnalytics,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    client = make_la_client(fake_logs)
    router = CommandRouter(client, None, frozenset({ME.upper()}))  # object ids match in any letter case
    try:
        for text, says in REFUSED:
            routed = await router.route(f"kql {text}", Conversation(), _status, me=ME)
            assert routed.route is Route.INVALID and routed.text.startswith("Not run: ") and says in routed.text
    finally:
        await client.close()
    assert fake_logs.requests == []
    assert [(a["event"], a["reason"], a["query_text"]) for a in _audit(caplog)] == [
        ("kql.refused", "refused_text", text.strip()) for text, _ in REFUSED]


async def test_an_allowed_query_runs_with_the_limits_and_is_audited_in_full(fake_logs: FakeLogAnalytics,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    text = "SigninLogs | where ResultType == \"500121\" | project UserPrincipalName, IPAddress, N = 1"
    query = make_query("analyst_kql", {"query": text, "time_window": "7d"})
    fake_logs.known[kql_of(query)] = table_body("analyst_kql", _rows(ROW_CAP + 1))
    client = AuditedSentinelClient(make_la_client(fake_logs)._backend)
    try:
        routed = await CommandRouter(client, None, frozenset({ME})).route(f"kql 7d {text}", Conversation(), _status,
                                                                          me=ME)
    finally:
        await client.close()
    assert routed.route is Route.QUERY and routed.run is not None
    result = routed.run.artifact
    assert isinstance(result, QueryResult) and len(result.records) == ROW_CAP
    assert isinstance(result.records[0], HuntRow) and result.records[0].value("IPAddress") == "203.0.113.7"
    assert result.metadata.truncated and any(f"Cut at {ROW_CAP} rows" in w for w in result.metadata.warnings)
    [request] = fake_logs.requests
    assert request.body["query"].startswith(text + "\n| take 101")
    assert request.body["timespan"].startswith("PT604800")  # the window goes as the API's timespan
    assert "wait=60" in request.headers["Prefer"]  # the server timeout: a week's window gets the whole ceiling
    [read] = [a for a in _audit(caplog) if a["event"] == "read"]
    assert read["tool"] == "analyst_kql" and read["arguments"]["query"] == text and read["rows"] == ROW_CAP
    card = TOOLS.card(result, lambda kind, key: None, NOW)
    assert_valid(card)
    assert "Cut at 100 rows" in json.dumps(card) and "user0@contoso.com" in json.dumps(card)
    assert "UserPrincipalName|IPAddress|N" in TOOLS.text(result, lambda kind, key: None, {}).splitlines()[1]


async def test_a_syntax_error_is_shown_with_the_services_position(fake_logs: FakeLogAnalytics,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    body = {"error": {"code": "BadArgumentError", "message": "The request had some invalid properties",
                      "innererror": {"code": "SyntaxError", "message": "A recognition error occurred in the query.",
                                     "innererror": {"code": "SYN0002", "line": 2, "pos": 28, "token": "=",
                                                    "message": "Query could not be parsed at '=' on line [2,28]"}}}}
    fake_logs.respond(400, body)
    client = AuditedSentinelClient(make_la_client(fake_logs)._backend)
    text = "SigninLogs\n| where UserPrincipalName = = 'x'"
    try:
        routed = await CommandRouter(client, None, frozenset({ME})).route(f"kql {text}", Conversation(), _status,
                                                                          me=ME)
    finally:
        await client.close()
    assert routed.run is not None and isinstance(routed.run.artifact, QueryError)
    message = routed.run.artifact.message
    assert message.startswith("Log Analytics could not run your query: Query could not be parsed at '=' on line "
                              "[2,28] (line 2, pos 28)"), message
    [read] = [a for a in _audit(caplog) if a["event"] == "read"]
    assert read["result"] == "bad_query" and read["query_text"] == text


async def test_the_model_can_never_run_an_analysts_query(demo_client) -> None:
    assert "analyst_kql" not in {t.name for t in TOOLS.offered(writes=True)}
    run = await ToolBox(demo_client).run("analyst_kql", json.dumps({"query": "SigninLogs | take 1"}))
    assert isinstance(run.artifact, QueryError) and run.artifact.code == "unknown_tool"


def test_python_m_bot_kql_prints_every_query_a_tool_would_run(capsys: pytest.CaptureFixture[str]) -> None:
    """A tool that runs several queries itself (as investigate_entity does) prints them all, numbered; the hunt
    prints its one query; bad arguments are a message, not a traceback."""
    from dataclasses import dataclass

    from bot.__main__ import main
    from bot.sentinel.client import SentinelClient
    from bot.tools.queries.hunt import TOOL as HUNT

    @dataclass(frozen=True)
    class TwoQueries(type(HUNT)):  # type: ignore[misc]
        async def read(self, sentinel: SentinelClient, arguments: dict[str, Any]) -> Any:
            await sentinel.run("hunt", {"table": "SigninLogs", "time_window": "1d",
                                        "where": [["UserPrincipalName", "==", arguments["entity"]]]})
            return await sentinel.run("query_alerts", {"entity": arguments["entity"]})

    tool = TwoQueries("two_queries", "", (), "", "{}", text=HUNT.text, card=HUNT.card)
    TOOLS.add(tool)
    try:
        assert main(["kql", "two_queries", "--args", json.dumps({"entity": 'alice"@contoso.com'})]) == 0
    finally:
        TOOLS.remove(tool.name)
    out, err = capsys.readouterr()
    assert out.startswith("// query 1 of 2: hunt\n// hunt: SigninLogs, the last 1d")
    assert "\n\n// query 2 of 2: query_alerts\n" in out and 'UserPrincipalName =~ "alice\\"@contoso.com"' in out
    assert "timespan sent with the query 1: PT86400S" in err and "query 2: PT86400S" in err

    assert main(["kql", "hunt", "--args", json.dumps({"table": "SigninLogs", "time_window": "2d"})]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("// hunt: SigninLogs, the last 2d\nlet hunt = SigninLogs") and "query 1 of" not in out
    assert err.strip() == "// timespan sent with the query: PT172800S"
    assert main(["kql", "hunt", "--args", json.dumps({"table": "Nope", "time_window": "2d"})]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "not a table a hunt can read" in err and "Traceback" not in err


def test_the_setting_reaches_the_router_through_the_access_policy() -> None:
    from bot.config import ConfigError, Settings
    from bot.teams.access import access_policy

    off = Settings.from_env({}, dotenv_path=None)
    assert off.access.kql_analysts == frozenset() and access_policy(off).hunters == frozenset()
    on = Settings.from_env({"ALLOWED_KQL_ANALYSTS": f"{ME}, {SOMEONE_ELSE.upper()}"}, dotenv_path=None)
    assert access_policy(on).hunters == {ME, SOMEONE_ELSE}
    with pytest.raises(ConfigError, match="ALLOWED_KQL_ANALYSTS"):
        Settings.from_env({"ALLOWED_KQL_ANALYSTS": "alice@contoso.com"}, dotenv_path=None)


@pytest.mark.slow
async def test_in_teams_the_policy_knows_the_analyst_by_their_object_id(demo_client) -> None:
    """Through the real app (the demo workspace): the hunters come from the settings through the access policy, the
    analyst's object id from Teams; an allowed analyst is told the demo cannot run free KQL, another that the policy
    does not let them."""
    from dataclasses import replace

    from botbuilder.core import MemoryStorage

    from bot.config import Settings
    from tests.support import connector_fake as teams
    from tests.support.connector_fake import FakeConnector
    from tests.teams.test_teams_bot import final_messages, next_id, start_bot

    settings = Settings.from_env({}, dotenv_path=None)
    settings = replace(settings, access=replace(settings.access, kql_analysts=frozenset({"aad-alice"})))
    connector = await FakeConnector().start()
    bot, server = await start_bot(connector, demo_client, None, MemoryStorage(), settings)
    replies = {}
    try:
        for user in ("alice", "bob"):
            activity = teams.personal("kql SigninLogs | take 1", activity_id=next_id(), service_url=connector.url,
                                      user=user, conversation_id=f"a:1personal-chat-{user}")
            await bot.post(activity)
            sent = await connector.wait_for(lambda s, a=activity: any(x.body.get("replyToId") == a["id"]
                                                                       for x in final_messages(s)))
            replies[user] = next(x for x in final_messages(sent) if x.body.get("replyToId") == activity["id"])
    finally:
        await server.close()
        await connector.stop()
    shown = {user: reply.text + json.dumps(reply.cards) for user, reply in replies.items()}
    assert "cannot run free KQL" in shown["alice"] and "ALLOWED_KQL_ANALYSTS" not in shown["alice"]
    assert "ALLOWED_KQL_ANALYSTS" in shown["bob"]


# --- issue 34: a trailing render, the query's own lookbacks, the whole message, the lexer against Kusto's ---

def test_a_trailing_render_is_dropped_and_the_analyst_told() -> None:
    text = "SigninLogs | summarize count() by bin(TimeGenerated, 1h)\n| render timechart with (title='x|y')"
    query = make_query("analyst_kql", {"query": text})
    assert query.text == "SigninLogs | summarize count() by bin(TimeGenerated, 1h)"
    assert query.notes == ("The chart (render timechart with (title='x|y')) was left out: the bot shows the rows.",)
    assert kql_of(query).startswith(query.text + "\n| take 101")


@pytest.mark.parametrize(("text", "days"), [
    ("SigninLogs | where TimeGenerated > ago(14d) | summarize by UserPrincipalName", 14),
    ("let lookback = 14d;\nSigninLogs | where TimeGenerated between (ago(lookback) .. now()) | take 5", 14),
    ("let starttime = 7d; let endtime = 1d;\nSigninLogs | where TimeGenerated between (ago(starttime) .. ago(endtime))",
     7),
    ("SigninLogs | where TimeGenerated >= now(-30d) | take 5", 30),
    ("SigninLogs | where TimeGenerated > ago(1.5d) | take 5", 1.5),
])
def test_the_time_range_covers_the_querys_own_lookback(text: str, days: float) -> None:
    query = make_query("analyst_kql", {"query": text})
    assert query.timespan == timedelta(days=days) + timedelta(hours=1), text
    assert len(query.notes) == 1 and "was widened from 1 day to" in query.notes[0]


def test_a_lookback_past_the_maximum_is_capped_and_said() -> None:
    query = make_query("analyst_kql", {"query": "SigninLogs | where TimeGenerated > ago(400d) | take 1"})
    assert query.timespan == timedelta(days=90)
    assert "rows older than that are not read" in query.notes[0]
    shorter = make_query("analyst_kql", {"query": "SigninLogs | where TimeGenerated > ago(2h)", "time_window": "7d"})
    assert shorter.timespan == timedelta(days=7) and shorter.notes == ()  # the window asked for already covers it
    in_a_string = make_query("analyst_kql", {"query": "SigninLogs | where AppDisplayName == 'ago(60d)' | take 1"})
    assert in_a_string.timespan == timedelta(hours=24)


async def test_the_notes_reach_the_result(fake_logs: FakeLogAnalytics) -> None:
    text = ("SigninLogs | where TimeGenerated > ago(14d) | summarize N = count() by bin(TimeGenerated, 1d)"
            " | render columnchart")
    query = make_query("analyst_kql", {"query": text})
    fake_logs.known[kql_of(query)] = table_body("analyst_kql", _rows(2))
    client = make_la_client(fake_logs)
    try:
        routed = await CommandRouter(client, None, frozenset({ME})).route(f"kql {text}", Conversation(), _status, me=ME)
    finally:
        await client.close()
    result = routed.run.artifact if routed.run else None
    assert isinstance(result, QueryResult), routed
    warnings = result.metadata.warnings
    assert any("left out" in w for w in warnings) and any("widened" in w for w in warnings)
    [request] = fake_logs.requests
    assert request.body["timespan"] == "PT1213200.0S" and "render" not in request.body["query"]


def test_a_long_kql_message_is_read_whole_never_cut() -> None:
    from bot.teams.routes import MAX_TEXT_CHARS, bounded

    filters = "".join(f"\n| where UserPrincipalName != 'user{i}@contoso.com'" for i in range(200))
    text = "kql SigninLogs" + filters + "\n| where ResultType == '50126'"
    assert len(text) > MAX_TEXT_CHARS and bounded(text) == text
    assert bounded("x" * 10_000) == "x" * MAX_TEXT_CHARS  # a question is still cut
    command = parse(bounded(text))
    assert command is not None and command.arguments["query"].endswith("ResultType == '50126'")
    too_long = "kql SigninLogs | where x == '" + "a" * 40_000 + "'"
    with pytest.raises(InvalidParameter, match="at most 28000"):  # refused whole, never run without its end
        make_query("analyst_kql", parse(bounded(too_long)).arguments)  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_lexer_finds_the_strings_kustos_parser_finds() -> None:
    """Where strings begin and end is what hides a command or a function name: the guard's lexer must agree with
    Microsoft's parser on every literal (bracket-quoted names included) of the queries it reads."""
    from bot.sentinel import kql_text

    texts = ALLOWED + [t for t, _ in REFUSED if kql_text_ok(t)]
    for text, result in zip(texts, kusto.check(texts), strict=True):
        ours = []
        for token in kql_text.tokens(text):
            if token.kind == kql_text.STRING:
                ours.append(token.text)
            elif token.kind == kql_text.NAME and token.text.startswith("["):
                ours.append(token.text[1:-1])
        assert ours == [lit["text"] for lit in result["string_literals"]], text


def kql_text_ok(text: str) -> bool:
    from bot.sentinel import kql_text

    try:
        kql_text.tokens(text)
    except kql_text.Unterminated:
        return False
    return True


@pytest.mark.parametrize(("text", "back"), [
    # Forms published hunting queries write (measured on 48 of Microsoft's): arithmetic, typed literals,
    # conversions, points built from points, startofday, let-bound values inside a function body.
    ("let timeframe = 1d; let lookback = 90d;\nAuditLogs | where TimeGenerated > ago(timeframe + lookback)", 91),
    ("let starttime = 14d;\nSigninLogs | where TimeGenerated > startofday(ago(starttime))", 15),
    ("SigninLogs | make-series n = count() on TimeGenerated from startofday(ago(14d)) to startofday(now()) step 1d",
     15),
    ("let timeframe = 7d;\nSigninLogs | where TimeGenerated > ago(timeframe*2)", 14),
    ("SigninLogs | where TimeGenerated > ago(2 * 3d)", 6),
    ("SigninLogs | where TimeGenerated > ago(timespan(14d))", 14),
    ("SigninLogs | where TimeGenerated > ago(totimespan('14.00:00:00'))", 14),
    ("let lookback = totimespan('10d');\nSigninLogs | where TimeGenerated > ago(lookback)", 10),
    ("let starttime = ago(1d); let lookback = starttime - 14d;\n"
     "SigninLogs | where TimeGenerated between (lookback .. starttime)", 15),
    ("SigninLogs | where TimeGenerated > now() - 20d", 20),
    ("let f = () { let lb = 12d; SigninLogs | where TimeGenerated > ago(lb) };\nf()", 12),
])
def test_the_lookback_reader_reads_the_forms_hunts_write(text: str, back: float) -> None:
    from bot.sentinel import kql_lookback, kql_text

    assert kql_lookback.lookback(kql_text.statements(kql_text.tokens(text))) == timedelta(days=back), text


@pytest.mark.parametrize("text", [
    "SigninLogs | where TimeGenerated > ago(" * 60 + "1d" + ")" * 60,  # deep nesting is bounded
    "let a = b; let b = a;\nSigninLogs | where TimeGenerated > ago(a)",  # names that refer to each other
    "SigninLogs | where TimeGenerated > ago(1d / 0)",
    "SigninLogs | where TimeGenerated > ago(99999999999999d)",
    "SigninLogs | where TimeGenerated > ago(UnknownColumn) and TimeGenerated > datetime(2026-01-01)",
])
def test_the_lookback_reader_never_fails_on_what_it_cannot_read(text: str) -> None:
    from bot.sentinel import kql_lookback, kql_text

    found = kql_lookback.lookback(kql_text.statements(kql_text.tokens(text)))
    assert found is None or found >= timedelta()
    make_query("analyst_kql", {"query": text})  # never a crash: at worst the window alone


def test_a_placeholder_in_a_comment_is_the_analysts_business() -> None:
    assert refusal("// was {{StartTimeISO}}\nSigninLogs | take 1") is None
    assert "placeholder" in (refusal("SigninLogs | where AppDisplayName has '{{x}}'") or "")


def test_a_filled_placeholder_query_gets_its_baseline() -> None:
    from bot.sentinel import kql_lookback, kql_text

    text = ("let starttime = ago(1d); let endtime = now(); let lookback = totimespan((endtime - starttime) * 7);\n"
            "SigninLogs | where TimeGenerated > ago(lookback)")
    assert kql_lookback.lookback(kql_text.statements(kql_text.tokens(text))) == timedelta(days=7)
