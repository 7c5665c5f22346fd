"""The fact check derived from what record types declare (issue 38): a statement linking a subject with a value of a
semantic type is held to the linked rows, counts to their aggregates, flags to their verbs; a record type declared
later (here, in this test only) is checked with no new check code; what states nothing is never marked; the README's
questions answered by the stand-in model get no mark; hostile answers and rows stay bounded and never throw."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck import StreamCheck, grounding
from bot.orchestrator.factcheck.facts import MAX_ROWS, Facts
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import EntityRef, Incident, IncidentDetail, QueryMetadata, QueryResult
from bot.sentinel.semantics import Declaration, Sem, declare
from bot.tools.toolbox import ToolBox
from tests.conftest import NOW
from tests.support import openai_fake as oa
from tests.support import row_corpus, rule_model

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclasses.dataclass(frozen=True)
class VpnSession:
    """A record type no code of the fact check knows: it only declares its fields."""

    FACTS: ClassVar[Declaration] = declare(
        "vpn session", ("vpn sessions", "VPN sessions", "tunnels"), identity=("user", "gateway", "client_ip"),
        belongs=("user", "client_ip"), counted_by="sessions", user=Sem.ACCOUNT, gateway=Sem.HOST,
        client_ip=Sem.IP, country=Sem.COUNTRY, sessions=Sem.COUNT, mfa=Sem.FLAG, banner=Sem.TEXT,
        last=Sem.TIMESTAMP, cues={"mfa": r"passed mfa|completed mfa"})
    user: str
    gateway: str
    client_ip: str
    country: str
    sessions: int
    mfa: bool
    banner: str = ""
    last: datetime | None = None


def _sessions_conversation(*rows: VpnSession, total: int | None = None) -> Conversation:
    conversation = Conversation()
    metadata = QueryMetadata("vpn_sessions", {}, total if total is not None else len(rows), len(rows),
                             total is not None and total > len(rows), 1.0, "", "P7D", "demo")
    conversation.remember(QueryResult(tuple(rows), metadata), NOW)  # type: ignore[arg-type]
    return conversation


def _marks(conversation: Conversation, text: str) -> list[str]:
    return [text[f.start:f.end] for f in grounding.check(text, conversation.facts, conversation.references, NOW)]


ROWS = (VpnSession("dana.ross@contoso.com", "VPN-GW-01", "203.0.113.50", "NL", 4, True, "Welcome to 198.51.100.1",
                   datetime(2026, 11, 19, 8, 5, tzinfo=UTC)),
        VpnSession("dana.ross@contoso.com", "VPN-GW-02", "203.0.113.51", "DE", 2, False,
                   last=datetime(2026, 11, 20, 11, 40, tzinfo=UTC)),
        VpnSession("omar.haddad@contoso.com", "VPN-GW-01", "192.0.2.77", "GB", 3, False))


def test_a_record_type_declared_in_a_test_is_checked_with_no_new_check_code() -> None:
    conversation = _sessions_conversation(*ROWS)
    for true in ("dana.ross@contoso.com connected through VPN-GW-02 from 203.0.113.51.",
                 "CONTOSO\\dana.ross came in from the Netherlands.",
                 "dana.ross had 6 VPN sessions.", "omar.haddad@contoso.com: 3 VPN sessions, from United Kingdom.",
                 "Dana.Ross@Contoso.com used 2 different countries.", "omar.haddad had 1 tunnels from 192.0.2.77."):
        assert _marks(conversation, true) == [], true
    # Neither end holds the other: one mark over the relation (which end is wrong, the rows cannot say).
    assert _marks(conversation, "dana.ross@contoso.com connected from 192.0.2.77.") == \
        ["dana.ross@contoso.com connected from 192.0.2.77"]
    assert _marks(conversation, "dana.ross came in from Russia.") == ["Russia"]
    assert _marks(conversation, "omar.haddad@contoso.com connected through VPN-GW-02.") == ["VPN-GW-02"]
    assert _marks(conversation, "dana.ross had 9 VPN sessions.") == ["9 VPN sessions"]
    assert _marks(conversation, "omar.haddad passed MFA.") == ["passed MFA"]
    assert _marks(conversation, "dana.ross passed MFA.") == []
    # Its free text is never evidence: an IP only a banner names is no VPN session's client.
    assert _marks(conversation, "dana.ross@contoso.com connected from 198.51.100.1.") == ["198.51.100.1"]


def test_first_and_last_times_are_the_rows_earliest_and_latest() -> None:
    conversation = _sessions_conversation(*ROWS)
    for true in ("dana.ross's last VPN session was at 2026-11-20 11:40 UTC.",
                 "Her first VPN session: 2026-11-19 08:05 UTC (dana.ross@contoso.com).",
                 "dana.ross's last VPN session was on Nov 20.", "dana.ross's last VPN session ended at 12:40 (CET)."):
        assert _marks(conversation, true) == [], true
    assert _marks(conversation, "dana.ross's last VPN session was at 2026-11-20 16:40 UTC.") == \
        ["2026-11-20 16:40"]
    assert _marks(conversation, "The first VPN session of dana.ross was on Nov 12.") == ["Nov 12"]


def test_a_share_is_the_part_of_the_subjects_rows_its_words_select() -> None:
    # dana.ross: two rows (NL with 4 sessions, DE with 2): by rows half from Germany, by sessions a third.
    conversation = _sessions_conversation(*ROWS)
    for true in ("Half of dana.ross's VPN sessions came from Germany.", "33% of dana.ross's VPN sessions came from DE.",
                 "1 of 2 VPN sessions of dana.ross came from Germany.", "For dana.ross, 67% of VPN sessions came "
                 "from the Netherlands.", "About 40% of the VPN sessions of dana.ross came from 203.0.113.51.",
                 "Most of dana.ross's VPN sessions came from Germany.",  # hedged: states no number
                 "Over 20% of dana.ross's VPN sessions came from Germany.",  # a bound: not read
                 "3 of 7 VPN sessions of dana.ross came from Germany.",  # another whole: not this count
                 "60% of dana.ross's VPN sessions were interactive."):  # nothing the rows can select
        assert _marks(conversation, true) == [], true
    assert _marks(conversation, "90% of dana.ross's VPN sessions came from Germany.") == ["90%"]
    assert _marks(conversation, "dana.ross: 2 of 2 VPN sessions came from Germany.") == ["2 of 2"]
    assert _marks(conversation, "A quarter of the VPN sessions of dana.ross came from 203.0.113.50.") == \
        ["A quarter"]
    assert _marks(_sessions_conversation(*ROWS, total=40), "90% of dana.ross's VPN sessions came from Germany.") \
        == []  # not every row was returned: not decided


def _changed_conversation() -> Conversation:
    """Four incidents listed, then a change to each confirmed (as the confirmation desk records it)."""
    conversation = Conversation()
    incidents = tuple(Incident(n, f"Incident {n}", "High", "Active", owner, NOW, NOW, 1, (), (), f"https://x/{n}", None)
                      for n, owner in ((900001, None), (900002, None), (900003, "bob@contoso.com"), (900004, None)))
    metadata = QueryMetadata("query_incidents", {}, 4, 4, False, 1.0, "", "P1D", "demo")
    conversation.remember(QueryResult(incidents, metadata), NOW)
    facts = conversation.facts
    facts.record_change(900002, "assign", "Owner set to Alice Wong", NOW, severity="High", status="Active",
                        owner="Alice Wong", owner_sign_in="alice@contoso.com")
    facts.record_change(900001, "status", "Status set to Closed (TruePositive)", NOW, severity="High",
                        status="Closed", classification="TruePositive")
    facts.record_change(900003, "severity", "Severity set to Low", NOW, severity="Low", status="Active",
                        owner="bob@contoso.com")
    facts.record_change(900004, "escalate", "Escalated to Dana Ross", NOW, severity="High", status="Active",
                        escalated_to=("dana@contoso.com", "Dana Ross"))
    return conversation


def test_what_a_confirmed_change_set_is_what_an_answer_says_it_set() -> None:
    conversation = _changed_conversation()
    for true in ("I assigned #900002 to alice@contoso.com.", "#900001 was closed as a true positive.",
                 "I closed #900001 as TruePositive.", "#900003: severity lowered to Low.",
                 "I escalated #900004 to dana@contoso.com.", "#900003 is with bob@contoso.com.",
                 "Should I assign #900002 to bob@contoso.com?", "#900002 involves bob@contoso.com.",
                 "I did not close #900001 as a false positive."):
        assert _marks(conversation, true) == [], true
    assert _marks(conversation, "I assigned #900002 to bob@contoso.com.") == ["bob@contoso.com"]
    assert _marks(conversation, "I closed #900001 as a false positive.") == ["false positive"]
    assert _marks(conversation, "#900003: severity raised to High.") == ["High"]
    assert _marks(conversation, "I escalated #900004 to bob@contoso.com.") == ["bob@contoso.com"]
    stored = Conversation.from_dict(json.loads(json.dumps(conversation.to_dict())))
    assert _marks(stored, "I closed #900001 as a false positive.") == ["false positive"], "kept with the conversation"


def _detail(number: int, *entities: tuple[str, str]) -> IncidentDetail:
    incident = Incident(number, f"Incident {number}", "High", "Active", None, NOW, NOW, 1, (), (), f"https://x/{number}",
                        None)
    return IncidentDetail(incident, f"{number:08d}-0000-4000-8000-000000000000", "", None, None, None, None, None, 0,
                          (), (), tuple(EntityRef(t, v) for t, v in entities))


def test_an_entity_said_of_an_incident_is_held_to_the_entities_its_detail_declares() -> None:
    conversation = Conversation()
    details = (_detail(4242, ("host", "WS-FIN-023"), ("account", "alice@contoso.com")),
               _detail(4243, ("account", "bob@contoso.com"), ("ip", "203.0.113.9")))
    for detail in details:
        metadata = QueryMetadata("get_incident_detail", {"incident_ref": str(detail.number)}, 1, 1, False, 1.0, "",
                                 "P1D", "demo")
        conversation.remember(QueryResult((detail,), metadata), NOW)
    for true in ("#4242 involves alice@contoso.com and ws-fin-023.", "#4243 involves bob@contoso.com.",
                 "### #4243\n- 203.0.113.9 is part of it", "Did #4242 involve bob@contoso.com?"):
        assert _marks(conversation, true) == [], true
    assert _marks(conversation, "#4242 involves bob@contoso.com.") == ["bob@contoso.com"]
    assert _marks(conversation, "### #4242\n- 203.0.113.9 is part of it") == ["203.0.113.9"]


def test_a_tactic_or_a_product_said_of_an_incident_is_held_to_what_it_declares() -> None:
    conversation = Conversation()
    incident = Incident(5150, "Lateral movement", "High", "Active", None, NOW, NOW, 2, ("LateralMovement",),
                        ("Microsoft Defender for Endpoint",), "https://x/5150", None)
    conversation.remember(QueryResult((incident,), QueryMetadata("query_incidents", {}, 1, 1, False, 1.0, "", "P1D",
                                                                 "demo")), NOW)
    for true in ("#5150 maps to the Lateral Movement tactic.", "#5150 came from Microsoft Defender for Endpoint.",
                 "| Incident | Tactic |\n|---|---|\n| 5150 | LateralMovement |",
                 "Open #5150 in Microsoft Sentinel.", "#5150 is listed in Microsoft Sentinel."):  # no cue: no product
        assert _marks(conversation, true) == [], true
    assert _marks(conversation, "#5150 is tagged Exfiltration.") == ["Exfiltration"]
    assert _marks(conversation, "#5150 was detected by Microsoft Defender for Identity.") == \
        ["Microsoft Defender for Identity"]
    assert _marks(conversation, "| Incident | Tactic |\n|---|---|\n| 5150 | Exfiltration |") == ["Exfiltration"]


def test_its_rows_survive_the_stored_conversation() -> None:
    conversation = _sessions_conversation(*ROWS)
    stored = Facts.from_dict(json.loads(json.dumps(conversation.facts.to_dict())))
    assert stored.rows == conversation.facts.rows and stored.kinds == conversation.facts.kinds
    assert Facts.from_dict({**conversation.facts.to_dict(), "rows": [["x"]]}).rows == {}  # damaged: not known


def test_a_count_over_a_partial_result_is_not_decided() -> None:
    conversation = _sessions_conversation(*ROWS, total=40)  # 40 matched, 3 returned
    assert _marks(conversation, "dana.ross had 9 VPN sessions.") == []
    assert _marks(conversation, "dana.ross came in from Russia.") == ["Russia"]  # a value it holds is still a value


def test_rows_let_go_past_the_bound_leave_their_subjects_undecided() -> None:
    many = [VpnSession(f"user{i}@contoso.com", "VPN-GW-01", f"10.1.{i // 250}.{i % 250}", "NL", 1, False)
            for i in range(MAX_ROWS + 5)]
    conversation = _sessions_conversation(*many)
    assert len(conversation.facts.rows) == MAX_ROWS
    def row_marks(text: str) -> list[str]:
        return [f.category for f in grounding.check(text, conversation.facts, conversation.references, NOW)
                if f.category.startswith("row")]

    assert row_marks("user0@contoso.com came in from Russia.") == []  # its rows are gone: not decided
    assert row_marks(f"user{MAX_ROWS}@contoso.com came in from Russia.") == ["row"]


def test_a_kind_past_a_quarter_of_the_bound_lets_go_of_its_own_rows_not_the_others() -> None:
    conversation = _sessions_conversation(*ROWS)
    incidents = tuple(Incident(n, f"Incident {n}", "Low", "New", None, NOW, NOW, 1, ("Execution",), (),
                               f"https://x/{n}", None) for n in range(1000, 1000 + MAX_ROWS + 40))
    metadata = QueryMetadata("query_incidents", {}, len(incidents), len(incidents), False, 1.0, "", "P7D", "demo")
    conversation.remember(QueryResult(incidents, metadata), NOW)
    rows = conversation.facts.rows
    assert len(rows) == MAX_ROWS and sum(1 for kind, _ in rows if kind == "vpn session") == len(ROWS)
    assert _marks(conversation, "dana.ross came in from Russia.") == ["Russia"]  # the sessions are all still here
    assert _marks(conversation, f"#{1000 + MAX_ROWS + 39} is tagged Impact.") == ["Impact"]  # the newest incident


@pytest.mark.parametrize("text", [
    "Did dana.ross come in from Russia?", "Check whether dana.ross connected from 192.0.2.77.",
    "If dana.ross had connected from Russia, that would change things.", "dana.ross did not connect from Russia.",
    "dana.ross never passed MFA on VPN-GW-02.", "Block 192.0.2.77 if dana.ross ever uses it.",
    "dana.ross had about 5 VPN sessions.", "dana.ross had roughly 7 VPN sessions.", "dana.ross and VPN-GW-02 are in "
    "the same report.", "I'd look at whether omar.haddad passed MFA."])
def test_what_states_nothing_is_not_marked(text: str) -> None:
    assert _marks(_sessions_conversation(*ROWS), text) == []


def test_headings_rows_and_references_link_the_subject() -> None:
    conversation = _sessions_conversation(*ROWS)
    assert _marks(conversation, "### dana.ross@contoso.com\n- Country: NL\n- Gateway: VPN-GW-02") == []
    assert _marks(conversation, "### omar.haddad\n- Country: DE") == ["DE"]
    table = "| User | Client IP | Country | VPN sessions |\n|---|---|---|---|\n| dana.ross | 203.0.113.51 | DE | {n} |"
    assert _marks(conversation, table.format(n=2)) == []  # the sessions of that user from that IP
    assert _marks(conversation, table.format(n=11)) == ["11"]
    assert _marks(conversation, "dana.ross@contoso.com connected from 203.0.113.50. It came in from Germany.") == \
        ["Germany"]


async def test_every_generated_kind_marks_its_lies_and_not_its_facts(demo_client: SentinelClient) -> None:
    world = await row_corpus.build_world(demo_client, NOW)
    conversation = world.conversation
    score = row_corpus.score(world, range(1, 4), row_corpus.kinds(world), False,
                             lambda t: grounding.check(t, conversation.facts, conversation.references, NOW))
    lies, caught, correct, marked = score.totals()
    assert len(row_corpus.kinds(world)) >= 12 and lies >= 60 and correct >= lies
    assert caught >= 0.9 * lies and marked <= 0.03 * correct, "\n".join(score.misses[:10])


@pytest.fixture
async def stand_in(demo_client: SentinelClient) -> AsyncIterator[Orchestrator]:
    async with oa.FakeOpenAI(brain=rule_model.brain) as server:
        client = create_client(openai_api_key="sk-test", base_url=f"{server.endpoint}/v1", max_retries=0)
        yield Orchestrator(ChatModel(client, "rule-model"), ToolBox(demo_client), Memory(TokenCounter()), demo=True,
                           clock=lambda: NOW)


def readme_questions() -> list[str]:
    """The plain-language questions the README offers, in its order."""
    paragraph = README.read_text(encoding="utf-8").split("For questions in plain language", 1)[1].split("give it", 1)[0]
    return re.findall(r'"([^"]+)"', paragraph)


async def test_the_readme_questions_answered_by_the_stand_in_model_get_no_mark(stand_in: Orchestrator) -> None:
    questions = readme_questions()
    assert len(questions) >= 4
    conversation = Conversation()
    for question in questions:
        result = await stand_in.answer(conversation, question)
        assert result.text and not result.findings, (question, result.text)


def test_hostile_answers_and_rows_are_bounded_and_never_throw() -> None:
    hostile = VpnSession("d\u0430na.ross@contoso.com", "VPN-GW-0\uff11", "192.0.2.99", "N\u200bL", 10**9, True,
                         "\u202e" + "x" * 100_000)  # a Cyrillic a in the account, a full-width 1 in the gateway
    conversation = _sessions_conversation(*ROWS, hostile)
    facts = conversation.facts
    assert _marks(conversation, "dana.ross@contoso.com connected from 192.0.2.99.") == \
        ["dana.ross@contoso.com connected from 192.0.2.99"]
    assert _marks(conversation, "dana.ross@contoso.com connected through VPN-GW-01.") == []
    rows = "\n".join(f"| dana.ross | 203.0.113.{i % 250} | Russia | {i} |" for i in range(2000))
    for text in ("| User | Client IP | Country | VPN sessions |\n|---|---|---|---|\n" + rows,
                 "dana.ross connected from " + ", ".join(f"10.0.{i // 250}.{i % 250}" for i in range(4000)),
                 "dana.ross " * 10_000, "[1] " * 5_000 + "dana.ross had 9 VPN sessions.",
                 "\u202edana.ross\u200b had 6 VPN sessions from Ru\u0455sia."):
        started = datetime.now()
        grounding.annotate(text, grounding.check(text, facts, conversation.references, NOW))
        stream = StreamCheck(facts, conversation.references, NOW)
        for i in range(700, min(len(text), 20_000), 700):
            stream.advance(text[:i])
        assert (datetime.now() - started).total_seconds() < 60  # a hang guard only: the bench measures the cost


def test_a_streamed_answer_is_held_to_the_rows_as_it_is_written() -> None:
    conversation = _sessions_conversation(*ROWS)
    answer = ("### dana.ross@contoso.com\n\n- Gateway: VPN-GW-01\n- Country: Russia\n\n"
              "It had 6 VPN sessions. omar.haddad had 5 VPN sessions.\n")
    stream = StreamCheck(conversation.facts, conversation.references, NOW)
    for end in range(10, len(answer) + 10, 10):
        stream.advance(answer[:end])
    assert [answer[f.start:f.end] for f in stream.findings] == ["Russia", "5 VPN sessions"]


def test_rows_that_hold_no_such_value_decide_nothing() -> None:
    conversation = _sessions_conversation(VpnSession("svc-batch@contoso.com", "VPN-GW-01", "", "NL", 1, False),
                                          *ROWS)
    assert _marks(conversation, "svc-batch connected from 192.0.2.77.") == []  # its rows hold no client IP at all
    assert _marks(conversation, "svc-batch came in from Germany.") == ["Germany"]  # a country they do hold
