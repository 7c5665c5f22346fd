"""The bot with write actions, for tests: the real Teams app over a fake Bot Connector, reads from the demo
workspace, writes through the real ArmIncidentWriter to the fake ARM endpoint (primed with the same
incidents, under the same resource names), and a clock the test moves.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from botbuilder.core import MemoryStorage

from bot.app import Components, create_app
from bot.config import Settings
from bot.orchestrator.changes.confirmations import ConfirmationDesk, WritePolicy
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.incident_writer import ArmIncidentWriter
from bot.sentinel.models import IncidentDetail, QueryResult
from bot.tools.toolbox import ToolBox
from bot.turns.runner import TurnRunner
from tests.support import connector_fake as teams
from tests.support.arm_fake import FakeArm, FakeCredential
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI

RESPONDERS = frozenset({"aad-alice", "aad-bob"})  # the fake connector's users have aadObjectId aad-<name>
_ids = itertools.count(1)


def next_id() -> str:
    return f"1800000{next(_ids):06d}"


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class WriteRig:
    url: str
    connector: FakeConnector
    arm: FakeArm
    clock: Clock
    incidents: list[IncidentDetail]  # mirrored into the fake ARM endpoint
    desk: ConfirmationDesk
    app: Any = None
    _server: Any = field(default=None, repr=False)

    async def post(self, activity: dict[str, Any]) -> int:
        import aiohttp

        async with aiohttp.ClientSession() as session, session.post(self.url, json=activity) as response:
            return response.status

    async def say(self, text: str, *, user: str = "alice", where: str = "personal") -> dict[str, Any]:
        """Send ``text`` as ``user`` (``where``: personal, channel or group); returns the activity sent."""
        if where == "channel":
            activity = teams.channel_mention(text, activity_id=next_id(), service_url=self.connector.url, user=user)
        elif where == "group":
            activity = teams.group_chat(text, activity_id=next_id(), service_url=self.connector.url, user=user)
        else:
            activity = teams.personal(text, activity_id=next_id(), service_url=self.connector.url, user=user)
        await self.post(activity)
        return activity

    async def click(self, value: dict[str, Any], *, card_id: str | None, user: str = "alice",
                    where: str = "personal") -> None:
        await self.post(teams.submit(value, activity_id=next_id(), service_url=self.connector.url,
                                     reply_to_id=card_id, user=user, conversation=where))

    async def next_messages(self, count: int = 1, timeout: float = 10.0) -> list[teams.Sent]:
        """Wait until ``count`` more message activities (new or updated) arrive after the last call."""
        start = getattr(self, "_seen", 0)
        await self.connector.wait_for(
            lambda sent: len([s for s in sent[start:] if s.type == "message"]) >= count, timeout)
        fresh = [s for s in self.connector.sent[start:] if s.type == "message"]
        self._seen = self.connector.sent.index(fresh[count - 1]) + 1
        return fresh[:count]

    def confirmation(self, sent: list[teams.Sent]) -> tuple[str, str]:
        """(action id, card message id) of the confirmation card among ``sent``."""
        for message in sent:
            for card in message.cards:
                action_id = _submit_id(card, "change_confirm")
                if action_id:
                    return action_id, message.activity_id
        raise AssertionError(f"no confirmation card in {[s.text or s.cards for s in sent]}")


@dataclass(frozen=True)
class Said:
    """What an updated outcome card says: the text of its blocks, in order (its heading first, without its icon)."""

    text: str


def said(update: teams.Sent) -> Said:
    """The outcome a Confirm or Cancel press is answered with: its card, updated in place (one message per change)."""
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "TextBlock" and isinstance(node.get("text"), str):
                texts.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(update.cards)
    return Said(re.sub(r"^\W+", "", " ".join(texts)))  # the heading's outcome icon left out


def _submit_id(node: Any, action: str) -> str | None:
    if isinstance(node, dict):
        data = node.get("data")
        if node.get("type") == "Action.Submit" and isinstance(data, dict) and data.get("action") == action:
            return str(data["id"])
        return next((found for value in node.values() if (found := _submit_id(value, action))), None)
    if isinstance(node, list):
        return next((found for value in node if (found := _submit_id(value, action))), None)
    return None


async def mirror_incidents(arm: FakeArm, sentinel: SentinelClient, count: int = 6) -> list[IncidentDetail]:
    """Prime the fake ARM endpoint with the demo workspace's latest incidents, under their resource names."""
    listing = await sentinel.run("query_incidents", {"time_window": "last_30d", "limit": count})
    assert isinstance(listing, QueryResult)
    details = []
    for incident in listing.records:
        result = await sentinel.run("get_incident_detail", {"incident_ref": incident.number})
        assert isinstance(result, QueryResult)
        detail = result.records[0]
        owner = {"assignedTo": incident.owner} if incident.owner else None
        arm.add_incident(number=incident.number, name=detail.incident_id, title=incident.title,
                         severity=incident.severity, status=incident.status, owner=owner,
                         description=detail.description, classification=incident.classification)
        details.append(detail)
    return details


@asynccontextmanager
async def write_rig(tmp_path: Path, sentinel: SentinelClient, *, start: datetime, enabled: bool = True,
                    responders: frozenset[str] = RESPONDERS, fake_llm: FakeOpenAI | None = None,
                    brain: Any = None) -> AsyncIterator[WriteRig]:
    from aiohttp.test_utils import TestServer

    connector = await FakeConnector().start()
    arm = await FakeArm(tmp_path, clock=lambda: start).start()
    clock = Clock(start)
    runner = TurnRunner()
    runner.start()  # its loop must exist before the writer's HTTP session is made on it

    async def make_writer() -> ArmIncidentWriter:  # on the runner's loop, where its HTTP session will live
        return ArmIncidentWriter(endpoint=arm.endpoint, credential=FakeCredential(), transport=arm.transport(),
                                 timeout_seconds=5, backoff_seconds=0.01, max_backoff_seconds=1, **arm.workspace)

    try:
        await sentinel.prepare()
        incidents = await mirror_incidents(arm, sentinel)
        writer = await runner.call(make_writer())
        runner.closes.push_async_callback(writer.close)
        desk = ConfirmationDesk(sentinel, writer if enabled else None, WritePolicy(enabled, responders), clock=clock)
        orchestrator = None
        if fake_llm is not None:
            if brain is not None:
                fake_llm.brain = brain
            client = create_client(openai_api_key="sk-test", base_url=f"{fake_llm.endpoint}/v1")
            orchestrator = Orchestrator(ChatModel(client, "scripted"), ToolBox(sentinel), Memory(TokenCounter()),
                                        demo=sentinel.is_demo, desk=desk)
        app = create_app(Components(Settings.from_env({}, dotenv_path=None), sentinel, orchestrator, desk=desk),
                         MemoryStorage(), runner=runner)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        rig = WriteRig(str(server.make_url("/api/messages")), connector, arm, clock, incidents, desk, app, server)
        try:
            yield rig
        finally:
            await server.close()
    finally:
        await arm.stop()
        await connector.stop()
