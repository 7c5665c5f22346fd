"""Triage on arrival (bot/investigation/triage.py) on the demo workspace, and its section of the watch card."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.cards.watches import TRIAGE_PENDING, watched_incident
from bot.investigation.models import EntityVerdict, Investigation, Level, RelatedIncident, Triage
from bot.investigation.run import investigate
from bot.investigation.triage import MAX_ENTITIES, MAX_RELATED, main_entities, triage
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import Incident, IncidentDetail
from tests.cards.test_cards import assert_valid

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


async def test_the_triage_is_each_main_entitys_investigation_and_the_other_open_incidents(
        demo_client: SentinelClient) -> None:
    listed = await demo_client.run("query_incidents", {"time_window": "last_24h", "limit": 6})
    checked = 0
    for incident in listed.records:  # type: ignore[union-attr]
        detail = (await demo_client.run("get_incident_detail", {"incident_ref": incident.number})).records[0]
        assert isinstance(detail, IncidentDetail)
        found = await triage(demo_client, incident.number)
        picked = main_entities(detail)
        if not picked:
            assert found is None
            continue
        assert found is not None and found.incident == incident.number and len(picked) <= MAX_ENTITIES
        assert [(e.kind, e.value) for e in found.entities] == picked
        related: set[int] = set()
        for verdict, (kind, value) in zip(found.entities, picked, strict=True):
            own = await investigate(demo_client, {"entity": value, "entity_type": kind, "time_window": "last_7d"})
            investigation = own.records[0]  # type: ignore[union-attr]
            assert isinstance(investigation, Investigation)
            assert verdict.level is investigation.assessment.level
            assert verdict.signals == tuple(s.title for s in investigation.assessment.signals)
            section = investigation.section("query_incidents")
            related |= {i.number for i in section.records if isinstance(i, Incident)  # type: ignore[union-attr]
                        and i.status != "Closed" and i.number != incident.number}
        assert {r.number for r in found.related} <= related and len(found.related) == min(len(related), MAX_RELATED)
        order = list(Level)
        assert found.level is max((e.level for e in found.entities), key=order.index)
        assert found.headline and found.headline[0].startswith("Suggested: "), "the summary's first lines"
        checked += 1
    assert checked >= 3, "the demo's recent incidents name entities"


async def test_an_incident_the_workspace_does_not_have_has_no_triage(demo_client: SentinelClient) -> None:
    assert await triage(demo_client, 2**31 - 1) is None


def sample(value: str = "alice@contoso.com") -> Triage:
    return Triage(42, (EntityVerdict("account", value, Level.HIGH, 70, ("Risky user", "MFA-fatigue pattern")),
                       EntityVerdict("ip", "203.0.113.7", Level.NONE, 0, (), failed=True)),
                  (RelatedIncident(41, "Impossible travel", "Medium"),),
                  (f"Suggested: TruePositive (account {value} is HIGH (70))", f"Next: Reset the password of {value}"))


def test_a_stored_triage_reads_back_and_a_damaged_one_is_none() -> None:
    t = sample()
    assert Triage.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    for damaged in (None, {}, {"incident": "x"}, {"incident": 1, "entities": [{"kind": "a"}], "related": []}, "x"):
        assert Triage.from_dict(damaged) is None


def incident(title: str = "Beacon") -> Incident:
    return Incident(42, title, "High", "New", None, NOW, NOW, 1, (), (), "https://portal.azure.com/#asset/x", None)


@pytest.mark.parametrize("hostile", ["alice@contoso.com", "<at>Bob</at> [click](https://evil.example) **now**"])
def test_the_watch_card_shows_the_triage_valid_and_inert(hostile: str) -> None:
    pending = watched_incident(incident(), watch="high", now=NOW, demo=True, changes=True, triage_pending=True)
    assert_valid(pending)
    assert TRIAGE_PENDING in json.dumps(pending, ensure_ascii=False)
    shown = watched_incident(incident(), watch="high", now=NOW, demo=True, changes=True, triage=sample(hostile))
    assert_valid(shown)
    text = json.dumps(shown, ensure_ascii=False)
    assert "Triage: HIGH" in text and "Risky user, MFA-fatigue pattern" in text and "not assessed" in text
    assert "#41 Impossible travel (Medium)" in text and TRIAGE_PENDING not in text
    assert "Suggested: TruePositive" in text and 'Type \\"summary 42\\"' in text
    assert "<at>" not in text and "](" not in text and "**now" not in text
    closed = watched_incident(Incident(42, "x", "High", "Closed", None, NOW, NOW, 1, (), (), "", None), watch="high",
                              now=NOW, demo=False, changes=False, triage_pending=True)
    assert TRIAGE_PENDING not in json.dumps(closed, ensure_ascii=False), "a closed incident is not triaged"
