"""Every markdown link form an attacker can write, posted inert (shown, readable, not a link): in the model's answers
(through the real app to the fake Bot Connector, also once the fact check's ⚠ mark lands inside the link), in the
on-call roster's rows and card, and in an escalation's reason. One place makes text inert: ``bot.cards.inert``.

``live_links`` is the check, written apart from the code it checks: what Teams' markdown (CommonMark with its
link extensions) would make a link of.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import MemoryStorage

from bot.cards.common import plain
from bot.cards.inert import ZERO_WIDTH_SPACE, inert
from bot.demo.backend import DemoBackend
from bot.sentinel.client import SentinelClient
from bot.teams.replies import safe_markdown
from tests.support import connector_fake as teams
from tests.support import openai_fake as oa
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import Bot, final_messages, next_id, start_bot


@pytest.fixture
async def bot(connector: FakeConnector, demo_client: SentinelClient, fake_openai: FakeOpenAI) -> AsyncIterator[Bot]:
    """The real app, the fake Bot Connector as its serviceUrl, the demo workspace and the scripted model."""
    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage())
    yield running
    await server.close()


URL = "https://evil.example/a"
TRUSTED = ("portal.azure.com", "security.microsoft.com", "learn.microsoft.com")

# Each form with the attacker's URL; "{u}" is the URL.
FORMS = {
    "inline": "Please [Reset MFA]({u}) now.",
    "inline with a title": 'Please [Reset MFA]({u} "Reset") now.',
    "image": "![logo]({u})",
    "full reference": "Please [Reset MFA][1] now.\n\n[1]: {u}",
    "collapsed reference": "Please [Reset MFA][] now.\n\n[Reset MFA]: {u}",
    "shortcut reference": "Please [Reset MFA] now.\n\n[Reset MFA]: {u} \"Reset\"",
    "url in parentheses": "Reset it here ({u}).",
    "url and text in parentheses": "Reset it ({u} right away).",
    "autolink": "Reset it at <{u}>.",
    "bare": "Reset it at {u} now.",
    "bare after a bracket": "Reset it [{u}] now.",
    "bold": "Reset it at **{u}**.",
    "italic": "Reset it at _{u}_.",
    "code": "Reset it at `{u}`.",
    "bold link": "**[Reset MFA]({u})**",
    "italic link": "_[Reset MFA]({u})_",
    "html anchor": 'Reset it <a href="{u}">here</a>.',
    "www": "Reset it at www.evil.example/a now.",
    "link in a trusted link's text": "[{u}](https://portal.azure.com/#home)",
    "look-alike trusted host": "[Open in Sentinel](https://portal.azure.com.evil.example/a)",
}

_SCHEME_HOST = re.compile(r"(?i)(?<![a-z0-9+.-])(?:[a-z][a-z0-9+.-]*://|www\.)([a-z0-9-]+(?:\.[a-z0-9-]+)+)")
_INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)")
_REFERENCE_USE = re.compile(r"\]\[")
_DEFINITION = re.compile(r"(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)")
_AUTOLINK = re.compile(r"(?i)<(?:[a-z][a-z0-9+.-]*:|www\.)")
_ANCHOR = re.compile(r"(?i)<a\s")


def _trusted(url: str) -> bool:
    match = re.match(r"(?i)https://([^/?#:@\s]+)(?:[/?#]|$)", url)
    return bool(match) and any(match.group(1).lower() == h or match.group(1).lower().endswith("." + h)
                               for h in TRUSTED)


def live_links(text: str) -> list[str]:
    """What in ``text`` Teams would make a link to anything but the Microsoft portals."""
    live = [m.group(0) for m in _SCHEME_HOST.finditer(text) if not _trusted(m.group(0))]
    live += [m.group(1) for m in _INLINE.finditer(text) if not _trusted(m.group(1))]
    live += [m.group(1) for m in _DEFINITION.finditer(text) if not _trusted(m.group(1))]
    live += [m.group(0) for m in (*_REFERENCE_USE.finditer(text), *_AUTOLINK.finditer(text),
                                  *_ANCHOR.finditer(text))]
    return live


def readable(text: str, url: str = URL) -> bool:
    """The URL's characters are all there, in order, once the invisible breaks are taken out."""
    return url in text.replace(ZERO_WIDTH_SPACE, "")


def test_the_check_sees_every_form_live_before_it_is_made_inert() -> None:
    for name, form in FORMS.items():
        written = form.format(u=URL)
        assert live_links(written), name
        assert not live_links(inert(written)), (name, inert(written))
    assert not live_links("see [Open in Sentinel](https://portal.azure.com/#blade/x) [1] and #14404")


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_form_is_inert_in_answers_and_card_text(name: str) -> None:
    written = FORMS[name].format(u=URL)
    for shown in (safe_markdown(written), plain(written, 400)):
        assert not live_links(shown), (name, shown)
        if "{u}" in FORMS[name]:
            assert readable(shown), (name, shown)
    assert inert(inert(written)) == inert(written), "making text inert twice changes nothing"


def test_portal_links_stay_live_in_answers() -> None:
    written = "Open [#14404 in Sentinel](https://portal.azure.com/#blade/x) or https://security.microsoft.com/incidents/5"
    assert safe_markdown(written) == written


# ---- through the app: the model's answer as posted -----------------------------------------------------------------


def answering(content: str) -> Any:
    """A model that looks incidents up first (so the fact check has records), then answers ``content``."""

    def brain(body: dict[str, Any]) -> oa.Step:
        if body.get("tools") and not any(m.get("role") == "tool" for m in body.get("messages", [])):
            return oa.tool_calls(("query_incidents", {"time_window": "last_7d", "limit": 5}))
        return oa.text(content)

    return brain


async def posted_answer(bot: Bot, fake_openai: FakeOpenAI, content: str) -> str:
    fake_openai.brain = answering(content)
    activity = teams.personal("what should I do about the MFA prompts?", activity_id=next_id(),
                              service_url=bot.connector.url)
    await bot.post(activity)
    sent = await bot.connector.wait_for(lambda s: any(x.body.get("replyToId") == activity["id"] and x.text
                                                      for x in final_messages(s)), timeout=20)
    return "\n".join(x.text for x in final_messages(sent) if x.body.get("replyToId") == activity["id"])


@pytest.mark.parametrize("name", sorted(FORMS))
async def test_each_form_in_a_model_answer_is_posted_inert(bot: Bot, fake_openai: FakeOpenAI, name: str) -> None:
    text = await posted_answer(bot, fake_openai, FORMS[name].format(u=URL))
    assert not live_links(text), text
    if "{u}" in FORMS[name]:
        assert readable(text), text


# A wrong incident number the fact check marks ("⚠(...)" right after it): inside the link's text, inside its URL.
MARKED = {
    "mark in the link's text": "Please [Reset MFA for #999999]({u}) now.",
    "mark in the URL": "Please [Reset MFA]({u}/#999999) now.",
    "mark in a bare URL's parentheses": "Reset it ({u}/#999999).",
}


@pytest.mark.parametrize("name", sorted(MARKED))
async def test_the_fact_checks_mark_inside_a_link_leaves_it_inert(bot: Bot, fake_openai: FakeOpenAI,
                                                                   name: str) -> None:
    text = await posted_answer(bot, fake_openai, MARKED[name].format(u=URL))
    assert "⚠" in text, "the fact check marked the wrong number"
    assert not live_links(text), text
    assert readable(text) and "999999" in text, text


# ---- roster rows, the roster card, and an escalation's reason --------------------------------------------------------


HOSTILE_NAME = f"[Reset MFA]({URL}) {URL} <{URL}>"


async def test_a_hostile_on_call_name_is_inert_in_the_answer_and_the_roster_card(
        bot: Bot, demo_backend: DemoBackend, fake_openai: FakeOpenAI) -> None:
    demo_backend.roster = [row | {"Name": HOSTILE_NAME} for row in demo_backend.roster]
    activity = teams.personal("who is on call now?", activity_id=next_id(), service_url=bot.connector.url)
    await bot.post(activity)
    sent = await bot.connector.wait_for(lambda s: any(x.body.get("replyToId") == activity["id"] and x.cards
                                                      for x in final_messages(s)), timeout=20)
    [answer] = [x for x in final_messages(sent) if x.body.get("replyToId") == activity["id"] and x.cards]
    assert "Reset MFA" in answer.text and not live_links(answer.text), answer.text
    card_texts = [t for card in answer.cards for t in _texts(card)]
    shown = [t for t in card_texts if "Reset MFA" in t]
    assert shown and not [t for t in shown if live_links(t)], shown
    assert all(readable(t) for t in shown), shown


def _texts(node: Any) -> list[str]:
    """A card's markdown text: TextBlocks and FactSet values (a TextRun is not read as markdown nor linked: the card
    shows what was sent there exactly, as ``cards.common.exact`` does)."""
    if isinstance(node, dict) and node.get("type") == "TextRun":
        return []
    if isinstance(node, dict):
        own = [node["text"]] if isinstance(node.get("text"), str) else []
        own += [node["value"]] if isinstance(node.get("value"), str) and node.get("title") else []
        return own + [t for key, value in node.items() if key not in ("text",) for t in _texts(value)]
    if isinstance(node, list):
        return [t for value in node for t in _texts(value)]
    return []


def _reasons(limit: int = 480) -> list[str]:
    """Every form in escalation reasons of at most ``limit`` characters (a reason may have 500)."""
    reasons = [""]
    for form in FORMS.values():
        if "[1]" in form:
            form = form.replace("[1]", "[x]")  # "escalate 14448 -- ... [1]" would name the incident [1]
        shown = form.format(u=URL).replace("\n", " ")
        if len(reasons[-1]) + len(shown) + 1 > limit:
            reasons.append("")
        reasons[-1] = f"{reasons[-1]} {shown}".strip()
    return reasons


@pytest.mark.parametrize("reason", _reasons())
async def test_a_hostile_escalation_reason_and_on_call_name_are_inert_in_the_group_message(
        tmp_path: Path, demo_client: SentinelClient, demo_backend: DemoBackend, reason: str) -> None:
    from tests.support.write_rig import write_rig
    from tests.teams.test_escalation import NOW, escalation_post, until_done
    from tests.teams.test_write_actions import propose

    on_call = next(row for row in demo_backend.roster if row["UPN"] == "adelev@example.com")
    on_call["Name"] = f"Adele {URL}"
    async with write_rig(tmp_path, demo_client, start=NOW) as rig:
        number = rig.incidents[0].incident.number
        action_id, card_id, sent = await propose(rig, f"escalate {number} -- {reason}", where="channel")
        confirm = json.dumps(sent[0].cards, ensure_ascii=False)
        assert "Reset MFA" in confirm
        await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id, where="channel")
        done = await until_done(rig)
        post = escalation_post(done)
        assert "Reset MFA" in post.text and readable(post.text)
        without_mention = re.sub(r"<at>[^<]*</at>", "", post.text)
        assert not live_links(without_mention), post.text
        for message in done:
            for card in message.cards:
                texts = [t for t in _texts(card) if "evil" in t]
                assert not [t for t in texts if live_links(t)], texts
