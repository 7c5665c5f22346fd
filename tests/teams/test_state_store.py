"""The conversation state as stored: what a save writes (JSON built once), and the bound on its size."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ConversationAccount

from bot.orchestrator.items import UserMessage
from bot.orchestrator.memory import Memory, TokenCounter
from bot.teams.state import STATE_PROPERTY, ConversationData, EncodedState, StateStore, bound
from bot.teams.storage import SqliteStorage


class _Adapter:  # TurnContext needs an adapter object; nothing is sent here
    pass


def _context() -> TurnContext:
    activity = Activity(type="message", channel_id="msteams", conversation=ConversationAccount(id="a:chat"))
    return TurnContext(_Adapter(), activity)  # type: ignore[arg-type]


def _stored(path: Path) -> dict[str, object]:
    with sqlite3.connect(path) as db:
        (text,) = db.execute("SELECT data FROM bot_state").fetchone()
    value: dict[str, object] = json.loads(text)
    return value


async def test_a_save_stores_the_state_beside_what_an_earlier_version_kept_and_reads_back_the_same(
        tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "state.db")
    await storage.write({"msteams/conversations/a:chat": {"older_property": {"kept": "ünïcode ✓"}}})
    store = StateStore(storage)
    context = _context()
    data = await store.load(context)
    data.conversation.history.append(UserMessage('incidents with "quotes" and \\ and ünïcode'))
    data.mark_seen("1700000000001")
    assert await store.save(context, data, bound(data, Memory(TokenCounter())))
    stored = _stored(tmp_path / "state.db")
    assert stored == {"older_property": {"kept": "ünïcode ✓"}, STATE_PROPERTY: data.to_dict()}
    again = await store.load(_context())
    assert again.to_dict() == data.to_dict() and again.seen("1700000000001")
    data.mark_seen("1700000000002")  # changed after bound(): a save without its encoding serialises anew
    assert await store.save(context, data)
    assert (await store.load(_context())).seen("1700000000002")
    await storage.close()


def test_a_state_over_its_budget_loses_its_oldest_turns_until_it_fits() -> None:
    data = ConversationData()
    for n in range(40):
        data.conversation.history.append(UserMessage(f"question {n}: " + "x" * 2_000))
    encoded = bound(data, Memory(TokenCounter()), max_bytes=20_000)
    assert encoded.size <= 20_000 and encoded == EncodedState.of(data)
    assert data.conversation.history[-1] == UserMessage("question 39: " + "x" * 2_000), "the newest turns stay"


def test_with_no_history_left_a_state_over_its_budget_keeps_the_newer_half_of_its_facts_and_references() -> None:
    from tests.tools.test_tools_and_memory import NOW, incident, result

    data = ConversationData()
    data.conversation.history.append(UserMessage("question: " + "x" * 2_000))
    data.conversation.remember(result(*(incident(14_000 + n) for n in range(40))), NOW)
    before = [r.n for r in data.conversation.references.items]
    encoded = bound(data, Memory(TokenCounter()), max_bytes=200)
    assert data.conversation.history == [] and encoded == EncodedState.of(data)
    assert [r.n for r in data.conversation.references.items] == before[len(before) // 2:]


def test_a_state_over_its_budget_by_its_facts_sheds_facts_before_its_turns_and_references() -> None:
    """The fact check's older rows go before the conversation's turns and the analyst's [n]: with facts near their
    bound, halving facts and references at once (after every turn) lost the list the analyst was about to point at
    ("tell me more about [2]": no [2] in this conversation)."""
    from tests.tools.test_tools_and_memory import NOW, incident, result

    data = ConversationData()
    data.conversation.history.append(UserMessage("question: " + "x" * 500))
    data.conversation.remember(result(*(incident(14_000 + n) for n in range(40))), NOW)
    before = [r.n for r in data.conversation.references.items]
    full = EncodedState.of(data).size
    facts = len(json.dumps(data.conversation.facts.to_dict(), separators=(",", ":"), ensure_ascii=False))
    budget = full - facts // 4  # one halving of the facts is enough
    encoded = bound(data, Memory(TokenCounter()), max_bytes=budget)
    assert encoded.size <= budget and encoded == EncodedState.of(data)
    assert [r.n for r in data.conversation.references.items] == before, "every reference kept"
    assert data.conversation.history == [UserMessage("question: " + "x" * 500)], "the turn kept"
