"""The fact check on text analysts see in their first minutes (issue 38's two false marks): a list that puts a
reference beside each incident number ("[1] #900002, [2] #900001") is two mentions per item, not a claim that [2]
is the incident before it; and an entity the incident's own title or description names belongs to that incident.
Mismatches that are claims are still marked."""

from __future__ import annotations

import dataclasses

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck import grounding
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from tests.conftest import NOW
from tests.support import answer_corpus


def _reference_findings(conversation: Conversation, text: str) -> list[str]:
    found = grounding.check(text, conversation.facts, conversation.references, NOW)
    return [f.record for f in found if f.category == "reference"]


async def test_a_reference_beside_each_incident_number_is_not_a_mismatch(demo_client: SentinelClient) -> None:
    world = await answer_corpus.build_world(demo_client, NOW)
    conversation, refs = world.conversation, world.conversation.references
    a, b = world.incidents[0], world.incidents[1]
    ra, rb = refs.ref_for("incident", str(a.number)), refs.ref_for("incident", str(b.number))
    for text in (f"Not assigned yet: [{ra}] #{a.number}, [{rb}] #{b.number}",
                 f"Not assigned yet: #{a.number} [{ra}], #{b.number} [{rb}]",
                 f"- [{ra}] #{a.number}\n- [{rb}] #{b.number}",
                 f"#{a.number} ([{ra}]) and #{b.number} ([{rb}]) are open.",
                 f"[{ra}] #{a.number} [{rb}] #{b.number}"):
        assert _reference_findings(conversation, text) == [], text
    # A reference paired with another incident's number is still marked, whichever side it stands on.
    for text in (f"See #{a.number} [{rb}].", f"See [{rb}] #{a.number}.", f"[{ra}] #{b.number}, [{rb}] #{a.number}"):
        assert _reference_findings(conversation, text), text


async def test_an_entity_the_incident_title_names_belongs_to_it(demo_client: SentinelClient) -> None:
    world = await answer_corpus.build_world(demo_client, NOW)
    detail = world.details[0]
    number = detail.incident.number
    listed = {e.value.lower() for e in detail.entities}
    host = "SRV-TITLE-01"  # a host only the title names (a rule that puts the device in the incident's name)
    known_elsewhere = next(e.value for d in world.details[1:] for e in d.entities
                           if e.type == "host" and e.value.lower() not in listed)
    titled = dataclasses.replace(detail, incident=dataclasses.replace(
        detail.incident, title=f"Credential theft on {host}"))
    conversation = Conversation()
    for other in world.details[1:]:
        conversation.remember(QueryResult((other,), world_metadata()), NOW)
    conversation.remember(QueryResult((titled,), world_metadata()), NOW)

    def marked(text: str) -> list[str]:
        return [f.record for f in grounding.check(text, conversation.facts, conversation.references, NOW)]

    assert marked(f"#{number} involves {host}.") == []
    assert marked(f"#{number} involves {known_elsewhere}.")  # an entity of another incident, not this one's


def world_metadata():
    from bot.sentinel.models import QueryMetadata

    return QueryMetadata("get_incident_detail", {}, 1, 1, False, 1.0, "", "P90D", "demo")
