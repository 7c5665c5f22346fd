"""Virtual time for code that takes a clock and a sleep: each sleep is recorded and moves the clock on at once."""

from __future__ import annotations

import asyncio


class VirtualClock:
    """``now()`` and ``sleep()`` for one test: time passes only when someone sleeps (each sleep recorded)."""

    def __init__(self, sleeps: list[float] | None = None, start: float = 1000.0) -> None:
        self.sleeps = sleeps if sleeps is not None else []
        self._now = start

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += seconds
        await asyncio.sleep(0)
