"""The demo workspace backend: each read query in SQLite (its declaration's ``demo`` evaluation, in its module of
``bot.sentinel.queries``), with the semantics of its KQL.

Same windows (rows with TimeGenerated in (now - window, now]), same dedupe (latest row per incident
and per alert), same filters, caps, tie-breaking sort orders and result columns, so an answer from
the demo reads exactly like one from a real workspace. Rows later than "now" exist (the generator
writes whole days) and stay invisible until their time comes. The latest row per incident (alert)
comes from the precomputed latest-row tables (``store.py``), so a query reads about one row per
incident in its window however many updates the workspace holds.

Regeneration. The data covers whole days up to ``generated_until`` (the next UTC midnight). An hour
before that (``refresh_lead``), the next day's data is built beside the current one, in a worker
process writing a database file, and swapped in when ready; queries keep using the current data
meanwhile and never wait for a generation. Only the very first build, or a clock that jumps outside
the data's span, builds in place. SQLite work runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from bot.demo import changes as demo_changes
from bot.demo import generator, inject, oncall, store
from bot.demo.world import build_world
from bot.lifetime import die_with_parent
from bot.sentinel.client import RawTable
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import QueryError
from bot.sentinel.queries import spec_of

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
T = TypeVar("T")
# Builds a new database for (seed, now, volume) and says until when its data runs (``generated_until``).
Build = Callable[[int, datetime, int], tuple[sqlite3.Connection, datetime]]


def build_database(seed: int, now: datetime, volume: int = 1) -> tuple[sqlite3.Connection, datetime]:
    """A new database for ``now``, generated in this process, and the end of its data."""
    # The default size keeps the two-argument call (some tests memoise generate by it).
    rows = generator.generate(seed, now, volume=volume) if volume != 1 else generator.generate(seed, now)
    return (store.create_database(rows.incident_rows, rows.alert_rows, valid_from=iso(now), tables=rows.tables),
            rows.generated_until)


@dataclass(frozen=True)
class _Data:
    """One generated database and the span of "now" it can answer for."""

    conn: sqlite3.Connection
    valid_from: datetime
    generated_until: datetime
    path: Path | None = None  # the file of a database built by the worker process

    def serves(self, now: datetime) -> bool:
        return self.valid_from <= now < self.generated_until

    def close(self) -> None:
        self.conn.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


class DemoBackend:
    source = "demo"

    def __init__(self, seed: int, clock: Clock = lambda: datetime.now(UTC), *, volume: int = 1,
                 refresh_lead: timedelta = timedelta(hours=1), inbox: Path | None = None,
                 build: Build = build_database, shared: Path | None = None, changes: Path | None = None) -> None:
        self._seed = seed
        self._build = build  # how a database is built in place (tests hand out copies of one build)
        self._clock = clock
        self._volume = volume
        self._refresh_lead = refresh_lead
        self._lock = threading.Lock()  # one user of the live database at a time
        self._data: _Data | None = None
        self._on_generated: list[Callable[[sqlite3.Connection], None]] = []
        self._refresh: threading.Thread | None = None
        self._workdir: Path | None = None
        self._closed = False
        self.regenerations = 0  # swaps of data built beside the live one (tests and the benchmark read it)
        self.last_wait_s = 0.0  # how long the last query waited for the database (a generation in place, a swap)
        self.roster: list[dict[str, Any]] = oncall.roster(seed)  # the OnCall watchlist's rows (tests replace them)
        self._inbox = inbox  # new incidents another process adds (``inject``); None: only inject_incident
        self._inbox_offset = 0
        if inbox is not None:
            inject.create(inbox)  # the file says a bot reads it: new-incident refuses an inbox nobody created
        # A copy of the generated data for the other processes of this machine: the first to build it writes it,
        # the others (serve's worker processes) open it instead of generating their own.
        self._shared = shared
        self._injected: list[tuple[dict[str, Any], dict[str, Any]]] = []  # rows applied, replayed on regeneration
        # Incident changes every process of this demo made (``changes``): applied before each query, all of them to a
        # new database. None: the writer's changes stay in this process (its own journal replays them).
        self.changes = demo_changes.ChangeJournal(changes) if changes is not None else None
        self._changes_seen = 0

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def _conn(self) -> sqlite3.Connection | None:
        """The live database (tests and the benchmark look inside)."""
        return self._data.conn if self._data is not None else None

    def on_generated(self, hook: Callable[[sqlite3.Connection], None]) -> None:
        """Call ``hook`` with each newly generated database, under the lock, before it goes live (the demo
        writer re-applies the changes analysts made, which a regeneration would otherwise lose)."""
        self._on_generated.append(hook)

    def with_database(self, work: Callable[[sqlite3.Connection, datetime], T]) -> T:
        """Run ``work(database, now)`` under the backend's lock; blocking, so call it from a worker thread."""
        now = self._clock()
        with self._lock:
            return work(self._database(now), now)

    async def execute(self, query: Any, kql_text: str) -> RawTable | QueryError:
        now = self._clock()
        return await asyncio.to_thread(self._execute_sync, query, now)

    def _execute_sync(self, query: Any, now: datetime) -> RawTable:
        asked = time.perf_counter()
        with self._lock:
            self.last_wait_s = time.perf_counter() - asked
            conn = self._database(now)
            return RawTable(rows=spec_of(query.tool).demo(query, conn, now, self))

    def _database(self, now: datetime) -> sqlite3.Connection:
        """The live database for ``now`` (under the lock): built in place only when there is none for ``now``."""
        live = self._data
        if live is None or not live.serves(now):
            live = self._from_shared(now) or self._generate(now)
            old = self._go_live(live)
            if old is not None:
                old.close()
        elif now >= live.generated_until - self._refresh_lead:
            self._start_refresh(now)
        if self._inbox is not None:
            self._read_inbox(live.conn, now)
        if self.changes is not None:
            self._read_changes(live.conn)
        return live.conn

    def _read_changes(self, conn: sqlite3.Connection) -> None:
        """The changes this demo's processes wrote that this database has not seen (a restart: all of them)."""
        assert self.changes is not None
        rows, self._changes_seen = self.changes.since(self._changes_seen)
        for row in rows:
            demo_changes.apply(conn, row)
        if rows:
            conn.commit()

    def _generate(self, now: datetime) -> _Data:
        conn, generated_until = self._build(self._seed, now, self._volume)
        data = _Data(conn, now, generated_until)
        if self._shared is not None:
            try:
                store.save_shared(data.conn, self._shared, seed=self._seed, volume=self._volume,
                                  valid_from=now.isoformat(), generated_until=data.generated_until.isoformat())
            except (OSError, sqlite3.Error) as error:  # the other processes generate their own
                log.warning("could not share the demo workspace in %s (%s)", self._shared, error)
        return data

    def _from_shared(self, now: datetime) -> _Data | None:
        """The data another process of this machine generated, when it serves ``now``."""
        if self._shared is None:
            return None
        found = store.load_shared(self._shared, seed=self._seed, volume=self._volume)
        if found is None:
            return None
        conn, valid_from, generated_until = found
        data = _Data(conn, datetime.fromisoformat(valid_from), datetime.fromisoformat(generated_until))
        if not data.serves(now):
            conn.close()
            return None
        log.info("demo workspace opened from %s", self._shared)
        return data

    def _go_live(self, data: _Data) -> _Data | None:
        """Swap ``data`` in (under the lock; the hooks see it first) and return the data it replaces."""
        for incident, alert in self._injected:  # before the writer's hook, which may change them
            _add_incident(data.conn, incident, alert)
        data.conn.commit()
        for hook in self._on_generated:
            hook(data.conn)
        self._changes_seen = 0  # the new database gets every kept change at its first query
        old, self._data = self._data, data
        return old

    def _start_refresh(self, now: datetime) -> None:
        if self._refresh is not None and self._refresh.is_alive():
            return
        assert self._data is not None
        self._refresh = threading.Thread(target=self._build_next, args=(self._data.generated_until, now),
                                         name="demo-regeneration", daemon=True)
        self._refresh.start()

    def _build_next(self, day: datetime, valid_from: datetime) -> None:
        """Build the data for ``day`` (the next UTC day) in a worker process, then swap it in."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="sentinel-demo-"))
            weakref.finalize(self, shutil.rmtree, self._workdir, True)  # a backend dropped without close()
        path = self._workdir / f"workspace-{day:%Y%m%d}-{self.regenerations}.sqlite"
        # The worker ignores Ctrl+C only once its initializer runs; until then (seconds of imports on a busy machine)
        # the terminal's SIGINT would kill it with a traceback. Blocked in this thread, it is blocked in the worker
        # from its first instruction (the mask survives fork and exec); this thread only waits, so loses nothing.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=regeneration_worker, initargs=(os.getpid(),)) as pool:
                until = pool.submit(store.build_file, self._seed, day.isoformat(), self._volume, iso(valid_from),
                                    str(path)).result()
            data = _Data(store.connect(str(path)), valid_from, datetime.fromisoformat(until), path)
        except Exception:  # the next query past midnight builds in place instead
            if not self._closed:
                log.exception("regenerating the demo workspace failed")
            self._remove_workdir_if_closed()
            path.unlink(missing_ok=True)
            return
        with self._lock:
            if self._closed or (self._data is not None and self._data.generated_until >= data.generated_until):
                data.close()  # closed meanwhile, or the clock jumped and newer data was built in place
                self._remove_workdir_if_closed()
                return
            old = self._go_live(data)
            self.regenerations += 1
        if old is not None:
            old.close()  # outside the lock: freeing a big database takes a moment
        log.info("demo workspace regenerated for %s", day.date())

    def inject_incident(self, title: str, severity: str = "High", owner: str | None = None) -> int:
        """Add a new incident (status New, one alert with a host, an account and an IP) created at the clock's now,
        and return its number. Blocking: call it from a worker thread in async code. With an inbox it goes
        through the inbox file, as ``python -m bot demo new-incident`` does."""
        if self._inbox is not None:
            number = inject.append(self._inbox, title, severity, owner)
            self.prepare_sync()  # reads the inbox
            return number
        with self._lock:
            now = self._clock()
            conn = self._database(now)
            number = inject.FIRST_NUMBER + len(self._injected)
            self._apply(conn, inject.Injection.checked(number, title, severity, owner), now)
            return number

    def _read_inbox(self, conn: sqlite3.Connection, now: datetime) -> None:
        assert self._inbox is not None
        try:
            size = self._inbox.stat().st_size
        except FileNotFoundError:
            return
        if size <= self._inbox_offset:
            return
        found, self._inbox_offset = inject.read(self._inbox, self._inbox_offset)
        applied = {incident["IncidentNumber"] for incident, _ in self._injected}
        for injection in found:
            if injection.number not in applied:
                self._apply(conn, injection, now)

    def _apply(self, conn: sqlite3.Connection, injection: inject.Injection, now: datetime) -> None:
        incident, alert = inject.rows(injection, now, self._analyst(injection.owner))
        _add_incident(conn, incident, alert)
        conn.commit()
        self._injected.append((incident, alert))
        log.info("demo incident %d added: %s", injection.number, injection.severity.value)

    def _analyst(self, who: str | None) -> dict[str, Any] | None:
        """The demo analyst an owner names (UPN, email or display name, any case); None when unassigned."""
        if who is None:
            return None
        wanted = who.casefold()
        for analyst in build_world(self._seed).analysts:
            if wanted in {str(analyst[k]).casefold() for k in ("userPrincipalName", "email", "assignedTo")}:
                return analyst
        return {"objectId": None, "email": who, "assignedTo": who, "userPrincipalName": who}

    def wait_for_refresh(self, timeout: float | None = None) -> None:
        """Block until a regeneration under way is live (tests and the benchmark)."""
        if self._refresh is not None:
            self._refresh.join(timeout)

    async def prepare(self) -> None:
        """Generate the data now rather than on the first question."""
        await asyncio.to_thread(self.prepare_sync)

    def prepare_sync(self) -> None:
        with self._lock:
            self._database(self._clock())

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            if self.changes is not None:
                self.changes.close()
            if self._data is not None:
                self._data.close()
                self._data = None
        if self._refresh is None or not self._refresh.is_alive():  # else the regeneration cleans up when done
            self._remove_workdir_if_closed()

    def _remove_workdir_if_closed(self) -> None:
        if self._closed and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


def regeneration_worker(parent: int | None = None) -> None:
    """Set up the process that builds the next day's data: it dies with ``parent``, the process that started it (a
    bot killed mid-build leaves no worker holding its output open: bot/lifetime.py; this thread starts the pool
    and closes it, so it outlives the worker as the kernel's signal needs), a lower priority (on a small machine
    the queries, not the regeneration, get the CPU), and deaf to Ctrl+C, which the terminal sends to the whole
    process group: the bot stops it as it stops (closing the pool), instead of it printing a KeyboardInterrupt
    traceback."""
    if parent is not None and not die_with_parent(parent):
        os._exit(1)  # its parent is already gone: nobody wants the build
    os.nice(10)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _add_incident(conn: sqlite3.Connection, incident: dict[str, Any], alert: dict[str, Any]) -> None:
    """An injected incident's rows into a database (its triggers keep the latest-row tables right)."""
    if conn.execute("SELECT 1 FROM SecurityIncident WHERE IncidentNumber = ? LIMIT 1",
                    (incident["IncidentNumber"],)).fetchone():
        return  # already there (a replay into data that has it)
    columns = ", ".join(f'"{column}"' for column in incident)
    conn.execute(f"INSERT INTO SecurityIncident ({columns}) VALUES ({', '.join('?' for _ in incident)})",
                 list(incident.values()))
    store.add_alert(conn, alert)


