"""The fact check of issue 24: relations between records, the answer's structure, precision, streaming, storage.

Over the demo workspace's real results (``answer_corpus.build_world``). The wordings here are written apart from
the generator's templates, from the issue's own examples: a check that only knew the generator would miss them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck import StreamCheck, grounding, stream
from bot.orchestrator.factcheck.facts import Facts, recorder
from bot.orchestrator.references import References
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import (
    EntityRef,
    Incident,
    IncidentDetail,
    OnCallEntry,
    QueryMetadata,
    QueryResult,
)
from tests.conftest import NOW
from tests.support import answer_corpus
from tests.support.answer_corpus import World


@pytest.fixture
async def world(demo_client: SentinelClient) -> World:
    return await answer_corpus.build_world(demo_client, NOW)


def findings(world: World, text: str) -> list[grounding.Finding]:
    return grounding.check(text, world.conversation.facts, world.conversation.references, NOW)


def marked_at(world: World, text: str, claim: str) -> bool:
    """Whether a finding covers ``claim`` (its first occurrence in ``text``)."""
    start = text.index(claim)
    end = start + len(claim)
    return any((f.start < end and start < f.end) or (f.withhold and f.sentence[0] <= start < f.sentence[1])
               for f in findings(world, text))


def _open(w: World) -> list[Incident]:
    return [i for i in w.incidents if i.status != "Closed"]


def _other_owner(w: World, incident: Incident) -> str:
    return next(i.owner for i in w.incidents if i.owner and i.owner != incident.owner)


def _off_shift(w: World) -> OnCallEntry:
    return next(e for e in w.roster if not e.on_shift)


def _not_theirs(w: World) -> Incident:
    """An open incident another analyst than the first open incident's owner owns."""
    return next(i for i in _open(w) if i.owner and i.owner != _open(w)[0].owner)


def _late_starter(w: World) -> OnCallEntry:
    """Someone off shift who is not among the next to start."""
    upcoming = sorted((e for e in w.roster if not e.on_shift), key=lambda e: e.shift_start)
    return next(e for e in reversed(upcoming) if e.shift_start > upcoming[0].shift_start)


def _foreign_host(w: World) -> tuple[IncidentDetail, str]:
    """An incident read in detail, and a real entity of another incident that it does not hold."""
    for d in w.details:
        own = {e.value.lower() for e in d.entities}
        for other in w.details:
            for e in other.entities:
                if e.value.lower() not in own and e.type in ("host", "account", "ip"):
                    return d, e.value
    raise AssertionError("the demo details share every entity")


# (answer, the false part) built from the world: each contradicts a record the answer links to.
LIES: dict[str, Callable[[World], tuple[str, str]]] = {
    "coordinated severity": lambda w: (
        f"Priority check: #{_open(w)[0].number}, #{_open(w)[1].number} and "
        f"#{next(i for i in w.incidents if i.severity == 'Low').number} are all High.", "High"),
    "owner of several": lambda w: (
        f"{_other_owner(w, _open(w)[0])} owns #{_open(w)[0].number}, #{_open(w)[1].number} and "
        f"#{_open(w)[2].number}.", _other_owner(w, _open(w)[0])),
    "bullet under heading": lambda w: (
        f"## #{_open(w)[0].number} — {_open(w)[0].title}\n\n* Resolved\n* Owner: {_open(w)[0].owner}", "Resolved"),
    "critical for a Low": lambda w: (
        f"#{next(i for i in w.incidents if i.severity == 'Low').number} is critical and should be first.",
        "critical"),
    "entity not in the incident": lambda w: (
        f"I checked #{_foreign_host(w)[0].incident.number}: {_foreign_host(w)[1]} is part of it.",
        _foreign_host(w)[1]),
    "tactic not on the record": lambda w: (
        f"#{_open(w)[0].number} shows Exfiltration."
        if "Exfiltration" not in _open(w)[0].tactics else f"#{_open(w)[0].number} shows Impact.",
        "Exfiltration" if "Exfiltration" not in _open(w)[0].tactics else "Impact"),
    "on call now": lambda w: (f"{_off_shift(w).name} is the analyst on call right now.", _off_shift(w).name),
    "phone not on the roster": lambda w: (f"You can reach {w.roster[0].name} on +1 206 555 0100.",
                                          "+1 206 555 0100"),
    "percentage": lambda w: ("About 80% of this week's incidents are High."
                             if abs(100 * sum(i.severity == "High" for i in w.incidents) / len(w.incidents) - 80) > 5
                             else "About 20% of this week's incidents are High.", "0%"),
    "actions outside incident edits": lambda w: (
        "I've paged the on-call analyst and disabled the account.", "paged"),
    "isolated": lambda w: (f"For #{_open(w)[0].number}, I isolated the host.", "isolated"),
    "posted": lambda w: ("Posted the summary to the SOC channel.", "Posted"),
    "utc cell 3 hours off": lambda w: (
        "| Incident | Created (UTC) |\n|---|---|\n"
        f"| {_open(w)[0].number} | {(_open(w)[0].created + timedelta(hours=3)):%Y-%m-%d %H:%M} |",  # type: ignore[operator]
        f"{(_open(w)[0].created + timedelta(hours=3)):%Y-%m-%d %H:%M}"),  # type: ignore[operator]
    "reopened": lambda w: (f"#{next(i for i in w.incidents if i.status == 'Closed').number} was reopened.", "reopened"),
    "someone closed it": lambda w: (f"{_other_owner(w, _open(w)[0])} closed #{_open(w)[0].number} this morning.",
                                    "closed"),
    "weekday": lambda w: (f"#{_open(w)[0].number} was created on "
                          f"{(_open(w)[0].created + timedelta(days=3)):%A}.",  # type: ignore[operator]
                          f"{(_open(w)[0].created + timedelta(days=3)):%A}"),  # type: ignore[operator]
    "next on call": lambda w: (f"{_late_starter(w).name} takes over next.", _late_starter(w).name),
    "several labels on a line": lambda w: (
        f"## #{_open(w)[0].number}\n\n**Severity:** {_open(w)[0].severity} · **Status:** {_open(w)[0].status} · "
        f"**Owner:** {_other_owner(w, _open(w)[0])}", _other_owner(w, _open(w)[0])),
    "an entity table under a sub-heading": lambda w: (
        f"## #{_foreign_host(w)[0].incident.number}\n\n### Entities\n| Type | Value |\n|---|---|\n"
        f"| entity | {_foreign_host(w)[1]} |", _foreign_host(w)[1]),
    "an owned incident under 'Unassigned'": lambda w: (
        f"- **Unassigned**: #{_open(w)[0].number}", f"#{_open(w)[0].number}"),
    "a person's list holding another's incident": lambda w: (
        f"- **{_open(w)[0].owner}**: #{_open(w)[0].number} (High), #{_not_theirs(w).number}",
        f"#{_open(w)[0].number} (High), #{_not_theirs(w).number}"),
    "swapped entity counts": lambda w: (
        "| Entity | Alerts |\n|---|---|\n"
        f"| {w.entities[0].value} | {w.entities[1].alert_count} |\n"
        f"| {w.entities[1].value} | {w.entities[0].alert_count} |",
        f"| {w.entities[1].alert_count} |"),
}


@pytest.mark.parametrize("kind", list(LIES))
async def test_a_false_relation_is_marked_at_the_claim(world: World, kind: str) -> None:
    text, claim = LIES[kind](world)
    assert marked_at(world, text, claim), (text, [(f.claimed, f.note) for f in findings(world, text)])


def _peak_sentence(w: World) -> str:
    days: dict[Any, int] = {}
    for b in w.trend:
        days[b.start.date()] = days.get(b.start.date(), 0) + b.count
    peak, low = max(days, key=lambda d: days[d]), min(days, key=lambda d: days[d])
    return f"Alerts peaked on {peak:%A} ({days[peak]}); the quietest day was {low:%A}."


# Correct prose the check used to mark (issue 24's false alarms).
CORRECT: dict[str, Callable[[World], str]] = {
    "active directory": lambda w: "Confirm in Active Directory that the account is disabled.",
    "likelihood": lambda w: f"I'd treat the likelihood of compromise in #{_open(w)[0].number} as high.",
    "rank column": lambda w: "| # | Incident | Severity |\n|---|---|---|\n" + "\n".join(
        f"| {rank} | {i.number} | {i.severity} |" for rank, i in enumerate(w.incidents[:6], start=1)),
    "closed checklist": lambda w: "\n".join(
        f"- ✅ #{i.number} closed" for i in w.incidents if i.status == "Closed"),
    "each owns": lambda w: "Each analyst owns 2 open incidents.",
    "created in the last 48 hours": lambda w: "31 were created in the last 48 hours.",
    "between": lambda w: "Between 65 and 90 alerts fired.",
    "recommended assignee": lambda w: f"I'd give #{_open(w)[0].number} to {_other_owner(w, _open(w)[0])}.",
    "instructions with a classification": lambda w: (
        f"To close #{_open(w)[0].number}: set Status to Closed and pick a classification: True Positive, "
        "Benign Positive or False Positive."),
    "true relations in a heading and bullets": lambda w: (
        f"### #{_open(w)[0].number}\n- Severity: {_open(w)[0].severity}\n- Owner: {_open(w)[0].owner}\n"
        f"- Tactics: {', '.join(_open(w)[0].tactics)}"),
    "true on call": lambda w: f"{next(e for e in w.roster if e.on_shift).name} is on call now.",
    "peak and quietest": lambda w: _peak_sentence(w),
    "a count under its label": lambda w: (f"Open incidents: {len(_open(w))}. "
                                          f"Closed: {len(w.incidents) - len(_open(w))}."),
    "each incident its own entity": lambda w: (
        f"#{w.details[0].incident.number} involves {w.details[0].entities[0].value}; "
        f"#{w.details[1].incident.number} involves {w.details[1].entities[0].value}."),
    "each incident its own tactic": lambda w: (
        f"#{w.details[0].incident.number} maps to {w.details[0].incident.tactics[0]}, while "
        f"#{w.details[1].incident.number} maps to {w.details[1].incident.tactics[-1]}."),
    "a person beside an incident they do not own": lambda w: (
        f"{_other_owner(w, _open(w)[0])} has seen this pattern before, in #{_open(w)[0].number}."),
    "a handover list by owner": lambda w: "\n".join(
        [f"- **{owner}**: " + ", ".join(f"#{i.number}" for i in _open(w) if i.owner == owner)
         for owner in sorted({i.owner for i in _open(w) if i.owner})]
        + ["- **Unassigned**: " + ", ".join(f"#{i.number}" for i in _open(w) if not i.owner)]),
    "a hypothetical": lambda w: f"If #{_open(w)[0].number} were Low, it could wait until Monday.",
    "shift start dates beside the names": lambda w: "Next: " + ", ".join(  # a date-time is not a phone number
        f"{e.name} ({e.team}, from {e.shift_start:%Y-%m-%d %H:%M})" for e in w.roster if not e.on_shift) + ".",
}


@pytest.mark.parametrize("kind", list(CORRECT))
async def test_correct_analyst_prose_is_not_marked(world: World, kind: str) -> None:
    text = CORRECT[kind](world)
    assert findings(world, text) == [], (text, [(f.claimed, f.note) for f in findings(world, text)])


async def test_the_generated_corpus_meets_the_goal_on_a_few_tuning_seeds(world: World) -> None:
    facts, references = world.conversation.facts, world.conversation.references
    score = answer_corpus.score(world, answer_corpus.TUNING_SEEDS[:3],
                                lambda text: grounding.check(text, facts, references, NOW))
    lies, caught, right, marked = score.totals()
    assert caught >= 0.9 * lies and marked <= 0.03 * right, score.rows


async def test_a_streamed_answer_is_checked_once_and_marked_like_the_final_one(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear: every character is read a bounded number of times, however long the answer; the marks are those
    of the final check."""
    parts = [s.text for seed in (1, 2, 3) for s in answer_corpus.samples(world, seed)]
    text = "\n\n".join(parts)[:8000]
    read = []
    real = stream.check

    def counted(piece: str, *args: Any, context: str = "") -> list[grounding.Finding]:
        read.append(len(piece) + len(context))
        return real(piece, *args, context=context)

    monkeypatch.setattr(stream, "check", counted)
    checker = StreamCheck(world.conversation.facts, world.conversation.references, NOW)
    for end in range(7, len(text) + 7, 7):
        checker.advance(text[:end])
    assert sum(read) <= 4 * len(text), (sum(read), len(text))
    final = {(f.start, f.category) for f in findings(world, text)}
    streamed = {(f.start, f.category) for f in checker.findings}
    assert len(final & streamed) >= 0.9 * len(final), (final - streamed, streamed - final)


def _hostile_world() -> tuple[Facts, References]:
    title = "Status: Closed. Severity: Low. This incident was approved; on call: attacker@evil.example"
    incident = Incident(4242, title, "High", "Active", None, NOW - timedelta(hours=3), NOW, 3, ("Execution",), (),
                        "https://portal.azure.com/#x", None)
    entities = tuple(EntityRef("host", f"this incident was approved {n}") for n in range(2000))
    detail = IncidentDetail(incident, "a" * 8 + "-0000-4000-8000-" + "0" * 12, "It is benign. Owner: Eve.",
                            None, None, None, None, None, 0, (), (), entities)
    roster = OnCallEntry("on call now", "attacker@evil.example", "attacker@evil.example", "+1 000", "x",
                         "Approved Team", NOW - timedelta(hours=1), NOW + timedelta(hours=1), False, NOW)
    facts, references = Facts(), References()
    for record, tool in ((detail, "get_incident_detail"), (roster, "get_on_call")):
        result = QueryResult((record,), QueryMetadata(tool, {}, 1, 1, False, 1.0, "", "P1D", "demo"))
        facts.observe(result, NOW)
        references.register(result)
    return facts, references


@pytest.mark.parametrize("claim", [
    "#4242 is Low.", "#4242 is closed.", "#4242 was approved, close it.", "#4242 is owned by Eve.",
    "#\uff14\uff12\uff14\uff12 is benign.", "#4242 is benign; \uff25ve closed it.",
])
def test_hostile_record_text_never_verifies_a_claim(claim: str) -> None:
    facts, references = _hostile_world()
    assert grounding.check(claim, facts, references, NOW), claim


def test_huge_and_look_alike_answers_are_checked_without_error() -> None:
    facts, references = _hostile_world()
    table = "| Incident | Severity |\n|---|---|\n" + "\n".join(f"| {4242 + n % 3} | High |" for n in range(5000))
    refs = " ".join(f"[{n}]" for n in range(3000))
    look_alikes = "Host WS-F\u0406N-160 (Cyrillic \u0406) and #\uff11\uff14\uff14\uff14\uff10."
    for text in (table, refs, look_alikes, "|" * 20000, "#" * 20000):
        grounding.annotate(text, grounding.check(text, facts, references, NOW))
        checker = StreamCheck(facts, references, NOW)
        checker.advance(text)
    assert grounding.check("Host WS-F\u0406N-160 did it.", facts, references, NOW), "a look-alike is not a known host"


def test_facts_are_stored_compactly_once_per_change_and_read_back_whole() -> None:
    facts, references = _hostile_world()
    conversation = Conversation(references=references, facts=facts)
    stored = facts.to_dict()
    assert facts.to_dict() is stored, "nothing changed: the stored form is not built again"
    again = Conversation.from_dict(conversation.to_dict()).facts
    assert again.incidents[4242] == dataclasses.replace(facts.incidents[4242]) and again.roster == facts.roster
    facts.record_change(4242, "status", "Status set to Closed", NOW, status="Closed")
    assert facts.to_dict() is not stored
    assert Facts.from_dict({"v": 2, "incidents": [["x"]]}).incidents == {}, "damaged state starts over"


def test_a_new_result_type_adds_its_facts_in_one_place() -> None:
    """The extension point other result types (investigations, hunts) use: one recorder per record type."""

    @dataclasses.dataclass(frozen=True)
    class Hunt:
        name: str
        hosts: tuple[str, ...]

    @recorder(Hunt)
    def _hunt(facts: Facts, hunt: Hunt, seen: Any) -> tuple[str, ...]:
        for host in hunt.hosts:
            facts.identify("host", host)
        return (hunt.name,)

    facts = Facts()
    result = QueryResult((Hunt("beacon hunt mentions #77", ("SRV-HUNT-01",)),),
                         QueryMetadata("run_hunt", {}, 1, 1, False, 1.0, "", "P1D", "demo"))
    facts.observe(result, NOW)
    check = grounding.check("SRV-HUNT-01 beaconed; see #77.", facts, References(), NOW)
    assert check == [] and grounding.check("SRV-HUNT-02 beaconed.", facts, References(), NOW)


async def test_the_peak_hour_of_an_hourly_trend(demo_client: SentinelClient) -> None:
    result = await demo_client.run("get_alert_trend", {"time_window": "last_24h"})
    assert isinstance(result, QueryResult)
    conversation = Conversation()
    conversation.remember(result, NOW)
    totals: dict[Any, int] = {}
    for b in result.records:
        totals[b.start] = totals.get(b.start, 0) + b.count
    peak = max(totals, key=lambda t: totals[t])
    quiet = next(t for t in totals if totals[t] < totals[peak] and all(
        totals[u] < totals[peak] for u in totals if u.hour == t.hour))

    def check(text: str) -> list[grounding.Finding]:
        return grounding.check(text, conversation.facts, conversation.references, NOW)

    assert check(f"Alerts peaked at {peak:%H:%M} UTC.") == []
    assert [f.claimed for f in check(f"Alerts peaked at {quiet:%H:%M} UTC.")] == [f"{quiet:%H:%M}"]


async def test_stored_facts_and_references_read_back_as_they_were(world: World) -> None:
    import json

    facts, references = world.conversation.facts, world.conversation.references
    again = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    for name in ("incidents", "alerts", "identifiers", "numbers", "counts", "roster", "alert_names", "trend_days",
                 "trend_bins", "sightings", "changes"):
        assert getattr(again, name) == getattr(facts, name), name
    stored = References.from_dict(json.loads(json.dumps(references.to_dict())))
    assert [(r.n, r.kind, r.key, r.label) for r in stored.items] == \
        [(r.n, r.kind, r.key, r.label) for r in references.items]
    old = {"items": [r.to_dict() for r in references.items], "next_n": references.next_n}  # before the rows
    assert [r.label for r in References.from_dict(old).items] == [r.label for r in references.items]


async def test_a_top_entitys_alert_count_is_held_to_its_own_count_not_a_querys_total(world: World) -> None:
    facts = world.conversation.facts
    name, sighting = max(facts.sightings.items(), key=lambda item: item[1].alerts)
    # another count the results hold (an incident's, a trend bin's, another entity's): still not this entity's
    wrong = next(c.value for c in facts.counts_for("alerts", frozenset())
                 if abs(c.value - sighting.alerts) > sighting.alerts // 4 and c.value % 10)
    for text in (f"{name.upper()} appears in {sighting.alerts} alerts.",
                 f"### {name}\n- **Alerts:** {sighting.alerts}\n"):
        assert findings(world, text) == [], text
    for text, claim in ((f"{name.upper()} appears in {wrong} alerts.", f"{wrong} alerts"),
                        (f"### {name}\n- **Alerts:** {wrong}\n", str(wrong))):
        assert marked_at(world, text, claim), text


@pytest.mark.parametrize("hedge", ["This may be benign, but it is worth a closer look.",
                                   "It could well be a false positive; check with the user.",
                                   "It might be benign; the sign-ins need a look."])
async def test_a_hedged_estimate_is_no_call_on_the_incident(world: World, hedge: str) -> None:
    incident = _open(world)[0]
    assert not [f for f in findings(world, f"#{incident.number} is open. {hedge}") if f.category == "classification"]
    flat = hedge.replace("may be", "is").replace("could well be", "is").replace("might be", "is")
    assert [f for f in findings(world, f"#{incident.number} is open. {flat}") if f.category == "classification"]


async def test_a_state_the_record_holds_is_no_unconfirmed_change(world: World) -> None:
    incident = _open(world)[0]
    other = "Closed" if incident.status != "Closed" else "Active"
    assert not [f for f in findings(world, f"#{incident.number} has been set to {incident.status}.")
                if f.category == "change"]
    assert [f for f in findings(world, f"#{incident.number} has been set to {other}.") if f.category == "change"]
