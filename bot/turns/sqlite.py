"""SQLite files that threads and processes share: the local turn queue and the SQLite state store open their
files and run their write transactions through these two helpers, and are checked at start-up by :func:`unusable`."""

from __future__ import annotations

import os
import shlex
import sqlite3
import time
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


def unusable(path: Path, what: str) -> str | None:
    """What to do about an existing SQLite file that cannot be used (not a database, damaged, not readable), said
    for an operator: what is wrong, and the exact command that moves it (and its -wal and -shm) aside, since a new
    one is made in its place; None when it is fine or absent."""
    if not path.exists():
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10.0)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            connection.close()
    except sqlite3.OperationalError as error:
        if os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
            return None  # busy or locked: another process has it; opening it for real says so
        return (f"{what} {path} cannot be opened ({error}): this user ({_user()}) needs to read and write it and its "
                f"folder; see who owns them with: ls -ld {shlex.quote(str(path))} {shlex.quote(str(path.parent))}")
    except sqlite3.DatabaseError as error:
        aside = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}")
        moves = [f"mv {shlex.quote(str(p))} {shlex.quote(str(aside) + p.name[len(path.name):])}"
                 for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")) if p.exists()]
        return (f"{what} {path} is not a usable SQLite database ({error}). Move it aside (a new one is made at the "
                f"next start; what it held stays in the moved file) with:\n    " + " && ".join(moves))
    return None


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, AttributeError):
        return "the bot's user"
