"""Fact check benchmark (issue 11): what it catches, and what it costs per answer.

Run: ./run bench   (or .venv/bin/python bench/bench_fact_check.py [--runs N] [--smoke])

1. Caught / missed / wrongly flagged by category: every case of tests/support/fabrications.py (a scripted
   model calls the real tools over the demo workspace, then answers with a fabrication built from the
   results, or with a correct answer) through the real openai client against the fake Chat Completions
   server and the Orchestrator. Goal: every fabrication caught, no correct answer flagged.
2. Cost: CPU time of ``grounding.check`` + ``annotate`` per answer (p50/p99 over every case, repeated), beside
   the CPU time of the whole turn that produced it (same cases, same run), and for one long answer (about
   8,000 characters, the most the bot shows) to show the patterns do not blow up.

3. The generated corpus (tests/support/answer_corpus.py, issue 24): lies and correct analyst-grade answers
   built per seed from real results, varied in wording, structure and records. Per category: lies caught at the
   claim / caught elsewhere only / missed, and correct answers marked; for the tuning seeds and, apart, for the
   held-out seeds the check was never tuned on. Goal on held-out: >= 90% of lies marked at the claim, <= 3% of
   correct answers marked.

Figures are measured side by side in one run; nothing asserts an absolute time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

from bot.demo.backend import DemoBackend  # noqa: E402
from bot.orchestrator.conversation import Conversation  # noqa: E402
from bot.orchestrator.factcheck import StreamCheck, grounding  # noqa: E402
from bot.orchestrator.llm import ChatModel, create_client  # noqa: E402
from bot.orchestrator.loop import Orchestrator  # noqa: E402
from bot.orchestrator.memory import Memory, TokenCounter  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.tools.toolbox import ToolBox  # noqa: E402
from tests.support import answer_corpus  # noqa: E402
from tests.support import openai_fake as oa  # noqa: E402
from tests.support.fabrications import CORRECT, FABRICATIONS, Case, World, build_world, calls  # noqa: E402

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(runs: int) -> None:
    started = time.monotonic()
    sentinel = SentinelClient(DemoBackend(seed=7, clock=lambda: NOW))
    world = await build_world(sentinel, NOW)
    counter = TokenCounter()
    async with oa.FakeOpenAI() as fake:
        client = create_client(openai_api_key="sk-bench", base_url=f"{fake.endpoint}/v1", max_retries=0)
        orchestrator = Orchestrator(ChatModel(client, "gpt-4o"), ToolBox(sentinel), Memory(counter),
                                    demo=True, clock=lambda: NOW)
        rows: dict[str, Counter[str]] = {}
        turn_cpu: list[float] = []
        check_cpu: list[float] = []
        for case in FABRICATIONS + CORRECT:
            fake.script(oa.tool_calls(*calls(world)), oa.text(case.answer(world)))
            conversation = Conversation()
            cpu = time.process_time()
            result = await orchestrator.answer(conversation, "What needs my attention this week?")
            turn_cpu.append((time.process_time() - cpu) * 1000)
            tally = rows.setdefault(case.category, Counter())
            tally["cases"] += 1
            if case.fabricated:
                tally["caught" if result.findings else "missed"] += 1
            elif result.findings:
                tally["wrongly flagged"] += 1
            check_cpu += timed_checks(case, world, conversation, runs)
    print_table(rows)
    long_answer = (" ".join(case.answer(world) for case in FABRICATIONS + CORRECT) * 2)[:8000]
    facts_conversation = conversation
    long_cpu = []
    for _ in range(max(runs, 3)):
        cpu = time.process_time()
        found = grounding.check(long_answer, facts_conversation.facts, facts_conversation.references, NOW)
        grounding.annotate(long_answer, found)
        long_cpu.append((time.process_time() - cpu) * 1000)
    print("\n== 2. Cost per answer (CPU ms)")
    print(f"{'':36} {'p50':>8} {'p99':>8}")
    for label, values in (("fact check (check + annotate)", check_cpu),
                          ("whole turn (2 model calls, 7 tools)", turn_cpu),
                          (f"one long answer ({len(long_answer)} chars)", long_cpu)):
        print(f"{label:36} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f}")
    share = statistics.median(check_cpu) / statistics.median(turn_cpu)
    print(f"Fact check median is {share:.1%} of the turn's median CPU ({len(check_cpu)} checks, "
          f"{len(turn_cpu)} turns)")
    world = await answer_corpus.build_world(SentinelClient(DemoBackend(seed=7, clock=lambda: NOW)), NOW)
    streamed(world, runs, turn_cpu)
    hostile(world)
    await stored_state(runs <= 2)
    if os.environ.get("FACTCHECK_TUNING_ONLY") is None:
        await generated(world, smoke=runs <= 2)
    print(f"Benchmark took {time.monotonic() - started:.1f} s")


def hostile(world: answer_corpus.World) -> None:
    """Section 2c: answers no model should write, but a misbehaving one may: the check's cost stays in proportion
    to their length (final check and streamed in 200-character steps)."""
    facts, references = world.conversation.facts, world.conversation.references
    number = world.incidents[0].number
    cases = {"a table of 5,000 rows": "| Incident | Severity | Owner |\n|---|---|---|\n" + "\n".join(
                 f"| {number} | Low | Eve |" for _ in range(5000)),
             "3,000 references": " ".join(f"[{n}]" for n in range(3000)),
             "1,500 claims on one line": ", ".join(f"#{number} is Low" for _ in range(1500)),
             "one 36,000-character sentence": f"#{number} " + "is high and " * 3000 + "done.",
             "look-alike digits and letters": ("#\uff11\uff14\uff14\uff14\uff10 on WS-F\u0406N-160. " * 400)}
    print("\n== 2c. Hostile answers (CPU ms, one run each)")
    for label, text in cases.items():
        cpu = time.process_time()
        grounding.annotate(text, grounding.check(text, facts, references, NOW))
        final = (time.process_time() - cpu) * 1000
        cpu = time.process_time()
        stream = StreamCheck(facts, references, NOW)
        for end in range(200, len(text) + 200, 200):
            stream.advance(text[:end])
        streamed_ms = (time.process_time() - cpu) * 1000
        print(f"{label:32} {len(text):7d} chars: final {final:8.1f}, streamed {streamed_ms:8.1f}")


STATE_TURNS = 30
STATE_CALLS: tuple[tuple[str, dict[str, object]], ...] = (  # ten typical turns (bench_teams' part 4), asked 3 times
    ("query_incidents", {"time_window": "last_24h", "limit": 25}), ("get_incident_detail", {}),
    ("query_incidents", {"time_window": "last_7d", "min_severity": "High", "limit": 25}),
    ("query_alerts", {"time_window": "last_24h", "limit": 25}), ("get_alert_trend", {"time_window": "last_7d"}),
    ("get_top_entities", {"time_window": "last_7d", "limit": 10}), ("get_incident_detail", {}),
    ("query_incidents", {"time_window": "last_7d", "limit": 25}),
    ("query_alerts", {"time_window": "last_3d", "severity": ["Medium"], "limit": 25}), ("get_on_call", {}))


async def stored_state(smoke: bool) -> None:
    """Section 4: a conversation's stored state after 30 turns (each turn queries, reads two incidents in detail,
    the roster, and answers), bounded as the Teams surface stores it (``teams.state.bound``): bytes, the facts'
    share, and how many user turns of history the bound keeps."""
    from bot.teams.state import MAX_STATE_BYTES, ConversationData, bound

    sentinel = SentinelClient(DemoBackend(seed=7, clock=lambda: NOW))
    listing = await sentinel.run("query_incidents", {"time_window": "last_30d", "limit": 100})
    numbers = [i.number for i in listing.records]  # type: ignore[union-attr]
    memory = Memory(TokenCounter())
    data = ConversationData()
    turns = 4 if smoke else STATE_TURNS
    async with oa.FakeOpenAI() as fake:
        client = create_client(openai_api_key="sk-bench", base_url=f"{fake.endpoint}/v1", max_retries=0)
        orchestrator = Orchestrator(ChatModel(client, "gpt-4o"), ToolBox(sentinel), memory, demo=True,
                                    clock=lambda: NOW)
        for turn in range(turns):
            tool, arguments = STATE_CALLS[turn % len(STATE_CALLS)]
            if tool == "get_incident_detail":
                arguments = {"incident_ref": str(numbers[turn % len(numbers)])}
            fake.script(oa.tool_calls((tool, arguments)),
                        oa.text("Nothing here needs you right now: the newest items are already owned, and the rest "
                                "are low severity. Ask for any of them by number for the detail."))
            await orchestrator.answer(data.conversation, f"Question {turn}: what should I look at?")
            encoded = bound(data, memory)
            data = ConversationData.from_dict(json.loads(encoded.text))
    stored = json.loads(encoded.text)["conversation"]
    facts = len(json.dumps(stored.get("facts"), separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    users = sum(1 for item in stored.get("history", []) if item.get("type") == "user")
    print(f"\n== 4. Stored state after {turns} turns (bound {MAX_STATE_BYTES} bytes)")
    largest = ", ".join(f"{k} {v}" for k, v in sorted(((k, _size(v)) for k, v in stored.items()),
                                                      key=lambda kv: -kv[1])[:4])
    in_facts = ", ".join(f"{k} {v}" for k, v in sorted(((k, _size(v)) for k, v in (stored.get("facts") or {}).items()),
                                                       key=lambda kv: -kv[1])[:5])
    print(f"state {encoded.size} bytes, of which facts {facts} ({facts / encoded.size:.0%}); "
          f"user turns of history kept: {users} of {turns}")
    print(f"largest parts: {largest}; in the facts: {in_facts}")


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def long_answer_of(world: answer_corpus.World, chars: int) -> str:
    """An analyst-grade answer of about ``chars`` characters: generated samples (headings, bullets, tables,
    prose; true and false) one after another."""
    parts: list[str] = []
    seed = 1
    while sum(len(p) + 2 for p in parts) < chars:
        parts += [s.text for s in answer_corpus.samples(world, seed)]
        seed += 1
    return "\n\n".join(parts)[:chars]


def streamed(world: answer_corpus.World, runs: int, turn_cpu: list[float]) -> None:
    """Section 2b: a long answer streamed in 12-character chunks (as the model streams it), checked the way the
    loop checks it (``StreamCheck``: only what is new), beside checking the whole answer at every sentence end
    (how it was done before) and the one final check."""
    facts, references = world.conversation.facts, world.conversation.references
    print(f"\n== 2b. Long answers, streamed and final (CPU ms per answer; turn p50 {percentile(turn_cpu, 0.5):.2f})")
    print(f"{'':44} {'p50':>8} {'p99':>8}")
    for chars in (2000, 8000):
        text = long_answer_of(world, chars)
        rows: dict[str, list[float]] = {"streamed, only what is new": [], "final check (check + annotate)": []}
        if runs > 2:
            rows["streamed, whole answer per sentence (before)"] = []
        for _ in range(max(3, runs // 4)):
            cpu = time.process_time()
            stream = StreamCheck(facts, references, NOW)
            for end in range(12, len(text) + 12, 12):
                stream.advance(text[:end])
            rows["streamed, only what is new"].append((time.process_time() - cpu) * 1000)
            cpu = time.process_time()
            grounding.annotate(text, grounding.check(text, facts, references, NOW))
            rows["final check (check + annotate)"].append((time.process_time() - cpu) * 1000)
            if "streamed, whole answer per sentence (before)" in rows:
                cpu = time.process_time()
                shown = 0
                for end in range(12, len(text) + 12, 12):
                    cuts = [m.end() for m in re.finditer(r"[.!?:](?=\s)|\n", text[:end])]
                    if cuts and cuts[-1] > shown:
                        shown = cuts[-1]
                        done = text[:shown].rstrip()
                        grounding.mark(done, grounding.check(done, facts, references, NOW))
                rows["streamed, whole answer per sentence (before)"].append((time.process_time() - cpu) * 1000)
        for label, values in rows.items():
            print(f"{len(text):5d} chars, {label:32} {percentile(values, 0.5):8.2f} {percentile(values, 0.99):8.2f}")


async def generated(world: answer_corpus.World, smoke: bool) -> None:
    """Section 3: the generated corpus, tuning seeds and held-out seeds side by side."""
    facts, references = world.conversation.facts, world.conversation.references
    sets = {"tuning": answer_corpus.TUNING_SEEDS, "held-out": answer_corpus.HELD_OUT_SEEDS}
    scores = {name: answer_corpus.score(world, seeds[:2] if smoke else seeds,
                                        lambda text: grounding.check(text, facts, references, NOW))
              for name, seeds in sets.items()}
    print("\n== 3. Generated corpus (answer_corpus): lies at the claim / elsewhere / missed; correct answers marked")
    print(f"{'category':26} {'tuning':>24}   {'held-out':>24}")
    categories = sorted({c for s in scores.values() for c in s.rows}, key=lambda c: (c.startswith("correct"), c))
    for category in categories:
        cells = []
        for name in sets:
            t = scores[name].rows.get(category, Counter())
            cells.append(f"{t['marked']:3d} of {t['cases']:3d} marked" if category.startswith("correct") else
                         f"{t['at claim']:3d}/{t['elsewhere']:2d}/{t['missed']:3d} of {t['cases']:3d}")
        print(f"{category:26} {cells[0]:>24}   {cells[1]:>24}")
    for name, s in scores.items():
        lies, caught, right, marked = s.totals()
        goal = "met" if caught >= 0.9 * lies and marked <= 0.03 * right else "NOT met"
        print(f"{name}: {caught} of {lies} lies marked at the claim ({caught / max(lies, 1):.0%}); {marked} of {right} "
              f"correct answers marked ({marked / max(right, 1):.1%}); goal >= 90% and <= 3%: {goal}")


def timed_checks(case: Case, world: World, conversation: Conversation, runs: int) -> list[float]:
    """The check alone, repeated on the conversation the turn left (its facts and references)."""
    text = case.answer(world)
    times = []
    for _ in range(runs):
        cpu = time.process_time()
        found = grounding.check(text, conversation.facts, conversation.references, NOW)
        grounding.annotate(text, found)
        times.append((time.process_time() - cpu) * 1000)
    return times


def print_table(rows: dict[str, Counter[str]]) -> None:
    print("== 1. Fabrications caught, correct answers flagged (scripted model over real demo results)")
    print(f"{'category':18} {'cases':>6} {'caught':>7} {'missed':>7} {'wrongly flagged':>16}")
    for category, tally in rows.items():
        print(f"{category:18} {tally['cases']:6d} {tally['caught']:7d} {tally['missed']:7d} "
              f"{tally['wrongly flagged']:16d}")
    fabricated = sum(t["cases"] for c, t in rows.items() if c != "correct")
    caught = sum(t["caught"] for t in rows.values())
    flagged = sum(t["wrongly flagged"] for t in rows.values())
    correct = rows.get("correct", Counter())["cases"]
    verdict = "met" if caught == fabricated and flagged == 0 else "NOT met"
    print(f"Caught {caught} of {fabricated} fabrications; {flagged} of {correct} correct answers flagged; "
          f"goal all caught, none flagged: {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="repetitions of each check")
    parser.add_argument("--smoke", action="store_true", help="a quick run of every part (figures not meaningful)")
    options = parser.parse_args()
    if options.smoke:
        print("SMOKE RUN (--smoke): every case once, each check timed twice; the cost figures only show that it runs")
    asyncio.run(main(2 if options.smoke else options.runs))
