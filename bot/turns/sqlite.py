"""SQLite files that threads and processes share: the local turn queue and the SQLite state store open their
files and run their write transactions through these two helpers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal


def connect_wal(path: Path, *, synchronous: Literal["NORMAL", "FULL"]) -> sqlite3.Connection:
    """A connection to a SQLite file that threads and processes share: WAL, transactions only where
    :func:`immediate` opens them, and up to 10 s of waiting for another writer."""
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
    except BaseException:
        connection.close()
        raise
    return connection


@contextmanager
def immediate(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, its write lock taken at the start; rolled back when the block raises."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
