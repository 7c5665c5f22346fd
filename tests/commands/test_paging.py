"""Lists a page at a time (issue 37): "more", "page N" and a card's Next button, against the demo workspace.

What a page shows, what its footnote says was returned and what it offers next agree: `entities 30d 50` showed 25
rows while its footer said 50 were returned and suggested asking for up to 50 (the card holds 25 rows; the footer
counted the query's rows, and the card's hint was fixed text).
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.commands.paging import Listing
from bot.commands.router import CommandRouter, Route, Routed
from bot.orchestrator import sources
from bot.orchestrator.conversation import Conversation
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.terminal import render
from bot.tools.registry import TOOLS
from tests.conftest import NOW


async def _quiet(_: str) -> None:
    return None


async def say(router: CommandRouter, conversation: Conversation, text: str) -> Routed:
    return await router.route(text, conversation, _quiet)


def shown(routed: Routed) -> QueryResult:
    assert routed.route is Route.QUERY and routed.run is not None and isinstance(routed.run.artifact, QueryResult), \
        routed.text
    return routed.run.artifact


def texts(node: Any) -> str:
    if isinstance(node, dict):
        own = node.get("text") if node.get("type") == "TextBlock" else ""
        return " ".join([str(own or ""), *(texts(v) for v in node.values())])
    if isinstance(node, list):
        return " ".join(texts(v) for v in node)
    return ""


def card_of(result: QueryResult, conversation: Conversation) -> dict[str, Any]:
    return TOOLS.card(result, conversation.references.ref_for, NOW)


async def test_entities_50_shows_a_page_whose_card_footer_and_offer_agree(demo_client: SentinelClient) -> None:
    router, conversation = CommandRouter(demo_client, None), Conversation()
    everything = await demo_client.run("get_top_entities", {"time_window": "last_30d", "limit": 50})
    assert isinstance(everything, QueryResult) and len(everything.records) == 50
    total = everything.metadata.total

    routed = await say(router, conversation, "entities 30d 50")
    first = shown(routed)
    assert first.records == everything.records[:25]
    assert (first.metadata.returned, first.metadata.offset, first.metadata.total) == (25, 0, total)
    assert f"25 of {total} rows" in sources.sources([routed.run])[0].line(), "the footnote counts what is shown"
    card = card_of(first, conversation)
    words = texts(card)
    assert f'Showing 1–25 of {total} entities. Type "more" (or press Next) for the next page.' in words
    assert "up to 50" not in words, "no offer of what was already asked for"
    assert [a["title"] for a in card["actions"]] == ["Next"]
    assert conversation.references.ref_for("entity", f"{first.records[0].type}:{first.records[0].value}") == 1

    second = shown(await say(router, conversation, "MORE"))
    assert second.records == everything.records[25:50], "the next 25 of the same list"
    assert second.metadata.offset == 25 and second.metadata.returned == 25
    assert conversation.references.ref_for("entity", f"{second.records[0].type}:{second.records[0].value}") == 26
    words = texts(card_of(second, conversation))
    assert f"Showing 26–50 of {total} entities. A list pages to its first 50" in words
    assert f"rows 26–50 of {total}" in render.footer(second)

    past = await say(router, conversation, "more")
    assert past.route is Route.NEEDS and past.text.startswith(
        f"The next page is past the first 50 rows, as far as a list pages ({total} matched): narrow it")


@pytest.mark.parametrize(("typed", "said"), [
    ("page 9", "There is no page 9: this list has 5 pages (93 rows, 20 a page)."),
    ("page 0", "Pages are numbered from 1: this list has 5 pages (93 rows, 20 a page)."),
])
async def test_a_page_number_past_the_last_page_gets_a_clear_line(demo_client: SentinelClient, typed: str,
                                                                  said: str) -> None:
    router, conversation = CommandRouter(demo_client, None), Conversation()
    first = shown(await say(router, conversation, "incidents 7d"))
    assert first.metadata.total == 93 and len(first.records) == 20  # the tests' demo seed: 93 in 7 days
    answer = await say(router, conversation, typed)
    assert answer.route is Route.NEEDS and answer.text == said
    last = shown(await say(router, conversation, "Page 5"))
    assert last.metadata.offset == 80 and len(last.records) == 13
    assert "That is the last page." in texts(card_of(last, conversation))
    assert "Next" not in [a["title"] for a in card_of(last, conversation).get("actions", [])]
    done = await say(router, conversation, "next")
    assert done.route is Route.NEEDS and done.text.startswith("That was the last page: this list has 5 pages")


async def test_more_without_a_list_says_what_to_do(demo_client: SentinelClient) -> None:
    answer = await say(CommandRouter(demo_client, None), Conversation(), "more")
    assert answer.route is Route.NEEDS and answer.text.startswith("There is no list here to page through yet")


async def test_a_small_limit_is_the_page_and_the_list_is_kept_in_the_conversations_state(
        demo_client: SentinelClient) -> None:
    router, conversation = CommandRouter(demo_client, None), Conversation()
    first = shown(await say(router, conversation, "incidents 14d 10"))
    assert len(first.records) == 10
    kept = Conversation.from_dict(conversation.to_dict())  # the state a later turn (or another worker) reads
    second = shown(await say(router, kept, "more"))
    assert second.metadata.offset == 10 and len(second.records) == 10
    assert second.metadata.parameters["limit"] == 20, "asked for the rows up to the page's end"
    assert {i.number for i in first.records}.isdisjoint(i.number for i in second.records)


async def test_a_next_button_pages_its_own_list_and_a_forged_one_gets_a_clear_line(
        demo_client: SentinelClient) -> None:
    router, conversation = CommandRouter(demo_client, None), Conversation()
    first = shown(await say(router, conversation, "alerts 7d"))
    [button] = card_of(first, conversation)["actions"]
    await say(router, conversation, "incidents 24h")  # another list since: the button still pages its own
    listing = Listing.from_dict(button["data"]["listing"])
    pressed = shown(await router.page(conversation, listing, None, _quiet, pressed=True))
    assert pressed.metadata.tool == "query_alerts" and pressed.metadata.offset == 20
    assert Listing.from_dict({"tool": "query_alerts", "arguments": {}, "offset": -1, "rows": 5, "total": 9}) is None
    assert Listing.from_dict({"tool": "get_alert_trend", "arguments": {}, "offset": 0, "rows": 5, "total": 9}) is None
    forged = Listing.from_dict({"tool": "query_alerts", "arguments": {"bogus": 1}, "offset": 20, "rows": 20,
                                "total": 90})
    refused = await router.page(conversation, forged, None, _quiet, pressed=True)
    assert refused.route is Route.NEEDS and refused.text.startswith("That Next button belongs to a list I can no")
    stale = await router.page(conversation, None, None, _quiet, pressed=True)
    assert stale.route is Route.NEEDS and stale.text.startswith("That Next button belongs to a list I can no longer")
