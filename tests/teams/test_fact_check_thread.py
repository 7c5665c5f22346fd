"""The fact check runs off every event loop (issue 38): a long or hostile answer never holds up the web server's loop,
which acknowledges Teams' requests, nor the turns' loop, which serves the other conversations.

Through the real turn path (the adapter, the runner, the orchestrator, the rule-based model streaming its answer over
the fake Chat Completions server): the check's own functions are wrapped to note the thread they run on and whether
an event loop runs there. No time is measured.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from bot.orchestrator import factcheck
from bot.orchestrator.factcheck.stream import StreamCheck
from tests.support import connector_fake as teams
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import Bot, bot, final_messages, next_id  # noqa: F401 - a fixture used by name


def _loop_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _noting(function: Callable[..., Any], seen: list[tuple[str, int, bool]], name: str) -> Callable[..., Any]:
    def noted(*args: Any, **kwargs: Any) -> Any:
        seen.append((name, threading.get_ident(), _loop_here()))
        return function(*args, **kwargs)
    return noted


async def test_the_answers_check_runs_off_the_web_loop_and_the_turns_loop(
        bot: Bot, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    seen: list[tuple[str, int, bool]] = []
    monkeypatch.setattr(factcheck, "check", _noting(factcheck.check, seen, "answer"))
    monkeypatch.setattr(StreamCheck, "advance", _noting(StreamCheck.advance, seen, "streamed piece"))
    web_thread = threading.get_ident()  # the test's loop serves the bot's web routes
    fake_openai.latency_s = 0.3  # long enough for progress: the answer streams
    await bot.post(teams.personal("what high-severity incidents came in this week?", activity_id=next_id(),
                                  service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: bool(final_messages(s)))
    assert "[1]" in final_messages(sent)[-1].text
    kinds = {name for name, _, _ in seen}
    assert kinds == {"answer", "streamed piece"}, seen
    assert all(thread != web_thread for _, thread, _ in seen), "checked on the web server's thread"
    assert not any(loop for _, _, loop in seen), "checked on a thread that runs an event loop (the turns' loop)"
