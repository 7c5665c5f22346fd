"""The independent wording corpus (tests/support/wording_corpus.py) is labelled right: every claim of a correct
answer is true of the records the bot read, and each lie's span is the one false value, by a computation of this
file's own over the raw rows (each subject's own investigation section, not the corpus's claim lists). It is
deterministic, balanced (at least as many correct answers as lies, every record type and family), and the fact
check neither raises on any of its answers nor marks outside the answer. The check's figures are measured by
bench/bench_wordings.py, never asserted here."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from bot.orchestrator.factcheck import StreamCheck, grounding
from bot.sentinel.client import SentinelClient
from tests.conftest import NOW, SEED
from tests.support import wording_corpus as wc
from tests.support.demo import copied_demo

SEEDS = 3
BENCH_SEEDS = 20  # bench/bench_wordings.py's default: its whole corpus is labelled right


@pytest.fixture(scope="module")
def world() -> wc.World:
    return asyncio.run(wc.build_world(SentinelClient(copied_demo(SEED, lambda: NOW)), NOW))


@pytest.fixture(scope="module")
def everything(world: wc.World) -> list[wc.Sample]:
    return [s for split in wc.SPLITS for s in wc.corpus(world, SEEDS, split)]


def _section(world: wc.World, subject: str, name: str) -> list[Any]:
    """The rows of the subject's own investigation's section; the section must be whole for a count to be decided."""
    found = [s for inv in world.investigations if inv.entity.lower() == subject.lower() for s in inv.sections
             if s.name == name]
    assert found and all(s.total == len(s.records) and not s.error for s in found), (subject, name)
    return [r for s in found for r in s.records]


def _rows(world: wc.World, name: str) -> list[Any]:
    return [r for inv in world.investigations for s in inv.sections if s.name == name for r in s.records]


def _any(rows: list[Any], attribute: str, value: str) -> bool:
    """Whether a row holds the value; an account in any of its forms (a lie must differ from every one)."""
    def same(text: str) -> str:
        text = text.lower()
        return text if "://" in text else text.split("\\")[-1].split("@")[0]

    return any(same(str(getattr(r, attribute))) == same(value) for r in rows)


def holds(world: wc.World, claim: wc.Claim) -> bool:
    """Whether the records the world read bear the claim out, computed here from the raw rows."""
    kind, name, subject, value = claim.kind, claim.field, claim.subject, claim.value
    if kind == "incident":
        incident = next(i for i in world.incidents if str(i.number) == subject[0])
        return str({"alerts": incident.alert_count}.get(name, getattr(incident, name, None))) == value
    if kind == "alert":
        return str(getattr(next(a for a in world.alerts if a.alert_id == subject[0]), name)) == value
    if kind == "sign-in":
        return _signin(world, name, subject[0], value)
    if kind == "process":
        rows = [r for r in _rows(world, "evidence_processes") if (r.device, r.file_name) == subject]
        return _any(rows, name, value)
    if kind == "logon":
        if name == "failed":
            return sum(r.action == "LogonFailed" for r in _section(world, subject[0], "evidence_logons")) == int(value)
        rows = [r for r in _rows(world, "evidence_logons") if r.device == subject[0]]
        return _any(rows, {"remote ip": "remote_ip"}.get(name, name), value)
    if kind == "connection":
        rows = [r for r in _rows(world, "evidence_network") if r.device == subject[0]]
        if name == "port":
            return any(r.remote_ip == subject[1] and str(r.remote_port) == value for r in rows)
        return _any(rows, {"remote ip": "remote_ip", "url": "remote_url"}[name], value)
    if kind == "file event":
        rows = [r for r in _rows(world, "evidence_files") if r.device == subject[0]]
        if name == "file":
            return _any(rows, "file_name", value)
        return _any([r for r in rows if r.file_name == subject[1]], name, value)
    if kind == "email":
        return _email(world, name, subject, value)
    if kind == "url click":
        return any(r.upn == subject[0] and r.url == value and r.clicked_through
                   for r in _rows(world, "evidence_url_clicks"))
    if kind in ("risky user", "risk detection", "behavior event"):
        section = {"risky user": "evidence_risky_user", "risk detection": "evidence_risk_detections",
                   "behavior event": "evidence_ueba"}[kind]
        attribute = {"level": "risk_level", "type": "event_type"}.get(name, name)
        return _any([r for r in _rows(world, section) if r.upn == subject[0]], attribute, value)
    if kind == "assessment":
        investigation = next(i for i in world.investigations if i.entity == subject[0])
        return str(investigation.level if name == "level" else investigation.score) == value
    if kind == "top entity":
        return any(e.value == subject[0] and str(e.alert_count) == value for e in world.top)
    if kind == "on-call entry":
        return _any([e for e in world.roster if e.name == subject[0]], name, value)
    return _hunt(world, name, subject, value)


def _signin(world: wc.World, name: str, upn: str, value: str) -> bool:
    if name == "failed":
        return sum(r.count for r in _section(world, upn, "evidence_signins") if r.result_type != "0") == int(value)
    if name == "last":
        latest = max(r.last for r in _section(world, upn, "evidence_signins") if r.last)
        return f"{latest:%Y-%m-%d %H:%M}" == value
    return _any([r for r in _rows(world, "evidence_signins") if r.upn == upn], name, value)


def _email(world: wc.World, name: str, subject: tuple[str, ...], value: str) -> bool:
    if name == "sender":
        return _any([r for r in _rows(world, "evidence_email") if r.recipient == subject[0]], "sender", value)
    mine = [r for r in _section(world, subject[0], "evidence_email") if (r.recipient, r.sender) == subject]
    if name == "count":
        return len({r.message_id for r in mine}) == int(value)
    return _any(mine, "delivery_location", value)


def _hunt(world: wc.World, name: str, subject: tuple[str, ...], value: str) -> bool:
    hunt = next(h for h in world.hunts if h.name == subject[0])
    keys = hunt.arguments["by"]
    row = next(r for r in hunt.rows if tuple(str(r.value(k)) for k in keys) == subject[1:])
    if name == "share":
        assert hunt.complete, "a share is decided only over every row"
        return round(100 * row.value("Count") / sum(r.value("Count") for r in hunt.rows)) == int(value)
    return str(row.value("Count" if name == "count" else name)) == value


def denotes(text: str, claim: wc.Claim) -> bool:
    """Whether an answer's words stand for the claim's value (as the corpus writes values: names for country codes,
    counts in words, shares with %, times in three forms, a URL's scheme and host in capitals)."""
    value = claim.value
    forms = {value.lower(), wc.COUNTRIES.get(value, value).lower(), f"{value}%"}
    if value.isdigit():
        forms.add(wc.in_words(int(value)))
    if claim.field == "last":
        moment = datetime.strptime(value, "%Y-%m-%d %H:%M")
        forms |= {f"{value} utc", f"{moment:%b} {moment.day} at {moment:%H:%M} utc".lower(),
                  f"{moment:%d %b %Y, %H:%M} utc".lower()}
    if claim.kind == "url click":
        scheme, _, rest = value.partition("://")
        host, slash, path = rest.partition("/")
        forms.add(f"{scheme}://{host}".lower() + slash + path.lower())
    return text.lower() in forms or (claim.kind == "url click" and text.lower() == value.lower())


def test_every_correct_answer_is_true_and_every_lie_has_one_false_value_at_its_span(world: wc.World) -> None:
    for sample in (s for split in wc.SPLITS for s in wc.corpus(world, BENCH_SEEDS, split)):
        false = [c for c in sample.claims if c.lie]
        assert all(holds(world, c) for c in sample.claims if not c.lie), sample.text
        if not sample.is_lie:
            assert not false and sample.category == "correct", sample.text
            continue
        assert len(false) == 1 and false[0].lie == sample.category, sample.text
        assert not holds(world, false[0]), (sample.text, false[0])
        start, end = sample.span or (0, 0)
        assert denotes(sample.text[start:end], false[0]), (sample.text[start:end], false[0])


def test_a_lie_is_a_true_claim_with_its_value_changed(world: wc.World, everything: list[wc.Sample]) -> None:
    """Each lie's false claim has a true twin (same record type, field and subject, the records' value), so a lie
    is about something the records decide, not about a field or subject no query returned."""
    claims = wc.Claims(world)
    for sample in (s for s in everything if s.is_lie):
        false = next(c for c in sample.claims if c.lie)
        twins = [c for c in claims.of(false.kind) if (c.field, c.subject) == (false.field, false.subject)]
        assert twins and all(holds(world, c) for c in twins), sample.text


def test_the_corpus_is_deterministic_and_balanced(world: wc.World, everything: list[wc.Sample]) -> None:
    again = [s for split in wc.SPLITS for s in wc.corpus(world, SEEDS, split)]
    assert [(s.text, s.span) for s in again] == [(s.text, s.span) for s in everything]
    lies = [s for s in everything if s.is_lie]
    correct = [s for s in everything if not s.is_lie]
    assert len(correct) >= len(lies) >= 100
    assert {s.kind for s in everything} == set(wc.TUNING_KINDS + wc.HELD_OUT_KINDS)
    assert {s.family for s in everything} == set(wc.FAMILIES)
    assert not set(wc.TUNING_KINDS) & set(wc.HELD_OUT_KINDS)
    assert {s.kind for s in everything if not s.held_out} == set(wc.TUNING_KINDS)
    assert {s.family for s in everything if not s.held_out} == set(wc.TUNING_FAMILIES)
    assert {(s.kind in wc.HELD_OUT_KINDS, s.family in wc.HELD_OUT_FAMILIES) for s in everything if s.held_out} == \
        {(False, True), (True, True)}
    categories = {s.category for s in lies}
    for category in ("wrong count", "wrong country", "wrong ip", "wrong parent process", "wrong time",
                     "wrong severity", "wrong status", "wrong owner", "wrong aggregate", "wrong share",
                     "made-up identifier", "click that did not happen", "wrong sender"):
        assert category in categories, category


async def test_a_world_built_again_gives_the_same_corpus(everything: list[wc.Sample]) -> None:
    world = await wc.build_world(SentinelClient(copied_demo(SEED, lambda: NOW)), NOW)
    assert [s.text for s in wc.corpus(world, SEEDS, "tuning")] == [s.text for s in everything if not s.held_out]


def test_the_check_never_raises_nor_marks_outside_any_corpus_answer(world: wc.World,
                                                                    everything: list[wc.Sample]) -> None:
    facts, references = world.conversation.facts, world.conversation.references
    for sample in everything:
        found = grounding.check(sample.text, facts, references, NOW)
        assert all(0 <= f.start < f.end <= len(sample.text) for f in found), sample.text
        grounding.annotate(sample.text, found)
    stream = StreamCheck(facts, references, NOW)
    streamed = "\n\n".join(s.text for s in everything[:40])
    for end in range(50, len(streamed) + 50, 50):
        stream.advance(streamed[:end])
    assert all(0 <= f.start < f.end <= len(streamed) for f in stream.findings)
