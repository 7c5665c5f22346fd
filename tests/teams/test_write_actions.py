"""Incident changes from Teams, end to end inside one process: a command or a card button proposes, the
requester confirms on the card, and the real ArmIncidentWriter writes to a fake ARM endpoint.

The bot is the real Teams app (CloudAdapter, handler, turn runner) over a fake Bot Connector; reads come
from the demo workspace and the fake ARM endpoint holds the same incidents under the same resource names.
Every test checks what reached ARM (exact requests, etag included) and what the analyst saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.client import SentinelClient
from tests.conftest import NOW
from tests.support.write_rig import WriteRig, said, write_rig


@pytest.fixture
async def rig(tmp_path: Path, demo_client: SentinelClient) -> AsyncIterator[WriteRig]:
    async with write_rig(tmp_path, demo_client, start=NOW) as running:
        yield running


def text_of(messages: list[Any]) -> str:
    return " ".join(m.text + json.dumps(m.cards) for m in messages)


def audit_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.audit for r in caplog.records if r.name == "bot.audit"]


async def propose(rig: WriteRig, text: str, **where: str) -> tuple[str, str, list[Any]]:
    await rig.say(text, **where)
    sent = await rig.next_messages()
    action_id, card_id = rig.confirmation(sent)
    return action_id, card_id, sent


async def test_assign_to_me_is_proposed_confirmed_written_with_the_etag_and_audited(
        rig: WriteRig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    incident = rig.incidents[0]
    number, name = incident.incident.number, incident.incident_id
    etag = rig.arm.incidents[name]["etag"]
    action_id, card_id, sent = await propose(rig, f"assign {number} to me")
    card = json.dumps(sent[0].cards)
    assert "Confirm" in card and "Cancel" in card and f"#{number}" in card and "Alice" in card
    assert rig.arm.puts == 0, "a proposal writes nothing"

    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [update] = await rig.next_messages()
    reply = said(update)
    puts = rig.arm.requests_for("PUT")
    assert next(p.path.rsplit("/", 2)[-2:] for p in puts) == ["incidents", name]
    body = puts[0].body
    assert body["etag"] == etag, "the write carries the etag read when the analyst confirmed"
    assert body["properties"]["owner"] == {"ownerType": "User", "objectId": "aad-alice",
                                           "userPrincipalName": "alice@contoso.com", "email": "alice@contoso.com",
                                           "assignedTo": "Alice"}
    assert body["properties"]["title"] == incident.incident.title, "a full replace resends the title"
    assert "incidentNumber" not in body["properties"], "read-only properties are not sent"
    assert puts[0].headers["Authorization"].startswith("Bearer ")
    assert puts[0].query["api-version"] == "2025-09-01"
    comment = puts[1]
    assert "/comments/" in comment.path
    assert comment.body == {"properties": {"message": "Owner set to Alice from Microsoft Teams by alice@contoso.com"}}
    assert len(puts) == 2

    assert update.method == "PUT" and update.activity_id == card_id, "the confirmation card is updated in place"
    outcome = json.dumps(update.cards)
    assert "View action" in outcome and "Action.ToggleVisibility" in outcome and "Confirm" not in outcome
    assert "Done: Owner set to Alice" in reply.text

    records = audit_records(caplog)
    assert [r["event"] for r in records] == ["incident_change.proposed", "incident_change.executed"]
    executed = records[-1]
    assert executed["actor_object_id"] == "aad-alice" and executed["incident_number"] == number
    assert executed["conversation_id"] and executed["result"] == "executed"
    assert "comment" not in json.dumps(executed["change"]), "no message content in the audit log"


@pytest.mark.parametrize(("command", "expected"), [
    ("close {n} false positive incorrect alert logic: pen test by the red team",
     {"status": "Closed", "classification": "FalsePositive", "classificationReason": "IncorrectAlertLogic",
      "classificationComment": "pen test by the red team"}),
    ("close {n} benign positive: expected admin script", {"status": "Closed", "classification": "BenignPositive",
                                                         "classificationReason": "SuspiciousButExpected"}),
    ("severity {n} informational", {"severity": "Informational"}),
])
async def test_status_and_severity_changes_send_exactly_the_changed_fields(rig: WriteRig, command: str,
                                                                          expected: dict[str, Any]) -> None:
    incident = next(i for i in rig.incidents if i.incident.status != "Closed"
                    and i.incident.severity != "Informational")
    before = dict(rig.arm.incidents[incident.incident_id]["properties"])
    action_id, card_id, _ = await propose(rig, command.format(n=incident.incident.number))
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    await rig.next_messages()
    update = rig.arm.requests_for("PUT")[0].body["properties"]
    for key, value in expected.items():
        assert update[key] == value
    unchanged = {k for k in before if k not in expected and k in update}
    assert all(update[k] == before[k] for k in unchanged), "everything else is sent back as it was"
    summary = rig.arm.requests_for("PUT")[1].body["properties"]["message"]
    assert summary.endswith("from Microsoft Teams by alice@contoso.com")


async def test_a_comment_is_one_comment_with_its_author(rig: WriteRig) -> None:
    number = rig.incidents[1].incident.number
    action_id, card_id, sent = await propose(rig, f"comment {number}: Called the user; password reset done")
    assert "Called the user; password reset done" in text_of(sent)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    await rig.next_messages()
    [put] = rig.arm.requests_for("PUT")
    assert put.body == {"properties": {"message": "Called the user; password reset done\n\n"
                                                  "(Added from Microsoft Teams by alice@contoso.com)"}}


async def test_double_click_writes_once(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"severity {number} low"
                                          if rig.incidents[0].incident.severity != "Low" else f"severity {number} high")
    click = {"action": "change_confirm", "id": action_id}
    await asyncio.gather(rig.click(click, card_id=card_id), rig.click(click, card_id=card_id))
    sent = await rig.next_messages(2)
    assert len([p for p in rig.arm.requests_for("PUT") if "/comments/" not in p.path]) == 1
    assert "Already handled" in text_of(sent)
    await rig.click(click, card_id=card_id)
    [late] = await rig.next_messages()
    assert "Already handled" in late.text and rig.arm.writes == 2, "a late third click writes nothing either"


async def test_someone_else_cannot_confirm_in_a_channel_but_the_requester_still_can(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, sent = await propose(rig, f"assign {number} to me", where="channel")
    assert "Only Alice can confirm" in text_of(sent)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, user="bob", where="channel")
    [refusal] = await rig.next_messages()
    assert "Only Alice can confirm this change" in refusal.text and rig.arm.puts == 0
    await rig.click({"action": "change_cancel", "id": action_id}, card_id=card_id, user="bob", where="channel")
    [refusal] = await rig.next_messages()
    assert "Only Alice can cancel" in refusal.text and rig.arm.puts == 0
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
    await rig.next_messages()
    assert rig.arm.writes == 2  # the update and its audit comment


async def test_an_expired_proposal_is_not_written(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    rig.clock.advance(minutes=5, seconds=1)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [update] = await rig.next_messages()
    reply = said(update)
    assert update.activity_id == card_id and "Expired" in json.dumps(update.cards)
    assert "Expired" in reply.text and rig.arm.puts == 0


async def test_cancel_updates_the_card_and_writes_nothing(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    await rig.click({"action": "change_cancel", "id": action_id}, card_id=card_id)
    [update] = await rig.next_messages()
    assert update.activity_id == card_id and "Cancelled by Alice" in json.dumps(update.cards)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [late] = await rig.next_messages()
    assert "Already handled" in late.text and rig.arm.puts == 0


async def test_a_new_request_cancels_the_pending_change(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    await rig.say("incidents 24h")
    update, _answer = await rig.next_messages(2)
    assert update.activity_id == card_id and "asked something else" in json.dumps(update.cards)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [late] = await rig.next_messages()
    assert "Already handled" in late.text and rig.arm.puts == 0


async def test_etag_conflict_asks_again_with_the_new_state(rig: WriteRig) -> None:
    incident = rig.incidents[0]
    action_id, card_id, _ = await propose(rig, f"assign {incident.incident.number} to me")
    new_etag = rig.arm.touch(incident.incident_id, severity="Low", owner={"assignedTo": "Bob", "ownerType": "User"})
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    update, fresh = await rig.next_messages(2)
    reply = said(update)
    assert rig.arm.puts == 0, "nothing is written over someone else's change"
    assert update.activity_id == card_id and "changed since you asked" in reply.text
    new_id, new_card = rig.confirmation([fresh])
    assert new_id != action_id and "Bob" in json.dumps(fresh.cards), "the new card shows the new state"
    await rig.click({"action": "change_confirm", "id": new_id}, card_id=new_card)
    await rig.next_messages()
    put = rig.arm.requests_for("PUT")[0]
    assert put.body["etag"] == new_etag, "the second confirmation writes against the state it showed"
    assert put.body["properties"]["severity"] == "Low", "the write keeps the other analyst's change"
    assert rig.arm.writes == 2


async def test_a_conflict_at_write_time_is_caught_too(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    rig.arm.fail(409, method="PUT", path=r"/incidents/[^/]+$")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    _update, fresh = await rig.next_messages(2)
    reply = said(_update)
    assert "changed since you asked" in reply.text
    assert rig.confirmation([fresh])[0] != action_id and rig.arm.writes == 0


async def test_forbidden_names_the_role_to_grant(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    rig.arm.fail(403, method="PUT")
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [update] = await rig.next_messages()
    reply = said(update)
    assert "Microsoft Sentinel Responder" in reply.text and "Microsoft Sentinel Responder" in json.dumps(update.cards)
    assert rig.arm.writes == 0


async def test_a_transient_failure_keeps_the_proposal_for_another_try(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    rig.arm.fail(503, method="PUT", times=10)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [reply] = await rig.next_messages()
    assert "Press Confirm again" in reply.text and rig.arm.writes == 0
    rig.arm._rules.clear()
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    await rig.next_messages()
    assert rig.arm.writes == 2


async def test_a_non_responder_is_refused_and_nothing_is_proposed(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    await rig.say(f"assign {number} to me", user="carol")
    [reply] = await rig.next_messages()
    assert "not on this bot's list of responders" in text_of([reply])
    assert "change_confirm" not in text_of([reply]) and rig.arm.requests == []


async def test_write_actions_disabled_refuses(tmp_path: Path, demo_client: SentinelClient) -> None:
    async with write_rig(tmp_path, demo_client, start=NOW, enabled=False) as rig:
        await rig.say(f"close {rig.incidents[0].incident.number} false positive incorrect alert logic: test")
        [reply] = await rig.next_messages()
        assert "turned off" in text_of([reply]) and "WRITE_ACTIONS_ENABLED" in text_of([reply])
        assert rig.arm.requests == []


async def test_detail_card_close_form_proposes_with_the_chosen_classification(rig: WriteRig) -> None:
    incident = next(i for i in rig.incidents if i.incident.status != "Closed")
    value = {"action": "change_propose", "tool": "set_incident_status",
             "arguments": {"incident_ref": str(incident.incident.number), "status": "Closed"},
             "classification": "FalsePositive:InaccurateData", "classification_comment": "feed sent bad geo data"}
    await rig.click(value, card_id=None)
    sent = await rig.next_messages()
    action_id, card_id = rig.confirmation(sent)
    assert "Inaccurate Data" in text_of(sent)  # the before/after table spaces the reason (a phone column)
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    await rig.next_messages()
    properties = rig.arm.requests_for("PUT")[0].body["properties"]
    assert (properties["classification"], properties["classificationReason"]) == ("FalsePositive", "InaccurateData")


async def test_bad_change_requests_get_usage_not_proposals(rig: WriteRig) -> None:
    for text, expected in [("close 42", "Which classification?"), ("assign [9] to me", "no [9]"),
                           ("assign 42 to Bob Smith", "not a user principal name"),
                           ("severity 424242 high", "no incident #424242")]:
        await rig.say(text)
        [reply] = await rig.next_messages()
        assert expected in text_of([reply]), (text, text_of([reply])[:300])
    assert rig.arm.puts == 0


async def test_the_model_can_propose_what_the_analyst_asked_for_and_nothing_more(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    from tests.support import rule_model

    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=rule_model.brain) as rig:
        await rig.say("incidents 30d")
        await rig.next_messages()
        await rig.say("please assign [1] to me")
        sent = await rig.next_messages(2)
        action_id, card_id = rig.confirmation(sent)
        assert "Proposed, not done yet" in text_of(sent) and rig.arm.puts == 0
        tools = [t["function"]["name"] for t in fake_openai.requests[-1].json["tools"]]
        assert {"assign_incident", "set_incident_status", "add_incident_comment"} <= set(tools)
        await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
        await rig.next_messages()
        assert rig.arm.writes == 2


async def test_one_proposal_per_turn_however_many_the_model_asks_for(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    from tests.support import openai_fake as oa

    def greedy(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "tool" for m in body["messages"][-3:]):
            return oa.text("I proposed the changes.")
        return oa.tool_calls(*[("set_incident_severity", {"incident_ref": str(i.incident.number),
                                                          "severity": "Informational"}) for i in targets])

    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=greedy) as rig:
        targets = [i for i in rig.incidents if i.incident.severity != "Informational"][:3]
        numbers = " ".join(f"#{i.incident.number}" for i in targets)
        await rig.say(f"lower the severity of {numbers} to informational")
        sent = await rig.next_messages(2)
        rig.confirmation(sent)
        tool_results = [m["content"] for m in fake_openai.requests[-1].messages if m.get("role") == "tool"]
        assert sum(r.startswith("Proposed") for r in tool_results) == 1
        assert sum("only one can wait for confirmation" in r for r in tool_results) == 2
        assert rig.arm.puts == 0


async def test_responders_get_change_buttons_on_incident_details_and_others_do_not(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    await rig.say(f"incident {number}")
    [mine] = await rig.next_messages()
    await rig.say(f"incident {number}", user="carol")
    [theirs] = await rig.next_messages()
    assert "change_propose" in json.dumps(mine.cards) and "Assign to me" in json.dumps(mine.cards)
    assert "change_propose" not in json.dumps(theirs.cards)


# ---- typed answers to a pending change ("yes", "cancel") -----------------------------------------------------

@pytest.mark.parametrize("typed", ["yes", "Confirm", "confirm it", "Yes, do it.", "go ahead!"])
async def test_typed_yes_from_the_requester_confirms_like_the_button(rig: WriteRig, typed: str) -> None:
    incident = rig.incidents[0]
    etag = rig.arm.incidents[incident.incident_id]["etag"]
    action_id, card_id, _ = await propose(rig, f"assign {incident.incident.number} to me")
    await rig.say(typed)
    update, reply = await rig.next_messages(2)
    assert update.method == "PUT" and update.activity_id == card_id, "the confirmation card is updated in place"
    assert "View action" in json.dumps(update.cards) and "change_confirm" not in json.dumps(update.cards)
    assert reply.text.startswith("Done: Owner set to Alice")
    puts = rig.arm.requests_for("PUT")
    assert rig.arm.writes == 2 and puts[0].body["etag"] == etag, "the update (with its etag) and the audit comment"
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [late] = await rig.next_messages()
    assert "Already handled" in late.text and rig.arm.writes == 2, "a late button press writes nothing more"


@pytest.mark.parametrize("typed", ["cancel", "No", "cancel it."])
async def test_typed_cancel_from_the_requester_cancels_like_the_button(rig: WriteRig, typed: str) -> None:
    number = rig.incidents[0].incident.number
    _action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    await rig.say(typed)
    update, reply = await rig.next_messages(2)
    assert update.activity_id == card_id and "Cancelled by Alice" in json.dumps(update.cards)
    assert reply.text.startswith("Cancelled by Alice") and rig.arm.puts == 0
    await rig.say("yes")  # nothing waits now: "yes" is an ordinary message again (no model here)
    [after] = await rig.next_messages()
    assert "Plain-language questions are not enabled" in text_of([after]) and rig.arm.puts == 0


async def test_typed_yes_from_someone_else_in_a_channel_is_refused_and_the_requester_still_can(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    _action_id, card_id, _ = await propose(rig, f"assign {number} to me", where="channel")
    await rig.say("yes", user="bob", where="channel")
    [refusal] = await rig.next_messages()
    assert "Only Alice can confirm this change" in refusal.text and rig.arm.puts == 0
    await rig.say("cancel", user="bob", where="channel")
    [refusal] = await rig.next_messages()
    assert "Only Alice can cancel this change" in refusal.text and rig.arm.puts == 0
    await rig.say("go ahead", where="channel")
    update, reply = await rig.next_messages(2)
    assert update.method == "PUT" and update.activity_id == card_id and reply.text.startswith("Done:")
    assert rig.arm.writes == 2


async def test_typed_yes_after_expiry_is_not_written(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    _action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    rig.clock.advance(minutes=5, seconds=1)
    await rig.say("yes")
    update, reply = await rig.next_messages(2)
    assert update.activity_id == card_id and "Expired" in json.dumps(update.cards)
    assert reply.text.startswith("Expired") and rig.arm.puts == 0


async def test_typed_yes_rereads_the_incident_and_asks_again_when_it_changed(rig: WriteRig) -> None:
    incident = rig.incidents[0]
    action_id, card_id, _ = await propose(rig, f"assign {incident.incident.number} to me")
    new_etag = rig.arm.touch(incident.incident_id, severity="Low", owner={"assignedTo": "Bob", "ownerType": "User"})
    await rig.say("confirm")
    update, reply, fresh = await rig.next_messages(3)
    assert rig.arm.puts == 0 and update.activity_id == card_id and "changed since you asked" in reply.text
    new_id, new_card = rig.confirmation([fresh])
    assert new_id != action_id
    await rig.say("yes")
    update, _done = await rig.next_messages(2)
    assert update.activity_id == new_card, "the new card is the one updated"
    assert rig.arm.requests_for("PUT")[0].body["etag"] == new_etag and rig.arm.writes == 2


async def test_only_the_whole_message_confirms(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    _action_id, card_id, _ = await propose(rig, f"assign {number} to me")
    await rig.say("yes but first show me the alerts")  # more than a yes: a new request, as before
    update, _answer = await rig.next_messages(2)
    assert update.activity_id == card_id and "asked something else" in json.dumps(update.cards)
    assert rig.arm.puts == 0


# ---- shared conversations: one pending change per requester (issue 28) ------------------------------------


def confirm_data(sent: list[Any]) -> dict[str, Any]:
    """The data the Confirm button of the confirmation card among ``sent`` submits."""
    def find(node: Any) -> dict[str, Any] | None:
        if isinstance(node, dict):
            if node.get("type") == "Action.Submit" and (node.get("data") or {}).get("action") == "change_confirm":
                return dict(node["data"])
            return next((found for value in node.values() if (found := find(value))), None)
        if isinstance(node, list):
            return next((found for value in node if (found := find(value))), None)
        return None
    data = find([m.cards for m in sent])
    assert data is not None, "a confirmation card"
    return data


async def test_two_responders_in_a_group_chat_each_keep_their_pending_change(rig: WriteRig) -> None:
    # Before: bob's proposal cancelled alice's ("Replaced by a newer request"), so only one of them could confirm.
    first, second, third = (d.incident.number for d in rig.incidents[:3])
    alice_id, alice_card, _ = await propose(rig, f"assign {first} to me", where="group")
    _bob_id, bob_card, sent = await propose(rig, f"assign {second} to me", user="bob", where="group")
    assert len(sent) == 1 and sent[0].activity_id == bob_card, "alice's card is left alone"
    assert "Replaced" not in text_of(sent)

    await rig.say(f"assign {third} to me", user="bob", where="group")  # bob's own newer request replaces his
    replaced, newer = await rig.next_messages(2)
    assert replaced.activity_id == bob_card and "asked something else" in json.dumps(replaced.cards)
    _bob_id, bob_card = rig.confirmation([newer])

    await rig.click({"action": "change_confirm", "id": alice_id}, card_id=alice_card, where="group")
    [update] = await rig.next_messages()
    reply = said(update)
    assert update.activity_id == alice_card and f"Done: Owner set to Alice on #{first}" in reply.text
    await rig.say("yes", user="bob", where="group")  # the speaker's own pending change
    update, reply = await rig.next_messages(2)
    assert update.activity_id == bob_card and reply.text.startswith(f"Done: Owner set to Bob on #{third}")
    assigned = {rig.arm.incidents[d.incident_id]["properties"]["incidentNumber"]:
                (rig.arm.incidents[d.incident_id]["properties"].get("owner") or {}).get("assignedTo")
                for d in rig.incidents[:3]}
    assert assigned[first] == "Alice" and assigned[third] == "Bob", assigned
    assert rig.arm.writes == 4, "two updates, two audit comments"


async def test_typed_cancel_in_a_group_chat_cancels_the_speakers_own_change(rig: WriteRig) -> None:
    first, second = (d.incident.number for d in rig.incidents[:2])
    _alice_id, alice_card, _ = await propose(rig, f"assign {first} to me", where="group")
    _bob_id, bob_card, _ = await propose(rig, f"assign {second} to me", user="bob", where="group")
    await rig.say("cancel", user="bob", where="group")
    update, reply = await rig.next_messages(2)
    assert update.activity_id == bob_card and reply.text == "Cancelled by Bob."
    await rig.say("yes", where="group")
    update, reply = await rig.next_messages(2)
    assert update.activity_id == alice_card and reply.text.startswith("Done:") and rig.arm.writes == 2


async def test_a_confirm_pressed_in_another_conversation_says_so_and_changes_nothing(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    _action_id, card_id, sent = await propose(rig, f"assign {number} to me", where="group")
    data = confirm_data(sent)
    await rig.click(data, card_id=card_id, where="personal")  # the card forwarded to her 1:1 chat with the bot
    [reply] = await rig.next_messages()
    assert reply.text == ("That change was proposed in another conversation: press Confirm on its card there. "
                          "Nothing was changed.")
    assert rig.arm.puts == 0
    await rig.click(data, card_id=card_id, where="group")
    [update] = await rig.next_messages()
    reply = said(update)
    assert update.activity_id == card_id and "Done:" in reply.text and rig.arm.writes == 2


def test_stored_state_with_one_pending_change_still_loads() -> None:
    from bot.orchestrator.changes.pending import PendingAction
    from bot.orchestrator.conversation import Conversation
    from bot.sentinel.changes import ChangeKind, IncidentSnapshot, Owner, make_change

    alice = Owner(object_id="aad-alice", name="Alice")
    action = PendingAction("a1", make_change(ChangeKind.ASSIGN, 42, owner=alice), alice,
                           IncidentSnapshot("n", '"1"', 42, "T", "High", "New"), NOW, NOW + timedelta(minutes=5),
                           card_id="card-1")
    old = Conversation().to_dict() | {"pending_action": action.to_dict()}  # as stored before issue 28
    del old["pending_actions"]
    loaded = Conversation.from_dict(old)
    assert [a.id for a in loaded.pending_actions] == ["a1"] and loaded.pending("a1") == action
    assert loaded.pending_for(Owner(object_id="AAD-ALICE")) == action, "by object id, any case"
    again = Conversation.from_dict(loaded.to_dict())
    assert again.pending_actions == [action]
    assert Conversation.from_dict(old | {"pending_action": {"id": "broken"}}).pending_actions == []


def test_a_conversation_keeps_at_most_eight_pending_changes_and_says_why_the_oldest_lapsed() -> None:
    from bot.orchestrator.changes.pending import MAX_PENDING_ACTIONS, PendingAction
    from bot.orchestrator.conversation import Conversation
    from bot.sentinel.changes import ChangeKind, IncidentSnapshot, Owner, make_change

    conversation = Conversation()
    for n in range(MAX_PENDING_ACTIONS + 1):
        who = Owner(object_id=f"aad-{n}", name=f"R{n}")
        conversation.add_pending(PendingAction(f"a{n}", make_change(ChangeKind.ASSIGN, 42, owner=who), who,
                                               IncidentSnapshot("n", '"1"', 42, "T", "High", "New"), NOW,
                                               NOW + timedelta(minutes=5)))
    assert [a.id for a in conversation.pending_actions] == [f"a{n}" for n in range(1, MAX_PENDING_ACTIONS + 1)]
    lapsed = conversation.finished("a0")
    assert lapsed is not None and lapsed.headline.startswith("Lapsed")


async def test_the_stand_in_model_proposes_an_escalation_asked_for_in_words(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    from tests.support import rule_model

    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=rule_model.brain) as rig:
        await rig.say("incidents 30d")
        await rig.next_messages()
        await rig.say("please escalate [1] to whoever is on call: contain the host")
        sent = await rig.next_messages(2)
        rig.confirmation(sent)
        calls = [c["function"] for m in fake_openai.requests[-1].messages for c in m.get("tool_calls") or []]
        assert [c["name"] for c in calls] == ["escalate_incident"], calls
        assert json.loads(calls[0]["arguments"])["reason"] == "contain the host"
        assert "Proposed, not done yet" in text_of(sent) and rig.arm.puts == 0


async def test_the_stand_in_model_closes_only_with_a_classification_and_a_reason(
        tmp_path: Path, demo_client: SentinelClient, fake_openai: Any) -> None:
    from tests.support import rule_model

    async with write_rig(tmp_path, demo_client, start=NOW, fake_llm=fake_openai, brain=rule_model.brain) as rig:
        await rig.say("incidents 30d open")
        await rig.next_messages()
        await rig.say("please close [1], we checked it")
        [asked] = await rig.next_messages()
        assert "Closing needs a classification" in text_of([asked]) and rig.arm.puts == 0
        await rig.say("please close [1] as a false positive: the red team's pen test")
        [which] = await rig.next_messages()
        assert "incorrect alert logic or inaccurate data" in text_of([which]) and rig.arm.puts == 0
        await rig.say("please close [1] as a false positive, inaccurate data: the red team's pen test")
        sent = await rig.next_messages(2)
        rig.confirmation(sent)
        calls = [c["function"] for m in fake_openai.requests[-1].messages for c in m.get("tool_calls") or []]
        assert [json.loads(c["arguments"]) for c in calls] == [
            {"incident_ref": json.loads(calls[0]["arguments"])["incident_ref"], "status": "Closed",
             "classification": "FalsePositive", "classification_reason": "InaccurateData",
             "comment": "the red team's pen test"}]


@pytest.mark.parametrize("where", ["personal", "group", "channel"])
@pytest.mark.parametrize("verb", ["change_confirm", "change_cancel"])
async def test_a_pressed_confirm_or_cancel_is_one_message_the_card_updated_in_place(rig: WriteRig, where: str,
                                                                                   verb: str) -> None:
    """Issue 37: every Confirm or Cancel in a 1:1 chat posted twice (the card updated, then "Done: ..."). The card
    updated in place says the outcome, in every kind of conversation; nothing else is posted."""
    number = rig.incidents[1].incident.number
    action_id, card_id, _ = await propose(rig, f"comment {number}: called the user", where=where)
    before = len(rig.connector.sent)
    await rig.click({"action": verb, "id": action_id}, card_id=card_id, where=where)
    [update] = await rig.next_messages()
    assert update.method == "PUT" and update.activity_id == card_id
    assert said(update).text.startswith("Done: Comment added" if verb == "change_confirm" else "Cancelled by Alice")
    await rig.say("help", where=where)  # turns of one conversation run in order: the press's are all out by now
    [answer] = await rig.next_messages()
    between = [s for s in rig.connector.sent[before:] if s.type == "message"]
    assert between == [update, answer], [(s.method, s.text[:40]) for s in between]
    assert rig.arm.writes == (1 if verb == "change_confirm" else 0)
