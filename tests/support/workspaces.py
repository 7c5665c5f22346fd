"""Sentinel clients for tests: the demo workspace, and Log Analytics through the fake service primed from it."""

from __future__ import annotations

from typing import Any

from bot.demo.backend import DemoBackend
from bot.sentinel.client import SentinelClient
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client
from bot.sentinel.queries import kql_of, make_query
from tests.support.loganalytics_fake import FakeCredential, FakeLogAnalytics, table_body

WORKSPACE = "11111111-2222-3333-4444-555555555555"


def make_la_client(fake: FakeLogAnalytics, *, sdk_retries: int | None = None, **backend_options: Any) -> SentinelClient:
    """A SentinelClient over the real LogsQueryClient, pointed at the fake service."""
    extra = {"retry_total": sdk_retries} if sdk_retries is not None else {}
    logs = create_logs_client(FakeCredential(), endpoint=fake.endpoint, transport=fake.transport(),
                              retry_backoff_factor=0.01, **extra)
    return SentinelClient(LogAnalyticsBackend(logs, WORKSPACE, **backend_options))


async def prime(fake: FakeLogAnalytics, demo: DemoBackend, tool: str, arguments: dict[str, Any],
                dynamic_as_text: bool = True) -> str:
    """Teach the fake the demo's answer to this exact query; returns the KQL."""
    query = make_query(tool, {k: v for k, v in arguments.items() if v is not None})
    text = kql_of(query)
    raw = await demo.execute(query, text)
    fake.known[text] = table_body(tool, raw.rows, dynamic_as_text=dynamic_as_text)
    return text
