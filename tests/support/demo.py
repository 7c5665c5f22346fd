"""Demo workspaces for tests: each distinct (seed, now, volume) is generated once per test run, and every backend
gets its own copy of that database (SQLite's backup API: milliseconds, against about a second to generate).

A copy is a separate in-memory database, so a test that writes to its workspace (the demo writer, an injected or
planted incident, a changed roster) changes only its own. ``copied_demo`` takes DemoBackend's arguments and builds
lazily as DemoBackend does: the database is for the clock's "now" at the first query, not at construction.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime
from typing import Any

from bot.demo import store
from bot.demo.backend import Clock, DemoBackend, build_database

_TEMPLATES: dict[tuple[int, datetime, int], tuple[sqlite3.Connection, datetime]] = {}
_LOCK = threading.Lock()  # backends build from worker threads; one template is read by one copy at a time


def copy_of_build(seed: int, now: datetime, volume: int = 1) -> tuple[sqlite3.Connection, datetime]:
    """What ``build_database`` returns, as a copy of the one database built for these arguments this run."""
    key = (seed, now, volume)
    with _LOCK:
        if key not in _TEMPLATES:
            _TEMPLATES[key] = build_database(seed, now, volume)
        template, generated_until = _TEMPLATES[key]
        copy = store.connect()  # the SQL functions the queries and triggers use are per connection
        template.backup(copy)
    return copy, generated_until


def copied_demo(seed: int, clock: Clock, **options: Any) -> DemoBackend:
    """``DemoBackend(seed, clock, **options)`` whose in-place builds are copies of this run's one build."""
    return DemoBackend(seed, clock, build=copy_of_build, **options)
