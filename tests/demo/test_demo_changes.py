"""The demo's incident changes outlive the process that made them and reach the demo's other processes (issue 37:
changes made through the demo vanished on restart, and `./run chat` never saw changes made in the Playground).

Each backend here stands for one process of the demo (``./run``'s bot, ``./run chat``, a restarted bot): its own
in-memory workspace, one changes file beside the inbox they share.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.demo import changes
from bot.demo.backend import DemoBackend
from bot.demo.writer import DemoIncidentWriter
from bot.sentinel.changes import ChangeKind, Owner, make_change
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import IncidentDetail, QueryResult
from tests.conftest import NOW, SEED
from tests.support.demo import copied_demo

ALEX = "00000000-0000-0000-0000-0000000000020"


def process(folder: Path) -> tuple[DemoBackend, SentinelClient]:
    backend = copied_demo(SEED, lambda: NOW, changes=changes.beside(folder / "demo-inbox.jsonl"))
    return backend, SentinelClient(backend)


async def detail(client: SentinelClient, number: int) -> IncidentDetail:
    result = await client.run("get_incident_detail", {"incident_ref": number})
    assert isinstance(result, QueryResult) and result.records
    found = result.records[0]
    assert isinstance(found, IncidentDetail)
    return found


async def test_a_change_reaches_the_other_process_and_the_next_start(tmp_path: Path) -> None:
    bot, bot_client = process(tmp_path)
    chat, chat_client = process(tmp_path)  # started before the change: it reads it at its next query
    listed = await bot_client.run("query_incidents", {"time_window": "last_7d", "status": "open", "limit": 1})
    assert isinstance(listed, QueryResult)
    number = listed.records[0].number
    before = await detail(chat_client, number)
    writer = DemoIncidentWriter.for_client(bot_client)
    incident = await writer.read(before.incident_id)
    assigned = await writer.update(incident, make_change(ChangeKind.ASSIGN, number, owner=Owner(object_id=ALEX)))
    closed = await writer.update(assigned, make_change(
        ChangeKind.STATUS, number, status="Closed", classification="FalsePositive",
        classification_reason="InaccurateData", classification_comment="pen test"))
    await writer.add_comment(before.incident_id, "c-1", "Called the user")

    seen = await detail(chat_client, number)
    assert (seen.incident.owner, seen.incident.status, seen.incident.classification) == (
        "Alex Wilber", "Closed", "FalsePositive")
    assert (seen.classification_reason, seen.comment_count) == ("InaccurateData", before.comment_count + 1)
    await bot.close()
    await chat.close()

    restarted, restarted_client = process(tmp_path)
    again = await detail(restarted_client, number)
    assert (again.incident.owner, again.incident.status, again.comment_count) == (
        "Alex Wilber", "Closed", before.comment_count + 1)
    kept = await DemoIncidentWriter.for_client(restarted_client).read(again.incident_id)
    assert kept.etag != closed.etag, "the comment came after the close"
    await restarted.close()


async def test_no_file_without_an_inbox_and_none_written_before_a_change(tmp_path: Path) -> None:
    alone = copied_demo(SEED, lambda: NOW)  # tests, and a demo run without DEMO_INBOX: changes stay in the process
    assert alone.changes is None
    shared, client = process(tmp_path)
    await client.run("query_incidents", {"time_window": "last_24h"})
    assert shared.changes is not None and not shared.changes.path.exists(), "reading writes nothing"
    await alone.close()
    await shared.close()


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    """Each append is one transaction of its own: a second process writing at the same moment waits its turn."""
    path = tmp_path / changes.FILE_NAME
    code = ("import sys; from pathlib import Path; from bot.demo.changes import ChangeJournal; "
            "j = ChangeJournal(Path(sys.argv[1]));"
            "[j.append({'IncidentName': f'other-{i}', 'TimeGenerated': str(i)}) for i in range(300)]")
    other = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=Path(__file__).parents[2])
    mine = changes.ChangeJournal(path)
    for i in range(300):
        mine.append({"IncidentName": f"mine-{i}", "TimeGenerated": str(i)})
    assert other.wait(timeout=60) == 0
    rows, last = mine.since(0)
    names = [row["IncidentName"] for row in rows]
    assert len(names) == 600 and len(set(names)) == 600 and last >= 600
    assert [n for n in names if n.startswith("mine-")] == [f"mine-{i}" for i in range(300)], "in the order written"
    assert mine.since(last) == ([], last)
    mine.close()
