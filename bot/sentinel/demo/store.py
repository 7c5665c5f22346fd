"""The demo workspace's SQLite database: SecurityIncident and SecurityAlert with Sentinel's columns.

Column names and types come from ``tables.json`` (the Azure Monitor table reference). Datetimes are
stored as fixed-width ISO-8601 text so they sort and compare as text; dynamic columns as JSON text,
as Log Analytics itself hands them out.

One derived table, ``AlertEntity``, holds each alert row's distinct identifiable entities (type, value),
computed once at load with the same rules the KQL applies (``queries.entity_value``), so entity
queries are plain joins instead of re-parsing JSON on every question.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.sentinel.queries import MV_EXPAND_LIMIT, entity_value

TABLES_FILE = Path(__file__).resolve().parent.parent / "tables.json"
_SQLITE_TYPES = {"int": "INTEGER", "long": "INTEGER", "bool": "INTEGER", "real": "REAL"}


def load_table_columns() -> dict[str, list[tuple[str, str]]]:
    """{table: [(column, kusto type), ...]} for SecurityIncident and SecurityAlert."""
    raw = json.loads(TABLES_FILE.read_text(encoding="utf-8"))
    return {table: [(c["name"], c["type"]) for c in columns] for table, columns in raw.items()}


def iso(moment: datetime) -> str:
    """The storage form of a datetime: UTC, microseconds, 'Z' (fixed width, sorts as text)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def create_database(
    incident_rows: Iterable[Mapping[str, Any]], alert_rows: Iterable[Mapping[str, Any]]
) -> sqlite3.Connection:
    """A new in-memory database holding the given rows (the connection may be used from one thread at a time)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.row_factory = sqlite3.Row
    # casefold() matches Kusto's case-insensitive `contains` better than SQLite's ASCII-only lower().
    conn.create_function(
        "contains_ci", 2, lambda text, part: int(part.casefold() in (text or "").casefold()), deterministic=True
    )
    tables = load_table_columns()
    for table, columns in tables.items():
        ddl = ", ".join(f'"{name}" {_SQLITE_TYPES.get(kind, "TEXT")}' for name, kind in columns)
        conn.execute(f"CREATE TABLE {table} ({ddl})")
    _insert(conn, "SecurityIncident", [name for name, _ in tables["SecurityIncident"]], incident_rows)
    _insert(conn, "SecurityAlert", [name for name, _ in tables["SecurityAlert"]], alert_rows)
    conn.execute("CREATE TABLE AlertEntity (AlertRowId INTEGER, EntityType TEXT, EntityValue TEXT)")
    conn.executemany("INSERT INTO AlertEntity VALUES (?, ?, ?)", _alert_entities(conn))
    conn.executescript(
        """
        CREATE INDEX incident_time ON SecurityIncident (TimeGenerated, IncidentNumber);
        CREATE INDEX incident_number ON SecurityIncident (IncidentNumber, TimeGenerated);
        CREATE INDEX alert_time ON SecurityAlert (TimeGenerated, SystemAlertId, AlertSeverity);
        CREATE INDEX alert_id ON SecurityAlert (SystemAlertId, TimeGenerated);
        CREATE INDEX alert_entity_row ON AlertEntity (AlertRowId, EntityType, EntityValue);
        ANALYZE;
        """
    )
    conn.commit()
    return conn


def _insert(conn: sqlite3.Connection, table: str, columns: list[str], rows: Iterable[Mapping[str, Any]]) -> None:
    placeholders = ", ".join("?" for _ in columns)
    conn.executemany(
        f"INSERT INTO {table} VALUES ({placeholders})", ([row.get(c) for c in columns] for row in rows)
    )


def _alert_entities(conn: sqlite3.Connection) -> Iterable[tuple[int, str, str]]:
    """(alert row id, type, value) for each identifiable top-level entity, as the KQL expands them."""
    for row_id, entities in conn.execute("SELECT rowid, Entities FROM SecurityAlert").fetchall():
        try:
            items = json.loads(entities) if entities else []
        except ValueError:
            continue
        if not isinstance(items, list):
            continue
        seen: set[tuple[str, str]] = set()  # an entity named twice in one alert counts once
        for item in items[:MV_EXPAND_LIMIT]:
            value = entity_value(item)
            if value and (str(item["Type"]), value) not in seen:
                seen.add((str(item["Type"]), value))
                yield row_id, str(item["Type"]), value
