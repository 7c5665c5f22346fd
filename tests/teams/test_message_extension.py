"""The message extension: compose-box search and pasted portal links, over HTTP on the real adapter and handler,
against the demo workspace; and the strict link parser on its own (forged, foreign and look-alike links).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
import pytest

from bot.demo.catalog import RESOURCE_GROUP, SUBSCRIPTION_ID, WORKSPACE_NAME
from bot.demo.catalog import TENANT_ID as DEMO_TENANT
from bot.sentinel.params import MAX_LIMIT
from bot.teams.access import REFUSAL_TEXT, Refusal
from bot.teams.extension import HELP_TEXT, NO_ME, read_search
from bot.teams.links import IncidentLink, Workspace, incident_link
from tests.cards.test_cards import assert_valid
from tests.support import connector_fake as teams
from tests.support.connector_fake import TENANT
from tests.teams.test_access import Running, audit_records, local, start  # noqa: F401 - a fixture used by name
from tests.teams.test_teams_bot import next_id

OTHER_TENANT = "0f0e0d0c-0b0a-4909-8807-060504030201"
GUID = "6a7f098b-d03d-49ec-9134-6c60c547d83c"
WS = Workspace(SUBSCRIPTION_ID, RESOURCE_GROUP, WORKSPACE_NAME, frozenset({TENANT}))
SENTINEL_LINK = ("https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/"
                 f"{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.OperationalInsights/"
                 f"workspaces/{WORKSPACE_NAME}/providers/Microsoft.SecurityInsights/Incidents/{GUID}")


# ---- links, pure ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    SENTINEL_LINK,
    SENTINEL_LINK.replace("#asset", "#@contoso.onmicrosoft.com/asset"),
    SENTINEL_LINK.replace("#asset", f"#@{TENANT}/asset"),
    SENTINEL_LINK.replace("resourceGroups", "resourcegroups").replace(GUID, GUID.upper()),
    SENTINEL_LINK.replace("https://portal.azure.com/", "https://PORTAL.azure.com"),
])
def test_sentinel_links_to_this_workspace_name_the_incident(url: str) -> None:
    assert incident_link(url, WS) == IncidentLink("sentinel", GUID)


@pytest.mark.parametrize("url", [
    "https://security.microsoft.com/incidents/14431",
    f"https://security.microsoft.com/incidents/14431?tid={TENANT}",
    f"https://security.microsoft.com/incidents/14431/overview?tid={TENANT}",
    "https://security.microsoft.com/incident2/14431/alerts",
])
def test_defender_links_name_the_incident_by_its_defender_id(url: str) -> None:
    assert incident_link(url, WS) == IncidentLink("defender", "defender:14431")


@pytest.mark.parametrize("url", [
    # another tenant's or another workspace's incident
    SENTINEL_LINK.replace(SUBSCRIPTION_ID, "11111111-2222-4333-8444-555555555555"),
    SENTINEL_LINK.replace(f"workspaces/{WORKSPACE_NAME}", "workspaces/other-ws"),
    SENTINEL_LINK.replace(f"resourceGroups/{RESOURCE_GROUP}", "resourceGroups/other-rg"),
    SENTINEL_LINK.replace("#asset", f"#@{OTHER_TENANT}/asset"),
    f"https://security.microsoft.com/incidents/14431?tid={OTHER_TENANT}",
    # not an incident
    "https://portal.azure.com/#home",
    SENTINEL_LINK.replace("/Incidents/", "/Alerts/"),
    SENTINEL_LINK + "/extra",
    SENTINEL_LINK.rsplit("/", 1)[0] + "/not-a-guid",
    "https://security.microsoft.com/alerts/da637",
    "https://security.microsoft.com/incidents/abc",
    "https://security.microsoft.com/incidents/14431?tid=x&next=https://evil.example",
    "https://security.microsoft.com/incidents/14431#frag",
    # forged hosts, schemes and look-alikes
    SENTINEL_LINK.replace("portal.azure.com", "portal.azure.com.evil.example"),
    SENTINEL_LINK.replace("portal.azure.com", "evil.example/portal.azure.com"),
    SENTINEL_LINK.replace("portal.azure.com", "portal.azure.com@evil.example"),
    SENTINEL_LINK.replace("portal.azure.com", "user@portal.azure.com"),
    SENTINEL_LINK.replace("portal.azure.com", "portal.azure.com:8443"),
    SENTINEL_LINK.replace("https://", "http://"),
    SENTINEL_LINK.replace("portal", "p\u043ertal"),  # Cyrillic o
    SENTINEL_LINK.replace("portal.azure.com", "xn--prtal-9ve.azure.com"),
    "https://security.microsoft.com.evil.example/incidents/14431",
    "https://security\uff0emicrosoft.com/incidents/14431",  # fullwidth full stop
    " " + SENTINEL_LINK,
    SENTINEL_LINK.replace("/providers/", "\\providers/", 1),
    "javascript:alert(1)//portal.azure.com",
    SENTINEL_LINK + "x" * 3000,
    "", None, 42, ["https://security.microsoft.com/incidents/1"],
])
def test_anything_else_names_nothing(url: Any) -> None:
    assert incident_link(url, WS) is None


def test_a_bot_without_the_workspace_path_unfurls_no_sentinel_links() -> None:
    assert incident_link(SENTINEL_LINK, Workspace("", "", "", frozenset({TENANT}))) is None
    assert incident_link(SENTINEL_LINK, None) is None


# ---- search text, pure ---------------------------------------------------------------------------------------

def test_search_words_become_typed_filters() -> None:
    assert read_search("#14431", None).number == 14431
    assert read_search("14431", None).number == 14431
    mine = read_search("mine HIGH open phishing mail", "aad-alice").arguments
    assert mine == {"time_window": "last_30d", "sort": "newest", "severity": "High", "status": "open",
                    "owner": "aad-alice", "search": "phishing mail"}
    assert read_search("", None).arguments == {"time_window": "last_30d", "sort": "newest"}
    with pytest.raises(ValueError):
        read_search("mine", None)


# ---- over HTTP -----------------------------------------------------------------------------------------------

async def invoke(bot: Running, name: str, value: dict[str, Any], **more: Any) -> dict[str, Any]:
    body = teams.extension(name, value, activity_id=next_id(), service_url=bot.connector.url, **more)
    async with aiohttp.ClientSession() as session, session.post(bot.url, json=body) as response:
        assert response.status == 200, await response.text()
        answer = await response.json()
    return answer["composeExtension"]


async def search(bot: Running, text: str, **page: Any) -> dict[str, Any]:
    return await invoke(bot, "composeExtension/query", teams.search(text, **page))


def numbers(result: dict[str, Any]) -> list[int]:
    return [int(a["preview"]["content"]["title"].split()[0][1:]) for a in result["attachments"]]


async def test_a_search_lists_previews_and_inserts_the_incident_card_with_details(start: Any) -> None:  # noqa: F811
    bot = await start(local())
    result = await search(bot, "", initial=True)
    assert result["type"] == "result" and len(result["attachments"]) == 25
    first = result["attachments"][0]
    assert first["preview"]["contentType"] == "application/vnd.microsoft.card.thumbnail"
    card = first["content"]
    assert first["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert_valid(card)
    number = numbers(result)[0]
    assert f"Incident #{number}" in json.dumps(card)
    details = [a for s in card["body"] if s["type"] == "ActionSet" for a in s["actions"]]
    assert details == [{"type": "Action.Submit", "title": "Details",
                        "data": {"action": "incident_detail", "incident": number}}]
    [one] = (await search(bot, f"#{number}"))["attachments"]
    assert one["content"] == card, "found by number: the same card"


async def test_search_by_words_severity_and_mine(start: Any) -> None:  # noqa: F811
    bot = await start(local())
    high = await search(bot, "high")
    assert high["attachments"] and all("High" in a["preview"]["content"]["text"] for a in high["attachments"])
    words = await search(bot, "powershell")
    titles = [a["preview"]["content"]["title"].lower() for a in words["attachments"]]
    assert any("powershell" in t for t in titles), "title or description: the titles show some"
    assert len(titles) < len((await search(bot, ""))["attachments"]) or len(titles) == 25
    mine = await search(bot, "mine")
    assert mine["type"] == "message" and "No incidents" in mine["text"], "nothing is Alice's in the demo"


async def test_a_search_with_many_matches_pages_and_ends(start: Any) -> None:  # noqa: F811
    bot = await start(local())
    pages = [numbers(await search(bot, "", skip=skip, count=25)) for skip in range(0, MAX_LIMIT + 25, 25)]
    assert [len(p) for p in pages] == [25, 25, 25, 25, 0], "pages of 25, then an empty page ends the list"
    seen = [n for p in pages for n in p]
    assert len(set(seen)) == len(seen) == MAX_LIMIT, "no incident twice across pages"


@pytest.mark.parametrize("hostile", [
    '" | union SecurityAlert | take 1 //', "'; drop table x; --", "\u202eevil\u0000", "x" * 5000, "🔥" * 300,
    "<at>Sentinel</at> incidents", "mine'or'1'=='1",
])
async def test_hostile_search_text_is_one_literal_or_a_clear_message(start: Any, hostile: str) -> None:  # noqa: F811
    bot = await start(local())
    result = await search(bot, hostile)
    if result["type"] == "message":
        assert HELP_TEXT in result["text"] or "No incidents" in result["text"] or result["text"] == NO_ME
    else:
        assert all(isinstance(a["content"], dict) for a in result["attachments"])


async def test_a_pasted_link_unfurls_to_the_detail_card_and_others_to_nothing(start: Any,  # noqa: F811
                                                                               caplog: pytest.LogCaptureFixture
                                                                               ) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    bot = await start(local())
    listed = await search(bot, "", initial=True)
    number = numbers(listed)[0]
    card = listed["attachments"][0]["content"]
    url = next(a["url"] for a in card.get("actions", []) if a["type"] == "Action.OpenUrl")
    unfurled = await invoke(bot, "composeExtension/queryLink", {"url": url})
    [attachment] = unfurled["attachments"]
    assert_valid(attachment["content"])
    assert f"Incident #{number}" in json.dumps(attachment["content"]) and "Alerts" in json.dumps(attachment["content"])
    defender = await invoke(bot, "composeExtension/queryLink",
                            {"url": f"https://security.microsoft.com/incidents/{number}?tid={DEMO_TENANT}"})
    assert f"Incident #{number}" in json.dumps(defender["attachments"][0]["content"])
    reads = audit_records(caplog, "read")
    assert reads[-1]["tool"] == "get_incident_detail" and reads[-1]["actor_object_id"] == "aad-alice"
    before = len(audit_records(caplog, "read"))
    for other in (url.replace(SUBSCRIPTION_ID, "11111111-2222-4333-8444-555555555555"),
                  url.replace("portal.azure.com", "portal.azure.com.evil.example"), "https://example.com/x",
                  f"https://security.microsoft.com/incidents/{number}?tid={OTHER_TENANT}"):
        assert (await invoke(bot, "composeExtension/queryLink", {"url": other}))["attachments"] == []
    assert len(audit_records(caplog, "read")) == before, "a link that names nothing reads nothing"
    gone = await invoke(bot, "composeExtension/queryLink", {"url": url.replace(url[-36:], GUID.replace("6", "7"))})
    assert gone["attachments"] == [], "an incident the workspace does not have: nothing"


async def test_refused_users_get_a_refusal_result_audited_and_nothing_read(start: Any,  # noqa: F811
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    bot = await start(local(readers=frozenset({"aad-someone-else"})))
    refused = await search(bot, "high")
    assert refused == {"type": "message", "text": REFUSAL_TEXT[Refusal.READER]}
    link = await invoke(bot, "composeExtension/queryLink", {"url": SENTINEL_LINK})
    assert link["type"] == "message" and link["text"] == REFUSAL_TEXT[Refusal.READER]
    assert [r["activity_type"] for r in audit_records(caplog, "access.refused")] == ["invoke", "invoke"]
    assert audit_records(caplog, "read") == []
    bot = await start(local(tenants=frozenset({TENANT})))
    other = teams.extension("composeExtension/query", teams.search("high"), activity_id=next_id(),
                            service_url=bot.connector.url)
    other["conversation"]["tenantId"] = other["channelData"]["tenant"]["id"] = OTHER_TENANT
    async with aiohttp.ClientSession() as session, session.post(bot.url, json=other) as response:
        answer = await response.json()
    assert answer["composeExtension"]["text"] == REFUSAL_TEXT[Refusal.TENANT]


async def test_malformed_extension_invokes_get_a_clear_answer(start: Any) -> None:  # noqa: F811
    bot = await start(local())
    for value in ({}, {"parameters": "x"}, {"parameters": [None, {"name": "search", "value": 5}]},
                  {"queryOptions": {"skip": -5, "count": 10**9}, "parameters": [{"name": "search", "value": "high"}]},
                  {"queryOptions": {"skip": True, "count": "x"}}):
        result = await search_raw(bot, value)
        assert result["type"] in ("result", "message")
    assert (await invoke(bot, "composeExtension/queryLink", {"url": {"nested": 1}}))["attachments"] == []
    for name in ("composeExtension/query", "composeExtension/queryLink"):
        for value in ("x", 5, None, [1]):
            assert await invoke(bot, name, value) == {"type": "message",  # type: ignore[arg-type]
                                                      "text": "The bot could not read that request."}


async def search_raw(bot: Running, value: dict[str, Any]) -> dict[str, Any]:
    return await invoke(bot, "composeExtension/query", value)


async def test_details_on_an_inserted_card_is_answered_where_it_was_pressed(start: Any) -> None:  # noqa: F811
    """Teams sends an Action.Submit on a card a message extension inserted as composeExtension/onCardButtonClicked
    with the button's data; Details is answered with the detail card, anything else acknowledged and ignored."""
    bot = await start(local())
    number = numbers(await search(bot, "", initial=True, count=1))[0]
    for data in ({"action": "change_propose", "tool": "assign_incident", "arguments": {"incident_ref": "1"}},
                 "x", {"action": "incident_detail", "incident": number}):
        body = teams.extension("composeExtension/onCardButtonClicked", data,  # type: ignore[arg-type]
                               activity_id=next_id(), service_url=bot.connector.url)
        async with aiohttp.ClientSession() as session, session.post(bot.url, json=body) as response:
            assert response.status == 200
    sent = await bot.connector.wait_for(lambda s: any(f"Incident #{number}" in json.dumps(c) for x in s
                                                      for c in x.cards))
    # Turns of one conversation run in arrival order: anything the first two presses started has been sent by now.
    [answer] = [x for x in sent if x.type == "message"]
    assert "Open in Sentinel" in json.dumps(answer.cards), "the detail card, and nothing for the other presses"
