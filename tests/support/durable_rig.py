"""Two bot instances with durable turns, behind a round-robin proxy, one killed mid-run (test and benchmark).

Everything is real but the Bot Connector: Azurite holds the queue and the blobs, each instance is
``python -m bot serve`` in its own process (TURN_QUEUE=azure, Blob state, commands only), and
tests/support/round_robin.py spreads the deliveries, repeating a share of them to the other instance.

The run, per conversation, sends its messages one after another (each once the previous was acknowledged), all
conversations at once, in three parts:
1. the first third, until every one is answered;
2. the second third while the fake connector holds each typing indicator for a while; once all are acknowledged
   and some typing indicators are held (turns are running), instance A gets SIGKILL: its running turns had not
   replied yet, and must be answered once, by B or by A after its restart, in order;
3. A is restarted; once it is ready, the last third.
Then every answer the connector received is counted: lost (never answered), answered twice, out of order.

:func:`front_acks` measures the web front alone: one ``python -m bot serve`` taking no turns and one ``python -m bot
worker`` beside it, on Azurite; acknowledgement times for bursts and for steady rates, and the front's CPU per
activity (from /proc: Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.support import connector_fake as teams
from tests.support.azurite import Azurite
from tests.support.connector_fake import FakeConnector
from tests.support.processes import kill_group, popen
from tests.support.round_robin import TWICE_HEADER, RoundRobin

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0  # hang guards (start, an answer): a loaded 2-core machine took over 60 s
HOLD_TYPING_S = 4.0  # long enough that the kill lands while the held turns still wait
# Delivery is at least once: a turn whose instance dies after its answer went out and before the turn was recorded
# (the conversation's state and its queue line: two storage writes) is answered again. An answer repeated after the
# kill whose first copy came this soon before it is counted apart (``answered_again_at_kill``), not as a defect; a
# loaded 2-core machine took a few seconds for those two writes.
COMMIT_WINDOW_S = 10.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class BotProcess:
    """``python -m bot serve`` with durable turns, in its own process and working folder (no .env is read); with
    ``separate_worker``, the web process takes no turns and a ``python -m bot worker`` process beside it does: one
    the rig starts, or with ``supervised`` one serve starts itself (TURN_WORKER_PROCESSES=1). Each instance is its
    own process group (the worker beside it another), killed whole as a machine or container would go, and dies with
    the process that started it (tests/support/processes.py)."""

    def __init__(self, name: str, workdir: Path, env: dict[str, str], separate_worker: bool = False,
                 supervised: bool = False) -> None:
        self.name = name
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {**env, "PORT": str(self.port), "TURN_WORKER_IN_WEB": "false" if separate_worker else "true"}
        if separate_worker and supervised:
            self.env["TURN_WORKER_PROCESSES"] = "1"
        self.separate_worker = separate_worker and not supervised
        self.process: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.started_in = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> BotProcess:
        started = time.monotonic()
        with (self.workdir / "bot.log").open("ab") as log:
            self.process = popen([sys.executable, "-m", "bot", "serve"], cwd=self.workdir, env=self.env,
                                 stdout=log, stderr=subprocess.STDOUT)
            if self.separate_worker:
                self.worker = popen([sys.executable, "-m", "bot", "worker"], cwd=self.workdir, env=self.env,
                                    stdout=log, stderr=subprocess.STDOUT)
        async with aiohttp.ClientSession() as session:
            while time.monotonic() - started < START_TIMEOUT_S:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: {self.log_tail()}")
                try:
                    async with session.get(f"{self.url}/readyz") as answer:
                        if answer.status == 200:
                            self.started_in = time.monotonic() - started
                            return self
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} did not get ready in {START_TIMEOUT_S} s: {self.log_tail()}")

    def log_tail(self) -> str:
        return (self.workdir / "bot.log").read_text(errors="replace")[-3000:]

    def _processes(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in (self.process, self.worker) if p is not None and p.poll() is None]

    def kill(self) -> None:
        for process in self._processes():
            kill_group(process)

    def stop(self) -> None:
        """SIGTERM, as a platform stops a container: each finishes its turns; then its whole group is killed."""
        for process in self._processes():
            process.terminate()
        for process in (self.process, self.worker):
            if process is not None:
                kill_group(process, grace_s=30)


@dataclass
class Figures:
    conversations: int
    messages: int
    deliveries: int = 0
    repeated: int = 0
    lost: int = 0
    twice: int = 0
    out_of_order: int = 0
    held_at_kill: int = 0
    answered_again_at_kill: int = 0  # answered just before the kill and again after it (COMMIT_WINDOW_S)
    recovery_s: float = 0.0
    restart_s: float = 0.0
    elapsed_s: float = 0.0
    acks_ms: list[float] = field(default_factory=list)

    @property
    def ack_p99_ms(self) -> float:
        if len(self.acks_ms) < 2:
            return self.acks_ms[0] if self.acks_ms else 0.0
        return statistics.quantiles(self.acks_ms, n=100)[98]


class _Connector(FakeConnector):
    """The fake connector, holding typing indicators while ``holding`` (counted in ``held``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.holding = False
        self.held = 0
        self.typing_delay = self._hold
        self._typed: set[str] = set()
        self.presses: set[str] = set()  # card presses' activity ids: no front sends their typing, only the worker

    def _hold(self, body: dict[str, Any]) -> float:
        # A message's first typing indicator is the front's, sent once it is queued; the next is its worker's,
        # as the turn starts: only that one is held, so a held one means a turn is running.
        answering = str(body.get("replyToId"))
        first = answering not in self._typed and answering not in self.presses
        self._typed.add(answering)
        if not self.holding or first:
            return 0.0
        self.held += 1
        return HOLD_TYPING_S


def _answer_messages(connector: FakeConnector) -> list[teams.Sent]:
    """The message replies the connector got (typing indicators and updates aside), in the order it got them."""
    return [sent for sent in connector.sent if sent.method == "POST" and sent.type == "message"]


def _answers(connector: FakeConnector) -> dict[str, list[str]]:
    """Per conversation, the activity ids its message replies answer (a card press's answer names its invoke), in the
    order the connector got them."""
    answers: dict[str, list[str]] = {}
    for sent in _answer_messages(connector):
        answers.setdefault(sent.conversation_id, []).append(str(sent.body.get("replyToId")))
    return answers


def _answered_again_at_kill(connector: FakeConnector, conversation: str, killed_at: float) -> int:
    """Answers of ``conversation`` sent once within COMMIT_WINDOW_S before the kill and once more after it: the turn
    the killed instance had answered but not yet recorded (see COMMIT_WINDOW_S). At most one per conversation: its
    turns run one at a time."""
    times: dict[str, list[float]] = {}
    for sent in _answer_messages(connector):
        if sent.conversation_id == conversation:
            times.setdefault(str(sent.body.get("replyToId")), []).append(sent.at)
    again = [at for at in times.values() if len(at) == 2 and killed_at - COMMIT_WINDOW_S <= at[0] <= killed_at < at[1]]
    return min(len(again), 1)


def _bot_env(workdir: Path, azurite: Azurite | None) -> dict[str, str]:
    """Azure: Blob state and the queue on Azurite. Local (no Azurite): the instances are processes of one machine
    sharing the SQLite state and the SQLite turn queue in ``workdir``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AZURE", "OPENAI", "MICROSOFT"))}
    env.update({"PYTHONPATH": str(ROOT), "HOST": "127.0.0.1", "LOG_LEVEL": "WARNING", "SHUTDOWN_GRACE_SECONDS": "2"})
    if azurite is not None:
        env.update({"STATE_STORE": "blob", "TURN_QUEUE": "azure", "STATE_BLOB_CONNECTION_STRING":
                    azurite.connection_string})
    else:
        env.update({"STATE_STORE": f"sqlite:///{workdir.resolve() / 'state.db'}", "TURN_QUEUE": "local",
                    "TURN_QUEUE_PATH": str(workdir.resolve() / "turns.db")})
    return env


def _azurite(workdir: Path, queue: str) -> Azurite | None:
    if queue == "local":
        return None
    (workdir / "azurite").mkdir(parents=True, exist_ok=True)
    return Azurite(workdir / "azurite")


def activity(text_or_press: str, activity_id: str, conversation: str, service_url: str) -> dict[str, Any]:
    """A personal message, or (``text_or_press`` "press") an Action.Execute press of an incident's Details."""
    user = conversation.rsplit("-", 1)[-1]
    if text_or_press == "press":
        return teams.invoke({"action": "incident_detail", "incident": 1}, activity_id=activity_id,
                            service_url=service_url, conversation_id=conversation, user=user)
    return teams.personal(text_or_press, activity_id=activity_id, service_url=service_url,
                          conversation_id=conversation, user=user)


async def run(workdir: Path, *, conversations: int, messages: int, repeat_share: float = 0.1, seed: int = 1,
              answer_timeout_s: float = 120.0, separate_workers: bool = False, queue: str = "azure",
              presses: bool = False) -> Figures:
    """``queue`` azure: two instances on Azurite. local: two web processes of one machine on the SQLite queue, each
    starting its worker process itself when ``separate_workers``. ``presses``: every third activity of a conversation
    is a card press (an Action.Execute invoke) instead of a message."""
    figures = Figures(conversations, messages)
    chance = random.Random(seed)
    azurite = _azurite(workdir, queue)
    connector = await _Connector().start()
    env = _bot_env(workdir, azurite)
    bots = [BotProcess(name, workdir, env, separate_workers, supervised=queue == "local")
            for name in ("bot-a", "bot-b")]
    proxy: RoundRobin | None = None
    started = time.monotonic()
    try:
        await asyncio.gather(*(bot.start() for bot in bots))
        proxy = await RoundRobin([bot.url for bot in bots]).start()
        ids = {f"a:durable-{c}": [f"{c}-{m}" for m in range(messages)] for c in range(conversations)}
        if presses:
            connector.presses = {a for line in ids.values() for m, a in enumerate(line) if m % 3 == 1}
        thirds = [0, messages // 3, 2 * messages // 3, messages]

        async def send(session: aiohttp.ClientSession, conversation: str, part: int) -> None:
            for activity_id in ids[conversation][thirds[part]:thirds[part + 1]]:
                body = activity("press" if activity_id in connector.presses else "help", activity_id, conversation,
                                connector.url)
                headers = {TWICE_HEADER: "1"} if chance.random() < repeat_share else {}
                for _ in range(20):  # a 5xx (an instance shutting down, the queue failing) is retried, as Teams does
                    sent_at = time.monotonic()
                    async with session.post(f"{proxy.url}/api/messages", json=body, headers=headers) as answer:
                        await answer.read()
                    figures.acks_ms.append((time.monotonic() - sent_at) * 1000)
                    figures.deliveries += 1
                    if answer.status < 500:
                        break
                    await asyncio.sleep(0.2)

        def answered(part_end: int) -> bool:
            got = _answers(connector)
            return all(set(ids[c][:part_end]) <= set(got.get(c, ())) for c in ids)

        async def wait_answered(part_end: int) -> None:
            deadline = time.monotonic() + answer_timeout_s
            while not answered(part_end) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(send(session, c, 0) for c in ids))
            await wait_answered(thirds[1])
            connector.holding = True
            await asyncio.gather(*(send(session, c, 1) for c in ids))
            while connector.held < 2 and not answered(thirds[2]):
                await asyncio.sleep(0.005)
            figures.held_at_kill = connector.held
            bots[0].kill()  # every POST was answered: the killed instance's running turns are what is at stake
            killed_at = time.monotonic()
            connector.holding = False
            restarting = asyncio.ensure_future(bots[0].start())
            await wait_answered(thirds[2])
            figures.recovery_s = time.monotonic() - killed_at
            await restarting
            figures.restart_s = bots[0].started_in
            await asyncio.gather(*(send(session, c, 2) for c in ids))
            await wait_answered(messages)
        figures.elapsed_s = time.monotonic() - started
        figures.repeated = proxy.repeated
        got = _answers(connector)
        for conversation, expected in ids.items():
            answers = got.get(conversation, [])
            figures.lost += len(set(expected) - set(answers))
            again = _answered_again_at_kill(connector, conversation, killed_at)
            figures.answered_again_at_kill += again
            figures.twice += len(answers) - len(set(answers)) - again
            firsts = list(dict.fromkeys(answers))
            figures.out_of_order += sum(1 for a, b in itertools.pairwise(firsts)
                                        if expected.index(a) > expected.index(b))
        return figures
    finally:
        if proxy is not None:
            await proxy.stop()
        for bot in bots:
            bot.stop()
        await connector.stop()
        if azurite is not None:
            azurite.stop()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass
class RateFigures:
    offered_per_s: float
    sent: int
    answered_per_s: float
    ack_p50_ms: float
    ack_p99_ms: float


@dataclass
class AckFigures:
    burst_new_ms: list[float] = field(default_factory=list)  # 50 conversations the front has not seen, at once
    burst_known_ms: list[float] = field(default_factory=list)  # the same conversations again, at once
    rates: list[RateFigures] = field(default_factory=list)
    front_cpu_ms: float = 0.0  # the web process's CPU per activity over the steady rates


async def front_acks(workdir: Path, *, burst: int = 50, rates: tuple[float, ...] = (10, 25, 50, 100),
                     rate_seconds: float = 3.0, answer_timeout_s: float = 120.0, queue: str = "azure") -> AckFigures:
    """Acknowledgement times of a web front that only enqueues (its turns run in a separate worker process), on
    Azurite or on the local queue."""
    figures = AckFigures()
    azurite = _azurite(workdir, queue)
    connector = await FakeConnector().start()
    bot = BotProcess("front", workdir, _bot_env(workdir, azurite), separate_worker=True)
    sent: set[str] = set()
    try:
        await bot.start()
        assert bot.process is not None
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def post(conversation: str, activity_id: str) -> float:
                body = teams.personal("help", activity_id=activity_id, service_url=connector.url,
                                      conversation_id=conversation, user=conversation.rsplit("-", 1)[-1])
                started = time.monotonic()
                async with session.post(f"{bot.url}/api/messages", json=body) as answer:
                    await answer.read()
                if answer.status >= 300:
                    raise RuntimeError(f"the front answered {answer.status}: {bot.log_tail()}")
                sent.add(activity_id)
                return (time.monotonic() - started) * 1000

            async def all_answered() -> None:
                deadline = time.monotonic() + answer_timeout_s
                while time.monotonic() < deadline:
                    got = {str(m.body.get("replyToId")) for m in connector.sent if m.type == "message"}
                    if sent <= got:
                        return
                    await asyncio.sleep(0.05)
                raise RuntimeError(f"{len(sent - got)} turns were not answered in {answer_timeout_s:.0f} s")

            await post("a:front-warmup", "warmup")
            await all_answered()
            conversations = [f"a:front-{i}" for i in range(burst)]
            figures.burst_new_ms = list(await asyncio.gather(*(post(c, f"new-{i}") for i, c in
                                                               enumerate(conversations))))
            await all_answered()
            figures.burst_known_ms = list(await asyncio.gather(*(post(c, f"known-{i}") for i, c in
                                                                 enumerate(conversations))))
            await all_answered()
            cpu_before, activities = process_cpu_s(bot.process.pid), 0
            for rate in rates:
                count = max(1, int(rate * rate_seconds))
                started = time.monotonic()
                posts = []
                for n in range(count):  # an open loop: each at its time, whatever the earlier ones are doing
                    await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
                    posts.append(asyncio.ensure_future(post(conversations[n % burst], f"rate{rate:g}-{n}")))
                acks = list(await asyncio.gather(*posts))
                await all_answered()
                elapsed = time.monotonic() - started
                activities += count
                figures.rates.append(RateFigures(rate, count, count / elapsed, percentile(acks, 50),
                                                 percentile(acks, 99)))
            figures.front_cpu_ms = (process_cpu_s(bot.process.pid) - cpu_before) * 1000 / max(1, activities)
        return figures
    finally:
        bot.stop()
        await connector.stop()
        if azurite is not None:
            azurite.stop()


@dataclass
class DefaultKillFigures:
    sent: int = 0
    answered_before_kill: int = 0
    lost: int = 0
    twice: int = 0
    restart_s: float = 0.0


async def kill_with_defaults(workdir: Path, *, conversations: int = 4, answer_timeout_s: float = 60.0,
                             env: dict[str, str] | None = None, presses: bool = False) -> DefaultKillFigures:
    """``python -m bot serve`` with the default settings (no TURN_QUEUE, no STATE_STORE: whatever they default to,
    in its own working folder), one message per conversation, each turn held mid-run (its typing indicators held by
    the connector), then SIGKILL to the bot's process group and a restart: how many of the acknowledged messages are
    answered after it. ``env``: settings added (a before/after comparison); ``presses``: every other conversation's
    activity is a card press (an Action.Execute invoke) instead."""
    figures = DefaultKillFigures()
    connector = await FakeConnector().start()
    connector.typing_delay = lambda body: 30.0  # every turn waits on its typing indicator: the kill lands mid-turn
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("AZURE", "OPENAI", "MICROSOFT", "TURN_", "STATE_"))}
    base.update({"PYTHONPATH": str(ROOT), "HOST": "127.0.0.1", "LOG_LEVEL": "WARNING", "SHUTDOWN_GRACE_SECONDS": "2",
                 **(env or {})})
    bot = BotProcess("default", workdir, base)
    bot.env.pop("TURN_WORKER_IN_WEB", None)  # the default too
    ids = [f"kill-{c}" for c in range(conversations)]
    try:
        await bot.start()
        async with aiohttp.ClientSession() as session:
            for c, activity_id in enumerate(ids):
                body = activity("press" if presses and c % 2 else "help", activity_id, f"a:kill-{c}", connector.url)
                async with session.post(f"{bot.url}/api/messages", json=body) as answer:
                    assert answer.status < 300, (answer.status, bot.log_tail())
                figures.sent += 1
        await asyncio.sleep(1.5)  # every turn has started and waits on its typing indicator
        figures.answered_before_kill = len(_answers(connector))
        bot.kill()
        connector.typing_delay = None
        await bot.start()
        figures.restart_s = bot.started_in
        deadline = time.monotonic() + answer_timeout_s
        while time.monotonic() < deadline and len({a for got in _answers(connector).values() for a in got}) < len(ids):
            await asyncio.sleep(0.1)
        answered = [a for got in _answers(connector).values() for a in got]
        figures.lost = len(set(ids) - set(answered))
        figures.twice = len(answered) - len(set(answered))
        return figures
    finally:
        bot.stop()
        await connector.stop()


def worker_processes_in(folder: Path) -> list[int]:
    """The ``python -m bot worker`` processes running in ``folder`` (Linux /proc), whoever their parent."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if (b"bot" in command and b"worker" in command and Path(os.readlink(entry / "cwd")) == folder.resolve()
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"):
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


@dataclass
class FrontKillFigures:
    processes: int
    workers_after_kill: list[int] = field(default_factory=list)  # counted once the restarted front is ready, +settle
    ready_s: list[float] = field(default_factory=list)  # serve's start to /readyz 200
    first_answer_s: list[float] = field(default_factory=list)  # /readyz 200 to a message's answer
    worker_taking_s: list[float] = field(default_factory=list)  # serve's start to each worker's "taking turns"
    taking_at_ready: list[int] = field(default_factory=list)  # workers that had said "taking turns" when ready


def _taking_turns_at(log: str, since: float) -> list[float]:
    """Wall-clock times of the workers' "taking turns" log lines after ``since``."""
    import datetime as dt
    times = []
    for line in log.splitlines():
        if "worker taking turns" in line:
            with contextlib.suppress(ValueError):
                at = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if at >= since:
                    times.append(at)
    return times


async def kill_the_front(workdir: Path, *, processes: int = 2, kills: int = 3, settle_s: float = 5.0,
                         env: dict[str, str] | None = None) -> FrontKillFigures:
    """``python -m bot serve`` with TURN_WORKER_PROCESSES=``processes`` (local queue, no turns in the web process);
    SIGKILL to the web process alone (its workers are not signalled), restart, ``kills`` times: how many worker
    processes run each time, how long until ready and until a worker answers."""
    figures = FrontKillFigures(processes)
    connector = await FakeConnector().start()
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("AZURE", "OPENAI", "MICROSOFT", "TURN_", "STATE_"))}
    base.update({"PYTHONPATH": str(ROOT), "HOST": "127.0.0.1", "LOG_LEVEL": "INFO", "SHUTDOWN_GRACE_SECONDS": "2",
                 "TURN_WORKER_PROCESSES": str(processes), **(env or {})})
    bot = BotProcess("front", workdir, base, separate_worker=True, supervised=True)
    bot.env["TURN_WORKER_PROCESSES"] = str(processes)
    try:
        async with aiohttp.ClientSession() as session:
            for round_ in range(kills + 1):
                began = time.time()
                await bot.start()
                figures.ready_s.append(bot.started_in)
                figures.taking_at_ready.append(len(_taking_turns_at(
                    (bot.workdir / "bot.log").read_text(errors="replace"), began)))
                ready_at = time.monotonic()
                body = teams.personal("help", activity_id=f"round-{round_}", service_url=connector.url,
                                      conversation_id=f"a:front-kill-{round_}", user="u1")
                async with session.post(f"{bot.url}/api/messages", json=body) as answer:
                    assert answer.status < 300, (answer.status, bot.log_tail())
                while f"round-{round_}" not in {str(s.body.get("replyToId")) for s in connector.sent
                                                if s.type == "message"}:
                    if time.monotonic() - ready_at > START_TIMEOUT_S:
                        raise RuntimeError(f"round {round_} not answered: {bot.log_tail()}")
                    await asyncio.sleep(0.05)
                figures.first_answer_s.append(time.monotonic() - ready_at)
                deadline = time.monotonic() + START_TIMEOUT_S
                while len(_taking_turns_at((bot.workdir / "bot.log").read_text(errors="replace"), began)) < processes \
                        and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                figures.worker_taking_s.extend(at - began for at in _taking_turns_at(
                    (bot.workdir / "bot.log").read_text(errors="replace"), began))
                if round_:
                    await asyncio.sleep(settle_s)
                    figures.workers_after_kill.append(len(worker_processes_in(bot.workdir)))
                if round_ < kills:
                    assert bot.process is not None
                    os.kill(bot.process.pid, signal.SIGKILL)  # the web front alone, as an OOM kill would
                    bot.process.wait()
        return figures
    finally:
        bot.stop()
        for pid in worker_processes_in(bot.workdir):  # orphans of the killed fronts
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await connector.stop()
