"""The Agents Playground harness (tests/support/playground.py), proven against the echo bot.

One echo bot process and one Playground serve the whole module (about 2.5 s to start both); each test
waits only for events after its own sends. Skipped locally without node or the npm package; a failure
when ``CI`` is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.playground import (
    ManagedProcess,
    Playground,
    PlaygroundError,
    echo_bot_argv,
    repo_root,
    require_playground,
    start_bot,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def echo_bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ManagedProcess]:
    require_playground()
    bot = await start_bot(echo_bot_argv(), tmp_path_factory.mktemp("echo-bot"), name="echo-bot", cwd=repo_root())
    try:
        yield bot
    finally:
        await bot.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pg(echo_bot: ManagedProcess, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Playground]:
    async with Playground(f"http://127.0.0.1:{echo_bot.port}/api/messages",
                          tmp_path_factory.mktemp("playground")) as playground:
        yield playground
        assert playground.rejected() == [], playground.describe()


async def test_personal_message_gets_its_echo(pg: Playground) -> None:
    sent = await pg.send_personal("hello there")

    reply = await pg.wait_for_reply(sent)

    assert reply.text == "echo: hello there"
    assert reply.conversation_id == pg.personal_chat_id
    assert reply.kind == "create" and reply.activity_id and reply.timestamp is not None
    received = await pg.wait_received(sent)
    assert received.status == 201
    assert received.activity["text"] == "hello there"
    assert received.activity["conversation"]["conversationType"] == "personal"
    assert received.activity["from"]["id"] == pg.user_id


async def test_channel_mention_starts_a_thread_and_replies_stay_in_it(pg: Playground) -> None:
    post = await pg.post_in_channel("first question")
    assert post.posted_to == pg.general_channel_id
    assert post.conversation_id == f"{pg.general_channel_id};messageid={post.message_id}"

    first = await pg.wait_for_reply(post)
    assert first.text == "echo: first question"
    assert first.conversation_id == post.conversation_id

    reply = await pg.reply_in_thread(post.conversation_id, "follow-up")
    second = await pg.wait_for_reply(reply)
    assert second.text == "echo: follow-up"
    assert second.conversation_id == post.conversation_id

    received = (await pg.wait_received(reply)).activity
    assert received["text"] == f"<at>{pg.bot_name}</at> follow-up"
    assert received["conversation"]["id"] == post.conversation_id
    assert received["conversation"]["conversationType"] == "channel"
    assert received["channelData"]["teamsTeamId"] == pg.team_id
    assert received["channelData"]["teamsChannelId"] == pg.general_channel_id
    assert [e["mentioned"]["id"] for e in received["entities"] if e["type"] == "mention"] == [pg.bot_id]

    # Without an @mention the Playground does not call the bot at all.
    quiet = await pg.reply_in_thread(post.conversation_id, "just chatting", mention_bot=False)
    await pg.settle()
    assert pg.bot_messages(since=quiet) == [] and pg.exchanges(since=quiet) == []


async def test_group_chat_message(pg: Playground) -> None:
    sent = await pg.send_group("status please")

    reply = await pg.wait_for_reply(sent)

    assert reply.text == "echo: status please"
    assert reply.conversation_id == pg.group_chat_id
    received = (await pg.wait_received(sent)).activity
    assert received["conversation"]["conversationType"] == "groupChat"
    assert received["conversation"]["isGroup"] is True


async def test_card_arrives_and_its_buttons_reach_the_bot(pg: Playground) -> None:
    sent = await pg.send_personal("card")
    card_message = await pg.wait_for_reply(sent, lambda m: bool(m.cards))
    assert card_message.text is None
    assert [(a["type"], a["title"]) for a in card_message.card_actions()] == [
        ("Action.Submit", "Submit"), ("Action.Execute", "Execute")]

    pressed = await pg.submit(card_message, "Submit", inputs={"note": "typed"})
    answer = await pg.wait_for_reply(pressed)
    assert answer.text == 'submit: {"choice": "submit-pressed", "note": "typed"}'
    received = (await pg.wait_received(pressed)).activity
    assert received["replyToId"] == card_message.activity_id
    assert received["type"] == "message"
    assert received["value"] == {"choice": "submit-pressed", "note": "typed"}

    before = pg.bot_messages()[-1].seq
    result = await pg.execute(card_message, "Execute")
    assert result.type == "application/vnd.microsoft.card.adaptive"
    assert result.value["body"][0]["text"] == 'execute: execute-pressed {"choice": "execute"}'
    said = await pg.wait_for(lambda m: (m.text or "").startswith("execute:"), since=before)
    assert said.conversation_id == pg.personal_chat_id


async def test_update_in_place_is_seen_as_an_update_of_the_same_activity(pg: Playground) -> None:
    sent = await pg.send_personal("update")

    updated = await pg.wait_for(lambda m: m.is_update and m.conversation_id == pg.personal_chat_id, since=sent)

    created = pg.bot_messages(pg.personal_chat_id, since=sent)[0]
    assert (created.kind, created.text) == ("create", "update: before")
    assert (updated.activity_id, updated.text) == (created.activity_id, "update: after")
    assert pg.message(created.activity_id).text == "update: after"
    assert [m.text for m in pg.transcript(pg.personal_chat_id) if m.seq > sent.seq] == ["update: after"]


async def test_streamed_message_is_one_activity_updated_until_final(pg: Playground) -> None:
    sent = await pg.send_personal("stream")

    final = await pg.wait_for(lambda m: m.stream_type == "final", since=sent)

    events = pg.bot_messages(pg.personal_chat_id, since=sent)
    assert [(m.kind, m.stream_type, m.text) for m in events] == [
        ("create", "streaming", "stream: one"), ("update", "streaming", "stream: one two"),
        ("update", "final", "stream: one two three")]
    assert {m.activity_id for m in events} == {final.activity_id}
    assert final.stream["streamId"] == final.activity_id
    await pg.wait_received(sent)
    chunks = [e for e in pg.exchanges(direction="from_bot", since=sent)
              if e.activity.get("text", "").startswith("stream:")]
    assert [(e.activity_type, e.status) for e in chunks] == [("typing", 201), ("typing", 202), ("message", 202)]


async def test_installation_sends_the_welcome(pg: Playground) -> None:
    before = pg.bot_messages()[-1].seq

    await pg.install(pg.personal_chat_id)

    welcome = await pg.wait_for(lambda m: m.text == "welcome: echo bot installed", since=before)
    assert welcome.conversation_id == pg.personal_chat_id
    update = await pg.wait_for_exchange(lambda e: e.activity_type == "conversationUpdate", since=before)
    assert update.direction == "to_bot"
    assert {m["id"] for m in update.activity["membersAdded"]} == {pg.user_id, pg.bot_id}
    assert [e.activity["action"] for e in pg.exchanges(direction="to_bot", since=before)
            if e.activity_type == "installationUpdate"] == ["add"]


async def test_errors_are_reported_with_the_playgrounds_answer(pg: Playground) -> None:
    with pytest.raises(PlaygroundError) as error:
        await pg.send("no-such-conversation", "hello")
    assert error.value.status == 404

    with pytest.raises(TimeoutError, match="no reply in"):
        await pg.wait_for_reply(await pg.send_group("ignored", mention_bot=False), timeout=0.3)


async def test_stop_kills_the_playground_process_group(echo_bot: ManagedProcess, tmp_path: Path) -> None:
    playground = await Playground(f"http://127.0.0.1:{echo_bot.port}/api/messages", tmp_path).start()
    assert playground._process is not None
    pid = playground._process.process.pid
    assert os.getpgid(pid) == pid  # its own session and process group

    await playground.stop()

    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not playground.running
    assert (tmp_path / "playground-events.jsonl").is_file()
    first = json.loads((tmp_path / "playground-events.jsonl").read_text().splitlines()[0])
    assert "event" in first and "received" in first
