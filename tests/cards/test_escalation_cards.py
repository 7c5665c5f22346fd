"""The escalation's cards and message, without the network: the confirmation names the on-call analyst and
what Confirm will do, the outcome's View action shows the message exactly as posted (to whom, how) and the
audit record; all valid Adaptive Cards 1.5, within the size limit, with attacker-written text inert (in the
cards and in the Teams message, whose only markup is the bot's own mentions and bold labels).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bot import cards
from bot.orchestrator.changes.escalation import EscalationNotice, Named, Posted, unnotified_advice
from bot.sentinel.changes import ChangeKind, OnCallContact, Owner, escalation_comment, make_change
from bot.teams.mentions import Lookup, Member, escalation_message
from tests.cards.test_action_cards import ACTION_ID, EXPIRES, HOSTILE_TEXTS, facts, snapshot, toggle_and_target
from tests.cards.test_cards import NOW, assert_inert, assert_valid, texts

BRUNO = OnCallContact(Owner(user_principal_name="bruno.costa@contoso.com", name="Bruno Costa",
                            email="bruno.costa@contoso.com"), phone="+1 425 555 0847", team="SOC Tier 1",
                      location="Singapore", shift_end="2026-11-20T16:00:00+00:00")
ALEX = Owner(object_id="aad-alex", user_principal_name="alexw@example.com", name="Alex Wilber")


def escalation(on_call: OnCallContact = BRUNO, assign: bool = False, reason: str | None = None) -> Any:
    return make_change(ChangeKind.ESCALATE, 42, on_call=on_call, assign=assign, comment=reason)


def hostile_contact(value: str) -> OnCallContact:
    return OnCallContact(Owner(user_principal_name="x@contoso.com", name=value, email=value), phone=value,
                         team=value, location=value, shift_end=value)


def posted(name: str = "Bruno Costa", text: str = "**Escalation** for <at>Bruno Costa</at>: go") -> Posted:
    return Posted(text, "19:war-room@thread.tacv2;messageid=1", "activity-9",
                  (Named(name, "on call", teams_id="29:bruno"), Named("Dana", "owner", not_notified="not a member")))


def outcome_card(change: Any, **more: Any) -> dict:
    arguments: dict[str, Any] = {
        "outcome": "executed", "headline": "Done: #42 escalated to Bruno Costa (on call).",
        "requester": "Alex Wilber", "confirmed_by": "Alex Wilber", "demo": False, "action_id": ACTION_ID,
        "after": snapshot(), "audit_comment": escalation_comment(BRUNO, ALEX, None, False),
        "sent": {"method": "PUT", "path": "incidents/x/comments/y", "body": {"properties": {"message": "Escalated"}}},
        "posted": posted().to_dict(),
        "audit_record": {"event": "incident_change.executed", "escalated_to": "bruno.costa@contoso.com"}}
    return cards.change_outcome(change, snapshot(), **{**arguments, **more})


@pytest.mark.parametrize("assign", [False, True])
def test_the_confirmation_names_the_on_call_analyst_and_the_steps(assign: bool) -> None:
    card = cards.change_confirmation(escalation(assign=assign, reason="isolate WS-FIN-160"), snapshot(),
                                     action_id=ACTION_ID, requester="Alex Wilber", expires_at=EXPIRES, now=NOW,
                                     demo=True)
    assert_valid(card)
    shown = texts(card)
    assert shown[0] == "Confirm: Escalated to Bruno Costa (on call)" + (" and assigned to them" if assign else "")
    assert facts(card) == {"Name": "Bruno Costa", "Sign-in name": "bruno.costa@contoso.com",
                           "Email": "bruno.costa@contoso.com", "Phone": "+1 425 555 0847", "Team": "SOC Tier 1",
                           "Location": "Singapore", "On shift until": "20 Nov 16:00 UTC"}
    assert any(t.startswith("1. assign #42 to Bruno Costa") for t in shown) == assign
    assert any("post here an @mention of Bruno Costa" in t for t in shown)
    assert "Escalated to Bruno Costa (bruno.costa@contoso.com) by Alex Wilber from Microsoft Teams" + (
        "; assigned to them" if assign else "") in shown
    assert "Asked: isolate WS-FIN-160" in shown
    assert ("Table" in json.dumps(card)) == assign, "the owner's before -> after only when assigning"


def test_the_view_action_shows_the_message_as_sent_to_whom_and_the_audit_record() -> None:
    card = outcome_card(escalation())
    assert_valid(card)
    assert_inert(card)
    _toggle, hidden = toggle_and_target(card)
    shown = "\n".join(texts(hidden))
    for part in ("Message posted in Teams", "Bruno Costa: @mentioned (Teams id 29:bruno)",
                 "Dana: named in plain text, not notified: not a member", "Request sent to Sentinel",
                 "Audit comment written to Sentinel", "Audit record", '"event": "incident_change.executed"',
                 '"text": "\\u002a\\u002aEscalation\\u002a\\u002a for '
                 '\\u003cat\\u003eBruno Costa\\u003c/at\\u003e: go"',
                 '"id": "29:bruno"', "In conversation 19:war-room@thread.tacv2;messageid=1, message activity-9.",
                 "As it reads in Teams:\nEscalation for @Bruno Costa: go"):
        assert part in shown, part


@pytest.mark.parametrize("value", HOSTILE_TEXTS)
def test_hostile_roster_values_reasons_and_messages_stay_inert_in_the_cards(value: str) -> None:
    change = escalation(hostile_contact(value[:400]), assign=True, reason=value[:500])
    confirmation = cards.change_confirmation(change, snapshot(title=value), action_id=ACTION_ID, requester=value,
                                             expires_at=EXPIRES, now=NOW, demo=False)
    done = outcome_card(change, posted=posted(value, value).to_dict(), audit_comment=value)
    for card in (confirmation, done):
        assert_valid(card)
        assert_inert(card)


def test_ten_kilobytes_of_hostile_text_fit() -> None:
    value = "<at>x</at> **y** [z](https://evil.example) " * 300
    done = outcome_card(escalation(reason=value[:500]), posted=posted(value, value).to_dict(), audit_comment=value,
                        audit_record={"event": "incident_change.executed", "noise": value})
    assert_valid(done)
    assert_inert(done)


@pytest.mark.parametrize("value", [*HOSTILE_TEXTS, "Bob</at><at>Eve", "x)](https://evil.example"])
def test_the_teams_message_keeps_hostile_titles_names_and_reasons_inert(value: str) -> None:
    incident = snapshot(title=value, owner=Owner(user_principal_name="dana@contoso.com", name=value))
    notice = EscalationNotice(incident, hostile_contact(value), Owner(name=value), value, assigned=False)
    text, entities, named = escalation_message(notice, Lookup(Member("29:bruno", value)), Lookup(None, "gone"))
    markup = "<at>" + cards.plain(value, 80) + "</at>"
    assert text.count("<at>") == 1 and markup in text, "one mention, its name made inert inside"
    assert [e.text for e in entities] == [markup] and entities[0].mentioned.id == "29:bruno"
    without = text.replace(markup, "").replace("**Escalation**", "").replace(f"**#{incident.number}**", "")
    assert not re.search(r"<[A-Za-z/!?]", without), "no other tag, mention or HTML"
    assert "](" not in without.replace("](https://portal.azure.com", "") and "**" not in without
    assert [n.mentioned for n in named] == [True, False]


def test_nobody_found_is_never_styled_as_a_mention_and_the_advice_names_other_ways() -> None:
    notice = EscalationNotice(snapshot(), BRUNO, ALEX, None, assigned=False)
    text, entities, named = escalation_message(notice, Lookup(None, "not a member of this conversation"), None)
    assert not entities and "<at>" not in text and "@Bruno" not in text
    assert "Bruno Costa (on call, bruno.costa@contoso.com; not notified in Teams: not a member of this conversation)" \
        in text
    advice = unnotified_advice(Posted(text, "c", "a", tuple(named)), BRUNO)
    assert advice == ("Bruno Costa could not be notified in Teams (not a member of this conversation); the message "
                      "names them in plain text. Reach them another way: phone +1 425 555 0847 or email "
                      "bruno.costa@contoso.com.")
