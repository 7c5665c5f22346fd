"""The demo workspace's incident changes, kept in a file every process of the demo shares.

Each process of the demo (``./run``'s bot and its workers, ``./run chat``) holds its own copy of the generated
workspace in memory, so a change written into one copy (assign, status, close, comment: ``writer``) would be seen by
that process only, and lost when it stops. The writer therefore also appends each row it writes to this journal, a
SQLite file beside the demo's inbox (``DEMO_INBOX``'s folder, ``demo-changes.sqlite``); every backend applies the
rows it has not applied yet before each query, and all of them to a database it has just generated (a restart, the
day's regeneration). A row is applied as the writer applies it: the incident's rows from its time on are replaced by
it, so applying one twice changes nothing.

Safe with several processes: each append is one SQLite transaction (WAL, a busy timeout), rows are read by their
increasing id, and the file is never rewritten in place. The journal keeps the last ``MAX_ROWS`` rows.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
MAX_ROWS = 5000
FILE_NAME = "demo-changes.sqlite"
BUSY_TIMEOUT_S = 10.0


def beside(inbox: Path) -> Path:
    """Where the journal of the demo whose inbox is ``inbox`` lives."""
    return inbox.with_name(FILE_NAME)


class ChangeJournal:
    """The rows the demo's writers wrote, in the order they wrote them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def append(self, row: dict[str, Any]) -> None:
        """Keep ``row`` (a SecurityIncident row the writer wrote) for every process, at once."""
        conn = self._open()
        with conn:
            conn.execute("INSERT INTO changes (name, row) VALUES (?, ?)",
                         (row["IncidentName"], json.dumps(row, ensure_ascii=False, default=str)))
            conn.execute("DELETE FROM changes WHERE id <= (SELECT MAX(id) FROM changes) - ?", (MAX_ROWS,))

    def since(self, seen: int) -> tuple[list[dict[str, Any]], int]:
        """The rows kept after id ``seen``, oldest first, and the id to read on from."""
        if self._conn is None and not self.path.exists():  # no change made yet: reading creates nothing
            return [], seen
        try:
            found = self._open().execute("SELECT id, row FROM changes WHERE id > ? ORDER BY id", (seen,)).fetchall()
        except sqlite3.Error as error:  # unreadable now: read again at the next query
            log.warning("could not read the demo's changes from %s (%s)", self.path, error)
            return [], seen
        rows = []
        for _, text in found:
            try:
                rows.append(json.loads(text))
            except ValueError:
                continue
        return rows, (found[-1][0] if found else seen)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS changes (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
                         " row TEXT NOT NULL)")
            conn.commit()
            self._conn = conn
        return self._conn


def apply(conn: sqlite3.Connection, row: dict[str, Any]) -> bool:
    """Write a journal row into a demo database as the writer did: it replaces the incident's rows from its time on.
    False (nothing written) when the database has no such incident (it aged out of the generated days)."""
    name = row.get("IncidentName")
    if not conn.execute("SELECT 1 FROM SecurityIncident WHERE IncidentName = ? LIMIT 1", (name,)).fetchone():
        return False
    conn.execute("DELETE FROM SecurityIncident WHERE IncidentName = ? AND TimeGenerated >= ?",
                 (name, row["TimeGenerated"]))
    insert(conn, row)
    return True


def insert(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    columns = ", ".join(f'"{column}"' for column in row)
    conn.execute(f"INSERT INTO SecurityIncident ({columns}) VALUES ({', '.join('?' for _ in row)})",
                 list(row.values()))
