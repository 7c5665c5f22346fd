"""Incident write actions end to end in the Microsoft 365 Agents Playground (a real Teams emulator).

The bot runs as `python -m bot serve` on the demo workspace with WRITE_ACTIONS_ENABLED, so a confirmed
change is written by the demo workspace's own writer (no Azure Resource Manager) and every read after it
shows the change. WRITE_RESPONDERS lists two of the Playground's users: Alex Wilber (the current user, who
asks) and Megan Bowen (a responder too, yet not allowed to confirm Alex's change); Adele Vance is not a
responder. The language model is the rule-based stand-in behind the fake Chat Completions server.

- A 1:1 chat: list, "assign [n] to me", the confirmation card (before -> after), Confirm, the card updated
  in place to the executed card with "View action", and the incident read again.
- A channel thread: Alex asks, Megan and Adele press the buttons (refused: "Only Alex Wilber can ..."),
  the incident is unchanged, then Alex confirms.
- The model path in a 1:1 chat: "please assign [n] to me" becomes a proposal, which Alex cancels.

Skipped locally without node or the npm package; a failure when ``CI`` is set.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tests.support import rule_model
from tests.support.openai_fake import FakeOpenAI
from tests.support.playground import (
    BotMessage,
    ManagedProcess,
    Playground,
    Sent,
    start_sentinel_bot,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
WAIT = 30.0

# The Playground's mocked tenant (version 0.2.28; checked against its config in the ``pg`` fixture). The bot
# starts before the Playground (which waits for it), so the responders' object ids are fixed here.
ALEX = {"id": "user-id-0", "name": "Alex Wilber", "aadObjectId": "00000000-0000-0000-0000-0000000000020",
        "upn": "alexw@example.com"}
MEGAN = {"id": "user-id-1", "name": "Megan Bowen", "aadObjectId": "00000000-0000-0000-0000-0000000000021"}
ADELE = {"id": "user-id-2", "name": "Adele Vance", "aadObjectId": "00000000-0000-0000-0000-0000000000022"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(brain=rule_model.brain) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bot(model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ManagedProcess]:
    process = await start_sentinel_bot(model.endpoint, tmp_path_factory.mktemp("bot"), WRITE_ACTIONS_ENABLED="true",
                                       WRITE_RESPONDERS=f"{ALEX['aadObjectId']},{MEGAN['aadObjectId']}")
    try:
        yield process
    finally:
        await process.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pg(bot: ManagedProcess, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Playground]:
    async with Playground(f"http://127.0.0.1:{bot.port}/api/messages",
                          tmp_path_factory.mktemp("playground")) as playground:
        tenant = playground.tenant
        users = {u["id"]: u for u in [tenant["currentUser"], *tenant["users"]]}
        for user in (ALEX, MEGAN, ADELE):
            known = users.get(user["id"]) or {}
            assert (known.get("name"), known.get("aadObjectId")) == (user["name"], user["aadObjectId"]), \
                f"the Playground's users changed; update ALEX/MEGAN/ADELE: {json.dumps(users)[:1500]}"
        assert tenant["currentUser"]["id"] == ALEX["id"]
        yield playground


# ---- reading cards ------------------------------------------------------------------------------------------


def walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every element (dict) of a card, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def texts(card: dict[str, Any]) -> list[str]:
    return [e["text"] for e in walk(card)
            if e.get("type") in ("TextBlock", "TextRun") and isinstance(e.get("text"), str)]


def card_with(message: BotMessage, marker: str) -> dict[str, Any] | None:
    return next((c for c in message.cards if marker in json.dumps(c)), None)


def has_card(marker: str) -> Callable[[BotMessage], bool]:
    return lambda m: card_with(m, marker) is not None


def cell_text(cell: dict[str, Any]) -> str:
    return " ".join(texts(cell))


def before_after(card: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The Field | Before | After table of a confirmation card: field -> (before, after)."""
    for table in (e for e in walk(card) if e.get("type") == "Table"):
        rows = [[cell_text(c) for c in row.get("cells", [])] for row in table.get("rows", [])]
        if rows and rows[0] == ["Field", "Before", "After"]:
            return {row[0]: (row[1], row[2]) for row in rows[1:]}
    raise AssertionError(f"no before/after table in {json.dumps(card)[:2000]}")


def facts(card: dict[str, Any]) -> dict[str, str]:
    return {f.get("title"): f.get("value") for e in walk(card) if e.get("type") == "FactSet" for f in e["facts"]}


@dataclass(frozen=True)
class Row:
    ref: str  # "[3]"
    number: int
    status: str
    owner: str


def incident_rows(card: dict[str, Any]) -> list[Row]:
    """The rows of an incident table card: [n], number, status and owner ("#14431 · Active · Dana · 16h ago")."""
    found = []
    for row in (e for e in walk(card) if e.get("type") == "TableRow"):
        cells = [cell_text(c) for c in row.get("cells", [])]
        line = re.search(r"#(\d+) · (.+?) · (.+?) · \S+ ago", cells[1] if len(cells) > 1 else "")
        if cells and re.fullmatch(r"\[\d+\]", cells[0]) and line:
            found.append(Row(cells[0], int(line.group(1)), line.group(2), line.group(3)))
    return found


def not_yet_mine(rows: list[Row]) -> Row:
    """An incident Alex does not own yet (an active one if there is), so the change is a real one."""
    candidates = [r for r in rows if r.owner != ALEX["name"]]
    assert candidates, f"every listed incident is already Alex's: {rows}"
    return next((r for r in candidates if r.status == "Active"), candidates[0])


def outcome_parts(card: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The "View action" toggle of an outcome card and the element it shows."""
    toggles = [e for e in walk(card) if e.get("type") == "Action.ToggleVisibility" and e.get("title") == "View action"]
    assert len(toggles) == 1, f"one View action expected: {json.dumps(card)[:2000]}"
    targets = toggles[0]["targetElements"]
    assert len(targets) == 1
    target_id = targets[0] if isinstance(targets[0], str) else targets[0].get("elementId")
    hidden = [e for e in walk(card) if e.get("id") == target_id]
    assert len(hidden) == 1, f"View action targets {target_id!r}, which the card has {len(hidden)} times"
    return toggles[0], hidden[0]


# ---- steps ---------------------------------------------------------------------------------------------------


async def list_incidents(pg: Playground, send: Callable[[str], Any]) -> tuple[Sent, list[Row]]:
    sent = await send("incidents 7d")
    table = await pg.wait_for(lambda m: m.conversation_id == sent.conversation_id
                              and any(incident_rows(c) for c in m.cards), timeout=WAIT, since=sent,
                              description="incident table")
    rows = next(incident_rows(c) for c in table.cards if incident_rows(c))
    assert len(rows) >= 2, pg.describe(sent.seq)
    return sent, rows


async def incident_facts(pg: Playground, send: Callable[[str], Any], number: int) -> dict[str, str]:
    """Ask "incident <n>" and read the detail card's facts (Owner, Comments, ...)."""
    sent = await send(f"incident {number}")
    heading = re.compile(rf"(\[\d+\] )?Incident #{number}")
    detail = await pg.wait_for(lambda m: m.conversation_id == sent.conversation_id
                               and any(heading.fullmatch(t) for c in m.cards for t in texts(c)),
                               timeout=WAIT, since=sent, description=f"detail card of #{number}")
    return facts(next(c for c in detail.cards if "Owner" in facts(c)))


async def confirmation_card(pg: Playground, sent: Sent) -> tuple[BotMessage, dict[str, Any]]:
    """The confirmation card the bot posted for ``sent`` (a new message, or the status message it replaced)."""
    message = await pg.wait_for(lambda m: m.conversation_id == sent.conversation_id and has_card("change_confirm")(m),
                                timeout=WAIT, since=sent)
    card = card_with(message, "change_confirm")
    assert card is not None
    return message, card


async def card_updated(pg: Playground, card_message: BotMessage, since: Sent, marker: str) -> BotMessage:
    """The card message updated in place (the same message id) to a card containing ``marker``."""
    return await pg.wait_for(lambda m: m.kind == "update" and m.activity_id == card_message.activity_id
                             and card_with(m, marker) is not None, timeout=WAIT, since=since,
                             description=f"update of card message {card_message.activity_id} with {marker!r}")


def audit_events(bot: ManagedProcess) -> list[dict[str, Any]]:
    """The bot's structured audit records (log lines "audit {...}")."""
    events = []
    for line in bot.log_path.read_text(errors="replace").splitlines():
        if "bot.audit" in line and " audit {" in line:
            events.append(json.loads(line.split(" audit ", 1)[1]))
    return events


# ---- tests ----------------------------------------------------------------------------------------------------


async def test_one_to_one_assign_to_me_confirm_updates_the_card_in_place(pg: Playground,
                                                                         bot: ManagedProcess) -> None:
    say = pg.send_personal
    _, rows = await list_incidents(pg, say)
    row = not_yet_mine(rows)
    before = await incident_facts(pg, say, row.number)
    assert before["Owner"] == row.owner != ALEX["name"]

    asked = await say(f"assign {row.ref} to me")
    message, card = await confirmation_card(pg, asked)
    shown = json.dumps(card)
    assert f"Confirm: Owner set to {ALEX['name']}" in texts(card)
    assert any(t.startswith(f"#{row.number} ") for t in texts(card)), shown
    assert before_after(card) == {"Owner": (row.owner, ALEX["name"])}
    assert f"Only {ALEX['name']} can confirm this." in " ".join(texts(card))
    confirm, cancel = message.find_action("Confirm", type="Action.Submit"), message.find_action("Cancel")
    assert confirm["data"]["action"] == "change_confirm" and cancel["data"]["action"] == "change_cancel"
    assert confirm["data"]["id"] == cancel["data"]["id"]
    action_id = confirm["data"]["id"]

    pressed = await pg.submit(message, "Confirm")
    updated = await card_updated(pg, message, pressed, "View action")
    await pg.settle()
    assert not [m for m in pg.bot_messages(pg.personal_chat_id, since=pressed) if m.kind == "create"], \
        "one message per change: the card updated in place says the outcome, nothing is posted after it"

    # In place: the PUT of the card's message was accepted, and the outcome card was not sent anew.
    puts = [e for e in pg.exchanges(direction="from_bot", since=pressed)
            if e.activity_type == "message" and e.activity.get("id") == message.activity_id]
    assert [e.status for e in puts] == [200], pg.describe(pressed.seq)
    assert not [m for m in pg.bot_messages(pg.personal_chat_id, since=pressed)
                if m.kind == "create" and has_card("View action")(m)], "the outcome card was sent as a new message"
    seen = next(m for m in pg.transcript(pg.personal_chat_id) if m.activity_id == message.activity_id)
    assert seen.kind == "update" and has_card("View action")(seen), "the chat shows the outcome where the card was"

    executed = card_with(updated, "View action") or {}
    assert len(updated.attachments) == 1 and "change_confirm" not in json.dumps(executed), "no buttons left to press"
    assert texts(executed)[0] == f"✅ Done: Owner set to {ALEX['name']} on #{row.number}."
    assert f"Requested by {ALEX['name']}, confirmed by {ALEX['name']}." in texts(executed)
    toggle, hidden = outcome_parts(executed)
    assert toggle["targetElements"] == [hidden["id"]]
    assert hidden["type"] == "Container" and hidden["isVisible"] is False and action_id in hidden["id"]
    details = " ".join(texts(hidden))
    assert "Request sent to Sentinel" in details and "Audit comment written to Sentinel" in details
    # The sign-in name in the audit comment came from the Playground's member lookup (the activity only
    # carries the user's id, name and object id).
    assert f"Owner set to {ALEX['name']} from Microsoft Teams by {ALEX['upn']}" in details
    lookups = [e for e in pg.exchanges(direction="from_bot", since=asked) if e.activity_type == "getConversationMember"]
    assert lookups and all(e.status == 200 for e in lookups)
    assert lookups[0].response.get("userPrincipalName") == ALEX["upn"]
    assert pg.notes(level="error") == []

    after = await incident_facts(pg, say, row.number)
    assert after["Owner"] == ALEX["name"]
    assert int(after["Comments"]) == int(before["Comments"]) + 1, "the audit comment was added"
    executed_audit = [e for e in audit_events(bot) if e.get("action_id") == action_id]
    assert [e["event"] for e in executed_audit] == ["incident_change.proposed", "incident_change.executed"]

    again = await pg.submit(message, value=confirm["data"])  # a second click on the (old) Confirm writes nothing
    already = await pg.wait_for(lambda m: "Already handled" in (m.text or ""), timeout=WAIT, since=again)
    assert already.conversation_id == pg.personal_chat_id
    await pg.settle()
    assert pg.rejected() == [], pg.describe()


async def test_channel_thread_only_the_requester_can_confirm(pg: Playground, bot: ManagedProcess) -> None:
    post, rows = await list_incidents(pg, lambda text: pg.post_in_channel(text))
    thread = post.conversation_id
    assert thread.startswith(f"{pg.general_channel_id};messageid=")
    row = not_yet_mine(rows)

    asked = await pg.reply_in_thread(thread, f"assign {row.ref} to me")
    message, card = await confirmation_card(pg, asked)
    assert message.conversation_id == thread, "the confirmation card is in the thread"
    assert before_after(card) == {"Owner": (row.owner, ALEX["name"])}
    action_id = message.find_action("Confirm")["data"]["id"]

    # Megan is a responder herself, but this is Alex's change.
    megan = await pg.submit(message, "Confirm", from_id=MEGAN["id"])
    refused = await pg.wait_for(lambda m: "can confirm this change" in (m.text or ""), timeout=WAIT, since=megan)
    assert refused.conversation_id == thread
    assert refused.text.startswith(f"Only {ALEX['name']} can confirm this change")
    received = await pg.wait_received(megan, timeout=WAIT)
    assert received.activity["from"] == {"id": MEGAN["id"], "name": MEGAN["name"], "aadObjectId": MEGAN["aadObjectId"]}
    assert received.activity["replyToId"] == message.activity_id
    assert received.activity["value"] == {"action": "change_confirm", "id": action_id}

    # Adele is not a responder at all; her Cancel is refused the same way.
    adele = await pg.submit(message, "Cancel", from_id=ADELE["id"])
    refused = await pg.wait_for(lambda m: "can cancel this change" in (m.text or ""), timeout=WAIT, since=adele)
    assert refused.conversation_id == thread and refused.text.startswith(f"Only {ALEX['name']} can cancel")

    # Nothing changed: the card was left alone, and the incident still has its owner. Alex looks in the 1:1
    # chat: a message of his in the thread would cancel his pending change, and the Playground sends every
    # typed message as its current user (it ignores "from" there; it honours it for card submits).
    await pg.settle()
    looked = await incident_facts(pg, pg.send_personal, row.number)
    assert looked["Owner"] == row.owner
    assert [m for m in pg.bot_messages(thread, since=megan) if m.activity_id == message.activity_id] == [], \
        "the confirmation card was not touched"
    refusals = [(e["event"], e["actor_object_id"]) for e in audit_events(bot) if e.get("action_id") == action_id]
    assert refusals == [("incident_change.proposed", ALEX["aadObjectId"]),
                        ("incident_change.confirm_refused", MEGAN["aadObjectId"]),
                        ("incident_change.cancel_refused", ADELE["aadObjectId"])]

    alex = await pg.submit(message, "Confirm")
    updated = await card_updated(pg, message, alex, "View action")
    assert updated.conversation_id == thread
    executed = card_with(updated, "View action") or {}
    assert texts(executed)[0] == f"✅ Done: Owner set to {ALEX['name']} on #{row.number}."
    outcome_parts(executed)
    await pg.settle()
    assert not [m for m in pg.bot_messages(thread, since=alex) if m.kind == "create"], "one message per change"
    final = await incident_facts(pg, lambda text: pg.reply_in_thread(thread, text), row.number)
    assert final["Owner"] == ALEX["name"]
    await pg.settle()
    assert pg.rejected() == [], pg.describe()


async def test_model_proposes_assign_to_me_and_cancel_leaves_the_incident(pg: Playground,
                                                                          model: FakeOpenAI) -> None:
    say = pg.send_personal
    _, rows = await list_incidents(pg, say)
    row = not_yet_mine(rows)
    calls_before = len(model.requests)

    asked = await say(f"please assign {row.ref} to me")
    message, card = await confirmation_card(pg, asked)
    assert len(model.requests) > calls_before, "the model, not the command parser, handled the question"
    offered = {t["function"]["name"] for t in model.requests[calls_before].json.get("tools", [])}
    assert "assign_incident" in offered
    assert before_after(card) == {"Owner": (row.owner, ALEX["name"])}
    said = await pg.wait_for(lambda m: "Proposed, not done yet" in (m.text or ""), timeout=WAIT, since=asked)
    assert f"#{row.number}" in said.text

    pressed = await pg.submit(message, "Cancel")
    updated = await card_updated(pg, message, pressed, "Cancelled by")
    cancelled = card_with(updated, "Cancelled by") or {}
    assert texts(cancelled)[0] == f"✖️ Cancelled by {ALEX['name']}."
    assert "change_confirm" not in json.dumps(cancelled) and "View action" not in json.dumps(cancelled)
    assert (await incident_facts(pg, say, row.number))["Owner"] == row.owner
    await pg.settle()
    assert pg.rejected() == [], pg.describe()


async def test_escalating_from_the_one_to_one_chat_says_why_the_on_call_analyst_was_not_messaged(
        pg: Playground, bot: ManagedProcess) -> None:
    """Issue 37: escalating from the 1:1 chat failed with "a 1:1 message failed (RuntimeError)" and a ConnectorError
    traceback. The on-call analyst is not in Alex's 1:1 chat, so the bot starts one with them by their Entra object
    id; the Playground creates it but refuses the message into it (500 UserNotFound: it knows its users by their
    Teams ids). The escalation stands, says that, and the console shows one line, no traceback."""
    _, rows = await list_incidents(pg, pg.send_personal)
    asked = await pg.send_personal(f"escalate {rows[0].ref}")
    message, _ = await confirmation_card(pg, asked)
    pressed = await pg.submit(message, "Confirm")
    updated = await card_updated(pg, message, pressed, "View action")
    outcome = " ".join(texts(card_with(updated, "View action") or {}))
    assert "escalated to" in outcome, outcome
    await pg.settle()
    posted = [m for m in pg.transcript(pg.personal_chat_id) if (m.text or "").startswith("**Escalation**")]
    assert posted and "1:1 message failed (Teams answered 500 UserNotFound)" in posted[-1].text, posted
    log = bot.log_path.read_text(errors="replace")
    assert "RuntimeError" not in log and "Traceback" not in log, log[-3000:]
    assert "the 1:1 message to the on-call analyst failed (Teams answered 500 UserNotFound)" in log
