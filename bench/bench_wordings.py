"""Independent wording corpus benchmark (issue 38): what the fact check marks on answers written without its code.

Run: ./run bench   (or .venv/bin/python bench/bench_wordings.py [--seeds N] [--examples N] [--split S] [--smoke])

The corpus (tests/support/wording_corpus.py) was written without reading the check: analyst-grade answers about the
demo workspace's records as the bot's tools returned them (incidents, alerts, sign-ins, processes, logons,
connections, file events, emails and clicks, risk, UEBA, assessments, top entities, hunts with aggregates and
shares, the on-call roster), in wording families of its own, each answer correct or a lie with the span of its false
value. Three splits (``wording_corpus.SPLITS``): tuning (``TUNING_KINDS`` x ``TUNING_FAMILIES``, seeds 1..N), and
held out, neither adjusted to what the check marks: the held-out wordings on the tuning record types, and the
held-out record types in the held-out wordings (seeds 9001..); the held-out figure is both together. Per record
type and category: lies marked at the claim (a mark overlaps the false value) / elsewhere only / missed; correct
answers with any mark. Then per wording family, the totals of each split, the most common kinds of miss and false
mark with an example, and the check's CPU per answer. Nothing asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

from bot.demo.backend import DemoBackend  # noqa: E402
from bot.orchestrator.factcheck import grounding  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from tests.support import wording_corpus as wc  # noqa: E402

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


class Score:
    """Tallies of one split: per (record type, category) and per family, with the misses and false marks kept."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        self.families: dict[str, Counter[str]] = defaultdict(Counter)
        self.misses: list[tuple[wc.Sample, list[grounding.Finding]]] = []
        self.false_marks: list[tuple[wc.Sample, list[grounding.Finding]]] = []
        self.raised: list[str] = []
        self.costs: list[float] = []

    def add(self, sample: wc.Sample, found: list[grounding.Finding]) -> None:
        key = (sample.kind, sample.category)
        tally, family = self.rows[key], self.families[sample.family]
        tally["cases"] += 1
        family["lies" if sample.is_lie else "correct"] += 1
        if sample.span is None:
            tally["marked"] += bool(found)
            family["marked"] += bool(found)
            if found:
                self.false_marks.append((sample, found))
            return
        start, end = sample.span
        if any(f.start < end and start < f.end for f in found):
            tally["at claim"] += 1
            family["at claim"] += 1
        else:
            tally["elsewhere" if found else "missed"] += 1
            self.misses.append((sample, found))

    def totals(self) -> tuple[int, int, int, int]:
        lies = sum(t["cases"] for (_, c), t in self.rows.items() if c != "correct")
        caught = sum(t["at claim"] for t in self.rows.values())
        correct = sum(t["cases"] for (_, c), t in self.rows.items() if c == "correct")
        marked = sum(t["marked"] for t in self.rows.values())
        return lies, caught, correct, marked


def run(samples: list[wc.Sample], check: wc.Check) -> Score:
    score = Score()
    for sample in samples:
        cpu = time.process_time()
        try:
            found = check(sample.text)
            grounding.annotate(sample.text, found)
        except Exception as error:  # noqa: BLE001 - counted and reported: the goal is that none throws
            score.raised.append(f"{type(error).__name__}: {sample.text[:120]!r}")
            found = []
        score.costs.append((time.process_time() - cpu) * 1000)
        score.add(sample, found)
    return score


def report(title: str, score: Score) -> None:
    print(f"\n{title}")
    print(f"{'record type':16} {'category':28} {'cases':>5} {'at claim':>8} {'elsewhere':>9} {'missed':>6} "
          f"{'marked':>6}")
    for (kind, category), t in sorted(score.rows.items()):
        print(f"{kind:16} {category:28} {t['cases']:5d} {t['at claim']:8d} {t['elsewhere']:9d} {t['missed']:6d} "
              f"{t['marked']:6d}")
    print(f"\n{'wording family':16} {'lies':>5} {'at claim':>8} {'correct':>7} {'marked':>6}")
    for family, t in sorted(score.families.items()):
        print(f"{family:16} {t['lies']:5d} {t['at claim']:8d} {t['correct']:7d} {t['marked']:6d}")
    lies, caught, correct, marked = score.totals()
    print(f"{title.split(':')[0]}: {caught} of {lies} lies marked at the claim ({100 * caught / max(lies, 1):.1f}%); "
          f"{marked} of {correct} correct answers marked ({100 * marked / max(correct, 1):.1f}%); "
          f"{len(score.raised)} raised")


def kinds_of_failure(scores: list[Score], examples: int) -> None:
    """The most common (record type, lie category, family) of misses, and (record type, family) of false marks."""
    misses: Counter[tuple[str, str, str]] = Counter()
    first_miss: dict[tuple[str, str, str], tuple[wc.Sample, list[grounding.Finding]]] = {}
    for score in scores:
        for sample, found in score.misses:
            key = (sample.kind, sample.category, sample.family)
            misses[key] += 1
            first_miss.setdefault(key, (sample, found))
    print(f"\n== Most common misses (record type, lie, family): {sum(misses.values())} in all")
    for key, n in misses.most_common(examples):
        sample, found = first_miss[key]
        start, end = sample.span or (0, 0)
        print(f"{n:4d}  {' / '.join(key)}: false value {sample.text[start:end]!r} in {_excerpt(sample.text, start)!r}"
              + (f"; marked instead {[sample.text[f.start:f.end] for f in found][:3]}" if found else ""))
    marks: Counter[tuple[str, str, str]] = Counter()
    first_mark: dict[tuple[str, str, str], tuple[wc.Sample, grounding.Finding]] = {}
    for score in scores:
        for sample, found in score.false_marks:
            for finding in found:
                key = (sample.kind, sample.family, finding.category)
                marks[key] += 1
                first_mark.setdefault(key, (sample, finding))
    print(f"\n== Most common false marks on correct answers (record type, family, finding category): "
          f"{sum(marks.values())} marks in all")
    for key, n in marks.most_common(examples):
        sample, finding = first_mark[key]
        print(f"{n:4d}  {' / '.join(key)}: marked {sample.text[finding.start:finding.end]!r} "
              f"({finding.record!r}) in {_excerpt(sample.text, finding.start)!r}")


def _excerpt(text: str, at: int) -> str:
    start = max(0, at - 90)
    return text[start:at + 60].replace("\n", " \u21b5 ")


async def main(seeds: int, examples: int, example_split: str | None) -> None:
    started = time.monotonic()
    world = await wc.build_world(SentinelClient(DemoBackend(seed=7, clock=lambda: NOW)), NOW)
    conversation = world.conversation
    print("== 1. Lies marked and correct answers marked, per record type and category (independent corpus)")
    print(f"Investigated (from the data): {', '.join(i.entity for i in world.investigations)}; hunts: "
          f"{', '.join(h.name for h in world.hunts)}; rows recorded: {len(conversation.facts.rows)}")
    for split, (kinds, families) in wc.SPLITS.items():
        print(f"{split}: {', '.join(kinds)} x {', '.join(families)}; seeds {wc.FIRST_SEED[split]}.."
              f"{wc.FIRST_SEED[split] + seeds - 1}")

    def check(text: str) -> list[grounding.Finding]:
        return grounding.check(text, conversation.facts, conversation.references, NOW)

    scores = {split: run(wc.corpus(world, seeds, split), check) for split in wc.SPLITS}
    report("Tuning: record types and wordings of the tuning split", scores["tuning"])
    report("Held-out wordings: the tuning record types in wordings written last, never adjusted",
           scores["held-out wordings"])
    report("Held-out types: record types and wordings written last, never adjusted", scores["held-out types"])
    held = [scores["held-out wordings"], scores["held-out types"]]
    lies, caught, correct, marked = (sum(t) for t in zip(*(h.totals() for h in held), strict=True))
    print(f"Held out: {caught} of {lies} lies marked at the claim ({100 * caught / max(lies, 1):.1f}%); "
          f"{marked} of {correct} correct answers marked ({100 * marked / max(correct, 1):.1f}%)")
    verdict = "met" if caught >= 0.9 * lies and marked <= 0.03 * correct else "NOT met"
    print(f"Held-out goal >= 90% of lies at the claim, <= 3% of correct answers marked: {verdict}")
    all_lies, all_caught, all_correct, all_marked = (sum(t) for t in zip(*(s.totals() for s in scores.values()),
                                                                         strict=True))
    print(f"Whole corpus: {all_caught} of {all_lies} lies marked at the claim "
          f"({100 * all_caught / max(all_lies, 1):.1f}%); {all_marked} of {all_correct} correct answers marked "
          f"({100 * all_marked / max(all_correct, 1):.1f}%)")
    shown = [score for name, score in scores.items() if example_split in (None, name)]
    print(f"\n(examples of misses and false marks from: {example_split or 'every split'})")
    kinds_of_failure(shown, examples)

    print("\n== 2. The check on every corpus answer (CPU ms, check + annotate)")
    costs = [c for score in scores.values() for c in score.costs]
    raised = [r for score in scores.values() for r in score.raised]
    print(f"answers {len(costs)}  p50 {statistics.median(costs):.3f}  p99 "
          f"{sorted(costs)[min(len(costs) - 1, round(0.99 * (len(costs) - 1)))]:.3f}  max {max(costs):.3f}")
    for line in raised[:5]:
        print(f"raised: {line}")
    print(f"Corpus answers that made the check raise: {len(raised)}; goal none: {'met' if not raised else 'NOT met'}")
    print(f"\nBenchmark took {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per split")
    parser.add_argument("--examples", type=int, default=10, help="kinds of miss and of false mark listed")
    parser.add_argument("--split", choices=tuple(wc.SPLITS), default=None,
                        help="list examples of misses and false marks from this split only (tuning while tuning)")
    parser.add_argument("--smoke", action="store_true", help="a quick run of every part (figures not meaningful)")
    options = parser.parse_args()
    if options.smoke:
        print("SMOKE RUN (--smoke): two seeds per split; the figures only show that it runs")
    asyncio.run(main(2 if options.smoke else options.seeds, options.examples, options.split))
