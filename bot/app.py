"""Composition root: reads Settings, builds every client, and wires them together.

Nothing else constructs SDK clients or credentials; everything below receives what it needs, which is
how tests put fakes at the process boundary without patching.
"""

from __future__ import annotations

import logging

from bot.config import Settings
from bot.sentinel.client import SentinelClient

log = logging.getLogger(__name__)


def build_sentinel_client(settings: Settings) -> SentinelClient:
    """The workspace client: Log Analytics when SENTINEL_WORKSPACE_ID is set, else the demo workspace."""
    if settings.uses_demo_workspace:
        from bot.sentinel.demo.backend import DemoBackend

        log.info("No SENTINEL_WORKSPACE_ID set: using the demo workspace (generated data, seed %s)",
                 settings.demo_data_seed)
        return SentinelClient(DemoBackend(seed=settings.demo_data_seed))

    from azure.identity.aio import DefaultAzureCredential

    from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client

    assert settings.sentinel_workspace_id is not None
    client = create_logs_client(DefaultAzureCredential(), endpoint=settings.logs_endpoint)
    backend = LogAnalyticsBackend(client, settings.sentinel_workspace_id,
                                  server_timeout_s=settings.query_timeout_seconds)
    return SentinelClient(backend)
