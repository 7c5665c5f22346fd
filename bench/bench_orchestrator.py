"""Orchestrator benchmarks (issue 3): turn time against the critical path, prompt tokens, counting time.

Run: ./run bench   (or .venv/bin/python bench/bench_orchestrator.py [--runs N] [--seed S] [--smoke])

1. Turn time: a scripted 2-round turn (round 1: three tool calls, round 2: a text answer) through the real
   openai client against the fake Chat Completions server and the real LogsQueryClient against the fake Log
   Analytics service (HTTPS). The critical path is 2 x LLM latency + 1 x LA latency, since the three
   queries run concurrently. Goal: median wall time / critical path at most 1.10.
2. Prompt tokens: a scripted 10-turn investigation over the demo workspace, counted from the request bodies
   the fake model receives (tiktoken o200k_base: each message's text as OpenAI counts chat messages, plus
   the tools JSON), for (a) the bot as built and (b) the same conversation with raw JSON tool results
   (``json.dumps(result.to_dict())``) that are never compacted. Goal: a / b at most 0.33.
3. Counting time: the seconds the bot's TokenCounter spends per turn of investigation (a), and their
   share of the turn's wall time (the fakes answer at once, so the share is an upper bound).

All figures are ratios measured side by side in one run; nothing asserts an absolute time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import re
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# tiktoken cannot download its encodings here; use the shared offline copy, as ./run does.
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

import tiktoken  # noqa: E402

from bot.demo.backend import DemoBackend  # noqa: E402
from bot.investigation.models import Investigation as EntityInvestigation  # noqa: E402
from bot.orchestrator import prompts  # noqa: E402
from bot.orchestrator.conversation import Conversation  # noqa: E402
from bot.orchestrator.llm import ChatModel, create_client, tool_entry  # noqa: E402
from bot.orchestrator.loop import Orchestrator  # noqa: E402
from bot.orchestrator.memory import Memory, MemoryPolicy, TokenCounter  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.models import QueryResult  # noqa: E402
from bot.tools.registry import TOOLS, Registry  # noqa: E402
from bot.tools.toolbox import ToolBox  # noqa: E402
from tests.support import openai_fake as oa  # noqa: E402
from tests.support.loganalytics_fake import FakeLogAnalytics  # noqa: E402
from tests.support.workspaces import make_la_client, prime  # noqa: E402

# A fixed clock and seed, so the demo rows, and with them the token counts, are the same on every run.
NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
TURN_TIME_GOAL = 1.10
TOKEN_RATIO_GOAL = 0.33
# (LLM latency, LA latency) in seconds: the main setting, then a small one where overhead shows more.
LATENCY_SETTINGS = ((0.300, 0.400), (0.100, 0.100))
# --smoke: a few seconds that still run every part and print every table (CI runs it: tests/house/test_benchmarks.py);
# its figures are not meaningful. The 10-turn investigation (parts 2 and 3) is fast and runs in full.
SMOKE_RUNS = 2
SMOKE_LATENCY_SETTINGS = ((0.060, 0.080), (0.020, 0.020))
PARALLEL_CALLS = (
    ("query_incidents", {"time_window": "last_24h"}),
    ("query_alerts", {"time_window": "last_24h"}),
    ("get_top_entities", {"time_window": "last_7d"}),
)


def make_orchestrator(fake: oa.FakeOpenAI, sentinel: SentinelClient, counter: TokenCounter,
                      policy: MemoryPolicy = MemoryPolicy()) -> Orchestrator:
    client = create_client(openai_api_key="sk-bench", base_url=f"{fake.endpoint}/v1", max_retries=0)
    return Orchestrator(ChatModel(client, "gpt-4o"), ToolBox(sentinel), Memory(counter, policy), demo=sentinel.is_demo)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


# ---------------------------------------------------------------------------------------------------------
# 1. Turn time against the critical path


@dataclass
class TurnTiming:
    wall: float
    gaps: dict[str, float]  # where the time off the critical path went


async def timed_turn(orchestrator: Orchestrator, fake_llm: oa.FakeOpenAI, fake_la: FakeLogAnalytics,
                     llm_s: float, la_s: float) -> TurnTiming:
    fake_llm.requests.clear()
    fake_la.requests.clear()
    fake_llm.script(oa.tool_calls(*PARALLEL_CALLS), oa.text("Three views of the last day; see the tables."))
    started = time.monotonic()
    result = await orchestrator.answer(Conversation(), "Give me the overview of the last day")
    ended = time.monotonic()
    if result.failed or fake_llm.pending or not all(run.ok for run in result.runs) or len(result.runs) != 3:
        raise SystemExit(f"the scripted turn did not run as scripted: {result.text} {result.runs}")
    first, second = (r.received_at for r in fake_llm.chat_requests)
    queries = sorted(r.received_at for r in fake_la.requests)
    gaps = {
        "before 1st model call": first - started,
        "model answer -> queries sent": queries[0] - (first + llm_s),
        "spread of the 3 query starts": queries[-1] - queries[0],
        "last query answer -> 2nd model call": second - (queries[-1] + la_s),
        "2nd model answer -> turn done": ended - (second + llm_s),
    }
    return TurnTiming(ended - started, gaps)


async def bench_turn_time(runs: int, seed: int, settings: tuple[tuple[float, float], ...]) -> bool:
    print(f"== 1. Turn time: 2-round turn with 3 parallel tools vs the fakes' critical path 2 x LLM + 1 x LA "
          f"(goal median/path <= {TURN_TIME_GOAL:.2f}) ==")
    demo = DemoBackend(seed=seed, clock=lambda: NOW)
    verdicts: list[bool] = []
    breakdowns = []
    with tempfile.TemporaryDirectory() as tmp:
        fake_la = await FakeLogAnalytics(Path(tmp)).start()
        fake_llm = await oa.FakeOpenAI().start()
        clients = {"LogsQueryClient": make_la_client(fake_la)}
        try:
            for tool, arguments in PARALLEL_CALLS:
                await prime(fake_la, demo, tool, arguments)
            print(f"{'LA client':<15} {'LLM ms':>6} {'LA ms':>6} {'path ms':>8} {'cold ms':>8} {'median ms':>10} "
                  f"{'p90 ms':>8} {'median/path':>12} {'p90/path':>9}  goal")
            for name, sentinel in clients.items():
                orchestrator = make_orchestrator(fake_llm, sentinel, TokenCounter())
                for llm_s, la_s in settings:
                    fake_llm.latency_s, fake_la.latency_s = llm_s, la_s
                    critical = 2 * llm_s + la_s
                    # The first turn opens connections and gets a token: shown, not counted.
                    cold = await timed_turn(orchestrator, fake_llm, fake_la, llm_s, la_s)
                    timings = [await timed_turn(orchestrator, fake_llm, fake_la, llm_s, la_s) for _ in range(runs)]
                    walls = [t.wall for t in timings]
                    median, slow = statistics.median(walls), p90(walls)
                    ok = median / critical <= TURN_TIME_GOAL
                    verdicts.append(ok)
                    print(f"{name:<15} {llm_s * 1000:>6.0f} {la_s * 1000:>6.0f} {critical * 1000:>8.0f} "
                          f"{cold.wall * 1000:>8.1f} {median * 1000:>10.1f} {slow * 1000:>8.1f} "
                          f"{median / critical:>12.3f} {slow / critical:>9.3f}  {'met' if ok else 'NOT met'}")
                    breakdowns.append((name, llm_s, la_s, median - critical, {
                        gap: statistics.median(t.gaps[gap] for t in timings) for gap in timings[0].gaps}))
                await orchestrator.model.close()
        finally:
            for sentinel in clients.values():
                await sentinel.close()
            await fake_llm.stop()
            await fake_la.stop()
    print("Where the time off the critical path goes (medians, ms):")
    for name, llm_s, la_s, overhead, gaps in breakdowns:
        parts = ", ".join(f"{gap} {value * 1000:.1f}" for gap, value in gaps.items())
        print(f"  {name} {llm_s * 1000:.0f}/{la_s * 1000:.0f}: overhead {overhead * 1000:.1f} = {parts}")
    print(f"{runs} timed turns per row after one cold turn; the fakes run in this process and event loop, so their "
          f"own work counts as overhead. Goal median/path <= {TURN_TIME_GOAL:.2f} met in {sum(verdicts)} of "
          f"{len(verdicts)} rows.")
    return all(verdicts)


# ---------------------------------------------------------------------------------------------------------
# 2 and 3. The 10-turn investigation


@dataclass(frozen=True)
class Question:
    text: str
    calls: Callable[[Conversation], list[tuple[str, dict[str, Any]]]]  # [] answers without tools


def incident_number(conversation: Conversation, n: int) -> str:
    """What "[n]" means in this conversation (the model reads it from the reference list)."""
    reference = conversation.references.get(n)
    if reference is None or reference.kind != "incident":
        raise RuntimeError(f"[{n}] is not an incident in this conversation: {reference}")
    return reference.key


def entity_of(conversation: Conversation, kind: str) -> str:
    """The value of the newest [n] entity of a kind (an account, an IP), as the model reads it from the list."""
    found = [r for r in conversation.references.items if r.kind == "entity" and r.key.startswith(f"{kind}:")]
    if not found:
        raise RuntimeError(f"no {kind} among this conversation's references")
    return max(found, key=lambda r: r.n).key.partition(":")[2]


# The conversation measured before the investigation tools (issue 3): lists, trends and incidents in detail only.
LISTING = (
    Question("What came in overnight?", lambda c: [("query_incidents", {"time_window": "last_24h"})]),
    Question("Tell me more about [2].", lambda c: [("get_incident_detail", {"incident_ref": incident_number(c, 2)})]),
    Question("Show me the alerts from the last 24 hours.", lambda c: [("query_alerts", {"time_window": "last_24h"})]),
    Question("How has the alert volume trended this week?",
             lambda c: [("get_alert_trend", {"time_window": "last_7d"})]),
    Question("Which accounts, hosts and IPs are hit the most this week?",
             lambda c: [("get_top_entities", {"time_window": "last_7d"})]),
    Question("And what about [4]?", lambda c: [("get_incident_detail", {"incident_ref": incident_number(c, 4)})]),
    Question("High-severity alerts of the last 3 days?",
             lambda c: [("query_alerts", {"time_window": "last_3d", "min_severity": "High"})]),
    Question("Most targeted entities over the last 30 days?",
             lambda c: [("get_top_entities", {"time_window": "last_30d"})]),
    Question("Medium and above incidents this week, please.",
             lambda c: [("query_incidents", {"time_window": "last_7d", "min_severity": "Medium"})]),
    Question("Thanks. What should I hand over to the next shift?", lambda c: []),
)

# What analysts now do: the queue, one incident, its account investigated and its IP hunted, then the wider view.
INVESTIGATION = (
    Question("What came in overnight?", lambda c: [("query_incidents", {"time_window": "last_24h"})]),
    Question("Tell me more about [1].", lambda c: [("get_incident_detail", {"incident_ref": incident_number(c, 1)})]),
    Question("Is the account in that incident compromised?",
             lambda c: [("investigate_entity", {"entity": entity_of(c, "account"), "time_window": "last_7d"})]),
    Question("Who else signed in from its IP this week, and with what result?",
             lambda c: [("hunt", {"table": "SigninLogs", "time_window": "7d",
                                  "where": [["IPAddress", "==", entity_of(c, "ip")]],
                                  "summarize": ["count()"], "by": ["UserPrincipalName", "ResultType"]})]),
    Question("Show me the alerts from the last 24 hours.", lambda c: [("query_alerts", {"time_window": "last_24h"})]),
    Question("How has the alert volume trended this week?",
             lambda c: [("get_alert_trend", {"time_window": "last_7d"})]),
    Question("Which accounts, hosts and IPs are hit the most this week?",
             lambda c: [("get_top_entities", {"time_window": "last_7d"})]),
    Question("And what about [4]?", lambda c: [("get_incident_detail", {"incident_ref": incident_number(c, 4)})]),
    Question("Medium and above incidents this week, please.",
             lambda c: [("query_incidents", {"time_window": "last_7d", "min_severity": "Medium"})]),
    Question("Thanks. What should I hand over to the next shift?", lambda c: []),
)


def first_row_citation(content: str, conversation: Conversation) -> str:
    """The first row of a tool result, cited the same way whether the result is compact text or raw JSON."""
    if content.lstrip().startswith("{"):
        data = json.loads(content)
        row = dict(zip(data["columns"], data["rows"][0], strict=True))
        if "entity_kind" in row:  # investigate_entity
            return f"the {row['entity_kind']} {row['entity']}, assessed {row['assessment']['level']}"
        if data["columns"] == ["cells"]:  # hunt: each row its (column, value) pairs
            return f"the hunt's first row, {row['cells'][0][1]}"
        if "incident" in row:  # get_incident_detail
            row = row["incident"]
        if "number" in row:
            n = conversation.references.ref_for("incident", str(row["number"]))
            return f"[{n}], incident #{row['number']} ({row['severity']})"
        if "alert_id" in row:
            return f"[{conversation.references.ref_for('alert', row['alert_id'])}] ({row['severity']} alert)"
        if "alert_count" in row:
            key = f"{row['type']}:{row['value']}"
            return f"[{conversation.references.ref_for('entity', key)}] ({row['type']})"
        start = datetime.fromisoformat(row["start"].replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M")
        return f"the {start} bin ({row['count']} {row['severity']} alerts)"
    lines = content.splitlines()
    if lines[0].startswith("investigate_entity("):
        kind, entity = re.search(r" -> (\w+) (\S+) investigation", lines[0]).groups()
        level = re.search(r": level (\w+)", lines[1]).group(1)
        return f"the {kind} {entity}, assessed {level}"
    if lines[0].startswith("hunt("):
        return f"the hunt's first row, {lines[2].split('|')[1]}"
    detail = re.match(r"ref \[(\d+)\] \| number (\d+)", lines[1]) if len(lines) > 1 else None
    if detail:
        severity = re.match(r"severity (\w+)", lines[2]).group(1)
        return f"[{detail.group(1)}], incident #{detail.group(2)} ({severity})"
    cells = lines[2].split("|")
    kind = re.search(r" -> (?:\d+ of )?\d+ (\w+)", lines[0]).group(1)  # "-> 20 of 73 alerts [DEMO DATA]"
    if kind == "incidents":
        return f"{cells[0]}, incident #{cells[1]} ({cells[2]})"
    if kind == "alerts":
        return f"{cells[0]} ({cells[1]} alert)"
    if kind == "entities":
        return f"{cells[0]} ({cells[1]})"
    severities = lines[1].split("|")  # get_alert_trend: a row per bin, a column per severity
    return f"the {cells[0]} bin ({cells[1]} {severities[1]} alerts)"


class InvestigationBrain:
    """The fake model: issues the scripted turn's tool calls, then answers citing the first row."""

    def __init__(self, conversation: Conversation, questions: tuple[Question, ...]) -> None:
        self.conversation = conversation
        self.questions = questions
        self._ids = random.Random(0)  # call ids shaped like the service's, the same in both variants

    def _call_id(self) -> str:
        return "call_" + "".join(self._ids.choices(string.ascii_letters + string.digits, k=24))

    def __call__(self, body: dict[str, Any]) -> oa.Step:
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "user":
            question = next(q for q in self.questions if q.text == last["content"])
            calls = question.calls(self.conversation)
            if calls:
                return oa.tool_calls(*((name, arguments, self._call_id()) for name, arguments in calls))
            number = incident_number(self.conversation, 2)
            return oa.text(f"For the handover: [2] (incident #{number}) is the one to watch; the rest is in the "
                           "tables above.")
        if last["role"] == "tool":
            citation = first_row_citation(last["content"], self.conversation)
            return oa.text(f"The first row is {citation}; the card shows the rest. Want me to dig into it?")
        raise RuntimeError(f"the brain did not expect a {last['role']} message last")


@contextlib.contextmanager
def raw_json_tool_results(orchestrator: Orchestrator) -> Iterator[None]:
    """Variant (b): while active, each tool message carries ``json.dumps(result.to_dict())``, not compact text.

    Each read tool declares its own ``text`` builder (``bot.tools.read_tools``); this orchestrator's ToolBox gets
    a copy of the registry whose read tools render raw JSON instead, and nothing else changes (the [n]
    references are still registered, errors still go through ``compact.error_text``). ``check_raw_json_variant``
    fails the run loudly if that no longer takes effect (the benchmark would otherwise measure (a) twice).
    """

    def raw_json(result: QueryResult, ref_for: Any) -> str:
        return json.dumps(result.to_dict())

    toolbox = orchestrator.tools
    registry = toolbox.registry
    toolbox.registry = Registry(dataclasses.replace(tool, text=raw_json) if tool.text else tool
                                for tool in registry.tools)
    try:
        yield
    finally:
        toolbox.registry = registry


def check_raw_json_variant(fake: oa.FakeOpenAI) -> None:
    """Variant (b) must really have sent raw JSON: a stale seam would silently measure (a) twice."""
    contents = [m["content"] for r in fake.chat_requests for m in r.json["messages"] if m.get("role") == "tool"]
    if not contents or not all(c.lstrip().startswith("{") for c in contents):
        raise SystemExit("variant (b) sent tool results that are not raw JSON: raw_json_tool_results() in "
                         "bench/bench_orchestrator.py no longer replaces the loop's tool result text")


class PromptTokens:
    """Tokens of one request body: each message as OpenAI counts chat messages, plus the tools JSON.

    Split by where they come from: the system messages (prompt, demo note, [n] reference list), the tool
    definitions, the tool results, and the rest of the conversation (user questions, answers, tool calls).
    """

    PER_MESSAGE = 3  # <|start|>role ... <|end|>
    PER_REQUEST = 3  # the assistant reply is primed with <|start|>assistant<|message|>
    PARTS = ("system", "tools", "tool results", "conversation")

    def __init__(self) -> None:
        self._encoding = tiktoken.get_encoding("o200k_base")

    def count(self, body: dict[str, Any]) -> dict[str, int]:
        parts = dict.fromkeys(self.PARTS, 0)
        parts["conversation"] += self.PER_REQUEST
        for message in body.get("messages", []):
            part = {"system": "system", "tool": "tool results"}.get(message.get("role"), "conversation")
            parts[part] += self.PER_MESSAGE
            for key, value in message.items():
                if key == "tool_calls" and value:
                    parts[part] += self._tokens(json.dumps(value, separators=(",", ":")))
                elif isinstance(value, str):
                    parts[part] += self._tokens(value)
        if body.get("tools"):
            parts["tools"] += self._tokens(json.dumps(body["tools"], separators=(",", ":")))
        return parts

    def _tokens(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


@dataclass
class TurnFigures:
    question: str
    model_calls: int
    tools: list[str]
    parts: dict[str, int]  # prompt tokens of the turn's model calls, by PromptTokens.PARTS
    wall_s: float
    counting_s: float
    notices: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.parts.values())


@dataclass
class Investigation:
    turns: list[TurnFigures]
    setup_counting_s: float  # the tool definitions, counted once when the orchestrator is built
    transcript: list[Any]  # the answers and the records the tools returned, to check both variants match

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    def part(self, name: str) -> int:
        return sum(t.parts[name] for t in self.turns)


def comparable(records: tuple[Any, ...]) -> tuple[Any, ...]:
    """Records as both variants must agree on: an entity investigation without its clock time and query timings."""
    return tuple(dataclasses.replace(r, as_of=NOW, sections=tuple(dataclasses.replace(s, elapsed_ms=0.0)
                                                                   for s in r.sections))
                 if isinstance(r, EntityInvestigation) else r for r in records)


async def run_investigation(sentinel: SentinelClient, raw_json: bool,
                            questions: tuple[Question, ...] = INVESTIGATION) -> Investigation:
    counter = TokenCounter()
    tokens = PromptTokens()
    conversation = Conversation()
    # Raw JSON: never compacted, and never trimmed either (nothing is dropped from "the same conversation").
    policy = MemoryPolicy(compact_old_tool_results=False, history_tokens=10**9) if raw_json else MemoryPolicy()
    async with oa.FakeOpenAI(brain=InvestigationBrain(conversation, questions)) as fake:
        orchestrator = make_orchestrator(fake, sentinel, counter, policy)
        if raw_json:  # nor cut short: raw results would spend a turn's token bound before its last tool round
            orchestrator.max_turn_tokens = 0
        setup_counting = counter.seconds
        turns, transcript = [], []
        with raw_json_tool_results(orchestrator) if raw_json else contextlib.nullcontext():
            for question in questions:
                seen, counted = len(fake.chat_requests), counter.seconds
                started = time.perf_counter()
                result = await orchestrator.answer(conversation, question.text)
                wall = time.perf_counter() - started
                if result.failed or not all(run.ok for run in result.runs):
                    raise SystemExit(f"turn {question.text!r} failed: {result.text}")
                requests = fake.chat_requests[seen:]
                parts = dict.fromkeys(PromptTokens.PARTS, 0)
                for request in requests:
                    for name, count in tokens.count(request.json).items():
                        parts[name] += count
                turns.append(TurnFigures(question.text, len(requests), [run.tool for run in result.runs], parts,
                                         wall, counter.seconds - counted, result.notices))
                transcript += [result.text] + [comparable(run.artifact.records) for run in result.runs]
        await orchestrator.model.close()
        if raw_json:
            check_raw_json_variant(fake)
    return Investigation(turns, setup_counting, transcript)


async def bench_investigation(seed: int) -> bool:
    sentinel = SentinelClient(DemoBackend(seed=seed, clock=lambda: NOW))
    await sentinel.prepare()
    runs = {}
    for name, questions in (("investigation", INVESTIGATION), ("listing", LISTING)):
        runs[name] = (await run_investigation(sentinel, raw_json=False, questions=questions),
                      await run_investigation(sentinel, raw_json=True, questions=questions))
    await sentinel.close()
    ratio = report_ratio(f"== 2. Prompt tokens of a 10-turn investigation (demo workspace, seed {seed}; an incident, "
                         "its account investigated, its IP hunted, then the wider view)", *runs["investigation"])
    before = report_ratio(f"== 2b. Prompt tokens of the 10-turn list-and-detail conversation measured before the "
                          f"investigation tools (seed {seed}; no investigation or hunt, every tool still offered)",
                          *runs["listing"])
    report_definitions()
    built = runs["investigation"][0]
    print("== 3. Time spent counting tokens per turn (TokenCounter.seconds, investigation (a), fakes answer at "
          "once, so the share is an upper bound) ==")
    print(f"{'turn':>4} {'counting ms':>12} {'turn ms':>9} {'share':>7}")
    for i, t in enumerate(built.turns, 1):
        print(f"{i:>4} {t.counting_s * 1000:>12.3f} {t.wall_s * 1000:>9.1f} {t.counting_s / t.wall_s:>7.2%}")
    counting = [t.counting_s for t in built.turns]
    wall = sum(t.wall_s for t in built.turns)
    print(f"Counting: total {sum(counting) * 1000:.2f} ms over 10 turns, mean {statistics.mean(counting) * 1000:.3f} "
          f"ms, max {max(counting) * 1000:.3f} ms per turn; {sum(counting) / wall:.2%} of {wall * 1000:.0f} ms of "
          f"turn wall time (plus {built.setup_counting_s * 1000:.2f} ms once for the tool definitions)")
    return ratio <= TOKEN_RATIO_GOAL and before <= TOKEN_RATIO_GOAL


def report_ratio(title: str, built: Investigation, raw: Investigation) -> float:
    """Print one conversation's prompt tokens, (a) as built against (b) raw JSON, turn by turn; return a/b."""
    if built.transcript != raw.transcript:
        raise SystemExit("the two variants did not run the same conversation")
    ratio = built.prompt_tokens / raw.prompt_tokens
    print(f"{title}: bot as built (a) vs raw JSON tool results, never compacted (b) (goal a/b <= "
          f"{TOKEN_RATIO_GOAL:.2f}) ==")
    print(f"{'turn':>4} {'question':<58} {'calls':>5} {'tools':<22} {'(a) tokens':>10} {'(b) tokens':>10} {'a/b':>6}")
    for i, (a, b) in enumerate(zip(built.turns, raw.turns, strict=True), 1):
        tools = ",".join(a.tools) or "-"
        print(f"{i:>4} {a.question[:58]:<58} {a.model_calls:>5} {tools[:22]:<22} {a.prompt_tokens:>10} "
              f"{b.prompt_tokens:>10} {a.prompt_tokens / b.prompt_tokens:>6.3f}")
    calls = sum(t.model_calls for t in built.turns)
    print(f"Total prompt tokens over {calls} model calls: (a) {built.prompt_tokens}, (b) {raw.prompt_tokens}; "
          f"a/b = {ratio:.3f}; goal <= {TOKEN_RATIO_GOAL:.2f}: {'met' if ratio <= TOKEN_RATIO_GOAL else 'NOT met'}")
    for label, run in (("(a)", built), ("(b)", raw)):
        print(f"  {label} by part: " + ", ".join(f"{name} {run.part(name)} ({run.part(name) / run.prompt_tokens:.0%})"
                                                  for name in PromptTokens.PARTS))
    print(f"  tool results alone: a/b = {built.part('tool results') / raw.part('tool results'):.3f}; the system "
          f"prompt, reference list and tools are the same in both and sent on every model call")
    for label, run in (("(a)", built), ("(b)", raw)):
        notices = [f"turn {i}: {n}" for i, t in enumerate(run.turns, 1) for n in t.notices]
        print(f"  notices in {label}: " + ("; ".join(notices) or "none"))
    print("  (b) is the same Orchestrator with its tool result text swapped for json.dumps(result.to_dict()) "
          "(raw_json_tool_results() in this file; an investigation's JSON holds each evidence query's KQL, as every "
          "result's holds its own), MemoryPolicy(compact_old_tool_results=False) and no history trimming")
    return ratio


def report_definitions() -> None:
    """What every model call carries before the conversation: the system prompt and each offered tool's entry."""
    encoding = tiktoken.get_encoding("o200k_base")

    def tokens(value: Any) -> int:
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return len(encoding.encode(text, disallowed_special=()))

    print("== 2c. Sent on every model call (o200k_base tokens) ==")
    for writes in (False, True):
        offered = TOOLS.offered(writes=writes)
        print(f"  {'with' if writes else 'without'} write tools: system prompt "
              f"{tokens(prompts.system_prompt(writes=writes))}, tool definitions "
              f"{tokens([tool_entry(t) for t in offered])}")
    print("  per tool: " + ", ".join(f"{t.name} {tokens([tool_entry(t)])}" for t in TOOLS.offered(writes=True)))


async def main(runs: int, seed: int, smoke: bool) -> int:
    if smoke:
        print(f"SMOKE RUN (--smoke): {runs} timed turns per row at latencies {SMOKE_LATENCY_SETTINGS}; the figures "
              "only show that the benchmark runs")
    await bench_turn_time(runs, seed, SMOKE_LATENCY_SETTINGS if smoke else LATENCY_SETTINGS)
    print()
    await bench_investigation(seed)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed turns per latency setting")
    parser.add_argument("--seed", type=int, default=7, help="demo workspace seed")
    parser.add_argument("--smoke", action="store_true", help="a quick run of every part at tiny sizes (CI)")
    options, _ = parser.parse_known_args()  # ./run bench passes its arguments to every benchmark
    runs = SMOKE_RUNS if options.smoke and options.runs == parser.get_default("runs") else options.runs
    sys.exit(asyncio.run(main(max(1, runs), options.seed, options.smoke)))
