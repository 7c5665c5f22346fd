"""The incident summary (bot/investigation/summary.py): the command and the tool on the demo workspace, its card,
the terminal's text and the comment it posts; hostile text, an incident over the bounds, an entity whose
investigation fails, and the comment through the confirmation flow."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from bot.cards.summary import summary_card, summary_comment, summary_text
from bot.commands.parser import SUMMARY, parse
from bot.commands.router import CommandRouter, Route
from bot.investigation.models import EntityFinding, IncidentSummary, Level
from bot.investigation.run import investigate
from bot.investigation.summary import (
    CONCURRENT_INVESTIGATIONS,
    MAX_INVESTIGATED,
    MAX_TIMELINE,
    build,
    main_entities,
    summarize,
)
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.references import References
from bot.sentinel.changes import MAX_COMMENT_CHARS, ChangeKind, make_change
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import (
    AlertSummary,
    EntityRef,
    Incident,
    IncidentDetail,
    QueryError,
    QueryMetadata,
    QueryResult,
    SimilarIncident,
)
from bot.tools.registry import TOOLS
from tests.cards.test_cards import assert_valid, walk
from tests.conftest import NOW

HOSTILE = "<at>Bob</at> [click](https://evil.example/x) **now** ![i](http://evil.example/p.png) @everyone"


async def _status(_: str) -> None:
    return None


async def _mfa_incident(client: SentinelClient) -> int:
    found = await client.run("query_incidents", {"time_window": "last_7d", "search": "MFA push", "sort": "newest"})
    assert isinstance(found, QueryResult) and found.records
    return found.records[0].number


async def test_the_summary_command_answers_from_the_demo_without_a_model(demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)
    router = CommandRouter(demo_client, None)
    conversation = Conversation()
    routed = await router.route(f"summary {number}", conversation, _status)
    assert routed.route is Route.QUERY and routed.run is not None
    result = routed.run.artifact
    assert isinstance(result, QueryResult) and result.metadata.tool == SUMMARY
    summary = result.records[0]
    assert isinstance(summary, IncidentSummary) and summary.number == number
    # the MFA-fatigue story: the account is high, so a true positive with its password reset and an escalation
    assert summary.suggestion.classification == "TruePositive"
    kinds = [a.kind for a in summary.actions]
    assert "reset_credentials" in kinds and "escalate" in kinds
    assert all(a.cites for a in summary.actions) and all(r.cites for r in summary.suggestion.reasons)
    assert summary.similar and all(s.incident.number != number for s in summary.similar)
    assert summary.timeline and [e.time for e in summary.timeline] == sorted(e.time for e in summary.timeline)
    # every [n] a line cites is one the conversation has
    refs = conversation.references
    for line in [*summary.actions, *summary.suggestion.reasons, *summary.timeline]:
        for cite in line.cites:
            assert refs.ref_for(cite.kind, cite.key) is not None, cite
    # "summary [n]" and "summary #N" are the same incident; bare "summary" is the one last looked at
    incident_ref = refs.ref_for("incident", str(number))
    for text in (f"summary [{incident_ref}]", f"summary #{number}", "summary", f"summary of incident {number}"):
        again = await router.route(text, conversation, _status)
        assert again.route is Route.QUERY and again.run is not None, text
        assert again.run.artifact.records[0].number == number, text  # type: ignore[union-attr]
    printed = TOOLS.terminal(result, refs.ref_for, NOW)
    assert f"Summary of incident #{number}" in printed and "Suggested classification: TruePositive" in printed
    assert "UTC" in printed


async def test_the_summary_of_nothing_says_which_and_what_to_type(demo_client: SentinelClient) -> None:
    router = CommandRouter(demo_client, None)
    bare = await router.route("summary", Conversation(), _status)
    assert bare.route is Route.NEEDS and "number" in bare.text
    missing = await router.route("summary 2147483647", Conversation(), _status)
    assert missing.route is Route.QUERY and missing.run is not None
    empty = missing.run.artifact
    assert isinstance(empty, QueryResult) and not empty.records
    assert "No incident 2147483647" in TOOLS.terminal(empty, References().ref_for, NOW)
    assert parse("summary of the week please") is None  # a question for the model, not a command
    assert parse("summarize what happened overnight") is None
    assert parse("summarise incident 42") is None, "asked in words, it is the model's (which calls the same tool)"


async def test_the_tool_reads_an_incident_as_the_model_would_call_it(demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)
    tool = TOOLS.get(SUMMARY)
    assert tool is not None and not tool.command_only and tool in TOOLS.offered(writes=False)
    result = await tool.read(demo_client, {"incident_ref": str(number)})
    assert isinstance(result, QueryResult)
    refs = References()
    refs.register(result)
    text = TOOLS.text(result, refs.ref_for, {"incident_ref": str(number)})
    assert "SUMMARY computed by the bot" in text and "## Suggested classification: TruePositive" in text
    assert "## Recommended next actions" in text
    bad = await tool.read(demo_client, {"incident_ref": "1", "limit": 3})
    assert not isinstance(bad, QueryResult) and "incident_ref" in bad.message


async def test_the_card_reads_at_phone_width_with_every_row_citing_its_rows(demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)
    result = await summarize(demo_client, {"incident_ref": number})
    assert isinstance(result, QueryResult)
    refs = References()
    refs.register(result)
    built = summary_card(result, refs.ref_for, NOW, changes=True)
    assert_valid(built)
    assert not any(e.get("type") in ("Table", "ColumnSet") for e in walk(built["body"][1:])), \
        "one wrapped line per row, no columns to squeeze at 320 px"
    rows = [e["text"] for e in walk(built["body"]) if e.get("type") == "TextBlock" and e.get("size") == "small"
            and not e.get("isSubtle") and e.get("weight") != "bolder" and not e["text"].startswith("Note:")]
    assert rows and all(r.startswith("[") for r in rows), [r for r in rows if not r.startswith("[")][:3]
    post = next(a for a in built["actions"] if a["title"] == "Post to the incident")
    assert post["data"]["tool"] == "add_incident_comment"
    assert post["data"]["arguments"]["incident_ref"] == str(number)
    without = summary_card(result, refs.ref_for, NOW, changes=False)
    assert all(a["title"] != "Post to the incident" for a in without.get("actions", []))


async def test_the_posted_comment_goes_through_the_confirmation_flow(demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)
    result = await summarize(demo_client, {"incident_ref": number})
    assert isinstance(result, QueryResult)
    built = summary_card(result, References().ref_for, NOW, changes=True)
    post = next(a for a in built["actions"] if a["title"] == "Post to the incident")
    arguments = post["data"]["arguments"]
    comment = arguments["comment"]
    assert len(comment) <= MAX_COMMENT_CHARS and "[1]" not in comment
    assert "Suggested classification: TruePositive" in comment and "UTC" in comment
    change = make_change(ChangeKind.COMMENT, int(arguments["incident_ref"]), comment=comment)
    assert change.comment == comment.strip()


def _detail(title: str = "Beacon", alerts: int = 3, entities: tuple[EntityRef, ...] = (),
            alert_count: int | None = None, name: str = "Suspicious beacon") -> IncidentDetail:
    start = NOW - timedelta(hours=3)
    listed = tuple(AlertSummary(f"a{i}", name if i % 2 else f"{name} {i % 7}", "High", "New", "MDE",
                                start + timedelta(minutes=i), ("CommandAndControl",), techniques=("T1071",))
                   for i in range(alerts))
    incident = Incident(42, title, "High", "New", None, NOW, NOW, alert_count or alerts, ("CommandAndControl",), (),
                        "", None)
    return IncidentDetail(incident, "guid", title, None, None, None, None, None, 0, (), listed, entities)


def _meta(tool: str = SUMMARY, total: int = 1) -> QueryMetadata:
    return QueryMetadata(tool, {}, total, total, False, 1.0, "", "P30D", "demo")


def _result(summary: IncidentSummary) -> QueryResult:
    return QueryResult((summary,), _meta())


def test_hostile_titles_names_and_values_stay_inert_on_the_card_the_text_and_the_comment() -> None:
    entities = (EntityRef("account", "x@contoso.com"), EntityRef("url", "https://evil.example/a?b=<at>c</at>"),
                EntityRef("host", HOSTILE))
    detail = _detail(HOSTILE, entities=entities, name=HOSTILE)
    findings = tuple(EntityFinding(k, v, c, None, HOSTILE) for k, v, c in main_entities(detail))
    similar = QueryResult((SimilarIncident(replace(detail.incident, number=7, owner=HOSTILE,
                                                   classification="TruePositive"), (HOSTILE,), (HOSTILE,)),),
                          _meta("similar_incidents"))
    summary = build(detail, findings, similar, NOW)
    result = _result(summary)
    refs = References()
    refs.register(result)
    built = summary_card(result, refs.ref_for, NOW, changes=True)
    assert_valid(built)
    comment = summary_comment(summary)
    for shown in (json.dumps(built, ensure_ascii=False), comment):
        assert "<at>" not in shown and "](" not in shown and "**now" not in shown and "![i](" not in shown
        assert "https://evil.example" not in shown and "http://evil.example" not in shown  # no live link
    assert "Bob" in comment and "evil" in comment  # shown, inert, not dropped
    assert "\x1b" not in summary_text(result, refs.ref_for, NOW)


def test_an_incident_over_the_bounds_is_summarized_and_says_what_it_left_out() -> None:
    entities = tuple(EntityRef("host", f"ws-{i:03}") for i in range(150)) + \
        tuple(EntityRef("ip", f"198.51.100.{i}") for i in range(50))
    detail = _detail(alerts=50, alert_count=500, entities=entities)
    picked = main_entities(detail)
    assert len(picked) == MAX_INVESTIGATED and {k for k, _, _ in picked} == {"host", "ip"}
    summary = build(detail, tuple(EntityFinding(k, v, c, None, "not run") for k, v, c in picked), None, NOW)
    left = " ".join(summary.left_out)
    assert "50 of its 500 alerts" in left and "450 not summarized" in left
    assert f"{MAX_INVESTIGATED} of 200 entities investigated" in left
    assert len(summary.timeline) <= MAX_TIMELINE
    built = summary_card(_result(summary), References().ref_for, NOW, changes=True)
    assert_valid(built)
    assert "500 alerts" in json.dumps(built)
    assert len(summary_comment(summary)) <= MAX_COMMENT_CHARS


async def test_an_entity_whose_investigation_fails_is_unknown_and_the_rest_stands(
        demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)
    whole = await summarize(demo_client, {"incident_ref": number})
    assert isinstance(whole, QueryResult)
    good = whole.records[0]
    failed = replace(good.entities[0], investigation=None, error="Log Analytics timed out")
    summary = build(good.detail, (failed, *good.entities[1:]), None, NOW)
    assert summary.entities[0].level is None
    line = summary_text(_result(summary), References().ref_for, NOW)
    assert "UNKNOWN: its investigation failed (Log Analytics timed out)" in line
    assert any(a.kind == "investigate" and a.cites == (failed.cite,) for a in summary.actions)
    assert summary.entities[1:] == good.entities[1:] and summary.timeline  # the rest still stands
    if any(f.level is Level.HIGH for f in summary.entities[1:]):
        assert summary.suggestion.classification == "TruePositive"
    else:
        assert summary.suggestion.classification == "Undetermined"


async def test_a_failing_workspace_leaves_every_entity_unknown_not_none(demo_client: SentinelClient) -> None:
    number = await _mfa_incident(demo_client)

    class Failing:
        """The demo workspace, but every evidence and similar-incident query fails (the detail still answers)."""

        source = "demo"

        async def execute(self, query: Any, kql_text: str) -> Any:
            if query.tool == "get_incident_detail":
                return await demo_client._backend.execute(query, kql_text)  # type: ignore[attr-defined]
            return QueryError("timeout", "The workspace did not answer in time.", retry_possible=True,
                              tool=query.tool)

        async def prepare(self) -> None:
            return None

        async def close(self) -> None:
            return None

    result = await summarize(SentinelClient(Failing()), {"incident_ref": number})  # type: ignore[arg-type]
    assert isinstance(result, QueryResult)
    summary = result.records[0]
    assert summary.entities and all(f.level is None and f.error for f in summary.entities)
    assert summary.suggestion.classification == "Undetermined" and summary.similar_error
    assert result.metadata.warnings and summary.timeline  # the alerts still make the timeline


async def test_investigations_run_at_most_two_at_a_time(demo_client: SentinelClient,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    number = await _mfa_incident(demo_client)
    running, peak = 0, 0

    async def counted(client: SentinelClient, arguments: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            return await investigate(client, arguments)
        finally:
            running -= 1

    monkeypatch.setattr("bot.investigation.summary.investigate", counted)
    result = await summarize(demo_client, {"incident_ref": number})
    assert isinstance(result, QueryResult) and len(result.records[0].entities) >= 2
    assert peak == CONCURRENT_INVESTIGATIONS


async def test_a_narration_of_the_summary_is_held_by_the_fact_check(demo_client: SentinelClient) -> None:
    from bot.orchestrator.factcheck.facts import Facts
    from bot.orchestrator.factcheck.grounding import check

    number = await _mfa_incident(demo_client)
    result = await summarize(demo_client, {"incident_ref": number})
    assert isinstance(result, QueryResult)
    summary = result.records[0]
    refs = References()
    refs.register(result)
    facts = Facts()
    facts.observe(result, NOW)
    high = next(f for f in summary.entities if f.level is Level.HIGH)
    assert facts.verdicts[high.value.lower()].level == "high"
    assert number in facts.incidents and all(s.incident.number in facts.incidents for s in summary.similar)
    honest = f"Incident #{number}: the assessment of {high.value} is high."
    assert not check(honest, facts, refs, NOW)
    lie = f"Incident #{number}: the assessment of {high.value} is low, nothing to worry about."
    assert check(lie, facts, refs, NOW), "a level the bot did not compute is flagged"
    assert check("Incident #99999 was closed as a true positive.", facts, refs, NOW), "an incident never read"
