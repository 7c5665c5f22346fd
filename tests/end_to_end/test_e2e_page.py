"""What the analyst sees, on the rendered Agents Playground page in a real browser (Debian's chromium driven by
playwright-core through tests/e2e/screenshot.js): each scenario must make its reply visible where the user
looks, not only arrive on the websocket. Screenshots are written to the test's temporary directory.

Skipped when node, the Playground or chromium is missing (``./run tests`` installs the first two, and chromium
where it can: the browser is a Debian package, not an npm one); in CI (``CI`` set) that is a failure, not a skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support import openai_fake as oa
from tests.support import processes, rule_model
from tests.support.playground import ManagedProcess, Playground, repo_root, start_sentinel_bot
from tests.support.tooling import unavailable

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
SCRIPT = repo_root() / "tests" / "e2e" / "screenshot.js"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
LIE = "(as if it were low)"
ANALYST_OBJECT_ID = "00000000-0000-0000-0000-0000000000020"  # the Playground's current user (0.2.28)


def chromium_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install chromium)"
    return None


def brain(body: dict[str, Any]) -> oa.Step | None:
    """The rule-based model, except that a question containing LIE gets its first row's severity wrong."""
    messages = body.get("messages", [])
    question = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    results = [m for m in messages if m.get("role") == "tool"]
    if LIE in question and results and body.get("tools"):
        rows = [line.split("|") for line in str(results[-1]["content"]).splitlines() if line.startswith("[")]
        if rows:
            return oa.text(f"The one to look at first is #{rows[0][1]} {rows[0][0]}: it is only Low severity.")
    return rule_model.brain(body)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    reason = chromium_missing()
    if reason:
        unavailable("page-level tests", reason)
    async with oa.FakeOpenAI(brain=brain) as model:
        # Incident changes on, for the Playground's current user (Alex Wilber's object id in its mocked tenant);
        # the escalation brake off: the page tests escalate the same incident one after another.
        bot: ManagedProcess = await start_sentinel_bot(model.endpoint, tmp_path_factory.mktemp("bot"),
                                                       WRITE_ACTIONS_ENABLED="true", WRITE_RESPONDERS=ANALYST_OBJECT_ID,
                                                       ESCALATION_REPEAT_MINUTES="0", ESCALATION_COOLDOWN_SECONDS="0")
        try:
            async with Playground(f"http://127.0.0.1:{bot.port}/api/messages",
                                  tmp_path_factory.mktemp("playground")) as playground:
                yield playground.url + "/"
        finally:
            await bot.stop()


async def see(url: str, out: Path, *, say: list[str], expect: list[str], conversation: str = "personal",
              timeout_ms: int = 90000, press: str | list[str] | None = None, before_press: tuple[str, ...] = (),
              height: int = 900, extra: tuple[str, ...] = ()) -> str:
    """Drive the page as a person would (type, send, press card buttons in turn) and wait until every ``expect``
    text is visible on it; what the page script printed. ``height``: the window's (the chat scrolls inside it: a tall
    one shows more of it); ``extra``: more of the page script's options. ``timeout_ms`` is a hang guard, not a speed
    goal: a page that shows the text sooner ends sooner, and a loaded machine took over 20 s to draw one answer."""
    argv = ["node", str(SCRIPT), "--url", url, "--conversation", conversation, "--hide-log", "--full-page",
            "--chromium", CHROMIUM, "--timeout", str(timeout_ms), "--out", str(out), "--in-thread",
            "--height", str(height), *extra]
    for title in [press] if isinstance(press, str) else press or []:
        argv += ["--press", title]
    for text in before_press:
        argv += ["--before-press", text]
    for text in say:
        argv += ["--say", text]
    for text in expect:
        argv += ["--wait-text", text]
    process = await processes.start(argv, cwd=repo_root(), stdout=asyncio.subprocess.PIPE,
                                    stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await processes.finish(process, "the page script", 300)  # a hang guard: it has --timeout
    assert process.returncode == 0, (f"not visible on the page: {expect} ({conversation}, after {say}); "
                                     f"screenshot {out}\n{stderr.decode()[-2000:]}")
    assert await asyncio.to_thread(out.exists), stdout.decode()
    # A saga error makes the page reconnect its websocket, and a message arriving meanwhile is never drawn: the
    # expected texts can still show by luck (they came before or after), so the error itself fails the scenario.
    crashed = [line for line in stdout.decode().splitlines() if line.startswith('{"pageError":"Saga error')]
    assert crashed == [], f"the page failed on what the bot sent ({conversation}, after {say}): {crashed}"
    return stdout.decode()


async def test_the_trend_charts_y_labels_are_whole_on_a_phone(page_url: str, tmp_path: Path) -> None:
    """The trend card 320 px wide, as on a phone: Teams' chart gives its y-axis labels a 20 px margin there, and
    labels such as 1.75 or 34.5 were cut ("4.5"); the card's axis keeps them whole numbers that fit."""
    printed = await see(page_url, tmp_path / "trend-phone.png", say=["trend 24h"], expect=["Alert trend", "Peak"],
                        extra=("--card-width", "320", "--chart-labels"))
    labels = [json.loads(line) for line in printed.splitlines() if line.startswith('{"yLabel"')]
    assert len(labels) == 5 and labels[0]["yLabel"] == "0", printed
    assert [label for label in labels if label["cut"] or "." in label["yLabel"]] == [], labels


async def test_one_to_one_answer_text_and_its_card_are_on_the_page(page_url: str, tmp_path: Path) -> None:
    await see(page_url, tmp_path / "personal.png", say=["what high-severity incidents came in this week?"],
              expect=["most severe first", "Data sources", "AI generated"])


async def test_the_details_button_shows_the_incident_on_the_page(page_url: str, tmp_path: Path) -> None:
    await see(page_url, tmp_path / "details.png", say=["incidents 24h"], press="Details",
              expect=["Open in Sentinel"])


async def test_group_chat_command_with_mention_is_on_the_page(page_url: str, tmp_path: Path) -> None:
    await see(page_url, tmp_path / "group.png", conversation="group", say=["incidents 24h"],
              expect=["incidents (last 24 hours", "Data sources"])


# A channel post and a reply in its thread, each answered in the thread. The bot sends no typing indicator in
# channels: the page's typing state knows chats and channels but not threads, so one in a thread made the page
# restart its websocket, and the command's answer arriving meanwhile (within ~100 ms) was never drawn.
async def test_channel_post_and_its_thread_replies_are_on_the_page(page_url: str, tmp_path: Path) -> None:
    await see(page_url, tmp_path / "channel.png", conversation="general",
              say=["incidents 24h", "what high-severity incidents came in this week?"],
              expect=["incidents (last 24 hours", "most severe first"])


async def test_a_change_is_confirmed_on_its_card_and_the_outcome_shows_there(page_url: str, tmp_path: Path) -> None:
    """The analyst asks for a change, sees the confirmation card, presses Confirm on the page, and the card shows
    the outcome (the demo workspace's writer made the change)."""
    await see(page_url, tmp_path / "confirm.png",
              say=["incidents open 24h", "close [1] false positive inaccurate data: pen test"],
              before_press=["Confirm: Status set to Closed", "Only Alex Wilber can confirm this."], press="Confirm",
              expect=["Done: Status set to Closed", "View action"])


async def test_a_wrong_claim_is_marked_where_the_analyst_reads_it(page_url: str, tmp_path: Path) -> None:
    await see(page_url, tmp_path / "fact-check.png", say=[f"what is high this week {LIE}?"],
              expect=["Fact check: 1 statement in this answer does not match", "⚠(record: High)"])


async def test_a_reply_that_never_shows_fails_the_check(page_url: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="not visible on the page"):
        await see(page_url, tmp_path / "never.png", say=["incidents 24h"], expect=["no bot ever says this"],
                  timeout_ms=4000)


# ---- watches (issue 15): a new incident posted where the team works, seen on the page -------------------------

WATCH_INTERVAL_S = 2


async def test_a_watched_new_incident_is_on_the_page_within_one_poll_and_once_across_a_restart(
        tmp_path: Path) -> None:
    """``watch high`` in a channel thread; an incident injected into the running demo workspace (its inbox file,
    as ``python -m bot demo new-incident`` does) is on the page within one poll interval; the bot is stopped, a
    second incident injected, the bot started again (same state, same port): the second is shown, the first not
    again. Each card is then updated in place with its triage (issue 27). The page stays open throughout (it shows
    only what arrives while it is open)."""
    reason = chromium_missing()
    if reason:
        unavailable("page-level tests", reason)
    import json
    import sqlite3
    import time

    from bot.demo import inject
    from tests.support.playground import free_port

    inbox, state = tmp_path / "inbox.jsonl", tmp_path / "bot"
    state.mkdir()
    settings = {"PORT": str(free_port()), "DEMO_INBOX": str(inbox), "WATCH_POLL_SECONDS": str(WATCH_INTERVAL_S)}
    first, second = "Watched: ransomware on FIN-DB-01", "Watched: beacon from WS-HR-07 while the bot was down"

    def stored(prefix: str) -> bool:
        try:
            with sqlite3.connect(state / "state.db") as db:
                return db.execute("SELECT COUNT(*) FROM bot_state WHERE key LIKE ?", (prefix + "%",)).fetchone()[0] > 0
        except sqlite3.Error:
            return False

    async def until(check, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.1)

    async with oa.FakeOpenAI(brain=brain) as model:
        bot = await start_sentinel_bot(model.endpoint, state, **settings)
        try:
            async with Playground(f"http://127.0.0.1:{settings['PORT']}/api/messages", tmp_path / "pg") as playground:
                argv = ["node", str(SCRIPT), "--url", playground.url + "/", "--conversation", "general", "--hide-log",
                        "--full-page", "--chromium", CHROMIUM, "--timeout", "60000",
                        "--out", str(tmp_path / "watch.png"),
                        "--say", "watch high", "--wait-text", "Watching for high",
                        "--wait-text", first, "--wait-text", second, "--wait-text", "Triage: ",
                        "--count-text", "New incident #900001", "--count-text", "New incident #900002"]
                page = await processes.start(argv, cwd=repo_root(), stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
                await until(lambda: stored("watches/index"))
                assert inject.append(inbox, first, "High") == 900001
                injected = time.time()
                await until(lambda: stored("watches/card/"))
                await bot.stop()
                assert inject.append(inbox, second, "High") == 900002
                bot = await start_sentinel_bot(model.endpoint, state, **settings)
                stdout, stderr = await processes.finish(page, "the page script", 300)
                assert page.returncode == 0, f"not visible on the page; screenshot {tmp_path / 'watch.png'}\n" \
                                             f"{stderr.decode()[-2000:]}"
        finally:
            await bot.stop()
    lines = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    seen = {line["seen"]: line["at"] / 1000 for line in lines if "seen" in line}
    counts = {line["count"]: line["n"] for line in lines if "count" in line}
    print(f"\nwatch card on the page {seen[first] - injected:.1f} s after the injection (poll interval "
          f"{WATCH_INTERVAL_S} s); shown {counts}")
    assert seen[first] - injected <= WATCH_INTERVAL_S + 1.5, "on the page within one poll interval (and the poll)"
    assert counts == {"New incident #900001": 1, "New incident #900002": 1}, "nothing twice, nothing missed"
