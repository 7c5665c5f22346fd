"""Escalation on the rendered Agents Playground page (a real browser, as tests/end_to_end/test_e2e_page.py, whose bot
and Playground it starts the same way: the demo workspace with incident changes on for Alex Wilber): in the group
chat Alex lists incidents, types "escalate [1]", presses Confirm, and the escalation message is visible on the
page with the outcome. The on-call analyst is drawn as a Teams mention when the Playground has them in the chat
(the demo roster's shifts are the Playground's users, the round-the-clock lead is not), else named in plain
text with "not notified". Skipped without node, the Playground or chromium (a failure in CI).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.end_to_end.test_e2e_page import page_url, see

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
__all__ = ["page_url"]  # the fixture, shared with tests/end_to_end/test_e2e_page.py


async def test_escalate_in_a_group_chat_confirm_and_the_message_is_on_the_page(page_url: str,
                                                                               tmp_path: Path) -> None:
    await see(page_url, tmp_path / "escalation.png", conversation="group", say=["incidents 30d", "escalate [1]"],
              press="Confirm", expect=["Escalation for", "Escalated by Alex Wilber from Microsoft Teams",
                                       "escalated to"], timeout_ms=40000)


async def test_escalate_in_a_channel_thread_confirm_and_the_message_is_in_the_thread(page_url: str,
                                                                                     tmp_path: Path) -> None:
    await see(page_url, tmp_path / "escalation-channel.png", conversation="general",
              say=["incidents 30d", "escalate [1]"], before_press=["Confirm: Escalated to"], press="Confirm",
              expect=["Escalation for", "Escalated by Alex Wilber from Microsoft Teams", "escalated to"],
              timeout_ms=40000)


async def test_escalate_from_the_incident_detail_card_confirm_and_the_message_is_on_the_page(page_url: str,
                                                                                            tmp_path: Path) -> None:
    """Details on a listed incident, then the detail card's Escalate…, its Propose escalation, and Confirm."""
    await see(page_url, tmp_path / "escalate-from-card.png", say=["incidents 30d"],
              press=["Details", "Escalate…", "Propose escalation", "Confirm"],
              expect=["Escalation for", "Escalated by Alex Wilber from Microsoft Teams", "escalated to"],
              timeout_ms=40000)
