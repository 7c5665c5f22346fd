"""Leases that do not trust wall clocks (issue 28): a worker whose clock jumps an hour, forwards or back, while turns
run steals no live lease or turn and commits nothing after losing one; on the local queue (SQLite) and on Azure
Storage (Azurite). The workload is tests/support/skewed_workers.py; the unit tests below pin each rule."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.turns.contract import Envelope, LeaseLost, LockState, Sightings
from bot.turns.local_queue import LocalTurnQueue
from tests.support import skewed_workers


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.slow
@pytest.mark.parametrize("jump_s", [3600, -3600])
async def test_local_queue_a_worker_whose_clock_jumps_an_hour_duplicates_and_loses_nothing(
        tmp_path: Path, jump_s: int) -> None:
    figures = await skewed_workers.run(tmp_path, jump_s=jump_s, timeout_s=30)
    assert (figures.twice, figures.lost, figures.lost_saves, figures.tracebacks) == (0, 0, 0, 0), figures
    assert figures.by_skewed and figures.by_steady, f"both workers took turns: {figures}"


@pytest.mark.slow
@pytest.mark.parametrize("jump_s", [3600, -3600])
async def test_azure_queue_a_worker_whose_clock_jumps_an_hour_duplicates_and_loses_nothing(
        tmp_path: Path, jump_s: int, azurite: str) -> None:
    figures = await skewed_workers.run(tmp_path, jump_s=jump_s, queue="azure", connection_string=azurite,
                                       timeout_s=40)
    assert (figures.twice, figures.lost, figures.lost_saves, figures.tracebacks) == (0, 0, 0, 0), figures
    assert figures.by_skewed and figures.by_steady, f"both workers took turns: {figures}"


def test_sightings_count_only_this_process_s_own_looks_and_a_jump_adds_little() -> None:
    clock = Clock()
    seen = Sightings(clock, max_step_s=2.0)
    assert seen.unchanged_for("lease", 1) == 0.0, "a first look counts nothing, whatever the clock says"
    clock.now += 3600
    assert seen.unchanged_for("lease", 1) == 2.0, "a jump forward adds one step at most"
    clock.now -= 7200
    assert seen.unchanged_for("lease", 1) == 2.0, "a jump back adds nothing"
    clock.now += 1
    assert seen.unchanged_for("lease", 1) == 3.0
    assert seen.unchanged_for("lease", 2) == 0.0, "a new version starts again"


async def test_a_live_lease_is_not_taken_by_a_process_whose_clock_jumps_and_a_hung_one_is(tmp_path: Path) -> None:
    clock = Clock()
    steady = LocalTurnQueue.open(tmp_path / "turns.db")
    skewed = LocalTurnQueue.open(tmp_path / "turns.db", clock=clock)
    await steady.ensure()
    try:
        held = await steady.lease("a:chat")
        assert held is not None
        held._renewer.cancel()  # renewed by hand below
        await held.write(LockState(next=2))
        for _ in range(20):  # 20 looks a jumped hour apart: each adds at most 2 s, and each renewal starts again
            clock.now += 3600
            assert await skewed.lease("a:chat") is None, "held by a live, renewing worker"
            if _ % 3 == 2:
                assert await steady.call(steady.renew_lease, held)
        for _ in range(8):  # the holder hangs: no renewal for 8 looks of 2 s: 16 s of watching it stand still
            clock.now += 3600
            taken = await skewed.lease("a:chat")
            if taken is not None:
                break
        assert taken is not None, "a lease that stopped being renewed is taken over"
        assert (await taken.read()).next == 2 and taken.epoch == held.epoch + 1
        for write in (held.read(), held.write(LockState(next=9)),
                      steady.claim(Envelope("a:chat", "1", 2, {}, {}), "7", held)):
            with pytest.raises(LeaseLost):
                await write
        assert held.lost and not await steady.call(steady.renew_lease, held), "the old holder commits nothing"
        await held.release()
        assert (await taken.read()).next == 2, "its release does not free the new holder's lease"
        assert await steady.lease("a:chat") is None
        await taken.release()
    finally:
        await steady.close()
        await skewed.close()


async def test_a_taken_turn_is_not_taken_again_by_a_process_whose_clock_jumps_while_its_holder_keeps_it(
        tmp_path: Path) -> None:
    clock = Clock()
    steady = LocalTurnQueue.open(tmp_path / "turns.db")
    skewed = LocalTurnQueue.open(tmp_path / "turns.db", clock=clock)
    await steady.ensure()
    try:
        await steady.enqueue("a:chat", "1", {}, {})
        [held] = await steady.take(8)
        for look in range(20):
            clock.now += 3600 if look % 2 else -3600
            assert await skewed.take(8) == [], "hidden while its holder keeps it"
            if look % 3 == 2:
                await steady.keep(held)
        taken: list[object] = []
        for _ in range(9):  # its holder stopped keeping it: 15 s of watching (2 s a look)
            clock.now += 3600
            taken = list(await skewed.take(8))
            if taken:
                break
        assert len(taken) == 1, "a turn its holder stopped keeping reappears"
        await steady.done(held)
        assert await steady.waiting() == 1, "the old holder's receipt deletes nothing"
    finally:
        await steady.close()
        await skewed.close()


@pytest.mark.slow
async def test_azure_markers_age_by_storage_s_clock(azurite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker's age is its Last-Modified against the Date of Storage's answer: this machine's clock is not read."""
    from bot.turns import azure_queue
    from bot.turns.azure_queue import AzureTurnQueue

    monkeypatch.setattr(azure_queue, "MARKER_TTL_S", 1)
    turns = AzureTurnQueue.open(queue_name="markers", container="markers", connection_string=azurite)
    await turns.ensure()
    try:
        envelope = Envelope("a:chat", "17", 0, {}, {})
        assert await turns.claim(envelope, "1")
        assert not await turns.claim(envelope, "2"), "a repeat within the time to live"
        await asyncio.sleep(2.1)  # Storage's dates count whole seconds
        assert await turns.claim(envelope, "2"), "older than its time to live by Storage's clock"
        assert not await turns.claim(envelope, "3")
    finally:
        await turns.close()


async def test_a_worker_whose_lease_is_taken_over_mid_turn_commits_nothing_and_logs_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Its turn ran, but the lease moved on (its holder had hung): neither the conversation's next number nor the
    turn's deletion is written, and the worker says so in one line, without a traceback."""
    import sqlite3

    from bot.turns.worker import TurnWorker

    turns = LocalTurnQueue.open(tmp_path / "turns.db")
    await turns.ensure()
    ran: list[str] = []

    async def run(envelope: Envelope) -> None:
        ran.append(envelope.activity_id)
        with sqlite3.connect(tmp_path / "turns.db") as db:  # another worker takes the lease over meanwhile
            db.execute("UPDATE leases SET holder = 'other:1', epoch = epoch + 1")

    async def tell(envelope: Envelope, text: str) -> None:
        pass

    await turns.enqueue("a:chat", "1", {}, {})
    await turns.enqueue("a:chat", "2", {}, {})
    worker = TurnWorker(turns, run, tell)
    working = asyncio.ensure_future(worker.run(grace_s=0))
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while not ran or worker.held:
            assert asyncio.get_running_loop().time() < deadline, "timed out"
            await asyncio.sleep(0.02)
    finally:
        worker.stop()
        await working
    assert ran == ["1"], "no turn starts under a lost lease"
    assert await turns.waiting() == 2, "nothing deleted"
    with sqlite3.connect(tmp_path / "turns.db") as db:
        assert db.execute("SELECT state FROM leases").fetchone()[0] == '{"next": 0, "tries": 1}', "next not moved"
    assert not [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "lost a conversation's lease to another worker; leaving its turns to that worker"]
    await turns.close()
