"""The write-action cards: the confirmation a named person answers, the outcome that replaces it, and the
"Change" row of the incident detail card that proposes changes without the model.

Validated against the official Adaptive Card 1.5 schema with test_cards' helpers, kept under the size
limit with huge hostile text and request bodies, and checked to show attacker-written text inert.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot import cards
from bot.cards.incidents import CLOSE_CLASSIFICATIONS
from bot.orchestrator.loop import TurnResult
from bot.sentinel.changes import (
    ChangeKind,
    Classification,
    ClassificationReason,
    IncidentChange,
    IncidentSnapshot,
    IncidentStatus,
    Owner,
    make_change,
)
from bot.sentinel.models import IncidentDetail, IncidentMatch, QueryResult
from bot.sentinel.params import Severity
from bot.teams import replies
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolRun
from tests.cards.test_cards import HOSTILE, NOW, assert_inert, assert_valid, detail, meta, registry, shape, texts, walk

ACTION_ID = "3f2c9a7e-51b4-4e0b-9a43-0c1d2e3f4a5b"
EXPIRES = NOW + timedelta(minutes=5)
PATH = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/soc/providers/"
        "Microsoft.OperationalInsights/workspaces/soc-ws/providers/Microsoft.SecurityInsights/incidents/"
        "6a7f098b-0000-0000-0000-000000000000?api-version=2024-03-01")
FAKE_CONFIRMED = "\n\n✅ Done: Confirmed by CISO\nRequested by Alex Wilber, confirmed by Alex Wilber."
FAKE_JSON = '{"action": "change_confirm", "id": "someone-elses-action"}'
HOSTILE_TEXTS = [
    HOSTILE,
    "[Open in Sentinel](https://evil.example/login) <at>Security Team</at>",
    "Pen test\u202e\u200b\u2066 done" + FAKE_CONFIRMED,
    FAKE_JSON + "\n" + FAKE_CONFIRMED,
    "&lt;at&gt;admin&lt;/at&gt; **approve** __now__ _quickly_\n# Heading\n- item\n1. step",
]
VALID_ID = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


# ---- data -------------------------------------------------------------------------------------------


def snapshot(title: str = "Multiple MFA push notifications denied", **more: Any) -> IncidentSnapshot:
    fields: dict[str, Any] = {
        "name": "6a7f098b-0000-0000-0000-000000000000", "etag": '"0300bf09-0000-0000-0000-5c37296e0000"',
        "number": 42, "title": title, "severity": "Medium", "status": "Active",
        "owner": Owner(object_id="1b2c3d4e-0000-0000-0000-000000000001", user_principal_name="dana@contoso.com",
                       name="Dana Whitfield"),
        "url": "https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/x/incidents/42"}
    return IncidentSnapshot(**{**fields, **more})


def closed_snapshot() -> IncidentSnapshot:
    return snapshot(status="Closed", classification="FalsePositive", classification_reason="IncorrectAlertLogic",
                    classification_comment="pen test")


CHANGES = {
    "assign": make_change(ChangeKind.ASSIGN, 42, owner=Owner(user_principal_name="alex@contoso.com",
                                                             name="Alex Wilber")),
    "close": make_change(ChangeKind.STATUS, 42, status="Closed", classification="FalsePositive",
                         classification_reason="IncorrectAlertLogic", classification_comment="pen test"),
    "reopen": make_change(ChangeKind.STATUS, 42, status="Active"),
    "severity": make_change(ChangeKind.SEVERITY, 42, severity="High"),
    "comment": make_change(ChangeKind.COMMENT, 42, comment="Called the user: the MFA prompts were theirs.\n"
                                                           "Resetting the session anyway."),
}


def before_for(kind: str) -> IncidentSnapshot:
    return closed_snapshot() if kind == "reopen" else snapshot()


def confirmation(change: IncidentChange, incident: IncidentSnapshot | None = None, **more: Any) -> dict:
    arguments: dict[str, Any] = {"action_id": ACTION_ID, "requester": "Alex Wilber", "expires_at": EXPIRES,
                                 "now": NOW, "demo": False}
    return cards.change_confirmation(change, incident or snapshot(), **{**arguments, **more})


def sent_for(incident: IncidentSnapshot, change: IncidentChange) -> dict:
    body = {"etag": incident.etag, "properties": change.apply_to(
        {"title": incident.title, "severity": incident.severity, "status": incident.status,
         "owner": incident.owner.to_api(), "labels": [{"labelName": "VIP", "labelType": "User"}]})}
    return {"method": "PUT", "path": PATH, "body": body}


def outcome(change: IncidentChange, outcome_name: str = "executed", before: IncidentSnapshot | None = None,
            **more: Any) -> dict:
    before = before or snapshot()
    arguments: dict[str, Any] = {"outcome": outcome_name, "headline": "Done: status of #42 set to Closed",
                                 "requester": "Alex Wilber", "confirmed_by": "Alex Wilber", "demo": False,
                                 "action_id": ACTION_ID}
    return cards.change_outcome(change, before, **{**arguments, **more})


def executed(change: IncidentChange, before: IncidentSnapshot | None = None, **more: Any) -> dict:
    before = before or snapshot()
    after = before.with_changes(status="Closed", classification="FalsePositive",
                                classification_reason="IncorrectAlertLogic", classification_comment="pen test")
    arguments: dict[str, Any] = {"after": after, "sent": sent_for(before, change),
                                 "audit_comment": "Status set to Closed (FalsePositive: pen test) by alex@contoso.com "
                                                  "via the Sentinel assistant in Teams."}
    return outcome(change, "executed", before, **{**arguments, **more})


# ---- helpers ----------------------------------------------------------------------------------------


def submits(card: dict) -> list[dict]:
    return [node for node in walk(card) if node.get("type") == "Action.Submit"]


def open_urls(card: dict) -> list[dict]:
    return [node for node in walk(card) if node.get("type") == "Action.OpenUrl"]


def before_after_rows(card: dict) -> dict[str, tuple[str, str]]:
    table = next(node for node in walk(card) if node.get("type") == "Table")
    assert [c["items"][0]["text"] for c in table["rows"][0]["cells"]] == ["Field", "Before", "After"]
    return {row["cells"][0]["items"][0]["text"]: (row["cells"][1]["items"][0]["text"],
                                                  row["cells"][2]["items"][0]["text"]) for row in table["rows"][1:]}


def toggle_and_target(card: dict) -> tuple[dict, dict]:
    toggle, = [node for node in walk(card) if node.get("type") == "Action.ToggleVisibility"]
    hidden, = [node for node in walk(card) if node.get("isVisible") is False]
    return toggle, hidden


def shown_json(container: dict) -> str:
    """The request body as a reader copies it from the monospace lines."""
    runs = [node["text"] for node in walk(container) if node.get("type") == "TextRun"]
    return "\n".join(run.replace("\u00a0", " ") for run in runs)


def facts(node: dict) -> dict[str, str]:
    return {f["title"]: f["value"] for n in walk(node) if n.get("type") == "FactSet" for f in n["facts"]}


# ---- confirmation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(CHANGES))
@pytest.mark.parametrize("demo", [False, True])
def test_every_confirmation_is_valid_and_answers_with_the_action_id(kind: str, demo: bool) -> None:
    change = CHANGES[kind]
    card = confirmation(change, before_for(kind), demo=demo)
    assert_valid(card)
    assert texts(card)[0] == f"Confirm: {change.summary()}"
    assert ("DEMO DATA" in texts(card)) == demo
    confirm, cancel = submits(card)
    assert confirm == {"type": "Action.Submit", "title": "Confirm", "style": "positive",
                       "data": {"action": "change_confirm", "id": ACTION_ID}}
    assert cancel == {"type": "Action.Submit", "title": "Cancel", "data": {"action": "change_cancel", "id": ACTION_ID}}
    assert card["actions"][:2] == [confirm, cancel]  # plain submits: no messageBack text posted to the chat
    assert "#42 Multiple MFA push notifications denied" in texts(card)
    assert "Only Alex Wilber can confirm this. Expires in 5 minutes (15:35 UTC)." in texts(card)
    assert [a["title"] for a in open_urls(card)] == ["Open in Sentinel"]


def test_close_shows_before_and_after_of_every_field_it_sets() -> None:
    card = confirmation(CHANGES["close"])
    assert texts(card)[0] == "Confirm: Status set to Closed (FalsePositive: pen test)"
    assert before_after_rows(card) == {"Status": ("Active", "Closed"), "Classification": ("—", "False Positive"),
                                       "Reason": ("—", "Incorrect Alert Logic"), "Closing comment": ("—", "pen test")}
    table = next(node for node in walk(card) if node.get("type") == "Table")
    assert all(row["cells"][2]["items"][0].get("weight") == "bolder" for row in table["rows"][1:])


def test_assign_reopen_and_severity_tables() -> None:
    assert before_after_rows(confirmation(CHANGES["assign"])) == {"Owner": ("Dana Whitfield", "Alex Wilber")}
    assert before_after_rows(confirmation(CHANGES["reopen"], closed_snapshot())) == {
        "Status": ("Closed", "Active"), "Classification": ("False Positive", "—"),
        "Reason": ("Incorrect Alert Logic", "—"), "Closing comment": ("pen test", "—")}, "reopening clears these"
    assert before_after_rows(confirmation(CHANGES["severity"])) == {"Severity": ("Medium", "High")}
    unassigned = confirmation(CHANGES["assign"], snapshot(owner=Owner()))
    assert before_after_rows(unassigned) == {"Owner": ("Unassigned", "Alex Wilber")}
    same = confirmation(CHANGES["severity"], snapshot(severity="High"))
    table = next(node for node in walk(same) if node.get("type") == "Table")
    assert "weight" not in table["rows"][1]["cells"][2]["items"][0]  # unchanged values are not bold


def test_a_comment_is_shown_in_full_instead_of_a_table() -> None:
    comment = "\n".join(f"Line {i}: " + "checked the sign-in logs " * 3 for i in range(12))
    change = make_change(ChangeKind.COMMENT, 42, comment=comment)
    card = confirmation(change)
    assert_valid(card)
    assert not any(node.get("type") == "Table" for node in walk(card))
    shown = texts(card)
    start = shown.index("Comment to add") + 1
    assert shown[start:start + 12] == [line.strip() for line in comment.splitlines()]
    assert all(node.get("wrap") for node in walk(card) if node.get("text", "").startswith("Line "))


def test_notice_is_a_warning() -> None:
    note = "The incident changed since you asked; check the new state and confirm again."
    card = confirmation(CHANGES["close"], notice=note)
    assert_valid(card)
    warning = next(node for node in walk(card) if node.get("type") == "Container" and node.get("style") == "warning")
    assert warning["items"][0]["text"] == note and "color" not in warning["items"][0], "default text on the style"
    assert not any(node.get("style") == "warning" for node in walk(confirmation(CHANGES["close"]))
                   if node.get("type") == "Container")


@pytest.mark.parametrize(("expires", "now", "expected"), [
    (EXPIRES, NOW, "Expires in 5 minutes (15:35 UTC)."),
    (EXPIRES, NOW + timedelta(minutes=4, seconds=10), "Expires in 1 minute (15:35 UTC)."),
    (EXPIRES, NOW + timedelta(minutes=4, seconds=55), "Expires in 1 minute (15:35 UTC)."),
    (EXPIRES, NOW + timedelta(minutes=6), "This request expired at 15:35 UTC."),
    (EXPIRES.replace(tzinfo=None), NOW.replace(tzinfo=None), "Expires in 5 minutes (15:35 UTC)."),
    (EXPIRES.astimezone(datetime.now().astimezone().tzinfo), NOW, "Expires in 5 minutes (15:35 UTC)."),
])
def test_expiry_wording(expires: datetime, now: datetime, expected: str) -> None:
    card = confirmation(CHANGES["severity"], expires_at=expires, now=now)
    assert f"Only Alex Wilber can confirm this. {expected}" in texts(card)


GOOD_URLS = ["https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/x",
             "https://security.microsoft.com/incidents/42?tid=abc", "https://PORTAL.AZURE.COM/#view/x",
             "https://portal.azure.com:443/#x"]
BAD_URLS = ["http://portal.azure.com/#x", "https://evil.example/#portal.azure.com",
            "https://portal.azure.com.evil.example/", "https://portal.azure.com@evil.example/",
            "https://user:pw@portal.azure.com/", "https://portal.azure.com:8443/", "https://portal.azure.com:99999/",
            "https://evil.example\\@portal.azure.com/", "javascript:alert(1)", "", None, "https://portal.azure.com/ x",
            "https://sub.portal.azure.com/", "https://security.microsoft.com.evil.example/", "ftp://portal.azure.com/"]


@pytest.mark.parametrize("url", GOOD_URLS)
def test_open_in_sentinel_for_portal_links(url: str) -> None:
    for card in (confirmation(CHANGES["close"], snapshot(url=url)), executed(CHANGES["close"], snapshot(url=url))):
        assert_valid(card)
        assert open_urls(card) == [{"type": "Action.OpenUrl", "title": "Open in Sentinel", "url": url}]


@pytest.mark.parametrize("url", BAD_URLS)
def test_no_open_in_sentinel_for_other_links(url: str | None) -> None:
    for card in (confirmation(CHANGES["close"], snapshot(url=url)), executed(CHANGES["close"], snapshot(url=url))):
        assert_valid(card)
        assert open_urls(card) == []
    assert [a["title"] for a in confirmation(CHANGES["close"], snapshot(url=url))["actions"]] == ["Confirm", "Cancel"]


# ---- outcome ----------------------------------------------------------------------------------------


OUTCOME_CASES = [  # (outcome, colour, has "View action" with sent/after given, without)
    ("executed", "good", True, True),
    ("noop", "default", True, False),
    ("failed", "attention", True, False),
    ("cancelled", "default", False, False),
    ("expired", "default", False, False),
    ("superseded", "default", False, False),
]


@pytest.mark.parametrize("kind", list(CHANGES))
@pytest.mark.parametrize(("name", "colour", "toggled", "toggled_bare"), OUTCOME_CASES)
@pytest.mark.parametrize("demo", [False, True])
def test_every_outcome_is_valid_with_no_buttons_to_answer(kind: str, name: str, colour: str, toggled: bool,
                                                          toggled_bare: bool, demo: bool) -> None:
    change, before = CHANGES[kind], before_for(kind)
    full = outcome(change, name, before, after=before.with_changes(status="Closed"), sent=sent_for(before, change),
                   audit_comment="Changed via Teams", detail="Sentinel said 403.\nGrant Microsoft Sentinel Responder.",
                   demo=demo)
    bare = outcome(change, name, before, demo=demo, confirmed_by=None, headline="Cancelled by Alex Wilber")
    for card, has_toggle in ((full, toggled), (bare, toggled_bare)):
        assert_valid(card)
        assert submits(card) == []
        assert ("DEMO DATA" in texts(card)) == demo
        heading = next(node for node in walk(card) if node.get("style") == "heading")
        assert "color" not in heading, "coloured text (light green, red) is hard to read on a white card"
        first = card["body"][0]
        assert (first["style"] if first.get("type") == "Container" else "default") == colour
        assert heading in list(walk(first)), "the heading sits on the outcome's container"
        assert any(node.get("type") == "Action.ToggleVisibility" for node in walk(card)) == has_toggle
        assert any(node.get("isVisible") is False for node in walk(card)) == has_toggle
    assert "Requested by Alex Wilber, confirmed by Alex Wilber." in texts(full)
    assert "Requested by Alex Wilber." in texts(bare)
    assert ("Sentinel said 403." in texts(full)) and "Grant Microsoft Sentinel Responder." in texts(full)
    assert any(t.endswith("Cancelled by Alex Wilber") for t in texts(bare))
    if name != "executed":
        assert f"Requested change: {change.summary()}" in texts(bare)


def test_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="outcome must be one of"):
        outcome(CHANGES["close"], "approved")


def test_the_toggle_targets_a_hidden_container_with_a_valid_id() -> None:
    card = executed(CHANGES["close"])
    toggle, hidden = toggle_and_target(card)
    assert toggle["title"] == "View action" and toggle["targetElements"] == [hidden["id"]]
    assert hidden["type"] == "Container" and hidden["id"] == f"action-{ACTION_ID}"
    ids = [node["id"] for node in walk(card) if "id" in node]
    assert len(ids) == len(set(ids))
    for action_id, expected in (("a b<c>\"d'/e", "action-abcde"), ("", "action-status-42"), (None, "action-status-42"),
                                ("<>", "action-status-42"), ("x" * 500, "action-" + "x" * 64)):
        _, other = toggle_and_target(executed(CHANGES["close"], action_id=action_id))
        assert other["id"] == expected and VALID_ID.match(other["id"])


def test_view_action_shows_parameters_incident_request_and_audit_comment() -> None:
    change, before = CHANGES["close"], snapshot()
    sent = sent_for(before, change)
    card = executed(change, before, sent=sent)
    assert_valid(card)
    _, hidden = toggle_and_target(card)
    inside = texts(hidden)
    assert inside[:2] == ["Action", "action"]
    params = facts(hidden)
    assert params == {"action": "status", "incident": "42", "status": "Closed", "classification": "FalsePositive",
                      "classification_reason": "IncorrectAlertLogic", "classification_comment": "pen test"}
    assert before_after_rows(hidden) == {
        "Owner": ("Dana Whitfield", "Dana Whitfield"), "Severity": ("Medium", "Medium"), "Status": ("Active", "Closed"),
        "Classification": ("—", "False Positive"), "Reason": ("—", "Incorrect Alert Logic"),
        "Closing comment": ("—", "pen test")}
    assert f"PUT {PATH}" in inside
    assert json.loads(shown_json(hidden)) == sent["body"]
    assert "Audit comment written to Sentinel" in inside
    assert inside[-1].startswith("Status set to Closed (FalsePositive: pen test) by alex@contoso.com")
    assert not any("Shortened" in t for t in inside)
    assert not any("Requested change" in t for t in texts(card))  # the headline says it when it was done


def test_without_after_the_incident_is_one_factset() -> None:
    card = outcome(CHANGES["severity"], "failed", sent=sent_for(snapshot(), CHANGES["severity"]))
    assert_valid(card)
    _, hidden = toggle_and_target(card)
    assert not any(node.get("type") == "Table" for node in walk(hidden))
    assert facts(hidden)["Severity"] == "Medium" and facts(hidden)["Classification"] == "—"
    assert "Audit comment written to Sentinel" not in texts(hidden)
    noop = outcome(CHANGES["severity"], "noop", after=snapshot())
    _, hidden = toggle_and_target(noop)
    assert "Request sent to Sentinel" not in texts(hidden)


def test_a_comment_request_and_assign_owner_parameters() -> None:
    comment = CHANGES["comment"]
    sent = {"method": "PUT", "path": PATH.replace("?", "/comments/c-1?"), "body": {"properties": {
        "message": comment.comment}}}
    card = outcome(comment, "executed", sent=sent, after=snapshot(), headline="Done: comment added to #42")
    assert_valid(card)
    _, hidden = toggle_and_target(card)
    assert json.loads(shown_json(hidden)) == sent["body"]
    assert facts(hidden)["comment"] == " ".join(comment.comment.split())
    assign = outcome(CHANGES["assign"], "executed", after=snapshot(owner=CHANGES["assign"].owner))
    _, hidden = toggle_and_target(assign)
    assert facts(hidden)["owner"] == "user_principal_name: alex@contoso.com, name: Alex Wilber"


def test_a_huge_request_body_is_shortened_and_says_so() -> None:
    change = CHANGES["close"]
    labels = [{"labelName": f"label-{i}", "labelType": "User"} for i in range(300)]
    body = {"etag": "e", "properties": {"title": "🚨" * 5000, "description": "d" * 20_000, "labels": labels,
                                        **{f"extra{i}": "x" * 500 for i in range(100)}}}
    card = executed(change, sent={"method": "PUT", "path": PATH, "body": body},
                    audit_comment="a" * 10_000)
    assert_valid(card)
    _, hidden = toggle_and_target(card)
    runs = [node for node in walk(hidden) if node.get("type") == "TextRun"]
    assert 5 < len(runs) <= 60 and runs[-1]["text"] == "…"
    assert sum(len(run["text"]) for run in runs) <= 6_100
    assert any(t.startswith("Shortened to fit the card: long values and lines are cut") for t in texts(hidden))


# ---- hostile text -----------------------------------------------------------------------------------


def hostile_change(kind: str, value: str) -> IncidentChange:
    """The change with attacker text wherever it can carry text (bypassing make_change's length limits)."""
    if kind == "assign":
        return IncidentChange(ChangeKind.ASSIGN, 42, owner=Owner(user_principal_name="alex@contoso.com", name=value))
    if kind == "close":
        return IncidentChange(ChangeKind.STATUS, 42, status=IncidentStatus.CLOSED,
                              classification=Classification.FALSE_POSITIVE,
                              classification_reason=ClassificationReason.INCORRECT_ALERT_LOGIC,
                              classification_comment=value)
    if kind == "comment":
        return IncidentChange(ChangeKind.COMMENT, 42, comment=value)
    return IncidentChange(ChangeKind.SEVERITY, 42, severity=Severity.HIGH)


def hostile_incident(value: str) -> IncidentSnapshot:
    return snapshot(title=value, owner=Owner(user_principal_name="dana@contoso.com", name=value),
                    classification_comment=value, classification="FalsePositive")


def all_hostile_cards(kind: str, value: str) -> list[dict]:
    change, incident = hostile_change(kind, value), hostile_incident(value)
    after = incident.with_changes(title=value, classification_comment=value)
    return [
        confirmation(change, incident, requester=value, notice=value, demo=True),
        executed(change, incident, after=after, requester=value, confirmed_by=value, headline=value, detail=value,
                 audit_comment=value, sent={"method": "PUT", "path": value, "body": {"properties": {
                     "title": value, "message": value, value[:40]: [value, {"owner": value}]}}}),
        outcome(change, "failed", incident, headline=value, detail=value, requester=value, after=after),
        outcome(change, "cancelled", incident, headline=value, requester=value, confirmed_by=value),
    ]


@pytest.mark.parametrize("kind", ["assign", "close", "comment", "severity"])
@pytest.mark.parametrize("value", HOSTILE_TEXTS)
def test_hostile_text_is_inert(kind: str, value: str) -> None:
    for card in all_hostile_cards(kind, value):
        assert_valid(card)
        assert_inert(card)
        confirm = [s for s in submits(card) if s["title"] == "Confirm"]
        assert all(s["data"] == {"action": "change_confirm", "id": ACTION_ID} for s in confirm)
        assert len(submits(card)) in (0, 2)
        assert [a["url"] for a in open_urls(card)] in ([], [snapshot().url])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["assign", "close", "comment", "severity"])
def test_ten_kilobytes_of_hostile_text_fit(kind: str) -> None:
    for value in ((HOSTILE + FAKE_CONFIRMED) * 70, "🚨" * 10_000, ("[x](https://e) " * 700 + "\n") * 2):
        assert len(value) >= 10_000
        for card in all_hostile_cards(kind, value):
            assert_valid(card)  # includes the size limit
            assert_inert(card)


def one_line_cards(kind: str, value: str) -> list[dict]:
    """Cards where the attacker text sits in one-line fields: title, owner, closing comment, names, headline."""
    change, incident = hostile_change(kind, value), hostile_incident(value)
    after = incident.with_changes(classification_comment=value)
    return [
        confirmation(change, incident, requester=value, notice=value),
        executed(change, incident, after=after, requester=value, confirmed_by=value, headline=value),
        outcome(change, "cancelled", incident, headline=value, requester=value, confirmed_by=value),
    ]


def test_hostile_one_line_values_do_not_change_the_card_shape() -> None:
    """A hostile title, owner name or closing comment cannot add elements (a fake "Confirmed" line, a button)."""
    for kind in ("assign", "close", "severity"):
        benign = one_line_cards(kind, "Pen test by the red team")
        for value in HOSTILE_TEXTS:
            for clean_card, bad_card in zip(benign, one_line_cards(kind, value), strict=True):
                assert shape(bad_card) == shape(clean_card), (kind, value)


def test_fake_confirmation_text_stays_inside_its_own_line() -> None:
    card = confirmation(hostile_change("close", FAKE_CONFIRMED), hostile_incident(FAKE_JSON + FAKE_CONFIRMED),
                        requester="Mallory" + FAKE_CONFIRMED)
    title = next(t for t in texts(card) if t.startswith("#42 "))
    assert title == "#42 " + " ".join((FAKE_JSON + FAKE_CONFIRMED).split())
    assert texts(card)[0].startswith("Confirm: Status set to Closed (FalsePositive: ✅ Done: Confirmed by CISO")
    faked = [t for t in texts(card) if t.startswith("✅")]
    assert faked == [before_after_rows(card)["Closing comment"][1]]  # in its table cell, not a line of its own
    who = next(t for t in texts(card) if t.startswith("Only Mallory"))
    assert who.endswith("… can confirm this. Expires in 5 minutes (15:35 UTC).")  # a name is cut at 80 characters
    assert [s["data"] for s in submits(card)] == [{"action": "change_confirm", "id": ACTION_ID},
                                                  {"action": "change_cancel", "id": ACTION_ID}]


def test_hostile_request_json_still_says_exactly_what_was_sent() -> None:
    """Markup characters are JSON-escaped, so the shown JSON is inert and still parses to the body sent."""
    value = " | ".join(HOSTILE_TEXTS)
    body = {"properties": {"title": value, "labels": [value], "owner": {"assignedTo": value}}}
    card = executed(CHANGES["close"], sent={"method": "PUT", "path": PATH, "body": body})
    assert_inert(card)
    _, hidden = toggle_and_target(card)
    assert json.loads(shown_json(hidden)) == body
    runs = [node["text"] for node in walk(hidden) if node.get("type") == "TextRun"]
    assert any("\\u003cat\\u003e" in run for run in runs) and any("\\u202e" in run for run in runs)
    assert not any(re.search(r"[<>&*]|\]\(", run) for run in runs)


def test_ordinary_names_stay_readable_in_the_request() -> None:
    body = {"properties": {"owner": {"assignedTo": "José Müller", "userPrincipalName": "svc_backup@contoso.com"}}}
    _, hidden = toggle_and_target(executed(CHANGES["assign"], sent={"method": "PUT", "path": PATH, "body": body}))
    shown = shown_json(hidden)
    assert '"José Müller"' in shown and '"svc_backup@contoso.com"' in shown


def test_demo_label_on_both_cards() -> None:
    confirm = confirmation(CHANGES["severity"], demo=True)
    done = replace(snapshot(), severity="High")
    result = outcome(CHANGES["severity"], after=done, demo=True, sent=sent_for(snapshot(), CHANGES["severity"]))
    for card in (confirm, result):
        assert_valid(card)
        label = next(node for node in walk(card) if node.get("type") == "Column"
                     and any(item.get("text") == "DEMO DATA" for item in node["items"]))
        assert label["style"] == "warning" and "color" not in label["items"][0]


# ---- the "Change" row of the incident detail card ----------------------------------------------------


PORTAL_CLASSIFICATIONS = ["TruePositive:SuspiciousActivity", "BenignPositive:SuspiciousButExpected",
                          "FalsePositive:IncorrectAlertLogic", "FalsePositive:InaccurateData", "Undetermined"]
NUMBER = 14431  # tests.cards.test_cards.detail()'s incident


def detail_card(d: IncidentDetail | None = None, **more: Any) -> dict:
    return cards.incident_detail(d or detail(), lambda kind, key: 7, NOW, **more)


def closed_detail(**more: Any) -> IncidentDetail:
    d = detail(**more)
    return replace(d, incident=replace(d.incident, status="Closed", classification="FalsePositive"),
                   classification_reason="IncorrectAlertLogic", classification_comment="pen test", closed=NOW)


def change_row(card: dict) -> dict:
    """The buttons under the "Change" heading: an ActionSet, or a Container of ActionSets (rows that fit a phone)."""
    body = card["body"]
    start = next(n for n, node in enumerate(body) if node.get("text") == "Change")
    return next(node for node in body[start:] if node.get("type") in ("ActionSet", "Container"))


def change_set(card: dict) -> dict:
    """The buttons under the "Change" heading, as one ActionSet."""
    row = change_row(card)
    if row["type"] == "Container":  # rows of buttons that fit a phone (common.actions)
        return {"type": "ActionSet", "actions": [a for line in row["items"] for a in line["actions"]]}
    return row


def proposals(card: dict) -> list[dict]:
    """Every button that proposes a change, with the ShowCards' own Submits, in card order."""
    return [node for node in walk(card) if node.get("type") == "Action.Submit"
            and node.get("data", {}).get("action") == "change_propose"]


def show_card(card: dict, title: str) -> dict:
    return next(a for a in change_set(card)["actions"] if a["title"] == title and a["type"] == "Action.ShowCard")


def inputs(node: dict) -> dict[str, dict]:
    return {n["id"]: n for n in walk(node) if str(n.get("type")).startswith("Input.")}


def propose(tool: str, **arguments: str) -> dict:
    return {"action": "change_propose", "tool": tool, "arguments": {"incident_ref": str(NUMBER), **arguments}}


@pytest.mark.parametrize("demo", [False, True])
def test_the_detail_card_with_changes_proposes_the_five_changes(demo: bool) -> None:
    card = detail_card(changes=True, demo=demo)
    assert_valid(card)
    row = change_set(card)
    assert [(a["type"], a["title"]) for a in row["actions"]] == [
        ("Action.Submit", "Assign to me"), ("Action.ShowCard", "Close…"), ("Action.ShowCard", "Severity…"),
        ("Action.ShowCard", "Comment…"), ("Action.ShowCard", "Escalate…")]
    assert row["actions"][0]["data"] == propose("assign_incident", assignee="me")
    assert [(s["title"], s["data"]) for s in proposals(card)] == [
        ("Assign to me", propose("assign_incident", assignee="me")),
        ("Propose closing", propose("set_incident_status", status="Closed")),
        ("Propose severity", propose("set_incident_severity")),
        ("Propose comment", propose("add_incident_comment")),
        ("Propose escalation", propose("escalate_incident")),
    ]
    for form in row["actions"][1:]:  # each form's own button, so Teams submits that form's inputs with it
        assert form["card"]["type"] == "AdaptiveCard" and len(form["card"]["actions"]) == 1
        assert form["card"]["actions"][0]["type"] == "Action.Submit"
        assert not any(n.get("type") == "Action.ShowCard" for n in walk(form["card"]))  # ShowCards nest one card
    assert "Nothing changes until you confirm on the card that follows." in texts(card)
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Open in Sentinel",
                                "url": f"https://portal.azure.com/#asset/Incident/{NUMBER}"}]
    assert all(len(n["actions"]) <= 6 for n in walk(card) if "actions" in n)  # Teams shows at most 6 in a row


def test_a_closed_incident_offers_reopen_instead_of_close() -> None:
    card = detail_card(closed_detail(), changes=True)
    assert_valid(card)
    assert [a["title"] for a in change_set(card)["actions"]] == ["Assign to me", "Reopen", "Severity…", "Comment…",
                                                                 "Escalate…"]
    reopen = change_set(card)["actions"][1]
    assert reopen == {"type": "Action.Submit", "title": "Reopen",
                      "data": propose("set_incident_status", status="Active")}
    assert "classification" not in inputs(card) and "Propose closing" not in texts(card)
    assert [s["data"]["tool"] for s in proposals(card)] == ["assign_incident", "set_incident_status",
                                                           "set_incident_severity", "add_incident_comment",
                                                           "escalate_incident"]


@pytest.mark.parametrize("d", [detail(), closed_detail()], ids=["active", "closed"])
def test_without_changes_the_detail_card_proposes_nothing(d: IncidentDetail) -> None:
    for card in (detail_card(d), detail_card(d, changes=False)):
        assert_valid(card)
        assert proposals(card) == [] and inputs(card) == {}
        assert not any(n.get("type") == "Action.ShowCard" for n in walk(card))
        assert "Change" not in texts(card)
    assert detail_card(d) == detail_card(d, changes=False)
    with_row = detail_card(d, changes=True)
    start = with_row["body"].index(change_row(with_row)) - 2  # the heading, the note, the buttons
    assert with_row["body"][:start] + with_row["body"][start + 3:] == detail_card(d)["body"]


def test_the_close_form_asks_for_a_portal_classification_and_why() -> None:
    form = show_card(detail_card(changes=True), "Close…")["card"]
    fields = inputs(form)
    assert list(fields) == ["classification", "classification_comment"]
    choice, why = fields["classification"], fields["classification_comment"]
    assert choice["type"] == "Input.ChoiceSet" and choice["isRequired"] is True and choice["style"] == "compact"
    assert "isMultiSelect" not in choice and "value" not in choice  # no classification is chosen for the analyst
    assert [c["value"] for c in choice["choices"]] == PORTAL_CLASSIFICATIONS
    assert [(c["title"], c["value"]) for c in choice["choices"]] == [
        ("True positive – suspicious activity", "TruePositive:SuspiciousActivity"),
        ("Benign positive – suspicious but expected", "BenignPositive:SuspiciousButExpected"),
        ("False positive – incorrect alert logic", "FalsePositive:IncorrectAlertLogic"),
        ("False positive – inaccurate data", "FalsePositive:InaccurateData"),
        ("Undetermined", "Undetermined"),
    ]
    assert list(CLOSE_CLASSIFICATIONS) == [(c["title"], c["value"]) for c in choice["choices"]]
    assert why["type"] == "Input.Text" and why["isRequired"] is True and why["isMultiline"] is True
    assert why["maxLength"] == 1000 and why["placeholder"] == "Why? e.g. pen test by the red team"
    assert all(field.get("label") for field in fields.values())  # required inputs need a label (and show a *)


def test_every_portal_classification_is_one_the_change_accepts() -> None:
    for value in PORTAL_CLASSIFICATIONS:
        classification, _, reason = value.partition(":")
        change = make_change(ChangeKind.STATUS, NUMBER, status="Closed", classification=classification,
                             classification_reason=reason or None, classification_comment="pen test")
        assert change.classification is not None and change.classification.value == classification
        if reason:
            assert change.classification_reason is not None and change.classification_reason.value == reason


@pytest.mark.parametrize(("current", "offered"), [
    ("High", ["Medium", "Low", "Informational"]),
    ("Medium", ["High", "Low", "Informational"]),
    ("Informational", ["High", "Medium", "Low"]),
    ("Critical", ["High", "Medium", "Low", "Informational"]),
    (HOSTILE, ["High", "Medium", "Low", "Informational"]),
])
def test_the_severity_form_offers_the_other_severities(current: str, offered: list[str]) -> None:
    d = detail()
    card = detail_card(replace(d, incident=replace(d.incident, severity=current)), changes=True)
    assert_valid(card)
    assert_inert(card)
    fields = inputs(show_card(card, "Severity…")["card"])
    assert list(fields) == ["severity"]
    choice = fields["severity"]
    assert choice["type"] == "Input.ChoiceSet" and choice["isRequired"] is True and choice["style"] == "compact"
    assert [c["value"] for c in choice["choices"]] == offered
    assert {c["value"] for c in choice["choices"]} <= {s.value for s in Severity}
    assert choice["label"] == (f"New severity (now {'Info' if current == 'Informational' else current})"
                               if current in ("High", "Medium", "Informational") else "New severity")


def test_the_comment_form_takes_a_comment_up_to_the_limit() -> None:
    fields = inputs(show_card(detail_card(changes=True), "Comment…")["card"])
    assert list(fields) == ["comment"]
    comment = fields["comment"]
    assert comment["type"] == "Input.Text" and comment["isRequired"] is True and comment["isMultiline"] is True
    assert comment["maxLength"] == 2000 and comment["label"]


@pytest.mark.parametrize("d", [detail(), closed_detail()], ids=["active", "closed"])
def test_input_ids_are_unique_in_the_card(d: IncidentDetail) -> None:
    """The official schema cannot check it, but the spec wants ids unique in the card: the reference renderer's
    validator reports "Duplicate Id" across ShowCards, and Teams on iOS has been reported not to render cards with
    colliding input ids in ShowCards. So the closing comment is "classification_comment", the comment "comment"."""
    card = detail_card(d, changes=True)
    ids = [n["id"] for n in walk(card) if "id" in n]
    assert len(ids) == len(set(ids)), ids
    expected = ["severity", "comment"] if d.incident.status == "Closed" else \
        ["classification", "classification_comment", "severity", "comment"]
    expected += ["escalation_reason", "escalation_assign"]
    assert list(inputs(card)) == expected


def submitted(form: dict, typed: dict[str, str]) -> dict:
    """What Teams sends for a form's button: its data, with the form's own inputs merged at the top level."""
    button, = form["card"]["actions"]
    assert set(typed) == set(inputs(form["card"]))
    return {**button["data"], **typed}


def test_what_each_form_submits() -> None:
    card = detail_card(changes=True)
    close = {"classification": "FalsePositive:InaccurateData", "classification_comment": "pen test"}
    assert submitted(show_card(card, "Close…"), close) == {**propose("set_incident_status", status="Closed"), **close}
    assert submitted(show_card(card, "Severity…"), {"severity": "Low"}) == {
        **propose("set_incident_severity"), "severity": "Low"}
    assert submitted(show_card(card, "Comment…"), {"comment": "Called the user."}) == {
        **propose("add_incident_comment"), "comment": "Called the user."}
    escalation = {"escalation_reason": "Contain WS-FIN-160 now.", "escalation_assign": "true"}
    assert submitted(show_card(card, "Escalate…"), escalation) == {**propose("escalate_incident"), **escalation}


@pytest.mark.parametrize(("typed", "arguments"), [
    ({"escalation_reason": "Contain it.", "escalation_assign": "true"}, {"reason": "Contain it.", "assign": True}),
    ({"escalation_reason": "  ", "escalation_assign": "false"}, {}),
    ({"escalation_assign": "yes please"}, {}),
])
def test_the_escalate_form_becomes_the_escalation_tools_arguments(typed: dict, arguments: dict) -> None:
    from bot.teams.changes import proposed_from_card

    tool, got = proposed_from_card({**propose("escalate_incident"), **typed})
    assert tool == "escalate_incident" and got == {"incident_ref": str(NUMBER), **arguments}


def test_hostile_detail_with_changes_stays_small_valid_and_inert() -> None:
    huge = "🚨" + HOSTILE * 150  # over 10 KB of attacker-written text in every field
    assert len(huge.encode("utf-8")) > 10_000
    d = detail(n_alerts=50, n_entities=50, description=huge, title=huge,
               other_matches=tuple(IncidentMatch(100 + i, huge) for i in range(8)))
    d = replace(d, incident=replace(d.incident, title=huge, owner=huge, status=huge, tactics=(huge,),
                                    products=(huge,)), labels=(huge,) * 5, classification_comment=huge,
                alerts=tuple(replace(a, name=huge, product=huge) for a in d.alerts),
                entities=tuple(replace(e, value=huge) for e in d.entities))
    for hostile, second in ((d, "Close…"), (replace(d, incident=replace(d.incident, status="Closed")), "Reopen")):
        card = detail_card(hostile, changes=True)
        assert_valid(card)  # includes the size limit
        assert_inert(card)
        titles = [a["title"] for a in change_set(card)["actions"]]
        assert titles == ["Assign to me", second, "Severity…", "Comment…", "Escalate…"]
        assert [s["data"]["arguments"]["incident_ref"] for s in proposals(card)] == [str(NUMBER)] * 5
    benign = detail(n_alerts=50, n_entities=50, description="d" * 4000,
                    other_matches=tuple(IncidentMatch(100 + i, "Other") for i in range(8)))
    # Hostile text adds no element (it may take fewer entity rows: the size limit trims rows sooner).
    hostile_shape, benign_shape = shape(detail_card(d, changes=True)), shape(detail_card(benign, changes=True))
    assert len(hostile_shape) <= len(benign_shape) and set(hostile_shape) <= set(benign_shape)


# ---- replies: the detail card gets the buttons when the handler asks ---------------------------------


def detail_result(d: IncidentDetail | None = None) -> QueryResult:
    return QueryResult((d or detail(),), meta("get_incident_detail", 1, incident_ref=NUMBER))


def run_of(result: QueryResult) -> ToolRun:
    return ToolRun(result.metadata.tool, dict(result.metadata.parameters), result, 12.5, call_id="call-1")


def reply_cards(activities: list) -> list[dict]:
    return [attachment.content for activity in activities for attachment in activity.attachments or []]


def without_footer(card: dict) -> dict:
    """The result card as its builder made it: the reply puts the Data sources footnote in a last container."""
    last = card["body"][-1]
    assert last["type"] == "Container" and last.get("separator") and "Data sources" in json.dumps(last)
    return {**card, "body": card["body"][:-1]}


def test_command_result_carries_the_buttons_only_when_asked() -> None:
    result = detail_result()
    refs = registry(result)
    default = reply_cards(replies.command_result(result, run_of(result), refs, NOW))
    without = reply_cards(replies.command_result(result, run_of(result), refs, NOW, changes=False))
    with_buttons = reply_cards(replies.command_result(result, run_of(result), refs, NOW, changes=True))
    assert default == without and proposals(default[0]) == []
    assert len(default) == 1, "one card: the Data sources footnote is inside the result card"
    assert without_footer(default[0]) == TOOLS.card(result, refs.ref_for, NOW)
    assert result.metadata.is_demo
    assert without_footer(with_buttons[0]) == cards.incident_detail(result.records[0], refs.ref_for, NOW, demo=True,
                                                                    changes=True)
    assert len(proposals(with_buttons[0])) == 5
    assert with_buttons[0]["body"][-1] == default[0]["body"][-1]  # the footer is the same


def test_answer_puts_the_buttons_on_detail_cards_only() -> None:
    incidents = QueryResult(tuple(detail().incident for _ in range(1)), meta("query_incidents", 1))
    detail_one = detail_result()
    demo_detail = QueryResult(detail_one.records, replace(detail_one.metadata, warnings=("Showing 50 of 80 alerts.",)))
    turn = TurnResult(text="Here is #14431.", runs=[run_of(incidents), run_of(demo_detail)])
    refs = registry(incidents)
    refs.register(demo_detail)
    plain_cards = reply_cards(replies.answer(turn, refs, NOW, demo=False))
    button_cards = reply_cards(replies.answer(turn, refs, NOW, demo=False, changes=True))
    assert plain_cards[0] == button_cards[0]  # the incident table ignores it
    assert proposals(plain_cards[1]) == [] and len(proposals(button_cards[1])) == 5
    assert "Note: Showing 50 of 80 alerts." in texts(button_cards[1])  # same notes and demo marker as result_card
    assert "DEMO DATA" in texts(button_cards[1]) and "DEMO DATA" in texts(plain_cards[1])
    for card in button_cards:
        assert_valid(card)


def test_an_empty_detail_or_a_failed_query_ignores_changes() -> None:
    empty = QueryResult((), meta("get_incident_detail", 0, incident_ref=999))
    activities = replies.command_result(empty, run_of(empty), registry(empty), NOW, changes=True)
    assert without_footer(reply_cards(activities)[0]) == TOOLS.card(empty, lambda kind, key: None, NOW)
    assert all(proposals(card) == [] for card in reply_cards(activities))
