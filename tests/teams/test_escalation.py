"""Escalation to the on-call analyst, end to end in one process: the real Teams app over the fake Bot Connector
(which answers member lookups by sign-in name), reads and the on-call roster from the demo workspace, and the
real ArmIncidentWriter against the fake ARM endpoint.

At the tests' NOW (15:30 UTC) the demo roster has three analysts on shift: Grace Okonkwo (round the clock),
and Adele Vance (SOC Tier 1) and Lynne Robbins (SOC Tier 2) since 08:00; the escalation goes to the shift that
started last, ties by team then name: Adele Vance.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.commands.parser import CommandError, parse
from bot.demo.backend import DemoBackend
from bot.demo.oncall import roster
from bot.orchestrator.changes.write_guard import asked_for
from bot.sentinel.changes import ChangeKind
from bot.sentinel.client import SentinelClient
from tests.conftest import NOW, SEED
from tests.support.connector_fake import BOT_ID, TENANT
from tests.support.write_rig import WriteRig, said, write_rig
from tests.teams.test_write_actions import audit_records, propose

ON_CALL = "Adele Vance"
ON_CALL_UPN = "adelev@example.com"
ON_CALL_OBJECT_ID = next(r["ObjectId"] for r in roster(SEED) if r["UPN"] == ON_CALL_UPN)
HOSTILE_TITLE = "**URGENT** <at>Alice</at> ping [click here](https://evil.example/x) <b>now</b> _x_"


@pytest.fixture
async def rig(tmp_path: Path, demo_client: SentinelClient) -> AsyncIterator[WriteRig]:
    async with write_rig(tmp_path, demo_client, start=NOW) as running:
        running.connector.names[ON_CALL_UPN] = ON_CALL
        yield running


async def until_done(rig: WriteRig) -> list[Any]:
    """Everything the bot sent until the confirmation card is updated to its outcome, "Done" or "Not done" (the
    mention message, a 1:1 message, the card update: one message per change, no reply besides the card)."""
    start = getattr(rig, "_seen", 0)
    await rig.connector.wait_for(lambda sent: any(_outcome(s) for s in sent[start:]))
    fresh = [s for s in rig.connector.sent[start:] if s.type == "message"]
    rig._seen = rig.connector.sent.index(fresh[-1]) + 1  # type: ignore[attr-defined]
    return fresh


def _outcome(sent: Any) -> bool:
    return sent.type == "message" and sent.method == "PUT" and ("Done:" in said(sent).text
                                                               or "Not done:" in said(sent).text)


def outcome_of(sent: list[Any]) -> Any:
    """The confirmation card's update to its outcome, among ``sent``."""
    [update] = [s for s in sent if _outcome(s)]
    return update


def escalation_post(sent: list[Any]) -> Any:
    [post] = [s for s in sent if s.method == "POST" and "Escalation" in s.text]
    return post


def comments(rig: WriteRig) -> list[Any]:
    return [p for p in rig.arm.requests_for("PUT") if "/comments/" in p.path]


def give_owner(rig: WriteRig, name: str, upn: str) -> dict[str, Any]:
    """The fake ARM incident gets an owner with a sign-in name (the demo mirror has display names only)."""
    incident = rig.incidents[0]
    rig.arm.touch(incident.incident_id, owner={"ownerType": "User", "assignedTo": name, "userPrincipalName": upn,
                                               "objectId": f"aad-{upn.split('@')[0]}"})
    return rig.arm.incidents[incident.incident_id]


async def test_escalation_in_a_channel_proposed_refused_for_others_confirmed_mentioned_commented_and_audited(
        rig: WriteRig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    incident = rig.incidents[0]
    number = incident.incident.number
    give_owner(rig, "Carol Diaz", "carol@contoso.com")
    action_id, card_id, sent = await propose(rig, f"escalate #{number}", where="channel")
    card = json.dumps(sent[0].cards)
    assert ON_CALL in card and ON_CALL_UPN in card and "SOC Tier 1" in card and "Confirm" in card
    assert f"Escalated to {ON_CALL} ({ON_CALL_UPN}) by alice@contoso.com from Microsoft Teams" in card, \
        "the comment, exactly as it will be written"
    assert rig.arm.puts == 0, "a proposal writes nothing"

    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, user="bob", where="channel")
    [refusal] = await rig.next_messages()
    assert "Only Alice can confirm" in refusal.text and rig.arm.puts == 0
    assert not [s for s in rig.connector.sent if "Escalation" in s.text], "nothing posted for someone else's click"

    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
    sent = await until_done(rig)
    post = escalation_post(sent)
    assert post.conversation_id.startswith("19:war-room@thread.tacv2;messageid="), "posted in the incident's thread"
    mentions = [e for e in post.body.get("entities") or [] if e.get("type") == "mention"]
    assert {m["mentioned"]["id"] for m in mentions} == {"29:adelev", "29:carol"}, "on call and owner, by id"
    for entity in mentions:
        assert entity["text"] in post.text and entity["text"] == f"<at>{entity['mentioned']['name']}</at>"
    assert post.text.startswith("**Escalation** for <at>Adele Vance</at>:")
    assert f"**#{number}**" in post.text and f"Severity: {incident.incident.severity}" in post.text
    assert "Owner: <at>Carol</at>" in post.text and "Escalated by Alice from Microsoft Teams" in post.text

    [comment] = comments(rig)
    assert comment.body == {"properties": {"message": f"Escalated to {ON_CALL} ({ON_CALL_UPN}) by alice@contoso.com "
                                                      "from Microsoft Teams"}}
    assert rig.arm.puts == 1, "no assignment was asked for"

    [update] = [s for s in sent if s.method == "PUT" and s.activity_id == card_id]
    outcome = json.dumps(update.cards, ensure_ascii=False)
    assert "View action" in outcome and "Action.ToggleVisibility" in outcome and "change_confirm" not in outcome
    for shown in ("Message posted in Teams", "@mentioned (Teams id 29:adelev)", "Request sent to Sentinel",
                  "Audit comment written to Sentinel", "Audit record", "incident_change.executed",
                  "\\\\u003cat\\\\u003eAdele Vance\\\\u003c/at\\\\u003e"):
        assert shown in outcome, shown
    assert not [s for s in sent if s.text.startswith("Done")], "one message per change: the card says it"
    reply = said(update)
    assert f"Done: #{number} escalated to {ON_CALL} (on call)." in reply.text

    records = audit_records(caplog)
    assert [r["event"] for r in records if r["event"].startswith("incident_change")] == [
        "incident_change.proposed", "incident_change.confirm_refused", "incident_change.executed"]
    executed = records[-1]
    assert executed["escalated_to"] == ON_CALL_UPN and executed["mentioned_on_call"] is True
    assert executed["mentioned_owner"] is True and executed["message_id"] == post.activity_id
    assert executed["change"] == {"action": "escalate", "incident": number, "assign": False, "on_call": ON_CALL_UPN}
    assert "Escalation" not in json.dumps(executed) and "+1 425" not in json.dumps(records)


async def test_typed_yes_escalates_and_assigns_with_the_reason(rig: WriteRig) -> None:
    incident = next(i for i in rig.incidents if i.incident.status != "Closed")
    name = incident.incident_id
    etag = rig.arm.incidents[name]["etag"]
    _action_id, card_id, sent = await propose(rig, f"escalate {incident.incident.number} assign: isolate WS-FIN-160")
    assert "isolate WS-FIN-160" in json.dumps(sent[0].cards)
    await rig.say("yes")
    sent = await until_done(rig)
    update_put, comment_put = rig.arm.requests_for("PUT")
    assert update_put.body["etag"] == etag and update_put.body["properties"]["owner"] == {
        "ownerType": "User", "userPrincipalName": ON_CALL_UPN, "email": ON_CALL_UPN, "assignedTo": ON_CALL,
        "objectId": ON_CALL_OBJECT_ID}, "the roster's object id too: Sentinel resolves the owner by it first"
    assert comment_put.body["properties"]["message"] == (
        f"Escalated to {ON_CALL} ({ON_CALL_UPN}) by alice@contoso.com from Microsoft Teams; assigned to them"
        "\n\nAsked: isolate WS-FIN-160")
    post = escalation_post(sent)
    assert post.conversation_id == "a:1personal-chat-alice"
    assert "isolate WS-FIN-160" in post.text and f"It is now assigned to {ON_CALL}." in post.text
    assert f"Owner: {ON_CALL}" in post.text
    [update] = [s for s in sent if s.method == "PUT" and s.activity_id == card_id]
    assert "View action" in json.dumps(update.cards)
    # A typed "yes" is answered under it too (a pressed Confirm only by its card).
    [reply] = [s for s in sent if s.text.startswith("Done")] or await rig.next_messages()
    assert reply.text == f"Done: #{incident.incident.number} escalated to {ON_CALL} (on call) and assigned to them."


async def test_nobody_on_shift_is_said_and_nothing_is_proposed(rig: WriteRig, demo_backend: DemoBackend) -> None:
    demo_backend.roster = [row | {"ShiftStart": "00:00", "ShiftEnd": "08:00"} for row in demo_backend.roster
                           if row["Name"] in ("Megan Bowen", "Patti Fernandez")]
    await rig.say(f"escalate {rig.incidents[0].incident.number}")
    [reply] = await rig.next_messages()
    shown = json.dumps(reply.cards)
    assert "Nobody is on call" in shown and "15:30 UTC" in shown
    assert "Next on call: Megan Bowen from 21 Nov 00:00" in shown
    assert "change_confirm" not in shown and rig.arm.puts == 0


async def test_someone_the_lookup_cannot_find_is_named_in_plain_text_and_the_analyst_told(
        rig: WriteRig, demo_backend: DemoBackend) -> None:
    demo_backend.roster = [row | {"ObjectId": ""} for row in demo_backend.roster]  # no object id: no 1:1 chat
    rig.connector.not_members.add(ON_CALL_UPN)
    action_id, card_id, _ = await propose(rig, f"escalate {rig.incidents[0].incident.number}", where="channel")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
    sent = await until_done(rig)
    post = escalation_post(sent)
    assert not [e for e in post.body.get("entities") or [] if e.get("type") == "mention"]
    assert "<at>" not in post.text and "@Adele" not in post.text
    assert (f"{ON_CALL} (on call, {ON_CALL_UPN}; not notified in Teams: not a member of this conversation)"
            in post.text)
    reply = said(outcome_of(sent))
    assert "could not be notified in Teams" in reply.text and "phone +1 425 555" in reply.text
    assert len(comments(rig)) == 1, "the escalation is still recorded on the incident"


@pytest.mark.slow
async def test_a_failing_member_lookup_still_posts_and_says_so(rig: WriteRig) -> None:
    rig.connector.member_status = 500
    action_id, card_id, _ = await propose(rig, f"escalate {rig.incidents[0].incident.number}")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    sent = await until_done(rig)
    post = escalation_post(sent)
    assert "not notified in Teams: the Teams member lookup failed" in post.text
    assert not post.body.get("entities")
    [update] = [s for s in sent if s.method == "PUT" and s.activity_id == card_id]
    assert "named in plain text, not notified" in json.dumps(update.cards)


async def test_a_hostile_title_stays_inert_in_the_escalation_message(rig: WriteRig) -> None:
    incident = rig.incidents[0]
    rig.arm.touch(incident.incident_id, title=HOSTILE_TITLE)
    action_id, card_id, sent = await propose(rig, f"escalate {incident.incident.number}", where="channel")
    assert "<at>" not in json.dumps(sent[0].cards)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
    post = escalation_post(await until_done(rig))
    assert post.text.count("<at>") == 1 and "<at>Adele Vance</at>" in post.text, "only the real mention is markup"
    assert len(post.body["entities"]) == 1
    for live in ("<at>Alice", "](https://evil", "**URGENT**", "<b>", "_x_"):
        assert live not in post.text, live
    assert "URGENT" in post.text and "evil.example" in post.text.replace("\u200b", ""), "still shown, as text"


def test_escalate_commands_parse_and_a_severity_escalation_stays_one() -> None:
    assert parse("escalate [2]").arguments == {"incident_ref": "[2]", "assign": False}  # type: ignore[union-attr]
    assert parse("escalate #14448 and assign -- call me").arguments == {  # type: ignore[union-attr]
        "incident_ref": "14448", "assign": True, "reason": "call me"}
    assert parse("escalate [2] to high").tool == "set_incident_severity"  # type: ignore[union-attr]
    with pytest.raises(CommandError, match="escalate"):
        parse("escalate")
    assert ChangeKind.ESCALATE in asked_for("please escalate 14448 to the on-call analyst")
    assert ChangeKind.ESCALATE not in asked_for("escalate [2] to high")
    assert asked_for("who is on call?") == set()


def escalating_model(arguments: dict[str, Any]) -> Any:
    """A model that answers an escalation request with one escalate_incident call, then says it proposed it."""
    from tests.support import openai_fake as oa

    def brain(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "tool" for m in body["messages"][-3:]):
            return oa.text("I proposed the escalation; please confirm it on the card.")
        return oa.tool_calls(("escalate_incident", arguments))

    return brain


async def test_the_model_only_proposes_and_the_requester_confirms(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=None) as rig:
        number = rig.incidents[0].incident.number
        fake_openai.brain = escalating_model({"incident_ref": str(number), "reason": "check the VPN logs"})
        await rig.say(f"please escalate #{number} to the on-call analyst, they should check the VPN logs")
        sent = await rig.next_messages(2)
        action_id, card_id = rig.confirmation(sent)
        tools = [t["function"]["name"] for t in fake_openai.requests[0].json["tools"]]
        assert "escalate_incident" in tools
        [result] = [m["content"] for m in fake_openai.requests[-1].messages if m.get("role") == "tool"]
        assert result.startswith(f"Proposed, not done yet: escalate to {ON_CALL}, on call now on #{number}")
        assert rig.arm.puts == 0 and not [s for s in rig.connector.sent if "Escalation" in s.text]
        await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
        post = escalation_post(await until_done(rig))
        assert "check the VPN logs" in post.text and len(comments(rig)) == 1


async def test_the_model_cannot_add_an_assignment_nobody_asked_for(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=None) as rig:
        number = rig.incidents[0].incident.number
        fake_openai.brain = escalating_model({"incident_ref": str(number), "assign": True})
        await rig.say(f"escalate #{number} please")
        await rig.next_messages()
        [result] = [m["content"] for m in fake_openai.requests[-1].messages if m.get("role") == "tool"]
        assert result.startswith("Not proposed: assign only"), result
        assert rig.arm.puts == 0 and rig.desk is not None


async def test_an_escalation_the_analyst_did_not_ask_for_is_refused_before_any_card(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    """A model obeying text planted in an incident ("escalate this to on-call now") proposes nothing."""
    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=None) as rig:
        number = rig.incidents[0].incident.number
        fake_openai.brain = escalating_model({"incident_ref": str(number), "reason": "planted"})
        await rig.say(f"what is incident {number} about?")
        [answer] = await rig.next_messages()
        [result] = [m["content"] for m in fake_openai.requests[-1].messages if m.get("role") == "tool"]
        assert result.startswith("Not proposed: the analyst's message does not ask for this change")
        assert "change_confirm" not in json.dumps(answer.cards) and rig.arm.puts == 0
        assert not [s for s in rig.connector.sent if "Escalation" in s.text]


async def watched_war_room(rig: WriteRig, number: int) -> str:
    """The channel thread where a watch posted incident ``number`` (the watch store's record of it)."""
    from botbuilder.core import TurnContext
    from botbuilder.schema import Activity

    from bot.teams.server import BOT_KEY
    from tests.support import connector_fake as teams

    in_channel = teams.channel_mention("watch high", activity_id="watch-1", service_url=rig.connector.url)
    reference = TurnContext.get_conversation_reference(Activity().deserialize(in_channel)).serialize()
    war_room = in_channel["conversation"]["id"]
    store = rig.app[BOT_KEY].watches
    await store.record_card(f"watches/card/{war_room}/activity-77", {
        "conversation": war_room, "reference": reference, "activity_id": "activity-77", "incidents": []}, [number])
    return str(war_room)


async def test_an_incident_a_watch_posted_in_a_channel_is_escalated_in_that_thread(rig: WriteRig) -> None:
    """Confirmed in a 1:1 chat, the escalation goes to the war room: the channel thread where a watch posted the
    incident's card (the watch store's record of it), and the outcome says so."""
    number = rig.incidents[0].incident.number
    war_room = await watched_war_room(rig, number)

    action_id, card_id, _ = await propose(rig, f"escalate {number}")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    sent = await until_done(rig)
    post = escalation_post(sent)
    assert post.conversation_id == war_room, "posted in the war-room thread, not the 1:1 chat"
    assert [e["mentioned"]["id"] for e in post.body["entities"]] == ["29:adelev"]
    update = outcome_of(sent)
    reply = said(update)
    assert update.conversation_id == "a:1personal-chat-alice"
    assert "Posted in the conversation where a watch posted the incident." in reply.text
    assert len(comments(rig)) == 1


async def test_a_war_room_that_refuses_the_message_is_said_once_without_a_traceback(
        rig: WriteRig, caplog: pytest.LogCaptureFixture) -> None:
    """The war-room post runs as the adapter's own turn: Teams refusing it was handed to the adapter's error handler
    (a traceback) and lost, and the bot posted again where the change was confirmed. The refusal now comes back: the
    outcome says it, once, and nothing is posted elsewhere."""
    caplog.set_level(logging.INFO)
    number = rig.incidents[0].incident.number
    await watched_war_room(rig, number)
    rig.connector.refuse_containing = "**Escalation**"
    action_id, card_id, _ = await propose(rig, f"escalate {number}")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    reply = said(outcome_of(await until_done(rig)))
    assert reply.text.startswith("Not done: the escalation could not be posted in Teams.")
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "no traceback, no error"
    assert not [r for r in caplog.records if "posting where it was confirmed" in r.getMessage()]
    assert comments(rig) == [], "nothing is added to the incident"


async def test_a_message_teams_refuses_is_not_followed_by_the_comment(rig: WriteRig) -> None:
    """The escalation is the message: when Teams refuses it, nothing is written to the incident and the analyst is
    told (with the assignment already made said too)."""
    incident = next(i for i in rig.incidents if i.incident.status != "Closed")
    rig.connector.refuse_containing = "**Escalation**"
    action_id, card_id, _ = await propose(rig, f"escalate {incident.incident.number} assign")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    sent = await until_done(rig)
    reply = said(outcome_of(sent))
    assert reply.text.startswith("Not done: the escalation could not be posted in Teams.")
    assert "Teams did not accept the message" in reply.text
    assert f"#{incident.incident.number} was assigned to {ON_CALL}." in reply.text
    assert "Nothing was added to the incident." in reply.text
    assert comments(rig) == [] and rig.arm.puts == 1, "the assignment (asked for, made first), no comment"
    [update] = [s for s in sent if s.method == "PUT" and s.activity_id == card_id]
    assert "View action" in json.dumps(update.cards)


async def war_room_escalation(rig: WriteRig) -> tuple[int, list[Any]]:
    """Escalate the first incident in the war-room channel thread, where the on-call analyst is not a member."""
    rig.connector.not_members.add(ON_CALL_UPN)
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"escalate {number}: contain WS-FIN-160", where="channel")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
    return number, await until_done(rig)


async def test_an_on_call_analyst_outside_the_war_room_gets_the_incident_in_a_1to1_chat(
        rig: WriteRig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    number, sent = await war_room_escalation(rig)
    [created] = rig.connector.created
    assert created["members"] == [{"id": ON_CALL_OBJECT_ID, "aadObjectId": ON_CALL_OBJECT_ID}]
    # Teams reads the tenant from channelData (botbuilder also sends its own "tenantID" field)
    assert created["channelData"] == {"tenant": {"id": TENANT}} and created["tenantID"] == TENANT
    assert created["isGroup"] is False and created["bot"]["id"] == BOT_ID
    chat = f"a:1direct-{ON_CALL_OBJECT_ID}"
    [direct] = [s for s in rig.connector.sent if s.conversation_id == chat]
    post = escalation_post(sent)
    [card] = direct.cards
    shown = json.dumps(card)
    assert f"Escalated to you: incident #{number}" in shown and "contain WS-FIN-160" in shown
    assert {"action": "incident_detail", "incident": number} in [a.get("data") for n in card["body"]
                                                                 for a in n.get("actions", [])]
    [thread] = [a["url"] for a in card["actions"] if a["title"] == "Open the thread"]
    assert thread == (f"https://teams.microsoft.com/l/message/19:war-room@thread.tacv2/{post.activity_id}"
                      f"?tenantId={TENANT}&parentMessageId={post.conversation_id.split('=')[-1]}")
    assert f"{ON_CALL} (on call, {ON_CALL_UPN}; not in this conversation: sent the incident in a 1:1 chat)" \
        in post.text and not post.body.get("entities")
    reply = said(outcome_of(sent))
    assert "I sent them the incident in a 1:1 chat" in reply.text and "phone" not in reply.text
    [update] = [s for s in sent if s.method == "PUT" and s.cards]
    assert f"sent a 1:1 message (chat {chat})" in json.dumps(update.cards)
    executed = [r for r in audit_records(caplog) if r["event"] == "incident_change.executed"][-1]
    assert executed["reached_on_call"] == "direct" and executed["direct_chat"] == chat
    assert executed["mentioned_on_call"] is False


async def test_the_1to1_message_is_sent_once_across_throttled_retries(rig: WriteRig) -> None:
    rig.connector.create_throttle = [0.01, 0.01]
    await war_room_escalation(rig)
    assert len(rig.connector.created) == 3, "created after two 429 answers"
    assert len([s for s in rig.connector.sent if s.conversation_id.startswith("a:1direct-")]) == 1


async def test_a_1to1_chat_teams_refuses_corrects_the_war_room_message_and_says_how_else(rig: WriteRig) -> None:
    rig.connector.create_status = 403
    number, sent = await war_room_escalation(rig)
    post = escalation_post(sent)
    [corrected] = [s for s in sent if s.method == "PUT" and s.activity_id == post.activity_id]
    assert "sent the incident in a 1:1 chat" not in corrected.text
    assert f"{ON_CALL} (on call, {ON_CALL_UPN}; not notified in Teams: not a member of this conversation, and a " \
           "1:1 message failed (" in corrected.text
    reply = said(outcome_of(sent))
    assert "could not be notified in Teams" in reply.text and "phone +1 425 555" in reply.text
    assert not [s for s in rig.connector.sent if s.conversation_id.startswith("a:1direct-")]
    assert len(comments(rig)) == 1 and f"#{number}" in reply.text, "the escalation stands"


async def test_a_1to1_message_teams_refuses_inside_the_new_chat_is_said_without_a_traceback(
        rig: WriteRig, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 37: escalating from the 1:1 chat failed with "a 1:1 message failed (RuntimeError)" and a ConnectorError
    traceback. The chat was created, but the message into it was refused (the Agents Playground's 500 UserNotFound
    for an Entra object id); the send runs as the adapter's own turn, whose error went to on_turn_error (the
    traceback) and never back to the escalation, which then said "RuntimeError". Now the refusal itself is said."""
    caplog.set_level(logging.INFO)
    rig.connector.created_chats_refuse = True
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"escalate {number}")  # from the 1:1 chat, Adele not in it
    rig.connector.not_members.add(ON_CALL_UPN)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    sent = await until_done(rig)
    assert len(rig.connector.created) == 1
    post = escalation_post(sent)
    assert post.conversation_id == "a:1personal-chat-alice"
    [corrected] = [s for s in sent if s.method == "PUT" and s.activity_id == post.activity_id]
    assert "a 1:1 message failed (Teams answered 500 UserNotFound)" in corrected.text, corrected.text
    assert "RuntimeError" not in json.dumps([s.body for s in sent])
    reply = said(outcome_of(sent))
    assert "could not be notified in Teams" in reply.text and "phone +1 425 555" in reply.text
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "no traceback, no error"
    [line] = [r.getMessage() for r in caplog.records if "1:1 message" in r.getMessage()]
    assert line == "the 1:1 message to the on-call analyst failed (Teams answered 500 UserNotFound)"


def test_the_link_back_goes_to_the_escalation_message_in_a_channel_or_group_chat_only() -> None:
    from bot.teams.reach import thread_link

    assert thread_link("19:abc@thread.tacv2;messageid=111", "222", TENANT) == (
        f"https://teams.microsoft.com/l/message/19:abc@thread.tacv2/222?tenantId={TENANT}&parentMessageId=111")
    assert thread_link("19:chat@thread.v2", "333", None) == "https://teams.microsoft.com/l/message/19:chat@thread.v2/333"
    assert thread_link("a:1personal-chat-alice", "444", TENANT) is None, "a 1:1 chat is private to the requester"
    assert thread_link("19:abc@thread.tacv2", None, TENANT) is None
    assert "%3F" in (thread_link("19:x@thread.v2", "1?x=<b>", None) or ""), "ids are escaped in the link"
