"""Drives the Microsoft 365 Agents Playground (a local Teams emulator) over HTTP for end-to-end tests.

The Playground (npm ``@microsoft/m365agentsplayground``, installed by ``npm ci --prefix tests/e2e``; see
Microsoft Learn, "Test your agent locally in Microsoft 365 Agents Playground") plays both the Teams client and
the Bot Connector service: it POSTs Teams-shaped activities to the bot's ``/api/messages`` and receives the
bot's replies on its mocked connector. This module starts it, does what its web page does, and records what
the bot sent::

    async with Playground("http://127.0.0.1:3978/api/messages", tmp_path) as pg:
        sent = await pg.send_personal("hello")
        reply = await pg.wait_for_reply(sent)
        assert reply.text == "echo: hello"

Everything below was read from the shipped bundle (``dist/index.js``, ``dist/client/static/js/main.*.js``)
of version 0.2.28 and checked against a running CloudAdapter bot.

Starting it
    ``node cli.js start -e <bot endpoint> -c msteams --dt -p 0`` in a new session (setsid), cwd = the test's
    work dir (so no ``.m365agentsplayground.yml`` from elsewhere is picked up), with
    ``TEAMSAPPTESTER_BROWSER=none`` (otherwise it runs xdg-open and exits 1) and
    ``M365_AGENTS_PLAYGROUND_LOGFILE=<workdir>/playground.log`` (it deletes that file on start, then appends
    every console.* call to it). ``-p 0`` makes it listen on a free port; when stdout is not a TTY it prints
    exactly one line, ``Listening on <port>``, to stdout (a taken ``-p N`` silently falls back to a random
    port, so reading that line is the only safe way to learn the port). Left to itself it listens on all
    interfaces; ``tests/e2e/loopback.js``, preloaded, keeps it on 127.0.0.1.
    ``GET /_internal/v1/config`` first waits (wait-on, up to 15 s) for the bot endpoint to answer anything,
    then answers; if the bot never answered, it answers anyway and logs "Cannot connect to your app".

The mocked tenant (``GET /_internal/v1/config`` -> ``{"config": {...}, "internalConfig": {...}}``)
    ``currentUser.id`` ``user-id-0`` (Alex Wilber), ``users`` ``user-id-1``..``user-id-5``,
    ``bot`` ``{"id": "00000000-0000-0000-0000-00000000000011", "name": "Test Bot"}``, ``tenantId``,
    ``personalChat.id`` and ``groupChats[0].id`` (random UUIDs, new on every start),
    ``teams[0]`` ``team-id`` with channels ``team-id`` (General) and ``channel-announcements-id``.

Sending as the user (what the page does)
    ``POST /_conversation/v1/conversations/{conversationId}/messages``
    ``{"from": {"id": "user-id-0"}, "text": "...", "textFormat": "plain" | "markdown" | "xml",
    "mentions": [{"mentioned": {"id": <bot id>}, "text": "<at>Test Bot</at>"}]}`` (mentions optional; the
    mention text must appear in ``text``, and ``textFormat`` is then ``xml``). Answer 200
    ``{"messageId": "<ms timestamp>", "timestamp": <ms>}``, plus ``"postConversationId":
    "team-id;messageid=<messageId>"`` when posted to a channel id: that new thread is a conversation of its
    own; post to its id to reply inside the thread. The bot is called *after* the answer (fire and forget),
    so replies must be waited for. In group chats and channels the bot is only called when the message
    @mentions it; otherwise nothing reaches the bot at all. Unknown conversation: 404; bad body: 400.
    The activity id the bot receives is a fresh GUID, not ``messageId``.

Pressing card buttons (what the page does)
    ``Action.Submit``: ``POST /_conversation/v1/submit`` ``{"conversation": {"id": <conversation of the card
    message>}, "replyToId": <card message id>, "from": {"id": "user-id-0"}, "value": <action data merged
    with the card inputs; {} when data is not an object>}``; 200 with an empty body, then (fire and forget)
    the bot gets a ``message`` activity with that ``value``, ``replyToId`` and ``channelData.source``.
    ``msteams.messageBack``-style data is passed through as is (no ``text`` is sent).
    ``Action.Execute``: ``POST /_conversation/v1/invoke`` ``{"name": "adaptiveCard/action", "value":
    {"action": {"type": "Action.Execute", "title": ..., "verb": ..., "data": ...}}, "from": {"id": ...},
    "conversation": {"id": ...}, "replyToId": <card message id>}``; the call waits for the bot and answers
    200 ``{"type": ..., "value": ...}`` from the bot's invoke response body (its ``statusCode`` dropped; the
    whole body is the ``response`` of the ``invoke`` :class:`Exchange`), or 502
    ``{"code": "UserBotError", "innerHttpError": {...}}`` when the bot failed. The page refuses an
    Action.Execute without ``verb``. When the card message has exactly one attachment the Playground
    replaces its stored card with the response ``value`` (Universal Actions refresh) without telling
    anyone over the websocket. ``replyToId`` must be a message of that conversation, else 400
    ``ActivityNotFoundInConversation``.

Installing the app (what the page does the first time it shows a conversation, on every page load)
    ``POST /_debug/conversation/{conversationId}/installation`` ``{}``: the bot gets an
    ``installationUpdate`` (action ``add``) and a ``conversationUpdate`` with ``membersAdded`` (personal:
    user and bot; channel: the bot, ``channelData.eventType`` ``teamMemberAdded``). Nothing is sent unless
    something calls this (:meth:`Playground.install`, or a browser opening the page), so a welcome message
    only appears when a test asks for it.

How the bot's replies are observed
    Through the two websockets the page uses, connected right after start:
    ``/_ws_conversation/v1/conversations/stream`` pushes ``{"action": "createMessage" | "updateMessage" |
    "typing", "actionConversationId": ..., "message": {"messageId", "timestamp", "from", "text",
    "textFormat", "attachments", "attachmentLayout", "mentions", "aiEntity", "feedbackLoopEnabled",
    "streamEntity", "suggestedActions", "postConversationId"?}}``: the conversation as the user sees it
    (-> :class:`BotMessage`). ``/_ws/log/stream`` pushes ``{"logAction": "appendLog", "log": {...}}``:
    every HTTP exchange in both directions with the full activity and the answer's status and body
    (-> :class:`Exchange`), plus text notes and warnings (-> :class:`LogNote`). An exchange is logged when
    its answer arrives, so the activity the bot received is logged after the replies it sent during that
    turn: :meth:`Playground.wait_received` waits for it, i.e. for the end of the turn.
    Why not the log file: events are written to it only while *no* websocket client is connected ("No
    websocket clients connected, buffering message: ..."); the Playground keeps them in memory and hands
    them all to the next client that connects, after which they stop appearing in the file. The websockets
    therefore lose nothing (a client connecting late still gets everything sent before), while the log file
    is complete only when nothing (no harness, no browser) is listening. Every event received is also
    appended, as received, to ``<workdir>/playground-events.jsonl`` for debugging. Each websocket client
    gets every event, so a browser showing the page at the same time does not take events away.

What the Playground does with the bot's activities (``/_connector/v3/conversations/{id}/activities``)
    - A ``message`` with text and attachments is split into several messages (the text, then one message
      per attachment, unless ``attachmentLayout`` is ``carousel``), each with its own id (``<id>-<suffix>``
      for the later ones); the bot then gets ``202`` with an empty body instead of ``201 {"id": ...}``, so
      it cannot update any of them later.
    - ``PUT .../activities/{id}`` (update) must carry text only or exactly one attachment, else 400
      ``BadSyntax`` "Activity resulted into multiple skype activities"; an accepted update appears as
      ``updateMessage`` with the same ``messageId``.
    - ``DELETE`` answers 501 ``DeleteActivityAPINotImplemented`` (and a warning note).
    - A reply sent to a channel id (not a thread id) starts a new thread; its ``createMessage`` carries
      ``actionConversationId`` = the channel and ``message.postConversationId`` = the new thread.
    - Streaming (``streaminfo`` entity, Microsoft Learn "Stream bot messages"): only in personal chats
      (elsewhere the first chunk is refused: 405 ``BadArgument`` in the code); sequence 1 creates the message (201
      with the stream id = message id), later chunks and the final message are ``updateMessage`` of that id (202).
      Typing activities without a stream entity become ``typing`` events; ``trace`` activities are dropped.
    - The activity's shape is validated (mentions must match the text, a message needs text or
      attachments...), Adaptive Card *contents* are not: a card with an unknown element type is accepted.
      A rejected activity shows up as an :class:`Exchange` with status >= 400 (see
      :meth:`Playground.rejected`) and never as a :class:`BotMessage`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp

from tests.support import processes
from tests.support.tooling import missing, require_tool

E2E_DIR = Path(__file__).resolve().parent.parent / "e2e"
PACKAGE = "@microsoft/m365agentsplayground"
CLI = E2E_DIR / "node_modules" / PACKAGE / "cli.js"
LOOPBACK = E2E_DIR / "loopback.js"  # preloaded: the Playground listens on 127.0.0.1 only
ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"

START_TIMEOUT = 120.0  # a hang guard: node start + the Playground's own wait for the bot endpoint (at most 15 s)
DEFAULT_WAIT = 10.0
MAX_EVENTS = 10_000  # per kind; a test that produces more is broken, and hitting it says so


def require_playground() -> None:
    """Skip the test when the Playground cannot run, except in CI (``CI`` set), where that is a failure."""
    require_tool("Agents Playground", CLI, "npm ci --prefix tests/e2e")


class PlaygroundError(RuntimeError):
    """The Playground answered an HTTP call with an error status."""

    def __init__(self, method: str, path: str, status: int, body: Any):
        self.status = status
        self.body = body
        shown = body if isinstance(body, str) else json.dumps(body)
        super().__init__(f"{method} {path} -> {status}: {shown[:2000]}")


# ---------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class BotMessage:
    """One event on the conversation websocket: a bot message created, updated in place, or typing."""

    seq: int  # arrival order over all recorded events of this Playground
    kind: Literal["create", "update", "typing"]
    conversation_id: str  # chat id, or thread id "team-id;messageid=<n>" for anything inside a channel thread
    activity_id: str  # the id the bot got back (its messageId); "" for typing
    text: str | None
    text_format: str | None
    attachments: tuple[dict[str, Any], ...]
    attachment_layout: str | None
    mentions: tuple[dict[str, Any], ...]
    suggested_actions: dict[str, Any] | None
    ai_entity: dict[str, Any] | None
    stream: dict[str, Any] | None  # the streaminfo entity: streamType, streamSequence, streamId
    feedback_loop_enabled: bool
    timestamp: datetime | None  # the Playground's clock (UTC)
    received_at: float  # time.monotonic() when the harness received it
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def is_update(self) -> bool:
        return self.kind == "update"

    @property
    def cards(self) -> list[dict[str, Any]]:
        """The Adaptive Cards among the attachments."""
        return [a.get("content") or {} for a in self.attachments if a.get("contentType") == ADAPTIVE_CARD]

    @property
    def stream_type(self) -> str | None:
        return (self.stream or {}).get("streamType")

    def card_actions(self) -> list[dict[str, Any]]:
        """Every action of every card, in document order (actions, ActionSets, ShowCard cards)."""
        found: list[dict[str, Any]] = []
        for card in self.cards:
            _collect_actions(card, found)
        return found

    def find_action(self, title: str | None = None, *, type: str | None = None) -> dict[str, Any]:
        """The one card action with this title (and/or type); raises when there is none or several."""
        matches = [a for a in self.card_actions()
                   if (title is None or a.get("title") == title) and (type is None or a.get("type") == type)]
        if len(matches) != 1:
            have = [(a.get("type"), a.get("title")) for a in self.card_actions()]
            raise LookupError(f"expected one action title={title!r} type={type!r} in message {self.activity_id}, "
                              f"found {len(matches)}; actions: {have}")
        return matches[0]

    def summary(self) -> str:
        what = self.text if self.text is not None else f"<{len(self.attachments)} attachment(s)>"
        stream = f" stream={self.stream_type}" if self.stream else ""
        return f"#{self.seq} {self.kind} {self.conversation_id} {self.activity_id}{stream}: {str(what)[:160]!r}"


def _collect_actions(node: Any, found: list[dict[str, Any]]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("type"), str) and node["type"].startswith("Action."):
            found.append(node)
        for key, value in node.items():
            if key in ("actions", "body", "items", "columns", "card", "selectAction", "inlineAction", "rows",
                       "cells"):
                _collect_actions(value, found)
    elif isinstance(node, list):
        for item in node:
            _collect_actions(item, found)


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange between the Playground and the bot, from the log websocket."""

    seq: int
    direction: Literal["to_bot", "from_bot"]
    activity_type: str | None  # activity type, or the connector operation for non-activity calls
    conversation_id: str | None
    message_id: str | None
    activity: Mapping[str, Any]  # the request body
    status: int | None
    response: Any
    timestamp: datetime | None
    received_at: float

    def summary(self) -> str:
        text = self.activity.get("text") if isinstance(self.activity, Mapping) else None
        return (f"#{self.seq} {self.direction} {self.activity_type} {self.conversation_id} -> {self.status}"
                f"{': ' + repr(str(text)[:120]) if text else ''}")


@dataclass(frozen=True)
class LogNote:
    """A text line of the Playground's log panel (level: default, warning, error)."""

    seq: int
    level: str
    text: str
    conversation_id: str | None
    timestamp: datetime | None


@dataclass(frozen=True)
class Sent:
    """What a send returned: where the bot's replies will appear and the point in the event stream."""

    posted_to: str  # the conversation id the message was posted to
    conversation_id: str  # where replies appear: the same, or the new thread for a channel post
    message_id: str  # the Playground's id of the user's message (for a submit: the card message's id)
    timestamp: datetime | None
    seq: int  # last event seq before the send; replies have a larger seq
    text: str | None = None  # the text as sent (with the <at> mention), for a message
    value: Mapping[str, Any] | None = None  # the value, for a card submit

    def is_received_as(self, exchange: Exchange) -> bool:
        """Whether ``exchange`` is the Playground delivering this send to the bot."""
        activity = exchange.activity
        if exchange.direction != "to_bot" or exchange.conversation_id != self.conversation_id:
            return False
        if self.value is not None:
            return activity.get("value") == dict(self.value) and activity.get("replyToId") == self.message_id
        return activity.get("type") == "message" and activity.get("text") == self.text


@dataclass(frozen=True)
class InvokeResult:
    """The bot's answer to an ``Action.Execute`` invoke, as the Playground returned it."""

    type: str | None
    value: Any
    raw: Mapping[str, Any]


def _ms(value: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------
# Processes


_LIVE: set[ManagedProcess] = set()


def _kill_leftovers() -> None:
    for process in list(_LIVE):
        process.kill_now()


atexit.register(_kill_leftovers)


class ManagedProcess:
    """A child process in its own session, killed with its whole process group on stop, at interpreter
    exit, and (Linux) when the test process dies. Waits for a ready line on its output (stdout and stderr,
    merged, all copied to ``log_path``)."""

    def __init__(self, process: asyncio.subprocess.Process, name: str, log_path: Path):
        self.process = process
        self.name = name
        self.log_path = log_path
        self.port: int | None = None
        self._drain: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, argv: Sequence[str], *, name: str, log_path: Path, ready: re.Pattern[str],
                    cwd: Path | None = None, env: Mapping[str, str] | None = None,
                    timeout: float = START_TIMEOUT) -> ManagedProcess:
        """Start ``argv``; wait until an output line matches ``ready`` (its group 1, if any, is the port)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=processes.die_with_parent)
        managed = cls(process, name, log_path)
        _LIVE.add(managed)
        try:
            await asyncio.wait_for(managed._wait_ready(ready), timeout)
        except BaseException as exc:
            await managed.stop()
            if isinstance(exc, TimeoutError):
                raise TimeoutError(f"{name} did not get ready within {timeout:.0f} s; "
                                   f"its output: {managed.tail()}") from None
            raise
        managed._drain = asyncio.create_task(managed._drain_stdout())
        return managed

    async def _wait_ready(self, ready: re.Pattern[str]) -> None:
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                await self.process.wait()
                raise RuntimeError(f"{self.name} exited with status {self.process.returncode} before it was "
                                   f"ready; its output: {self.tail()}")
            self._log(line)
            match = ready.search(line.decode(errors="replace"))
            if match:
                if match.groups():
                    self.port = int(match.group(1))
                return

    async def _drain_stdout(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self._log(line)

    def _log(self, line: bytes) -> None:
        with open(self.log_path, "ab") as log:
            log.write(line)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no output)"

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def kill_now(self) -> None:
        """SIGKILL the whole process group, synchronously (atexit and last-resort use)."""
        _LIVE.discard(self)
        if self.process.returncode is not None:
            return  # reaped: its pid may belong to someone else by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the process group, wait at most ``timeout``, then SIGKILL it."""
        _LIVE.discard(self)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), timeout)
        # The group may hold children that outlive the leader: always finish with SIGKILL.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), timeout)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain


# ---------------------------------------------------------------------------------------------------------
# The harness


Predicate = Callable[[BotMessage], bool]


class Playground:
    """One Agents Playground process in front of one bot endpoint, plus what it recorded.

    ``workdir`` (a test's tmp dir) receives ``playground.log`` (its console), ``playground-events.jsonl``
    (every websocket event as received) and is its working directory.
    """

    def __init__(self, bot_endpoint: str, workdir: Path, *, channel_id: str = "msteams",
                 cli: Path = CLI, node: str | None = None, start_timeout: float = START_TIMEOUT):
        self.bot_endpoint = bot_endpoint
        self.workdir = Path(workdir)
        self.channel_id = channel_id
        self.cli = cli
        self.node = node or shutil.which("node") or "node"
        self.start_timeout = start_timeout
        self.log_path = self.workdir / "playground.log"
        self.events_path = self.workdir / "playground-events.jsonl"
        self.url = ""
        self.port = 0
        self.startup_seconds = 0.0
        self._process: ManagedProcess | None = None
        self._session: aiohttp.ClientSession | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._config: dict[str, Any] = {}
        self._seq = 0
        self._messages: list[BotMessage] = []
        self._exchanges: list[Exchange] = []
        self._notes: list[LogNote] = []
        self._conversation_of: dict[str, str] = {}  # activity id -> conversation id of its create event
        self._changed = asyncio.Condition()

    # -- lifecycle ------------------------------------------------------------------------------------

    async def __aenter__(self) -> Playground:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> Playground:
        """Start the CLI, wait until its config answers (which also means it reached the bot), connect the
        websockets. On any failure everything started is stopped again."""
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "TEAMSAPPTESTER_BROWSER": "none", "M365_AGENTS_PLAYGROUND_LOGFILE": str(self.log_path)}
        argv = [self.node, "-r", str(LOOPBACK), str(self.cli), "start", "-e", self.bot_endpoint, "-c", self.channel_id,
                "--dt", "-p", "0"]
        try:
            self._process = await ManagedProcess.start(
                argv, name="Agents Playground", log_path=self.workdir / "playground.stdout.log",
                ready=re.compile(r"Listening on (\d+)"), cwd=self.workdir, env=env, timeout=self.start_timeout)
            assert self._process.port is not None
            self.port = self._process.port
            self.url = f"http://127.0.0.1:{self.port}"
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
            remaining = self.start_timeout - (time.monotonic() - started)
            try:
                self._config = await asyncio.wait_for(self._fetch_config(), max(remaining, 1.0))
            except TimeoutError:
                raise TimeoutError(f"GET /_internal/v1/config did not answer within {self.start_timeout:.0f} s; "
                                   f"console: {self._process.tail()}") from None
            for path, handler in (("/_ws_conversation/v1/conversations/stream", self._on_conversation_event),
                                  ("/_ws/log/stream", self._on_log_event)):
                ws = await self._session.ws_connect(f"ws://127.0.0.1:{self.port}{path}")
                self._readers.append(asyncio.create_task(self._read(ws, handler)))
            # The config call logged whether it reached the bot; those notes were buffered for the first
            # websocket client, which is us.
            await self._wait(lambda: next((n for n in self._notes if n.text == "Connected."
                                           or "Cannot connect to your app" in n.text), None),
                             5.0, "connection note from the Playground", 0)
            if self.notes(contains="Cannot connect to your app"):
                raise RuntimeError(f"the Playground could not reach the bot at {self.bot_endpoint} "
                                   f"(it waited 15 s for it to answer)")
        except BaseException:
            await self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    async def _fetch_config(self) -> dict[str, Any]:
        assert self._session is not None
        while True:  # bounded by the caller's wait_for
            try:
                async with self._session.get(f"{self.url}/_internal/v1/config") as response:
                    if response.status == 200:
                        return await response.json()
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Close the websockets and kill the Playground's process group. Safe to call twice."""
        for reader in self._readers:
            reader.cancel()
        for reader in self._readers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self._readers.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._process is not None:
            await self._process.stop()
            self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    # -- the mocked tenant ----------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """``GET /_internal/v1/config`` as fetched at start: ``{"config": {...}, "internalConfig": {...}}``."""
        return self._config

    @property
    def tenant(self) -> dict[str, Any]:
        return self._config["config"]

    @property
    def bot_id(self) -> str:
        return self.tenant["bot"]["id"]

    @property
    def bot_name(self) -> str:
        return self.tenant["bot"]["name"]

    @property
    def user_id(self) -> str:
        return self.tenant["currentUser"]["id"]

    @property
    def personal_chat_id(self) -> str:
        return self.tenant["personalChat"]["id"]

    @property
    def group_chat_id(self) -> str:
        return self.tenant["groupChats"][0]["id"]

    @property
    def team_id(self) -> str:
        return self.tenant["teams"][0]["id"]

    @property
    def general_channel_id(self) -> str:
        return self.tenant["teams"][0]["channels"][0]["id"]

    # -- acting as the user ---------------------------------------------------------------------------

    async def send(self, conversation_id: str, text: str, *, mention_bot: bool = False,
                   from_id: str | None = None, text_format: str | None = None) -> Sent:
        """Post a message as ``from_id`` (default: the current user) to a chat, channel or thread.

        With ``mention_bot`` the text is prefixed with ``<at>Test Bot</at>`` and carries the mention
        entity; in group chats and channels the bot is only called when it is mentioned.
        """
        body: dict[str, Any] = {"from": {"id": from_id or self.user_id}}
        if mention_bot:
            at = f"<at>{self.bot_name}</at>"
            body.update(text=f"{at} {text}", textFormat=text_format or "xml",
                        mentions=[{"mentioned": {"id": self.bot_id}, "text": at}])
        else:
            body.update(text=text, textFormat=text_format or "plain")
        seq = self._seq
        answer = await self._post(f"/_conversation/v1/conversations/{conversation_id}/messages", body)
        thread = answer.get("postConversationId")
        return Sent(posted_to=conversation_id, conversation_id=thread or conversation_id,
                    message_id=str(answer.get("messageId")), timestamp=_ms(answer.get("timestamp")), seq=seq,
                    text=body["text"])

    async def send_personal(self, text: str) -> Sent:
        """A message in the 1:1 chat with the bot."""
        return await self.send(self.personal_chat_id, text)

    async def send_group(self, text: str, *, mention_bot: bool = True, from_id: str | None = None) -> Sent:
        """A message in the group chat (the bot only hears it when mentioned)."""
        return await self.send(self.group_chat_id, text, mention_bot=mention_bot, from_id=from_id)

    async def post_in_channel(self, text: str, *, channel_id: str | None = None, mention_bot: bool = True,
                              from_id: str | None = None) -> Sent:
        """A new post (thread) in a channel, General by default. ``Sent.conversation_id`` is the thread id."""
        return await self.send(channel_id or self.general_channel_id, text, mention_bot=mention_bot,
                               from_id=from_id)

    async def reply_in_thread(self, thread_id: str, text: str, *, mention_bot: bool = True,
                              from_id: str | None = None) -> Sent:
        """A reply inside a channel thread (``team-id;messageid=<n>``)."""
        return await self.send(thread_id, text, mention_bot=mention_bot, from_id=from_id)

    async def mock_activity(self, conversation_id: str, activity: Mapping[str, Any],
                            timeout: float = DEFAULT_WAIT) -> Exchange:
        """What the page's "Mock an Activity" does: the Playground's template for ``conversation_id`` (id,
        timestamp, serviceUrl, recipient, conversation, from) with ``activity``'s fields over it (an invoke's name
        and value), POSTed to ``/_internal/v1/customActivities`` (200 at once, the activity sent to the bot after).
        The template has no channelData: Teams always sends the tenant there, so it is added. Returns the exchange
        when the bot answered, whose ``response`` is an invoke's answer body."""
        if self._session is None:
            raise RuntimeError("the Playground is not running")
        async with self._session.get(f"{self.url}/_internal/v1/customActivities/template",
                                     params={"conversationId": conversation_id}) as response:
            template = await response.json(content_type=None)
        body = {**template, "channelData": {"tenant": {"id": template["conversation"].get("tenantId")}},
                **activity}
        seq = self._seq
        await self._post("/_internal/v1/customActivities", body)
        return await self.wait_for_exchange(
            lambda e: e.direction == "to_bot" and e.activity.get("id") == body["id"], timeout, since=seq)

    async def post_card(self, conversation_id: str, card: Mapping[str, Any]) -> str:
        """A card the user posts (as a message extension inserts one): stored in the conversation, not sent to the
        bot (no mention), and not pushed to the page. Returns its message id, for pressing its buttons."""
        answer = await self._post(f"/_conversation/v1/conversations/{conversation_id}/messages", {
            "from": {"id": self.user_id}, "text": "", "textFormat": "plain",
            "attachments": [{"contentType": ADAPTIVE_CARD, "content": dict(card)}]})
        return str(answer.get("messageId"))

    async def press(self, conversation_id: str, message_id: str, value: Mapping[str, Any]) -> Sent:
        """An ``Action.Submit`` on any message of the conversation (e.g. a card the user posted): what
        :meth:`submit` sends, for a message the harness did not see the bot send."""
        seq = self._seq
        await self._post("/_conversation/v1/submit", {
            "conversation": {"id": conversation_id}, "replyToId": message_id, "from": {"id": self.user_id},
            "value": dict(value)})
        return Sent(posted_to=conversation_id, conversation_id=conversation_id, message_id=message_id,
                    timestamp=None, seq=seq, value=dict(value))

    async def install(self, conversation_id: str) -> None:
        """What the page does when a conversation is opened: installationUpdate + conversationUpdate."""
        await self._post(f"/_debug/conversation/{conversation_id}/installation", {})

    async def submit(self, message: BotMessage, title: str | None = None, *,
                     inputs: Mapping[str, Any] | None = None, value: Mapping[str, Any] | None = None,
                     from_id: str | None = None) -> Sent:
        """Press an ``Action.Submit`` button of a card message (the only one, or the one titled ``title``).

        The value sent is the action's data merged with ``inputs`` (the card's input values), as the
        Adaptive Cards renderer does; ``value`` replaces all of that.
        """
        if value is None:
            data = message.find_action(title, type="Action.Submit").get("data")
            value = {**(data if isinstance(data, dict) else {}), **(inputs or {})}
        seq = self._seq
        await self._post("/_conversation/v1/submit", {
            "conversation": {"id": message.conversation_id}, "replyToId": message.activity_id,
            "from": {"id": from_id or self.user_id}, "value": dict(value)})
        return Sent(posted_to=message.conversation_id, conversation_id=message.conversation_id,
                    message_id=message.activity_id, timestamp=None, seq=seq, value=dict(value))

    async def execute(self, message: BotMessage, title: str | None = None, *,
                      inputs: Mapping[str, Any] | None = None, from_id: str | None = None) -> InvokeResult:
        """Press an ``Action.Execute`` button: an ``adaptiveCard/action`` invoke; returns the bot's answer."""
        action = message.find_action(title, type="Action.Execute")
        if not action.get("verb"):
            raise ValueError(f"Action.Execute {action.get('title')!r} has no verb: the Playground page refuses it")
        data = action.get("data")
        if inputs:
            data = {**(data if isinstance(data, dict) else {}), **inputs}
        answer = await self._post("/_conversation/v1/invoke", {
            "name": "adaptiveCard/action",
            "value": {"action": {"type": "Action.Execute", "title": action.get("title"), "verb": action["verb"],
                                 "data": data}},
            "from": {"id": from_id or self.user_id}, "conversation": {"id": message.conversation_id},
            "replyToId": message.activity_id})
        answer = answer if isinstance(answer, dict) else {}
        return InvokeResult(type=answer.get("type"), value=answer.get("value"), raw=answer)

    async def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        if self._session is None:
            raise RuntimeError("the Playground is not running")
        async with self._session.post(f"{self.url}{path}", json=body) as response:
            text = await response.text()
            try:
                answer: Any = json.loads(text) if text else None
            except ValueError:
                answer = text
            if response.status >= 400:
                raise PlaygroundError("POST", path, response.status, answer)
            return answer if answer is not None else {}

    # -- what the bot sent ----------------------------------------------------------------------------

    def bot_messages(self, conversation_id: str | None = None, *, include_typing: bool = False,
                     since: int | Sent | None = None) -> list[BotMessage]:
        """Bot message events (creates and updates, in arrival order), optionally of one conversation and
        after a point (a ``Sent`` or a seq)."""
        after = since.seq if isinstance(since, Sent) else (since or 0)
        return [m for m in self._messages
                if m.seq > after and (include_typing or m.kind != "typing")
                and (conversation_id is None or m.conversation_id == conversation_id)]

    def transcript(self, conversation_id: str) -> list[BotMessage]:
        """The bot's messages in a conversation as the user sees them now: latest version of each, in
        the order they were created."""
        latest: dict[str, BotMessage] = {}  # keeps the order of first insertion, i.e. of creation
        for message in self.bot_messages(conversation_id):
            if message.kind == "create" or message.activity_id in latest:
                latest[message.activity_id] = message
        return list(latest.values())

    def message(self, activity_id: str) -> BotMessage:
        """The latest version of one bot message."""
        versions = [m for m in self._messages if m.activity_id == activity_id and m.kind != "typing"]
        if not versions:
            raise LookupError(f"no bot message with id {activity_id}")
        return versions[-1]

    def exchanges(self, *, direction: str | None = None, conversation_id: str | None = None,
                  since: int | Sent | None = None) -> list[Exchange]:
        """Raw HTTP exchanges between the Playground and the bot (full activities, statuses)."""
        after = since.seq if isinstance(since, Sent) else (since or 0)
        return [e for e in self._exchanges if e.seq > after
                and (direction is None or e.direction == direction)
                and (conversation_id is None or e.conversation_id == conversation_id)]

    def rejected(self) -> list[Exchange]:
        """Calls whose answer was an error: the bot's activities the Playground refused (4xx), and
        activities the bot answered with an error."""
        return [e for e in self._exchanges if e.status is not None and e.status >= 400]

    def notes(self, *, level: str | None = None, contains: str | None = None) -> list[LogNote]:
        """The log panel's text lines (connection state, warnings about unsupported card features...)."""
        return [n for n in self._notes if (level is None or n.level == level)
                and (contains is None or contains in n.text)]

    async def wait_for(self, predicate: Predicate, timeout: float = DEFAULT_WAIT, *,
                       since: int | Sent | None = None, include_typing: bool = False,
                       description: str = "matching bot message") -> BotMessage:
        """The first bot message event after ``since`` that satisfies ``predicate``; waits at most
        ``timeout`` seconds, then raises ``TimeoutError`` listing what did arrive."""
        after = since.seq if isinstance(since, Sent) else (since or 0)

        def find() -> BotMessage | None:
            for message in self._messages:
                if message.seq > after and (include_typing or message.kind != "typing") and predicate(message):
                    return message
            return None

        return await self._wait(find, timeout, description, after)

    async def wait_for_reply(self, sent: Sent, predicate: Predicate | None = None,
                             timeout: float = DEFAULT_WAIT) -> BotMessage:
        """The first new bot message in the conversation of ``sent`` (created after it) that satisfies
        ``predicate`` (default: any)."""
        return await self.wait_for(
            lambda m: m.kind == "create" and m.conversation_id == sent.conversation_id
            and (predicate is None or predicate(m)),
            timeout, since=sent, description=f"reply in {sent.conversation_id}")

    async def wait_received(self, sent: Sent, timeout: float = DEFAULT_WAIT) -> Exchange:
        """The activity the bot received for ``sent``, with the bot's answer status. The Playground logs
        it when the bot's ``/api/messages`` answered, i.e. after the turn (CloudAdapter answers when the
        turn's handler returns): waiting for it is waiting for the turn to end. Its ``seq`` is therefore
        larger than those of the replies sent during the turn."""
        return await self.wait_for_exchange(sent.is_received_as, timeout, since=sent)

    async def wait_for_exchange(self, predicate: Callable[[Exchange], bool], timeout: float = DEFAULT_WAIT, *,
                                since: int | Sent | None = None) -> Exchange:
        after = since.seq if isinstance(since, Sent) else (since or 0)

        def find() -> Exchange | None:
            return next((e for e in self._exchanges if e.seq > after and predicate(e)), None)

        return await self._wait(find, timeout, "matching exchange", after)

    async def settle(self, quiet: float = 0.3, timeout: float = DEFAULT_WAIT) -> None:
        """Wait until no event has arrived for ``quiet`` seconds (at most ``timeout``): for asserting that
        something did *not* happen."""
        deadline = time.monotonic() + timeout
        while True:
            seq = self._seq
            await asyncio.sleep(quiet)
            if self._seq == seq:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"events still arriving after {timeout} s")

    async def _wait(self, find: Callable[[], Any], timeout: float, description: str, after: int) -> Any:
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                found = find()
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or all(reader.done() for reader in self._readers):
                    break  # out of time, or the websockets closed (the Playground is gone)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)
        raise TimeoutError(f"no {description} within {timeout} s. {self.describe(after)}")

    def describe(self, after: int = 0) -> str:
        """What was recorded after ``after``: for assertion messages."""
        lines = [(m.seq, m.summary()) for m in self._messages if m.seq > after]
        lines += [(e.seq, e.summary()) for e in self._exchanges if e.seq > after]
        lines += [(n.seq, f"#{n.seq} note {n.level}: {n.text[:200]}") for n in self._notes
                  if n.seq > after and n.level != "default"]
        running = "running" if self.running else "NOT running"
        body = "\n  ".join(line for _, line in sorted(lines)[-40:]) or "(nothing)"
        return (f"Playground {self.url} ({running}); events after #{after}:\n  {body}\n"
                f"Full record: {self.events_path}; console: {self.log_path}")

    # -- websocket readers ----------------------------------------------------------------------------

    async def _read(self, ws: aiohttp.ClientWebSocketResponse, handler: Callable[[dict[str, Any]], None]) -> None:
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    event = json.loads(frame.data)
                except ValueError:
                    continue
                with open(self.events_path, "a", encoding="utf-8") as record:
                    record.write(json.dumps({"received": time.time(), "event": event}) + "\n")
                if isinstance(event, dict):
                    handler(event)
                    async with self._changed:
                        self._changed.notify_all()
        finally:
            await ws.close()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _room(self, records: list[Any]) -> bool:
        """False once a record list is full; says so once, as an error note."""
        if len(records) < MAX_EVENTS:
            return True
        if not self.notes(contains="harness: event limit"):
            self._notes.append(LogNote(self._next_seq(), "error",
                                       f"harness: event limit {MAX_EVENTS} reached, later events dropped", None, None))
        return False

    def _on_conversation_event(self, event: dict[str, Any]) -> None:
        action = event.get("action")
        kind = {"createMessage": "create", "updateMessage": "update", "typing": "typing"}.get(str(action))
        if kind is None or not self._room(self._messages):
            return
        message = event.get("message") or {}
        activity_id = str(message.get("messageId") or "")
        conversation_id = message.get("postConversationId") or event.get("actionConversationId") or ""
        if kind == "create" and activity_id:
            self._conversation_of[activity_id] = conversation_id
        elif kind == "update":  # an update of a thread's first message names the channel: keep its thread
            conversation_id = self._conversation_of.get(activity_id, conversation_id)
        self._messages.append(BotMessage(
            seq=self._next_seq(), kind=kind,  # type: ignore[arg-type]
            conversation_id=conversation_id, activity_id=activity_id,
            text=message.get("text"), text_format=message.get("textFormat"),
            attachments=tuple(message.get("attachments") or ()), attachment_layout=message.get("attachmentLayout"),
            mentions=tuple(message.get("mentions") or ()), suggested_actions=message.get("suggestedActions"),
            ai_entity=message.get("aiEntity"), stream=message.get("streamEntity"),
            feedback_loop_enabled=bool(message.get("feedbackLoopEnabled")), timestamp=_ms(message.get("timestamp")),
            received_at=time.monotonic(), raw=event))

    def _on_log_event(self, event: dict[str, Any]) -> None:
        item = event.get("log")
        if event.get("logAction") != "appendLog" or not isinstance(item, dict):
            return
        if item.get("type") == "bot":
            if not self._room(self._exchanges):
                return
            request = item.get("request") or {}
            response = item.get("response") or {}
            to_bot = item.get("to") == "User Application"
            self._exchanges.append(Exchange(
                seq=self._next_seq(), direction="to_bot" if to_bot else "from_bot",
                activity_type=item.get("activityName"), conversation_id=item.get("conversationId"),
                message_id=item.get("messageId"), activity=request.get("body") or {},
                status=response.get("statusCode"), response=response.get("body"),
                timestamp=_ms(item.get("timestamp")), received_at=time.monotonic()))
        elif self._room(self._notes):
            self._notes.append(LogNote(seq=self._next_seq(), level=str(item.get("level") or "default"),
                                       text=str(item.get("displayText") or ""),
                                       conversation_id=item.get("conversationId"),
                                       timestamp=_ms(item.get("timestamp"))))


# ---------------------------------------------------------------------------------------------------------
# Bots under test


BOT_READY = r"listening on (?:https?://[^\s/]+:)?(\d+)"  # the echo bot; "... listening on http://host:port/..."


def free_port() -> int:
    """A TCP port nothing listens on right now (for bots that cannot bind port 0 and report it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def start_bot(argv: Sequence[str], workdir: Path, *, name: str = "bot", ready: str = BOT_READY,
                    env: Mapping[str, str] | None = None, cwd: Path | None = None,
                    timeout: float = START_TIMEOUT) -> ManagedProcess:
    """Start a bot process and wait until a line of its output (stdout or stderr, e.g. a log line) matches
    ``ready`` (case-insensitive; group 1 = its port) and that port accepts connections. Its output goes to
    ``<workdir>/<name>.log``. Stop it with ``await process.stop()``."""
    started = time.monotonic()
    bot = await ManagedProcess.start(argv, name=name, log_path=Path(workdir) / f"{name}.log",
                                     ready=re.compile(ready, re.IGNORECASE), cwd=cwd,
                                     env={**os.environ, **(env or {})}, timeout=timeout)
    try:
        if not bot.port:
            raise RuntimeError(f"{name}'s ready line gave no port (or port 0): {bot.tail(500)}")
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", bot.port)
                writer.close()
                return bot
            except OSError as refused:
                if time.monotonic() - started > timeout or not bot.running:
                    raise RuntimeError(f"{name} does not accept connections on port {bot.port}: {bot.tail()}") \
                        from refused
                await asyncio.sleep(0.05)
    except BaseException:
        await bot.stop()
        raise


def echo_bot_argv(port: int = 0) -> list[str]:
    """How to run tests/support/echo_bot.py with this interpreter."""
    return [sys.executable, "-m", "tests.support.echo_bot", "--port", str(port)]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------------
# Command line: a Playground for a person (or tests/e2e/screenshot.js) to look at


async def _serve(bot_endpoint: str | None, workdir: Path) -> None:
    bot = None
    if bot_endpoint is None:
        bot = await start_bot(echo_bot_argv(), workdir, name="echo-bot", cwd=repo_root())
        bot_endpoint = f"http://127.0.0.1:{bot.port}/api/messages"
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    try:
        async with Playground(bot_endpoint, workdir) as pg:
            print(f"Agents Playground: {pg.url}/ (bot: {bot_endpoint}; logs: {workdir}). Ctrl-C stops it.",
                  flush=True)
            while pg.running and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        if bot is not None:
            await bot.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(
        prog="python -m tests.support.playground",
        description="Start the Agents Playground in front of a bot (default: the echo bot).")
    parser.add_argument("--bot-endpoint", help="e.g. http://127.0.0.1:3978/api/messages (default: start the echo bot)")
    parser.add_argument("--workdir", type=Path, help="logs and working directory (default: a new temp dir)")
    args = parser.parse_args(argv)
    reason = missing(CLI, "npm ci --prefix tests/e2e")
    if reason:
        print(reason, file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="playground-"))
    asyncio.run(_serve(args.bot_endpoint, workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())


async def start_sentinel_bot(model_endpoint: str, workdir: Path, **settings: str) -> ManagedProcess:
    """``python -m bot serve`` on the demo workspace in local mode, its model at ``model_endpoint`` (the fake
    Chat Completions server), state in ``workdir``; ``settings`` are further environment variables."""
    require_playground()
    env = {
        "PORT": str(free_port()), "HOST": "127.0.0.1", "STATE_STORE": f"sqlite:///{workdir}/state.db",
        "OPENAI_BASE_URL": f"{model_endpoint}/v1", "OPENAI_MODEL": "rule-model", "OPENAI_API_KEY": "sk-e2e",
        "MICROSOFT_APP_ID": "", "SENTINEL_WORKSPACE_ID": "", "AZURE_OPENAI_ENDPOINT": "", "LOG_LEVEL": "INFO",
        "PYTHONPATH": str(repo_root()), **settings,
    }
    return await start_bot([sys.executable, "-m", "bot", "serve"], workdir, name="sentinel-bot", env=env, cwd=workdir)
