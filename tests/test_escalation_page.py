"""Escalation on the rendered Agents Playground page (a real browser, as tests/test_e2e_page.py): in the group
chat Alex Wilber lists incidents, types "escalate [1]", presses Confirm, and the escalation message (the
on-call analyst, as a Teams mention when the Playground knows them, else named in plain text with "not
notified") is visible on the page together with the outcome.

The bot runs as `python -m bot serve` on the demo workspace with WRITE_ACTIONS_ENABLED and Alex as the one
responder; the on-call roster is the demo workspace's. Skipped without node, the Playground or chromium.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support import openai_fake as oa
from tests.support import rule_model
from tests.support.playground import ManagedProcess, Playground, start_sentinel_bot
from tests.test_e2e_page import chromium_missing, see

pytestmark = pytest.mark.asyncio(loop_scope="module")
ALEX_OBJECT_ID = "00000000-0000-0000-0000-0000000000020"  # the Playground's current user


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def page_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    reason = chromium_missing()
    if reason:
        pytest.skip(f"page-level tests: {reason}")
    async with oa.FakeOpenAI(brain=rule_model.brain) as model:
        bot: ManagedProcess = await start_sentinel_bot(model.endpoint, tmp_path_factory.mktemp("bot"),
                                                       WRITE_ACTIONS_ENABLED="true", WRITE_RESPONDERS=ALEX_OBJECT_ID)
        try:
            async with Playground(f"http://127.0.0.1:{bot.port}/api/messages",
                                  tmp_path_factory.mktemp("playground")) as playground:
                yield playground.url + "/"
        finally:
            await bot.stop()


async def test_escalate_in_a_group_chat_confirm_and_the_message_is_on_the_page(page_url: str,
                                                                               tmp_path: Path) -> None:
    await see(page_url, tmp_path / "escalation.png", conversation="group", say=["incidents 30d", "escalate [1]"],
              press="Confirm", expect=["Escalation for", "Escalated by Alex Wilber from Microsoft Teams",
                                       "escalated to"], timeout_ms=40000)
