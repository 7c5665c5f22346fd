"""The escalation brake: one open escalation per incident and on-call analyst, a cool-down per analyst, said to the
requester in words (who was paged, by whom, when, and when they may ask again); recorded in the state store, so
worker processes sharing it (two SqliteStorage instances on one file here) claim from one record.

Through the app: the write rig (real Teams app, fake Bot Connector, fake ARM), the on-call analyst outside the war
room, so every escalation that goes out also sends them a 1:1 message.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import MemoryStorage

from bot.orchestrator.changes.escalation import Brake, EscalationLedger, Page
from bot.sentinel.client import SentinelClient
from bot.teams.storage import CREATE_ONLY, SqliteStorage
from tests.support.write_rig import WriteRig, said, write_rig
from tests.teams.test_escalation import NOW, ON_CALL, ON_CALL_UPN

BRAKE = Brake(repeat=timedelta(minutes=60), cooldown=timedelta(seconds=120))
T0 = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


def page(incident: int, seconds: float, requester: str = "Alice") -> Page:
    return Page(incident, requester, T0 + timedelta(seconds=seconds), f"action-{incident}-{seconds}")


async def test_one_page_per_incident_and_person_and_one_per_cool_down() -> None:
    ledger = EscalationLedger(MemoryStorage(), BRAKE)
    assert await ledger.claim(ON_CALL_UPN, page(14440, 0)) is None
    stop = await ledger.claim(ON_CALL_UPN, page(14441, 30, "Bob"))
    assert stop is not None and stop.incident == 14440, "another incident, inside the cool-down"
    assert await ledger.claim("someone.else@example.com", page(14441, 30)) is None, "another analyst"
    assert await ledger.claim(ON_CALL_UPN.upper(), page(14441, 121)) is None, "after the cool-down (any case)"
    again = await ledger.claim(ON_CALL_UPN, page(14440, 1800))
    assert again is not None and again.incident == 14440, "the same incident stays open for the repeat window"
    assert await ledger.claim(ON_CALL_UPN, page(14440, 3601)) is None, "and may be escalated again after it"
    assert await ledger.check(ON_CALL_UPN, 14442, T0 + timedelta(seconds=3700)) is not None, "check records nothing"
    assert await ledger.check(ON_CALL_UPN, 14442, T0 + timedelta(seconds=3722)) is None


async def test_a_page_whose_message_failed_is_released() -> None:
    ledger = EscalationLedger(MemoryStorage(), BRAKE)
    first = page(14440, 0)
    assert await ledger.claim(ON_CALL_UPN, first) is None
    await ledger.release(ON_CALL_UPN, first)
    assert await ledger.claim(ON_CALL_UPN, page(14440, 5)) is None


async def test_worker_processes_sharing_the_store_page_an_analyst_once(tmp_path: Path) -> None:
    """13 claims at once, from two "processes" (two stores on one database file): one is recorded."""
    stores = [SqliteStorage(tmp_path / "state.db"), SqliteStorage(tmp_path / "state.db")]
    ledgers = [EscalationLedger(store, BRAKE, create_only=CREATE_ONLY) for store in stores]
    try:
        results = await asyncio.gather(*(ledgers[i % 2].claim(ON_CALL_UPN, page(14440 + i % 3, i * 0.1))
                                         for i in range(13)))
    finally:
        for store in stores:
            await store.close()
    assert sum(result is None for result in results) == 1, results


# ---- through the app ------------------------------------------------------------------------------------------------


@pytest.fixture
async def rig(tmp_path: Path, demo_client: SentinelClient) -> Any:
    async with write_rig(tmp_path, demo_client, start=NOW) as running:
        running.connector.names[ON_CALL_UPN] = ON_CALL
        running.connector.not_members.add(ON_CALL_UPN)  # outside the war room: each page is also a 1:1 message
        yield running


def direct_messages(rig: WriteRig) -> int:
    return len([s for s in rig.connector.sent if s.conversation_id.startswith("a:1direct-") and s.type == "message"])


def escalation_posts(rig: WriteRig) -> int:
    return len([s for s in rig.connector.sent if s.method == "POST" and "**Escalation**" in s.text])


async def escalate(rig: WriteRig, number: int, user: str) -> str:
    """Ask to escalate ``number`` in the war room as ``user`` and confirm it: the reply the requester read."""
    await rig.say(f"escalate {number}", where="channel", user=user)
    [proposed] = await rig.next_messages()
    shown = proposed.text + json.dumps(proposed.cards)
    if "change_confirm" not in shown:
        return shown
    action_id, card_id = rig.confirmation([proposed])
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel", user=user)
    await rig.connector.wait_for(lambda sent: any(words(s).startswith(("Done", "Not done", "Not paged"))
                                                  for s in sent[getattr(rig, "_seen", 0):]), timeout=20)
    done = [s for s in rig.connector.sent[rig._seen:] if s.type == "message"]  # type: ignore[attr-defined]
    rig._seen = len(rig.connector.sent)  # type: ignore[attr-defined]
    return next(words(s) for s in done if words(s).startswith(("Done", "Not done", "Not paged")))


def words(sent: Any) -> str:
    """What a message says: its text, or for the confirmation card's update its outcome (one message per change)."""
    return sent.text or (said(sent).text if sent.method == "PUT" and sent.type == "message" else "")


# 13 escalations in 50 s, five of them of one incident, by two analysts.
BURST = [0, 0, 1, 0, 2, 0, 3, 0, 4, 1, 2, 3, 5]


async def burst(rig: WriteRig) -> list[str]:
    answers = []
    for i, which in enumerate(BURST):
        answers.append(await escalate(rig, rig.incidents[which].incident.number, "alice" if i % 2 else "bob"))
        rig.clock.advance(seconds=50 / len(BURST))
    return answers


async def test_a_burst_of_escalations_pages_the_analyst_once_and_says_why_not_again(rig: WriteRig) -> None:
    answers = await burst(rig)
    assert answers[0].startswith("Done") and escalation_posts(rig) == 1 and direct_messages(rig) == 1
    first = rig.incidents[0].incident.number
    assert all("Done" not in a for a in answers[1:]), answers
    same = answers[1]
    assert f"#{first} was already escalated to {ON_CALL}" in same and "by Bob" in same and "at 15:30:00 UTC" in same
    other = answers[2]
    assert f"{ON_CALL} was paged" in other and f"for #{first}" in other and "Ask again after 15:32:00 UTC" in other
    assert rig.arm.puts == 1, "only the escalation that went out wrote its comment"


async def test_without_the_brake_the_burst_pages_thirteen_times(rig: WriteRig) -> None:
    """The figure the brake is measured against (the ledger taken away, as before it existed)."""
    rig.desk.ledger = None
    answers = await burst(rig)
    assert all(a.startswith("Done") for a in answers), answers
    assert escalation_posts(rig) == len(BURST) and direct_messages(rig) == len(BURST)


async def test_two_escalations_confirmed_at_once_page_once(rig: WriteRig) -> None:
    """Both cards shown before either is confirmed (the brake checked at the proposal passes both): the claim at
    Confirm is what holds."""
    numbers = [rig.incidents[0].incident.number, rig.incidents[1].incident.number]
    cards = []
    for user, number in zip(("alice", "bob"), numbers, strict=True):
        await rig.say(f"escalate {number}", where="channel", user=user)
        cards.append(rig.confirmation(await rig.next_messages()))
    await asyncio.gather(*(rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id,
                                     where="channel", user=user)
                           for user, (action_id, card_id) in zip(("alice", "bob"), cards, strict=True)))
    await rig.connector.wait_for(lambda sent: len([s for s in sent if words(s).startswith(("Done", "Not paged"))]) == 2,
                                 timeout=20)
    replies = [words(s) for s in rig.connector.sent if words(s).startswith(("Done", "Not paged"))]
    assert sorted(r.split(":")[0] for r in replies) == ["Done", "Not paged yet"], replies
    assert escalation_posts(rig) == 1 and direct_messages(rig) == 1
