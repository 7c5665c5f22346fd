"""Incident writes on the demo workspace: what Sentinel's REST API does, done to the demo's SQLite rows.

Sentinel adds a SecurityIncident row per modification, and so does this writer: ``update`` and
``add_comment`` append a copy of the incident's latest row with the change made and a new
LastModifiedTime/TimeGenerated, so the demo's read queries (latest row per incident) show it at once.
The etag is a hash of the latest row: every write changes it, and a stale one is refused as a conflict.
The change itself is ``IncidentChange.apply_to``, as for the ARM writer; an owner that names a demo
analyst (object id, UPN or email) is filled in from the demo directory, as Sentinel resolves owners.

The generator scripts each incident's future (rows later than now that appear as time passes). Once
the bot changes an incident its scripted future is dropped, so the change is not silently undone. The
backend regenerates its database when the UTC day changes; the writer keeps the rows it wrote (at most
MAX_JOURNAL_ROWS) and writes them again into the new database. With a changes file (``bot.demo.changes``: beside
the demo's inbox, as under ``./run``) each row also goes there, for the demo's other processes and its next start.

Comments go where Sentinel's table keeps them: the Comments column and AdditionalData.commentsCount
(which get_incident_detail reports). The table has no comment ids, so the ids callers choose are
remembered in memory (the last MAX_COMMENT_IDS) to make a retried comment a no-op.

The backend's SQLite connection is used as the backend uses it: in a worker thread, under its lock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from bot.demo import changes
from bot.demo.backend import DemoBackend
from bot.demo.values import compact_json
from bot.demo.world import build_world
from bot.sentinel.changes import IncidentChange, IncidentSnapshot, WriteError, check_updatable
from bot.sentinel.client import SentinelClient
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import one_line

DEMO_AUTHOR = "Sentinel assistant (demo)"
MAX_JOURNAL_ROWS = 5000
MAX_COMMENT_IDS = 10_000
_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")
_OWNER_KEYS = ("objectId", "email", "assignedTo", "userPrincipalName")  # the demo's Owner JSON, in its order
T = TypeVar("T")


class DemoIncidentWriter:
    is_demo = True

    def __init__(self, backend: DemoBackend, *, clock: Callable[[], datetime] | None = None) -> None:
        # The backend's lock, database and clock are shared on purpose: one workspace, one timeline.
        self._backend = backend
        self._clock = clock or backend.clock
        self._analysts = build_world(backend.seed).analysts
        self._journal: dict[str, list[dict[str, Any]]] = {}  # incident name -> rows written, oldest first
        self._comment_ids: dict[tuple[str, str], None] = {}  # insertion-ordered set
        # The backend regenerates its database when the day changes; the rows written here follow at once.
        backend.on_generated(self._replay)

    @classmethod
    def for_client(cls, client: SentinelClient, *, clock: Callable[[], datetime] | None = None) -> DemoIncidentWriter:
        """The writer of the demo workspace behind ``client`` (what the composition root has in hand)."""
        backend = getattr(client, "_backend", None)
        if not isinstance(backend, DemoBackend):
            raise TypeError("DemoIncidentWriter needs a SentinelClient over the demo workspace")
        return cls(backend, clock=clock)

    async def read(self, incident_name: str) -> IncidentSnapshot:
        name = _checked(incident_name)
        return await asyncio.to_thread(self._locked, lambda conn, now: _snapshot(_latest(conn, name, now)))

    async def update(self, incident: IncidentSnapshot, change: IncidentChange) -> IncidentSnapshot:
        name = _checked(incident.name)
        check_updatable(incident, change)
        return await asyncio.to_thread(self._locked, self._update_sync, name, incident, change)

    async def add_comment(self, incident_name: str, comment_id: str, message: str) -> None:
        name, comment_id = _checked(incident_name), _checked(comment_id)
        if not (message or "").strip():
            raise WriteError("bad_request", "The comment is empty; say what to write.")
        await asyncio.to_thread(self._locked, self._comment_sync, name, comment_id, message)

    async def close(self) -> None:
        return None  # the backend owns the database

    def _locked(self, work: Callable[..., T], *args: Any) -> T:
        return self._backend.with_database(lambda conn, now: work(conn, self._clock(), *args))

    def _update_sync(self, conn: sqlite3.Connection, now: datetime, name: str, incident: IncidentSnapshot,
                     change: IncidentChange) -> IncidentSnapshot:
        row = _latest(conn, name, now)
        if _etag(row) != incident.etag:
            raise WriteError("conflict", "The incident changed since you looked at it (someone else updated it), "
                             "so your change was not saved. Look at it again and confirm the change once more.",
                             status=409, detail=f"demo etag {incident.etag} is stale")
        props = change.apply_to(incident.properties)
        closed = props["status"] == "Closed"
        new = dict(row, Title=props["title"], Description=props.get("description") or "",
                   Severity=props["severity"], Status=props["status"], Owner=self._owner_json(props.get("owner")),
                   Classification=props.get("classification") or "",
                   ClassificationReason=props.get("classificationReason") or "",
                   ClassificationComment=props.get("classificationComment") or "",
                   Labels=compact_json(props.get("labels") or []),
                   ClosedTime=(row["ClosedTime"] or iso(now)) if closed else None)
        return _snapshot(self._append(conn, now, new))

    def _comment_sync(self, conn: sqlite3.Connection, now: datetime, name: str, comment_id: str,
                      message: str) -> None:
        if (name, comment_id) in self._comment_ids:
            return  # a retry of a comment already written
        row = _latest(conn, name, now)
        comments = _json(row["Comments"], [])
        additional = _json(row["AdditionalData"], {})
        additional["commentsCount"] = int(additional.get("commentsCount") or len(comments)) + 1
        comments.append({"message": message, "createdTimeUtc": iso(now)[:-4] + "Z",
                         "author": {"name": DEMO_AUTHOR, "email": None}})
        self._append(conn, now, dict(row, Comments=compact_json(comments), AdditionalData=compact_json(additional)))
        self._comment_ids[(name, comment_id)] = None
        while len(self._comment_ids) > MAX_COMMENT_IDS:
            del self._comment_ids[next(iter(self._comment_ids))]

    def _append(self, conn: sqlite3.Connection, now: datetime, row: dict[str, Any]) -> dict[str, Any]:
        stamp = max(iso(now), row["TimeGenerated"])  # never older than the row it changes
        row.update(TimeGenerated=stamp, LastModifiedTime=stamp, FirstModifiedTime=row["FirstModifiedTime"] or stamp,
                   ModifiedBy=DEMO_AUTHOR)
        name = row["IncidentName"]
        # Superseded: the incident's scripted future, and a row written at this very instant (a frozen clock),
        # which would otherwise tie with this one for "latest".
        conn.execute("DELETE FROM SecurityIncident WHERE IncidentName = ? AND TimeGenerated >= ?", (name, stamp))
        changes.insert(conn, row)
        conn.commit()
        if self._backend.changes is not None:  # for the demo's other processes, and this one's next start
            self._backend.changes.append(row)
        journal = [r for r in self._journal.pop(name, []) if r["TimeGenerated"] < stamp] + [row]
        self._journal[name] = journal  # most recently written last
        while sum(len(rows) for rows in self._journal.values()) > MAX_JOURNAL_ROWS:
            del self._journal[next(iter(self._journal))]  # the least recently written incident's changes
        return row

    def _replay(self, conn: sqlite3.Connection) -> None:
        for name, rows in list(self._journal.items()):
            if conn.execute("SELECT 1 FROM SecurityIncident WHERE IncidentName = ? LIMIT 1", (name,)).fetchone():
                conn.execute("DELETE FROM SecurityIncident WHERE IncidentName = ? AND TimeGenerated >= ?",
                             (name, rows[0]["TimeGenerated"]))
                for row in rows:
                    changes.insert(conn, row)
            else:  # the incident aged out of the generated days
                del self._journal[name]
        conn.commit()

    def _owner_json(self, owner: Any) -> str:
        given = {key: (owner or {}).get(key) or None for key in _OWNER_KEYS} if isinstance(owner, dict) else {}
        ids = {str(given[key]).lower() for key in ("objectId", "userPrincipalName", "email") if given.get(key)}
        for analyst in self._analysts:
            if ids & {str(analyst[key]).lower() for key in ("objectId", "userPrincipalName", "email") if analyst[key]}:
                return compact_json(analyst)
        return compact_json({key: given.get(key) for key in _OWNER_KEYS})


def _latest(conn: sqlite3.Connection, name: str, now: datetime) -> dict[str, Any]:
    row = conn.execute(
        "SELECT * FROM SecurityIncident WHERE IncidentName = ? AND TimeGenerated <= ? "
        "ORDER BY TimeGenerated DESC, rowid DESC LIMIT 1", (name, iso(now))).fetchone()
    if row is None:
        raise WriteError("not_found", "The demo workspace has no such incident (it may be older than the demo's "
                         "35 days of data). Look it up again by its number.", status=404,
                         detail=f"no demo incident named {name}")
    return dict(row)


def _snapshot(row: dict[str, Any]) -> IncidentSnapshot:
    owner = _json(row["Owner"], {})
    properties = {
        "title": row["Title"], "description": row["Description"], "severity": row["Severity"],
        "status": row["Status"], "owner": {**owner, "ownerType": "User" if any(owner.values()) else "Unknown"},
        "classification": row["Classification"] or None, "classificationReason": row["ClassificationReason"] or None,
        "classificationComment": row["ClassificationComment"] or None, "labels": _json(row["Labels"], []),
        "firstActivityTimeUtc": row["FirstActivityTime"], "lastActivityTimeUtc": row["LastActivityTime"],
        "incidentNumber": row["IncidentNumber"], "incidentUrl": row["IncidentUrl"],
        "createdTimeUtc": row["CreatedTime"], "lastModifiedTimeUtc": row["LastModifiedTime"],
        "providerName": row["ProviderName"], "providerIncidentId": row["ProviderIncidentId"],
        "additionalData": _json(row["AdditionalData"], {}),
        "relatedAnalyticRuleIds": _json(row["RelatedAnalyticRuleIds"], []),
    }
    return IncidentSnapshot.from_api({"name": row["IncidentName"], "etag": _etag(row),
                                      "properties": {k: v for k, v in properties.items() if v is not None}})


def _etag(row: dict[str, Any]) -> str:
    """A quoted GUID-shaped hash of the whole row: deterministic, and new with every written row."""
    digest = hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()
    return f'"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"'


def _checked(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise WriteError("bad_request", "That is not a Sentinel incident id, so nothing was changed. Refer to the "
                         "incident by its number.", detail=f"refused resource name {one_line(name, 80)!r}")
    return name


def _json(text: Any, default: Any) -> Any:
    try:
        value = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        value = None
    return value if isinstance(value, type(default)) else default
