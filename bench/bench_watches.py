"""Watch poll cost (issue 15): Log Analytics queries per poll interval with 1 and with 500 watches, and the poll's time.

Run: ./run bench   (or .venv/bin/python bench/bench_watches.py [--watches 500] [--polls 5] [--smoke])

Everything is the bot's own code at the process boundary's fakes, in this process: the real ``LogsQueryClient``
(through ``LogAnalyticsBackend`` and ``SentinelClient.incident_changes``) against the fake Log Analytics endpoint of
tests/support/loganalytics_fake.py, which counts every request it gets; the watches, cursor and posted cards in
SQLite (the default state store); the real botbuilder CloudAdapter posting and updating cards on the fake Bot
Connector of tests/support/connector_fake.py. Each watch is in a conversation of its own (a channel thread), its
filter one of "high", "medium open", "unassigned" and "" (everything new), in turn.

For 1 and for N watches, each poll is timed (``poll()``: lease, query, plan, posts, updates, cursor saved):
  quiet     nothing changed since the last poll
  one new   one new High incident (it matches the high, medium open, unassigned and all watches)
  burst     eight new incidents at once (more than five: one digest card per conversation)
  changed   the incident of "one new" is closed (every card showing it updated in place)
Goal: one Log Analytics query per poll, whatever the number of watches.

``--smoke`` runs every part with 1 and 8 watches and 2 quiet polls, so CI can tell the benchmark still runs
(tests/house/test_benchmarks.py); its figures are not meaningful.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from botbuilder.schema import ChannelAccount, ConversationAccount, ConversationReference  # noqa: E402

from bot.commands.parser import parse  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client  # noqa: E402
from bot.teams.storage import SqliteStorage  # noqa: E402
from bot.teams.surface import create_adapter  # noqa: E402
from bot.teams.watches import AdapterSender, PollReport, StoreLease, WatchPoller, WatchStore, sentinel_feed  # noqa: E402
from tests.support.connector_fake import FakeConnector  # noqa: E402
from tests.support.loganalytics_fake import FakeCredential, FakeLogAnalytics, table_body  # noqa: E402

FILTERS = ("watch high", "watch medium open", "watch unassigned", "watch")
GOAL_QUERIES = 1


def row(number: int, at: datetime, *, status: str = "New", owner: str = "", severity: str = "High") -> dict[str, Any]:
    return {"IncidentNumber": number, "Title": f"Suspicious activity on FIN-{number}", "Severity": severity,
            "Status": status, "Owner": owner, "CreatedTime": at, "LastModifiedTime": at, "AlertCount": 1,
            "Tactics": ["Execution"], "Products": ["Microsoft Defender for Endpoint"],
            "IncidentUrl": f"https://portal.azure.com/#incident/{number}", "Classification": "",
            "TimeGenerated": at, "Description": "", "TotalMatched": 1}


class Rig:
    """The fakes, the store with ``watches`` conversations watching, and a poller over them."""

    def __init__(self, tmp: Path, watches: int) -> None:
        self.tmp, self.watches = tmp, watches

    async def start(self) -> Rig:
        self.logs = await FakeLogAnalytics(self.tmp).start()
        self.connector = await FakeConnector().start()
        client = create_logs_client(FakeCredential(), endpoint=self.logs.endpoint, transport=self.logs.transport())
        self.sentinel = SentinelClient(LogAnalyticsBackend(client, "00000000-0000-0000-0000-000000000001"))
        self.storage = SqliteStorage(self.tmp / f"state-{self.watches}.db")
        self.now = datetime.now(UTC)
        store = WatchStore(self.storage, clock=lambda: self.now)
        for n in range(self.watches):
            conversation = f"19:room-{n}@thread.tacv2;messageid=17000000{n:05d}"
            reference = ConversationReference(
                conversation=ConversationAccount(id=conversation, conversation_type="channel"), channel_id="msteams",
                service_url=self.connector.url, bot=ChannelAccount(id="28:sentinel-bot"),
                user=ChannelAccount(id="29:alice"))
            command = parse(FILTERS[n % len(FILTERS)])
            assert command is not None
            await store.command(command, conversation_id=conversation, reference=reference, user_name="Alice",
                                user_aad_id="aad-alice")
        self.adapter = create_adapter(Settings.from_env({}, dotenv_path=None))
        self.poller = WatchPoller(store, sentinel_feed(self.sentinel), AdapterSender(self.adapter, ""),
                                  StoreLease(self.storage, seconds=70), interval_s=60, demo=False,
                                  clock=lambda: self.now)
        return self

    async def poll(self, rows: list[dict[str, Any]]) -> tuple[PollReport, int]:
        """One poll answered with ``rows``; its report and the Log Analytics requests it made."""
        self.now += timedelta(seconds=60)
        before = len(self.logs.requests)
        self.logs.respond(200, table_body("incident_changes", rows))
        report = await self.poller.poll()
        return report, len(self.logs.requests) - before

    async def stop(self) -> None:
        await self.adapter.bot_framework_authentication.sessions.close()
        await self.sentinel.close()
        await self.storage.close()
        await self.connector.stop()
        await self.logs.stop()


async def measure(tmp: Path, watches: int, quiet_polls: int) -> list[tuple[str, int, int, int, float]]:
    """(poll, queries, cards posted, cards updated, ms) for each kind of poll."""
    rig = await Rig(tmp, watches).start()
    out = []
    try:
        await rig.poll([])  # the first poll sets the cursor
        quiet = [await rig.poll([]) for _ in range(quiet_polls)]
        out.append(("quiet (median)", max(q for _, q in quiet), 0, 0,
                    statistics.median(r.seconds for r, _ in quiet) * 1000))
        new_at = rig.now + timedelta(seconds=30)
        report, queries = await rig.poll([row(1001, new_at)])
        out.append(("one new", queries, report.posted, report.updated, report.seconds * 1000))
        burst_at = rig.now + timedelta(seconds=30)
        report, queries = await rig.poll([row(2000 + i, burst_at + timedelta(milliseconds=i)) for i in range(8)])
        out.append(("burst of 8", queries, report.posted, report.updated, report.seconds * 1000))
        closed_at = rig.now + timedelta(seconds=30)
        report, queries = await rig.poll([row(1001, closed_at, status="Closed", owner="Dana Whitfield")])
        out.append(("changed", queries, report.posted, report.updated, report.seconds * 1000))
        assert all(r.failed is None for r, _ in quiet), "a poll failed"
    finally:
        await rig.stop()
    return out


async def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    logging.basicConfig(level=logging.ERROR)
    if args.smoke:
        print("SMOKE RUN: tiny sizes; the figures say nothing about performance.")
    counts = (1, 8) if args.smoke else (1, args.watches)
    polls = 2 if args.smoke else args.polls
    print("== Watch polls: Log Analytics queries and time per poll (fake Log Analytics, SQLite state, fake connector)")
    print(f"{'watches':>8} {'poll':<16} {'LA queries':>10} {'posted':>7} {'updated':>8} {'ms':>9}")
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for watches in counts:
            for name, queries, posted, updated, ms in await measure(Path(tmp), watches, polls):
                worst = max(worst, queries)
                print(f"{watches:>8} {name:<16} {queries:>10} {posted:>7} {updated:>8} {ms:>9.1f}")
    verdict = "met" if worst == GOAL_QUERIES else "NOT met"
    print(f"Most Log Analytics queries in one poll: {worst} with {counts[0]} and {counts[-1]} watches; "
          f"goal {GOAL_QUERIES} whatever the number of watches: {verdict}")
    print(f"Benchmark took {time.perf_counter() - started:.1f} s")
    return 0 if worst == GOAL_QUERIES else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watches", type=int, default=500)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
