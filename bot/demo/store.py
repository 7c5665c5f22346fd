"""The demo workspace's SQLite database: every table of tables.json with Sentinel's columns.

Column names and types come from ``tables.json`` (the Azure Monitor table reference). Datetimes are
stored as fixed-width ISO-8601 text so they sort and compare as text; dynamic columns as JSON text,
as Log Analytics itself hands them out.

Derived tables hold each alert row's identifiable entities, computed once at load with the same walk and rules the
KQL applies (``entities.alert_sightings``, ``entities.IdentityMap``): ``AlertEntity`` by type and lower-case value,
``AlertIdentity`` by identity (an account or host by any spelling tied to it), so entity queries are plain joins
instead of re-parsing JSON on every question.

Latest rows, precomputed. KQL takes the latest row per incident (alert) with ``summarize arg_max``
over the window; done at query time in SQLite that is a GROUP BY over every row of the window, which
grows with the workspace. Instead ``LatestIncident`` and ``LatestAlert`` give each row the time of the
next row of the same incident (alert), ``NextTime``: a row is the latest at ``now`` exactly when
``TimeGenerated <= now`` and ``NextTime`` is empty or later than ``now``, for any ``now``. Rows already
superseded before ``valid_from`` (the earliest "now" the database will serve) are left out, so the
tables hold about one row per incident (alert). Triggers keep ``LatestIncident`` right when the demo
writer adds or replaces incident rows.

Totals, precomputed. An alert row that is the latest of its alert and older than ``valid_from`` stays
so for every "now" served (``Settled``); those are counted ahead, per hour and severity (``AlertHour``)
and per day, severity and entity (``EntityDay``, entities numbered in ``Entity``). A query adds the
rows the totals cannot hold: the unsettled ones and those in the window's first, partial bucket.

Filters, precomputed. ``LatestIncident`` also holds each row's status, "unassigned" and casefolded title and
description, ``LatestAlert`` its status and the id of its text in ``AlertText`` (each distinct alert name and
description once, casefolded), so a filtered list reads narrow rows (alerts: one covering index) and a keyword is
looked for in each distinct text once. ``IncidentAlert`` says which incidents name an alert, so an entity pivot
starts from the incidents its alerts lead to.

The activity tables (SigninLogs, DeviceProcessEvents, ...: ``catalog.ACTIVITY_TABLES``) hold the generator's
sparse rows with their columns' defaults, and are indexed on TimeGenerated and on ``kql_lower`` of the columns
an entity is found in (``catalog.ENTITY_COLUMNS``).

A database is built in memory in this process, or (``build_file``) in a worker process straight into a
file, which the serving process then opens: regeneration then costs the serving process no CPU time.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.demo import columns, generator
from bot.sentinel import catalog
from bot.sentinel.demo_sql import OWNER, alert_text_id
from bot.sentinel.entities import IdentityMap, Sighting, alert_identities, alert_sightings
from bot.sentinel.hunt.sql import index_expressions

_SQLITE_TYPES = {"int": "INTEGER", "long": "INTEGER", "bool": "INTEGER", "real": "REAL"}


def load_table_columns() -> dict[str, list[tuple[str, str]]]:
    """{table: [(column, kusto type), ...]} for every table of tables.json."""
    return {table: list(columns) for table, columns in catalog.schema().items()}


_SHARED = "DemoShared"  # the table of a shared copy saying what it was built from (save_shared)


def connect(path: str = ":memory:") -> sqlite3.Connection:
    """A connection to a demo database (usable from one thread at a time), with the functions its queries use."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    # casefold() matches Kusto's case-insensitive `contains` better than SQLite's ASCII-only lower().
    conn.create_function(
        "contains_ci", 2, lambda text, part: int(part.casefold() in (text or "").casefold()), deterministic=True
    )
    conn.create_function("casefold", 1, lambda text: (text or "").casefold(), deterministic=True)
    # Kusto's tolower(): entities are grouped and found by their lower-case value (``EntityKey``).
    conn.create_function("kql_lower", 1, lambda text: (text or "").lower(), deterministic=True)
    # Generated data, rebuilt at will: no durability needed, and reads should come from memory.
    conn.executescript("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA cache_size = -262144; "
                       "PRAGMA mmap_size = 4294967296;")
    return conn


def create_database(
    incident_rows: Iterable[Mapping[str, Any]], alert_rows: Iterable[Mapping[str, Any]], *,
    valid_from: str = "", path: str = ":memory:", tables: Mapping[str, Iterable[Mapping[str, Any]]] | None = None,
) -> sqlite3.Connection:
    """A new database holding the given rows, to serve queries at ``valid_from`` (storage form) or later;
    ``tables``: the activity tables' rows (``generator.DemoData.tables``: sparse rows, completed here)."""
    conn = connect(path)
    schemas = load_table_columns()
    for table, table_columns in schemas.items():
        conn.execute(f"CREATE TABLE {table} ({_ddl(table, table_columns)})")
    _insert(conn, "SecurityIncident", [name for name, _ in schemas["SecurityIncident"]], incident_rows)
    _insert(conn, "SecurityAlert", [name for name, _ in schemas["SecurityAlert"]], alert_rows)
    _entity_tables(conn)
    _add_entities(conn, IdentityMap())
    conn.executescript(
        """
        CREATE INDEX incident_time ON SecurityIncident (TimeGenerated, IncidentNumber);
        CREATE INDEX incident_number ON SecurityIncident (IncidentNumber, TimeGenerated);
        CREATE INDEX alert_time ON SecurityAlert (TimeGenerated, SystemAlertId, AlertSeverity);
        CREATE INDEX alert_id ON SecurityAlert (SystemAlertId, TimeGenerated);
        CREATE INDEX alert_entity_row ON AlertEntity (AlertRowId, EntityType, EntityValue);
        CREATE INDEX alert_entity_key ON AlertEntity (EntityKey, AlertRowId);
        CREATE INDEX alert_identity_key ON AlertIdentity (IdentityKey, AlertRowId);
        """
    )
    _latest_tables(conn, valid_from)
    _activity_tables(conn, tables or {})
    conn.execute("ANALYZE")
    conn.commit()
    return conn


# "Unassigned", as SQL on a SecurityIncident row: no object id and no owner a list would show.
UNASSIGNED = f"(COALESCE(json_extract(Owner, '$.objectId'), '') = '' AND {OWNER} IS NULL)"
# Incidents are listed and filtered on these (status, unassigned, and their title and description casefolded once
# here, not per question), so a filtered list reads the narrow latest rows and joins a full row only to show it.
_INCIDENT_COLUMNS = f"CreatedTime, Severity, casefold(Title), Status, casefold(Description), {UNASSIGNED}"



# Alerts likewise: filtered on these, and searched in their name and description, held casefolded once per distinct
# text in AlertText (an alert rule's alerts share a name, many share a description): a search reads each text once,
# and the latest rows stay narrow enough for one index to hold every column a filtered list reads.
_ALERT_COLUMNS = f"AlertSeverity, Status, {alert_text_id('SecurityAlert')}"
_ALERT_TEXTS = """INSERT OR IGNORE INTO AlertText (AlertName, Description, NameFolded, DescriptionFolded)
    SELECT AlertName, Description, casefold(AlertName), casefold(Description) FROM
    (SELECT DISTINCT AlertName, Description FROM SecurityAlert {where})"""


def _chain(table: str, key: str, columns: str, where: str = "") -> str:
    """Each row of ``table`` with the time of the next row of the same ``key`` (ties broken by row order)."""
    return (f"SELECT rowid, {key}, TimeGenerated, LEAD(TimeGenerated) OVER (PARTITION BY {key} "
            f"ORDER BY TimeGenerated, rowid) AS NextTime, {columns} FROM {table} {where}")


_ALERTS_FIXED = """CREATE TRIGGER alert_added BEFORE INSERT ON SecurityAlert BEGIN
            SELECT RAISE(ABORT, 'demo alerts are fixed once generated: add them in the generator or add_alert');
        END;"""


def add_alert(conn: sqlite3.Connection, row: Mapping[str, Any]) -> None:
    """Add one new alert row (an injected incident's) with its derived rows: not settled, so the precounted
    totals never hold it and every query counts it live (the one way past the ``alert_added`` guard)."""
    columns = [name for name, _ in load_table_columns()["SecurityAlert"]]
    conn.execute("DROP TRIGGER alert_added")
    try:
        _insert(conn, "SecurityAlert", columns, [row])
    finally:
        conn.execute(_ALERTS_FIXED)
    row_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
    conn.execute(_ALERT_TEXTS.format(where="WHERE rowid = ?"), (row_id,))
    conn.execute(f"INSERT INTO LatestAlert SELECT rowid, SystemAlertId, TimeGenerated, NULL, {_ALERT_COLUMNS}, 0 "
                 "FROM SecurityAlert WHERE rowid = ?", (row_id,))
    _add_entities(conn, _load_identities(conn), row_id)


def _latest_tables(conn: sqlite3.Connection, valid_from: str) -> None:
    incident_chain = _chain("SecurityIncident", "IncidentNumber", _INCIDENT_COLUMNS,
                            "WHERE IncidentNumber = {row}.IncidentNumber")
    conn.executescript(
        f"""
        CREATE TABLE LatestIncident (IncidentRowId INTEGER PRIMARY KEY, IncidentNumber INTEGER, TimeGenerated TEXT,
                                     NextTime TEXT, CreatedTime TEXT, Severity TEXT, TitleFolded TEXT, Status TEXT,
                                     DescriptionFolded TEXT, Unassigned INTEGER);
        -- Which incidents name an alert (in any of their rows): where an entity's alerts lead.
        CREATE TABLE IncidentAlert (SystemAlertId TEXT, IncidentNumber INTEGER,
                                    PRIMARY KEY (SystemAlertId, IncidentNumber)) WITHOUT ROWID;
        CREATE TRIGGER incident_alerts AFTER INSERT ON SecurityIncident BEGIN
            INSERT OR IGNORE INTO IncidentAlert SELECT value, NEW.IncidentNumber FROM {_alert_ids('NEW')};
        END;
        CREATE TRIGGER incident_alerts_changed AFTER UPDATE OF AlertIds ON SecurityIncident BEGIN
            INSERT OR IGNORE INTO IncidentAlert SELECT value, NEW.IncidentNumber FROM {_alert_ids('NEW')};
        END;
        CREATE TABLE LatestAlert (AlertRowId INTEGER PRIMARY KEY, SystemAlertId TEXT, TimeGenerated TEXT,
                                  NextTime TEXT, AlertSeverity TEXT, Status TEXT, TextId INTEGER, Settled INTEGER);
        CREATE TABLE AlertText (TextId INTEGER PRIMARY KEY, AlertName TEXT, Description TEXT, NameFolded TEXT,
                                DescriptionFolded TEXT, UNIQUE (AlertName, Description));
        CREATE TABLE AlertHour (Hour TEXT, AlertSeverity TEXT, Alerts INTEGER, PRIMARY KEY (Hour, AlertSeverity));
        -- One entity per type and lower-case value ("WS1" and "ws1" are one host), shown by its least spelling.
        CREATE TABLE Entity (EntityId INTEGER PRIMARY KEY, EntityType TEXT, EntityKey TEXT, EntityValue TEXT,
                             UNIQUE (EntityType, EntityKey));
        -- Shown: the day's least spelling of the entity (a window shows the least of its days').
        CREATE TABLE EntityDay (EntityId INTEGER, Day TEXT, AlertSeverity TEXT, Alerts INTEGER, LastSeen TEXT,
                                FirstSeen TEXT, Shown TEXT, PRIMARY KEY (EntityId, Day, AlertSeverity)) WITHOUT ROWID;
        -- The demo writer appends and replaces incident rows: recompute that incident's chain.
        CREATE TRIGGER incident_added AFTER INSERT ON SecurityIncident BEGIN
            DELETE FROM LatestIncident WHERE IncidentNumber = NEW.IncidentNumber;
            INSERT INTO LatestIncident {incident_chain.format(row="NEW")};
        END;
        CREATE TRIGGER incident_removed AFTER DELETE ON SecurityIncident BEGIN
            DELETE FROM LatestIncident WHERE IncidentNumber = OLD.IncidentNumber;
            INSERT INTO LatestIncident {incident_chain.format(row="OLD")};
        END;
        CREATE TRIGGER incident_changed AFTER UPDATE OF Title, Severity, CreatedTime, Status, Description, Owner
                ON SecurityIncident BEGIN
            UPDATE LatestIncident SET TitleFolded = casefold(NEW.Title), Severity = NEW.Severity, Status = NEW.Status,
                                      DescriptionFolded = casefold(NEW.Description),
                                      Unassigned = {UNASSIGNED.replace('Owner', 'NEW.Owner')},
                                      CreatedTime = NEW.CreatedTime WHERE IncidentRowId = NEW.rowid;
        END;
        -- Alerts are fixed once generated (nothing in the bot writes them); say so rather than count wrong.
        {_ALERTS_FIXED}
        CREATE TRIGGER alert_removed BEFORE DELETE ON SecurityAlert BEGIN
            SELECT RAISE(ABORT, 'demo alerts are fixed once generated: remove them in the generator');
        END;
        -- An entity planted on an alert row by hand (tests do) is an identity of its own, unless its value is
        -- already known as a key of one (the injected alerts of add_alert are resolved in Python instead).
        CREATE TRIGGER entity_planted AFTER INSERT ON AlertEntity WHEN NOT EXISTS (
                SELECT 1 FROM AlertIdentity WHERE AlertRowId = NEW.AlertRowId AND EntityType = NEW.EntityType
                AND IdentityKey = NEW.EntityKey) AND NOT EXISTS (
                SELECT 1 FROM IdentityAlias WHERE Key = NEW.EntityKey AND EntityType = NEW.EntityType) BEGIN
            INSERT OR IGNORE INTO AlertIdentity
            SELECT NEW.AlertRowId, NEW.EntityType,
                   COALESCE((SELECT substr(MIN(Anchor), 2) FROM IdentityAnchor
                             WHERE EntityType = NEW.EntityType AND Key = NEW.EntityKey), NEW.EntityKey),
                   NEW.EntityValue;
        END;
        -- An identity added to a settled alert row counts in the daily totals at once.
        CREATE TRIGGER entity_added AFTER INSERT ON AlertIdentity BEGIN
            INSERT INTO Entity (EntityType, EntityKey, EntityValue)
            VALUES (NEW.EntityType, NEW.IdentityKey, NEW.IdentityValue)
            ON CONFLICT DO UPDATE SET EntityValue = min(EntityValue, excluded.EntityValue);
            INSERT INTO EntityDay
            SELECT (SELECT EntityId FROM Entity WHERE EntityType = NEW.EntityType AND EntityKey = NEW.IdentityKey),
                   substr(TimeGenerated, 1, 10), AlertSeverity, 1, TimeGenerated, TimeGenerated, NEW.IdentityValue
            FROM LatestAlert WHERE AlertRowId = NEW.AlertRowId AND Settled
            ON CONFLICT DO UPDATE SET Alerts = Alerts + 1, LastSeen = max(LastSeen, excluded.LastSeen),
                                      FirstSeen = min(FirstSeen, excluded.FirstSeen),
                                      Shown = min(Shown, excluded.Shown);
        END;
        """
    )
    current = "WHERE NextTime IS NULL OR NextTime > :valid_from"  # rows superseded before valid_from never show
    conn.execute(f"INSERT INTO LatestIncident SELECT * FROM "
                 f"({_chain('SecurityIncident', 'IncidentNumber', _INCIDENT_COLUMNS)}) {current}",
                 {"valid_from": valid_from})
    # Settled: the latest row of its alert for every "now" this database serves, so it can be counted ahead.
    settled = "TimeGenerated <= :valid_from AND NextTime IS NULL"
    conn.execute(_ALERT_TEXTS.format(where=""))
    conn.execute(f"INSERT INTO LatestAlert SELECT *, {settled} FROM "
                 f"({_chain('SecurityAlert', 'SystemAlertId', _ALERT_COLUMNS)}) {current}",
                 {"valid_from": valid_from})
    conn.execute(f"INSERT OR IGNORE INTO IncidentAlert SELECT value, s.IncidentNumber FROM SecurityIncident AS s, "
                 f"{_alert_ids('s')}")
    conn.executescript(
        """
        INSERT INTO AlertHour SELECT substr(TimeGenerated, 1, 13), AlertSeverity, COUNT(*) FROM LatestAlert
            WHERE Settled GROUP BY 1, 2;
        INSERT INTO Entity (EntityType, EntityKey, EntityValue)
            SELECT EntityType, IdentityKey, MIN(IdentityValue) FROM AlertIdentity GROUP BY 1, 2 ORDER BY 1, 2;
        INSERT INTO EntityDay
            SELECT n.EntityId, substr(l.TimeGenerated, 1, 10), l.AlertSeverity, COUNT(*), MAX(l.TimeGenerated),
                   MIN(l.TimeGenerated), MIN(e.IdentityValue)
            FROM LatestAlert AS l JOIN AlertIdentity AS e ON e.AlertRowId = l.AlertRowId
            JOIN Entity AS n ON n.EntityType = e.EntityType AND n.EntityKey = e.IdentityKey
            WHERE l.Settled GROUP BY 1, 2, 3;
        CREATE INDEX latest_incident_time ON LatestIncident (TimeGenerated, NextTime, CreatedTime, Severity);
        CREATE INDEX latest_incident_severity ON LatestIncident (Severity, CreatedTime);
        CREATE INDEX latest_incident_number ON LatestIncident (IncidentNumber, TimeGenerated);
        CREATE INDEX latest_alert_time ON LatestAlert (TimeGenerated, NextTime, AlertSeverity, Settled);
        -- Covering: a list (filtered on status or text too) reads its window from the index alone.
        CREATE INDEX latest_alert_severity ON LatestAlert (AlertSeverity, TimeGenerated, NextTime, Status, TextId,
                                                           SystemAlertId);
        CREATE INDEX latest_alert_unsettled ON LatestAlert (Settled, TimeGenerated);
        CREATE INDEX latest_alert_id ON LatestAlert (SystemAlertId, TimeGenerated);
        """
    )


def _ddl(table: str, table_columns: list[tuple[str, str]]) -> str:
    """A table's columns; those of the activity tables with their defaults (a row leaves out what is absent)."""
    if table not in catalog.ENTITY_COLUMNS:
        return ", ".join(f'"{name}" {_SQLITE_TYPES.get(kind, "TEXT")}' for name, kind in table_columns)
    kinds = dict(table_columns)
    return ", ".join(f'"{name}" {_SQLITE_TYPES.get(kinds[name], "TEXT")} DEFAULT {_literal(value)}'
                     for name, value in columns.defaults(table))


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _activity_tables(conn: sqlite3.Connection, tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> None:
    """The activity tables' rows, and the indexes their entity lookups and time windows use."""
    for table, rows in tables.items():
        _insert_in_time_order(conn, table, rows)
    for table, kinds in catalog.ENTITY_COLUMNS.items():
        conn.execute(f"CREATE INDEX {table.lower()}_time ON {table} ({', '.join(_time_index_columns(table))})")
        expressions = dict.fromkeys(e for expressions in kinds.values() for e in expressions)
        for index, expression in enumerate(expressions):
            conn.execute(f"CREATE INDEX {table.lower()}_entity_{index} ON {table} "
                         f"(kql_lower({expression}), TimeGenerated)")
    for table in catalog.HUNT_INDEXED:
        for index, expression in enumerate(index_expressions(table)):
            conn.execute(f"CREATE INDEX {table.lower()}_hunt_{index} ON {table} "
                         f"({expression}, {', '.join(_time_index_columns(table))})")


def _insert_in_time_order(conn: sqlite3.Connection, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """A table's rows stored in the order of their time: a window's rows then sit on neighbouring pages, so a hunt
    over 30 days reads them in order instead of one random page per row (at 100x, 30 days of sign-ins through the
    time index: 116,241 jumps between 174,191 rows as the generator wrote them). Rows from one builder set the same
    columns in the same order: one INSERT for each run of rows of one shape."""
    ordered = sorted(rows, key=lambda row: str(row.get("TimeGenerated") or ""))
    start = 0
    while start < len(ordered):
        names = tuple(ordered[start])
        end = start + 1
        while end < len(ordered) and tuple(ordered[end]) == names:
            end += 1
        listed = ", ".join(f'"{name}"' for name in names)
        conn.executemany(f"INSERT INTO {table} ({listed}) VALUES ({', '.join('?' * len(names))})",
                         [tuple(row.values()) for row in ordered[start:end]])
        start = end


def _time_index_columns(table: str) -> list[str]:
    """The time index's columns: the time, then the table's own columns a hunt shows by default (``catalog``'s
    ``hunt``, virtual columns left out), so a hunt reading only those (a series, sessions per user) reads the narrow
    index instead of each wide row. The hot columns' indexes end with them too, so the time index's covering does
    not win over them: a filter on a hot column reads only its matches, from the index alone."""
    stored = {name for name, _ in catalog.schema()[table]}
    shown = [name for name in catalog.tables()[table].hunt if name in stored and name != "TimeGenerated"]
    return ["TimeGenerated", *(f'"{name}"' for name in shown)]


def _alert_ids(row: str) -> str:
    """json_each over a SecurityIncident row's AlertIds (nothing when the text is not JSON)."""
    return f"json_each(CASE WHEN json_valid({row}.AlertIds) THEN {row}.AlertIds ELSE '[]' END)"


def save_shared(conn: sqlite3.Connection, path: Path, *, seed: int, volume: int, valid_from: str,
                generated_until: str) -> None:
    """A copy of a built database at ``path`` for the other processes of this machine (serve's worker processes)
    to open instead of generating their own, with what it was built from; replaced whole (another process reads
    the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    copy = sqlite3.connect(part)
    try:
        conn.backup(copy)
        copy.execute(f"CREATE TABLE {_SHARED} (seed INTEGER, volume INTEGER, valid_from TEXT, generated_until TEXT)")
        copy.execute(f"INSERT INTO {_SHARED} VALUES (?, ?, ?, ?)", (seed, volume, valid_from, generated_until))
        copy.commit()
    finally:
        copy.close()
    os.replace(part, path)


def load_shared(path: Path, *, seed: int, volume: int) -> tuple[sqlite3.Connection, str, str] | None:
    """The database :func:`save_shared` left at ``path``, copied into memory, with its ``valid_from`` and
    ``generated_until`` (ISO 8601); None when there is none built from ``seed`` and ``volume``, or it is unreadable
    (the caller builds its own)."""
    if not path.is_file():
        return None
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = source.execute(f"SELECT seed, volume, valid_from, generated_until FROM {_SHARED}").fetchone()
            if row is None or (row[0], row[1]) != (seed, volume):
                return None
            conn = connect()
            source.backup(conn)
        finally:
            source.close()
        conn.execute(f"DROP TABLE {_SHARED}")
        conn.commit()
    except sqlite3.Error:
        return None
    return conn, str(row[2]), str(row[3])


def build_file(seed: int, now: str, volume: int, valid_from: str, path: str) -> str:
    """Generate the workspace for ``now`` into a database file at ``path``; returns ``generated_until``.

    Runs in a worker process (arguments and result are plain values), so regeneration takes no CPU
    time from the process serving queries.
    """
    data = generator.generate(seed, datetime.fromisoformat(now), volume=volume)
    create_database(data.incident_rows, data.alert_rows, valid_from=valid_from, path=path, tables=data.tables).close()
    return data.generated_until.isoformat()


def _insert(conn: sqlite3.Connection, table: str, columns: list[str], rows: Iterable[Mapping[str, Any]]) -> None:
    placeholders = ", ".join("?" for _ in columns)
    conn.executemany(
        f"INSERT INTO {table} VALUES ({placeholders})", ([row.get(c) for c in columns] for row in rows)
    )


def _entity_tables(conn: sqlite3.Connection) -> None:
    """The alerts' entities as the queries read them (see ``entities.IdentityMap``): ``AlertEntity`` each alert's
    entities by type and lower-case value (least spelling), ``AlertIdentity`` by identity (an account or host by
    any spelling tied to it), ``IdentityAlias`` where each key of an account or host leads (a search by a SID
    finds the account known by its UPN), and the learned map itself (``IdentityAnchor``, ``IdentitySpelling``)
    so an injected alert is resolved like the rest."""
    conn.executescript(
        """
        CREATE TABLE AlertEntity (AlertRowId INTEGER, EntityType TEXT, EntityValue TEXT,
                                  EntityKey TEXT GENERATED ALWAYS AS (kql_lower(EntityValue)) STORED);
        CREATE TABLE AlertIdentity (AlertRowId INTEGER, EntityType TEXT, IdentityKey TEXT, IdentityValue TEXT,
                                    UNIQUE (AlertRowId, EntityType, IdentityKey));
        CREATE TABLE IdentityAlias (EntityType TEXT, Key TEXT, IdentityKey TEXT,
                                    PRIMARY KEY (Key, EntityType, IdentityKey)) WITHOUT ROWID;
        CREATE TABLE IdentityAnchor (EntityType TEXT, Key TEXT, Anchor TEXT, PRIMARY KEY (EntityType, Key))
            WITHOUT ROWID;
        CREATE TABLE IdentitySpelling (EntityType TEXT, EntityKey TEXT, Spelling TEXT,
                                       PRIMARY KEY (EntityType, EntityKey)) WITHOUT ROWID;
        """
    )


def _add_entities(conn: sqlite3.Connection, identities: IdentityMap, only: int | None = None) -> None:
    """The entity rows of every alert row (or ``only`` one), resolved with ``identities`` once it has learnt from
    them, and the map as it then is."""
    sightings = _sightings(conn, only)
    for _, seen in sightings:
        identities.learn(seen)
    _insert_entities(conn, sightings, identities)
    _save_identities(conn, identities)


def _sightings(conn: sqlite3.Connection, only: int | None = None) -> list[tuple[int, list[Sighting]]]:
    """Each alert row's identifiable entity objects, as the KQL expands them."""
    where = "" if only is None else f"WHERE rowid = {int(only)}"
    return [(row_id, alert_sightings(entities))
            for row_id, entities in conn.execute(f"SELECT rowid, Entities FROM SecurityAlert {where}").fetchall()]


def _insert_entities(conn: sqlite3.Connection, sightings: list[tuple[int, list[Sighting]]],
                     identities: IdentityMap) -> None:
    entity_rows: list[tuple[int, str, str]] = []
    identity_rows: list[tuple[int, str, str, str]] = []
    aliases: set[tuple[str, str, str]] = set()
    for row_id, seen in sightings:
        # One named twice (in any letter case) counts once, by its least spelling, as the KQL.
        least: dict[tuple[str, str], str] = {}
        for sighting in seen:
            key = (sighting.type, sighting.keys[0])
            least[key] = min(least.get(key, sighting.value), sighting.value)
        entity_rows.extend((row_id, kind, value) for (kind, _), value in least.items())
        resolved = alert_identities(seen, identities)
        identity_rows.extend((row_id, kind, key, shown) for (kind, key), shown in resolved.shown.items())
        aliases |= resolved.aliases
    # Identities and aliases first: the entity_planted trigger (once created) leaves rows they cover alone.
    conn.executemany("INSERT INTO AlertIdentity VALUES (?, ?, ?, ?)", identity_rows)
    conn.executemany("INSERT OR IGNORE INTO IdentityAlias VALUES (?, ?, ?)", sorted(aliases))
    conn.executemany("INSERT INTO AlertEntity VALUES (?, ?, ?)", entity_rows)


def _save_identities(conn: sqlite3.Connection, identities: IdentityMap) -> None:
    conn.executemany("INSERT OR REPLACE INTO IdentityAnchor VALUES (?, ?, ?)",
                     [(kind, key, anchor) for (kind, key), anchor in identities.anchors.items()])
    conn.executemany("INSERT OR REPLACE INTO IdentitySpelling VALUES (?, ?, ?)",
                     [(kind, key, spelling) for (kind, key), spelling in identities.spellings.items()])


def _load_identities(conn: sqlite3.Connection) -> IdentityMap:
    identities = IdentityMap()
    identities.anchors = {(kind, key): anchor
                          for kind, key, anchor in conn.execute("SELECT * FROM IdentityAnchor").fetchall()}
    identities.spellings = {(kind, key): spelling
                            for kind, key, spelling in conn.execute("SELECT * FROM IdentitySpelling").fetchall()}
    return identities
