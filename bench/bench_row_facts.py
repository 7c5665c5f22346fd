"""Declared-row fact check benchmark (issue 38): what it marks per record type, and what it costs per answer.

Run: ./run bench   (or .venv/bin/python bench/bench_row_facts.py [--seeds N] [--runs N] [--smoke])

1. The generated corpus (tests/support/row_corpus.py): investigations of the demo workspace's busiest entities,
   a few hunts and confirmed changes to listed incidents, plus a record type declared only here (``DnsLookup``: the
   check has no code for it and was never looked at with it). Lies and correct analyst-grade answers per record
   type, wording and structure. Two splits: tuning (the record types ``row_corpus.TUNING_KINDS``, tuning wordings,
   seeds 1..N) and held out (every other record type, held-out wordings, seeds 9001..); per kind and category: lies
   marked at the claim / elsewhere only / missed, correct answers marked (categories: values, counts, distinct
   counts, shares, first/last times, flags, changes; correct: the same true, and questions, negations, estimates,
   hedged shares). Goal on held-out: >= 90% of lies marked at the claim, <= 3% of correct answers.
2. Cost: CPU of ``grounding.check`` + ``annotate`` per answer over every sample (p50/p99; goal p99 under 5 ms),
   beside the CPU of the tool calls one investigation turn makes; a streamed answer of about 8,000 characters
   checked piece by piece as it is written (``StreamCheck``), as a ratio to that turn; hostile answers (thousands of
   table rows, one huge sentence, look-alike characters): CPU each, and that none throws.

Figures are measured side by side in one run; nothing asserts an absolute time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

from bot.demo.backend import DemoBackend  # noqa: E402
from bot.orchestrator.factcheck import StreamCheck, grounding  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.models import QueryMetadata, QueryResult  # noqa: E402
from bot.sentinel.semantics import Declaration, Sem, declare  # noqa: E402
from bot.tools.toolbox import ToolBox  # noqa: E402
from tests.support import row_corpus  # noqa: E402

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


@dataclass(frozen=True)
class DnsLookup:
    """A record type declared only here: which names a device looked up, what they resolved to, how often."""

    FACTS: ClassVar[Declaration] = declare(
        "dns lookup", ("dns lookups", "DNS queries", "lookups"), identity=("device", "name"),
        belongs=("device", "name", "resolved"), counted_by="times", device=Sem.HOST, name=Sem.DOMAIN,
        resolved=Sem.IP, times=Sem.COUNT)
    device: str
    name: str
    resolved: str
    times: int


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def build(sentinel: SentinelClient) -> row_corpus.World:
    world = await row_corpus.build_world(sentinel, NOW)
    # The new record type's rows, from the connections the investigations read (a name, its address, a count).
    connections = [{f.name: v for f, v in r.values} for r in world.rows if r.kind == "connection"]
    by_name = {(c["device"], c["remote_url"]): c["remote_ip"] for c in connections
               if c.get("remote_url") and c.get("remote_ip")}  # one row per name a device looked up (its identity)
    lookups = tuple(DnsLookup(device, name, ip, 1 + i % 4) for i, ((device, name), ip) in enumerate(by_name.items()))
    if lookups:
        metadata = QueryMetadata("dns_lookups", {}, len(lookups), len(lookups), False, 1.0, "", "P7D", "demo")
        world.conversation.remember(QueryResult(lookups, metadata), NOW)  # type: ignore[arg-type]
        world.rows += row_corpus.rows_of(lookups)
    return world


def report(title: str, score: row_corpus.Score, kinds: list[str]) -> tuple[int, int, int, int]:
    print(f"\n{title}")
    print(f"{'record type':26} {'category':22} {'cases':>5} {'at claim':>8} {'elsewhere':>9} {'missed':>6} "
          f"{'marked':>6}")
    for (kind, category), tally in sorted(score.rows.items()):
        if kind in kinds:
            print(f"{kind:26} {category:22} {tally['cases']:5d} {tally['at claim']:8d} {tally['elsewhere']:9d} "
                  f"{tally['missed']:6d} {tally['marked']:6d}")
    lies, caught, correct, marked = score.totals(kinds)
    print(f"{title.split(':')[0]}: {caught} of {lies} lies marked at the claim ({100 * caught / max(lies, 1):.1f}%); "
          f"{marked} of {correct} correct answers marked ({100 * marked / max(correct, 1):.1f}%)")
    return lies, caught, correct, marked


async def main(seeds: int, runs: int) -> None:
    started = time.monotonic()
    sentinel = SentinelClient(DemoBackend(seed=7, clock=lambda: NOW))
    cpu = time.process_time()
    run = await ToolBox(sentinel).run("investigate_entity", json.dumps({"entity": row_corpus.ENTITIES[0]}))
    turn_ms = (time.process_time() - cpu) * 1000
    assert run.ok, run.artifact
    world = await build(sentinel)
    conversation = world.conversation
    facts, references = conversation.facts, conversation.references
    kinds = row_corpus.kinds(world)
    tuning_kinds = [k for k in kinds if k in row_corpus.TUNING_KINDS]
    held_kinds = [k for k in kinds if k not in row_corpus.TUNING_KINDS]
    stored = facts.to_dict()
    row_bytes = sum(len(json.dumps(stored.get(k), separators=(",", ":"))) for k in ("kinds", "rows", "empty", "cut"))
    print("== 1. Lies marked and correct answers marked, per record type (generated corpus)")
    print(f"Record types: {len(kinds)} ({', '.join(kinds)}); rows recorded: {len(facts.rows)}; tuning: "
          f"{', '.join(tuning_kinds)}; held out: {', '.join(held_kinds)} (dns lookup is declared only in this bench)")
    print(f"Stored facts: {len(json.dumps(stored, separators=(',', ':')))} bytes, of which the declared rows' "
          f"{row_bytes} (and their strings in the shared table)")

    def check(text: str) -> list[grounding.Finding]:
        return grounding.check(text, facts, references, NOW)

    tuning = row_corpus.score(world, range(1, seeds + 1), tuning_kinds, False, check)
    held = row_corpus.score(world, range(9001, 9001 + seeds), held_kinds, True, check)
    report("Tuning: record types and wordings the check was developed on", tuning, tuning_kinds)
    lies, caught, correct, marked = report("Held out: record types and wordings it was not", held, held_kinds)
    verdict = "met" if caught >= 0.9 * lies and marked <= 0.03 * correct else "NOT met"
    print(f"Held-out goal >= 90% of lies at the claim, <= 3% of correct answers marked: {verdict}")

    print("\n== 2. Cost per answer (CPU ms)")
    texts = [s.text for seed in range(1, 3) for kind in kinds for held_out in (False, True)
             for s in row_corpus.samples(world, seed, kind, held_out)]
    costs = []
    for _ in range(runs):
        for text in texts:
            cpu = time.process_time()
            grounding.annotate(text, check(text))
            costs.append((time.process_time() - cpu) * 1000)
    p50, p99 = statistics.median(costs), percentile(costs, 0.99)
    print(f"{'':30} {'answers':>7} {'p50':>8} {'p99':>8}")
    print(f"{'check + annotate':30} {len(texts):7d} {p50:8.3f} {p99:8.3f}")
    print(f"{'one investigation turn (tools)':30} {1:7d} {turn_ms:8.1f} {turn_ms:8.1f}")
    print(f"Per answer p99 {p99:.2f} ms; goal under 5 ms: {'met' if p99 < 5 else 'NOT met'}")
    long_answer = "## What the evidence shows\n\n"
    correct_texts = [s.text for seed in range(1, 40) for kind in kinds
                     for s in row_corpus.samples(world, seed, kind, False) if s.lie is None]
    for text in correct_texts:
        if len(long_answer) > 8000:
            break
        long_answer += text + "\n\n"
    stream_costs = []
    for _ in range(max(1, runs // 4)):
        cpu = time.process_time()
        stream = StreamCheck(facts, references, NOW)
        for end in range(40, len(long_answer) + 40, 40):  # as the model writes it, 40 characters at a time
            stream.advance(long_answer[:end])
        stream_costs.append((time.process_time() - cpu) * 1000)
    streamed = statistics.median(stream_costs)
    print(f"Streamed answer of {len(long_answer)} characters, checked as written: {streamed:.1f} ms CPU, "
          f"{100 * streamed / max(turn_ms, 0.001):.0f}% of the investigation turn's {turn_ms:.0f} ms")
    hostile = {
        "5,000-row table": "| Account | IP | Country | Sign-ins |\n|---|---|---|---|\n" + "\n".join(
            f"| olivia.hart | 203.0.113.{i % 250} | Russia | {i} |" for i in range(5000)),
        "one 200,000-character sentence": "olivia.hart signed in from " + "Germany and " * 16_600 + "Russia.",
        "look-alike characters": "\u043elivia.hart@contoso.com had 26 failed sign-ins from \u0420ussia; "
                                 "SRV\u2011BKP\u201101 ran svcupd\u2024exe." * 50,
        "thousands of references": "[1] [2] [3] " * 3000 + "olivia.hart had 9 sign-ins.",
    }
    errors = 0
    for name, text in hostile.items():
        cpu = time.process_time()
        try:
            grounding.annotate(text, check(text))
        except Exception as error:  # noqa: BLE001 - counted and reported: the goal is that none throws
            errors += 1
            print(f"{name}: raised {type(error).__name__}")
        print(f"{'hostile: ' + name:50} {len(text):8d} chars {(time.process_time() - cpu) * 1000:9.1f} ms CPU")
    print(f"Hostile answers: {errors} raised; goal none: {'met' if errors == 0 else 'NOT met'}")
    print(f"\nBenchmark took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per split")
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each timed check")
    parser.add_argument("--smoke", action="store_true", help="a quick run of every part (figures not meaningful)")
    options = parser.parse_args()
    if options.smoke:
        print("SMOKE RUN (--smoke): two seeds per split, each check timed once; the figures only show that it runs")
    asyncio.run(main(2 if options.smoke else options.seeds, 1 if options.smoke else options.runs))
