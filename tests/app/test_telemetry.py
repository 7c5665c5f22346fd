"""Telemetry: the spans, metrics and log lines of real turns, and that they carry no message content.

An in-memory OpenTelemetry SDK is installed once for this module (OpenTelemetry's global providers can be
set once per process; the bot looks its tracer and instruments up when it uses them, so it records into
whatever is installed). Turns are driven as in test_teams_bot.py: the real CloudAdapter and handler over
HTTP, the fake Bot Connector, the demo workspace, the rule-based model behind the fake Chat Completions
server. The content check reads every attribute, event and status of every span.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import MemoryStorage
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot import telemetry
from bot.config import Settings
from bot.demo.backend import DemoBackend
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.queries import kql_of, make_query
from bot.sentinel.scheduler import Busy, Priority, QueryLimits, QueryScheduler, Slot
from bot.terminal.chat import TerminalChat
from bot.tools.toolbox import ToolBox
from tests.support import connector_fake as teams
from tests.support import rule_model
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import final_messages, next_id, start_bot

QUESTION = "what high-severity incidents came in this week?"
QUESTION_ARGUMENTS = {"time_window": "last_7d", "min_severity": "High"}  # what the rule model asks for


@dataclass
class Recorded:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.metrics.get_metrics_data()
        return [(dict(point.attributes), point)
                for resource in (data.resource_metrics if data else [])
                for scope in resource.scope_metrics
                for metric in scope.metrics if metric.name == name
                for point in metric.data.data_points]


@pytest.fixture(scope="module")
def installed() -> Iterator[Recorded]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    assert trace.get_tracer_provider() is tracer_provider, "another test installed a tracer provider first"
    yield Recorded(spans, reader)
    spans.shutdown()  # later test modules' spans are not kept


@pytest.fixture
def otel(installed: Recorded) -> Recorded:
    installed.spans.clear()
    return installed


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The bot's log lines as the JSON format writes them."""
    stream = io.StringIO()
    handler = telemetry.log_handler("json", stream)
    logger = logging.getLogger("bot")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


class FailsFirstQuery:
    """The demo workspace behind a service that fails the first query (503: the tool layer retries once)."""

    def __init__(self, inner: DemoBackend) -> None:
        self.inner = inner
        self.source = inner.source
        self.failed = False

    async def execute(self, query: Any, kql_text: str) -> Any:
        if not self.failed:
            self.failed = True
            return QueryError("server_error", "Service unavailable", retry_possible=True, status=503,
                              detail=f"failed while running {kql_text}")
        return await self.inner.execute(query, kql_text)

    async def prepare(self) -> None:
        await self.inner.prepare()

    async def close(self) -> None:
        await self.inner.close()


async def until(condition: Any, timeout: float = 10.0) -> None:
    """Waits for ``condition()``: the turn span ends after the answer is delivered and the state saved."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def one_turn(otel: Recorded, connector: FakeConnector, sentinel: SentinelClient, fake_llm: FakeOpenAI | None,
                   activity: dict[str, Any], settings: Settings | None = None) -> tuple[ReadableSpan, str]:
    """Serves the bot, posts one activity, and returns the finished turn span and the final message's text."""
    bot, server = await start_bot(connector, sentinel, fake_llm, MemoryStorage(), settings)
    try:
        await bot.post(activity)
        await until(lambda: otel.finished("turn"))
    finally:
        await server.close()
    [turn] = otel.finished("turn")
    return turn, final_messages(connector.sent)[-1].text


def recorded_text(spans: list[ReadableSpan]) -> list[str]:
    """Every string a span carries: name, attribute values, events and their attributes, status."""
    texts = []
    for span in spans:
        texts += [span.name, span.status.description or ""]
        texts += [str(value) for value in (span.attributes or {}).values()]
        for event in span.events:
            texts += [event.name] + [str(value) for value in (event.attributes or {}).values()]
    return texts


def leaks(spans: list[ReadableSpan], secrets: list[str]) -> list[tuple[str, str]]:
    return [(secret, text) for secret in secrets for text in recorded_text(spans) if secret and secret in text]


async def content_of_the_question(sentinel: SentinelClient) -> list[str]:
    """What must not reach telemetry: the question, the rows' text values and the KQL's string literals."""
    result = await sentinel.run("query_incidents", QUESTION_ARGUMENTS)
    assert isinstance(result, QueryResult) and result.records
    row_text = {value for record in result.records for value in (record.title, record.owner, record.url) if value}
    literals = re.findall(r'"([^"]{3,})"', kql_of(make_query("query_incidents", QUESTION_ARGUMENTS)))
    assert literals and row_text
    return [QUESTION, *sorted(row_text), *literals]


def children(parent: ReadableSpan, spans: list[ReadableSpan]) -> bool:
    return all(span.parent is not None and span.parent.span_id == parent.context.span_id
               and span.context.trace_id == parent.context.trace_id for span in spans)


async def test_a_question_turn_is_one_trace_with_model_and_query_spans_and_no_content(
        otel: Recorded, json_log: io.StringIO, connector: FakeConnector, demo_backend: DemoBackend,
        fake_openai: FakeOpenAI) -> None:
    turn, answer = await one_turn(otel, connector, SentinelClient(FailsFirstQuery(demo_backend)), fake_openai,
                                  teams.personal(QUESTION, activity_id=next_id(), service_url=connector.url))
    calls = sorted(otel.finished("llm.call"), key=lambda span: span.attributes["bot.llm.round"])
    queries = otel.finished("sentinel.query")
    assert turn.parent is None and turn.kind == trace.SpanKind.CONSUMER
    correlation = turn.attributes["bot.correlation_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", correlation)
    assert {k: turn.attributes[k] for k in ("teams.conversation.type", "bot.turn.kind", "bot.turn.outcome",
                                            "bot.turn.rounds", "bot.turn.tool_calls")} == {
        "teams.conversation.type": "personal", "bot.turn.kind": "question", "bot.turn.outcome": "answered",
        "bot.turn.rounds": 2, "bot.turn.tool_calls": 1}
    assert turn.attributes["bot.question.length"] == len(QUESTION)
    assert turn.attributes["bot.answer.length"] > 0 and "bot.question.text" not in turn.attributes

    # Two model calls (tool call, then the answer), both children of the turn, with GenAI attributes.
    assert len(calls) == 2 and children(turn, calls)
    for number, (call, finish) in enumerate(zip(calls, ("tool_calls", "stop"), strict=True), start=1):
        assert call.attributes["bot.llm.round"] == number
        assert call.attributes["gen_ai.request.model"] == "rule-model"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0 and call.attributes["gen_ai.usage.output_tokens"] > 0
        assert tuple(call.attributes["gen_ai.response.finish_reasons"]) == (finish,)
    assert calls[0].attributes["bot.llm.tool_calls"] == 1

    # The failed query and its retry: children of the turn, between the two model calls.
    assert len(queries) == 2 and children(turn, queries)
    failed, retried = sorted(queries, key=lambda span: span.start_time)
    assert calls[0].end_time <= failed.start_time and retried.end_time <= calls[1].start_time
    assert failed.attributes["error.type"] == "server_error" and failed.attributes["sentinel.status"] == 503
    assert failed.status.status_code == trace.StatusCode.ERROR
    result = await demo_backend_result(demo_backend)
    assert {k: retried.attributes[k] for k in ("sentinel.tool", "sentinel.source", "sentinel.rows",
                                               "sentinel.total", "sentinel.truncated")} == {
        "sentinel.tool": "query_incidents", "sentinel.source": "demo", "sentinel.rows": len(result.records),
        "sentinel.total": result.metadata.total, "sentinel.truncated": result.metadata.truncated}
    assert "error.type" not in retried.attributes

    # No question, answer, row text or KQL literal anywhere in the trace.
    secrets = await content_of_the_question(SentinelClient(demo_backend)) + [answer]
    everything = otel.spans.get_finished_spans()
    assert not leaks(list(everything), secrets)

    # Log lines from the handler, the tool layer and the data layer carry the turn's correlation and trace ids.
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    in_turn = [line for line in lines if line.get("correlation_id") == correlation]
    assert {"bot.teams.handler", "bot.tools.toolbox", "bot.sentinel.client"} <= {line["logger"] for line in in_turn}
    assert all(line["trace_id"] == format(turn.context.trace_id, "032x") for line in in_turn)
    assert not [line for line in json_log.getvalue().splitlines() for secret in secrets if secret in line]

    # Metrics: the turn by outcome, its duration, the tokens, the query latency by tool.
    turns = [p.value for attrs, p in otel.points("bot.turns")
             if attrs == {"bot.turn.outcome": "answered", "bot.turn.kind": "question",
                          "teams.conversation.type": "personal"}]
    assert turns and turns[0] >= 1
    assert any(p.count >= 1 for attrs, p in otel.points("bot.turn.duration") if attrs["bot.turn.kind"] == "question")
    tokens = {attrs["gen_ai.token.type"]: p.value for attrs, p in otel.points("bot.llm.tokens")
              if attrs["gen_ai.request.model"] == "rule-model"}
    assert tokens["input"] >= sum(call.attributes["gen_ai.usage.input_tokens"] for call in calls)
    assert tokens["output"] >= sum(call.attributes["gen_ai.usage.output_tokens"] for call in calls)
    latency = {attrs.get("error.type", "ok"): p.count for attrs, p in otel.points("sentinel.query.duration")
               if attrs["sentinel.tool"] == "query_incidents"}
    assert latency["ok"] >= 1 and latency["server_error"] >= 1


async def demo_backend_result(backend: DemoBackend) -> QueryResult:
    result = await SentinelClient(backend).run("query_incidents", QUESTION_ARGUMENTS)
    assert isinstance(result, QueryResult)
    return result


async def test_a_command_turn_has_a_query_span_and_no_model_call(otel: Recorded, connector: FakeConnector,
                                                                 demo_client: SentinelClient) -> None:
    turn, _ = await one_turn(otel, connector, demo_client, None, teams.channel_mention(
        "incidents 24h high", activity_id=next_id(), service_url=connector.url))
    [query] = otel.finished("sentinel.query")
    assert children(turn, [query]) and not otel.finished("llm.call")
    assert {k: turn.attributes.get(k) for k in ("teams.conversation.type", "bot.turn.kind", "bot.turn.command",
                                                "bot.turn.outcome", "bot.turn.tool_calls", "bot.question.length")} == {
        "teams.conversation.type": "channel", "bot.turn.kind": "command", "bot.turn.command": "incidents",
        "bot.turn.outcome": "answered", "bot.turn.tool_calls": 1, "bot.question.length": None}
    assert query.attributes["sentinel.tool"] == "query_incidents" and query.attributes["sentinel.rows"] >= 0


async def test_a_failing_turn_is_marked_failed_by_error_type_only(otel: Recorded, connector: FakeConnector) -> None:
    class Broken:
        source = "demo"

        async def execute(self, query: Any, kql_text: str) -> Any:
            raise RuntimeError("disk on fire while reading incident 'Ransomware on FIN-SRV-01'")

        async def prepare(self) -> None:
            return None

        async def close(self) -> None:
            return None

    turn, _ = await one_turn(otel, connector, SentinelClient(Broken()), None,
                             teams.personal("incidents 24h", activity_id=next_id(), service_url=connector.url))
    [query] = otel.finished("sentinel.query")
    assert turn.attributes["bot.turn.outcome"] == "failed" and turn.attributes["error.type"] == "RuntimeError"
    assert turn.attributes["bot.correlation_id"] in json.dumps([m.body for m in final_messages(connector.sent)]), \
        "the reference the analyst is given is the correlation id"
    assert query.attributes["error.type"] == "RuntimeError" and query.status.status_code == trace.StatusCode.ERROR
    assert not leaks([turn, query], ["disk on fire", "FIN-SRV-01"]), "exception messages are not recorded"
    failures = [p.value for attrs, p in otel.points("bot.turns") if attrs["bot.turn.outcome"] == "failed"]
    assert failures and failures[0] >= 1


async def test_capturing_content_adds_only_the_question_text(otel: Recorded, connector: FakeConnector,
                                                             demo_client: SentinelClient,
                                                             fake_openai: FakeOpenAI) -> None:
    settings = Settings.from_env({"TELEMETRY_CAPTURE_CONTENT": "true"}, dotenv_path=None)
    turn, answer = await one_turn(otel, connector, demo_client, fake_openai,
                                  teams.personal(QUESTION, activity_id=next_id(), service_url=connector.url), settings)
    assert turn.attributes["bot.question.text"] == QUESTION
    secrets = (await content_of_the_question(demo_client))[1:] + [answer]  # all but the question
    assert not leaks(list(otel.spans.get_finished_spans()), secrets)


async def test_an_orchestrator_turn_outside_teams_nests_under_the_callers_span(
        otel: Recorded, demo_client: SentinelClient, fake_openai: FakeOpenAI) -> None:
    """The terminal chat (and any other caller) gets the same model and query spans, under its own span."""
    fake_openai.brain = rule_model.brain
    client = create_client(openai_api_key="sk-test", base_url=f"{fake_openai.endpoint}/v1")
    orchestrator = Orchestrator(ChatModel(client, "rule-model"), ToolBox(demo_client), Memory(TokenCounter()),
                                demo=True)
    chat = TerminalChat(demo_client, orchestrator, out=io.StringIO(), status=io.StringIO())
    try:
        with trace.get_tracer("tests").start_as_current_span("caller"):
            reply = await chat.answer("which hosts were hit most this week, and what incidents came in?")
    finally:
        await orchestrator.model.close()
    [caller] = otel.finished("caller")
    calls, queries = otel.finished("llm.call"), otel.finished("sentinel.query")
    assert len(calls) == 2 and children(caller, calls)
    assert {q.attributes["sentinel.tool"] for q in queries} == {"get_top_entities", "query_incidents"}
    assert children(caller, queries), "queries run concurrently in tasks, and keep the caller's context"
    assert calls[0].attributes["bot.llm.tool_calls"] == 2
    results = [run.artifact for run in chat._last_runs if isinstance(run.artifact, QueryResult)]
    row_text = [str(getattr(record, field)) for result in results for record in result.records
                for field in ("value", "title") if hasattr(record, field)]
    assert len(row_text) > 5 and all(text in reply for text in row_text[:3])
    assert not leaks(calls + queries, ["which hosts were hit most", *row_text])


def test_log_lines_carry_the_correlation_id_in_both_formats() -> None:
    record = logging.LogRecord("bot.orchestrator.loop", logging.WARNING, __file__, 1, "model call failed: %s",
                               ("rate_limited",), None)
    text, as_json = telemetry.log_handler("text"), telemetry.log_handler("json")
    with telemetry.correlated("c0ffee123456"):
        for handler in (text, as_json):
            handler.filter(record)
        line = text.format(record)
        parsed = json.loads(as_json.format(record))
    assert "[c0ffee123456]: model call failed: rate_limited" in line
    assert parsed["correlation_id"] == "c0ffee123456" and parsed["message"] == "model call failed: rate_limited"
    assert parsed["level"] == "WARNING" and parsed["logger"] == "bot.orchestrator.loop"

    outside = logging.LogRecord("bot.app", logging.INFO, __file__, 1, "shutting down", (), None)
    assert as_json.filter(outside) and "correlation_id" not in json.loads(as_json.format(outside))
    assert "[-]: shutting down" in text.format(outside)
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.LogRecord("bot.x", logging.ERROR, __file__, 1, "turn failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(as_json.format(failed))["exception"]


def test_audit_records_go_to_their_own_file_and_off_the_console(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """AUDIT_LOG_FILE (./run sets it): one JSON object per line in that file, nothing on the other handlers."""
    from bot import audit

    path = tmp_path / "data" / "audit.jsonl"
    logger = logging.getLogger("bot.audit")
    before = (list(logger.handlers), logger.propagate, logger.level)
    try:
        logger.setLevel(logging.INFO)
        telemetry.audit_to_file(str(path))
        caplog.set_level(logging.INFO)
        audit.record("read", tool="query_incidents", rows=3)
    finally:
        for handler in logger.handlers[len(before[0]):]:
            handler.close()
        logger.handlers[:], logger.propagate = before[0], before[1]
        logger.setLevel(before[2])
    [line] = path.read_text(encoding="utf-8").splitlines()
    entry = json.loads(line)
    assert entry["audit"]["event"] == "read" and entry["audit"]["rows"] == 3 and entry["level"] == "INFO"
    assert not [r for r in caplog.records if r.name == "bot.audit"], "not on the console's handlers"


async def test_a_log_analytics_querys_wait_for_its_budget_is_measured(otel: Recorded) -> None:
    """By priority, and whether the query was then sent (bot/sentinel/scheduler.py)."""
    scheduler = QueryScheduler(QueryLimits(concurrent=1, queue_wait_s=0.01))
    slot = await scheduler.acquire("bot", Priority.TRIAGE)
    assert isinstance(slot, Slot) and isinstance(await scheduler.acquire("bot"), Busy)
    slot.release()
    counts = {(attrs["sentinel.priority"], attrs["sentinel.sent"]): point.count
              for attrs, point in otel.points("sentinel.query.wait")}
    assert counts == {("triage", True): 1, ("interactive", False): 1}
