"""Who may ask, end to end in the Microsoft 365 Agents Playground (a real Teams emulator).

The bot runs as `python -m bot serve` on the demo workspace with ALLOWED_READERS naming one of the
Playground's users, Alex Wilber (the current user). Alex is answered in the 1:1 chat and in the group chat;
Megan Bowen, in the same group chat, gets the refusal message, and nothing is read for her. The bot's log
has one ``access.refused`` audit record for Megan and ``read`` records for Alex only.

Skipped locally without node or the npm package; a failure when ``CI`` is set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.teams.access import REFUSAL_TEXT, Refusal
from tests.support import rule_model
from tests.support.openai_fake import FakeOpenAI
from tests.support.playground import ManagedProcess, Playground, start_sentinel_bot

pytestmark = pytest.mark.slow
WAIT = 30.0
# The Playground's mocked users (version 0.2.28; checked against its config first).
ALEX = {"id": "user-id-0", "name": "Alex Wilber", "aadObjectId": "00000000-0000-0000-0000-0000000000020"}
MEGAN = {"id": "user-id-1", "name": "Megan Bowen", "aadObjectId": "00000000-0000-0000-0000-0000000000021"}


def audit_events(bot: ManagedProcess) -> list[dict[str, Any]]:
    """The bot's structured audit records (log lines "audit {...}")."""
    return [json.loads(line.split(" audit ", 1)[1]) for line in bot.log_path.read_text(errors="replace").splitlines()
            if "bot.audit" in line and " audit {" in line]


async def test_an_allowed_reader_is_answered_and_another_user_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    async with FakeOpenAI(brain=rule_model.brain) as model:
        bot = await start_sentinel_bot(model.endpoint, tmp_path / "bot", ALLOWED_READERS=ALEX["aadObjectId"])
        try:
            async with Playground(f"http://127.0.0.1:{bot.port}/api/messages", tmp_path / "playground") as pg:
                users = {u["id"]: u for u in [pg.tenant["currentUser"], *pg.tenant["users"]]}
                for user in (ALEX, MEGAN):
                    known = users.get(user["id"]) or {}
                    assert (known.get("name"), known.get("aadObjectId")) == (user["name"], user["aadObjectId"]), \
                        f"the Playground's users changed; update ALEX/MEGAN: {json.dumps(users)[:1500]}"
                await allowed_and_refused(pg, bot)
        finally:
            await bot.stop()


async def allowed_and_refused(pg: Playground, bot: ManagedProcess) -> None:
    asked = await pg.send_personal("incidents 24h")
    assert (await pg.wait_for_reply(asked, lambda m: bool(m.cards), timeout=WAIT)).cards, "Alex, 1:1"

    alex = await pg.send_group("incidents 24h")
    listing = await pg.wait_for_reply(alex, lambda m: bool(m.cards), timeout=WAIT)
    await pg.wait_received(alex)
    # Megan presses a button on the card Alex got (the Playground posts typed messages as its current user).
    button = next(a for a in listing.card_actions() if a.get("type") == "Action.Submit")
    megan = await pg.submit(listing, value=button["data"], from_id=MEGAN["id"])
    refusal = await pg.wait_for_reply(megan, lambda m: bool(m.text), timeout=WAIT)
    assert refusal.text == REFUSAL_TEXT[Refusal.READER] and not refusal.cards
    await pg.wait_received(megan)
    # Alex's turn may still be sending its cards; Megan's brings the refusal and nothing else (no read, below).
    assert [m.text for m in pg.bot_messages(pg.group_chat_id, since=megan) if m.text] == [refusal.text]

    events = audit_events(bot)
    [refused] = [e for e in events if e["event"] == "access.refused"]
    assert refused["actor_object_id"] == MEGAN["aadObjectId"] and refused["reason"] == "not_a_reader"
    # The watch poller reads too (as itself, every interval): the analysts' reads are the ones with an object id.
    reads = [e for e in events if e["event"] == "read" and e.get("actor") != "watch poller"]
    assert len(reads) == 2 and {e["actor_object_id"] for e in reads} == {ALEX["aadObjectId"]}
