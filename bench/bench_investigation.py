"""Entity investigation benchmark: an investigation's wall time (its evidence queries run concurrently) and each
evidence query's median, on the demo workspace at 1x and 10x the incidents per day; and the tool definitions' tokens
sent on every model call, with and without ``investigate_entity``.

Run: ./run bench   (or .venv/bin/python bench/bench_investigation.py [--runs N] [--volumes 1,10] [--smoke])
Goal (issue 25): an investigation under 100 ms median at 1x. The entities investigated are the busiest account, host
and IP of the demo's alerts; the evidence tables' row counts are printed (until the demo generates them they are
empty, and the figures are the queries' fixed cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# tiktoken cannot download its encodings here; use the shared offline copy, as ./run does.
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

import tiktoken  # noqa: E402

from bot.investigation.run import TOOL, investigate, plan  # noqa: E402
from bot.orchestrator.llm import tool_entry  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.demo.backend import DemoBackend  # noqa: E402
from bot.sentinel.models import QueryResult  # noqa: E402
from bot.sentinel.params import TimeWindow  # noqa: E402
from bot.sentinel.queries.evidence import EVIDENCE  # noqa: E402
from bot.sentinel.queries.evidence.entity import detect  # noqa: E402
from bot.tools.registry import TOOLS  # noqa: E402

GOAL_MS = 100.0  # an investigation's median at 1x
TABLES = sorted({spec.demo.__self__.table if hasattr(spec.demo, "__self__") else spec.name for spec, _ in EVIDENCE})


def tool_tokens() -> tuple[int, int]:
    """Tokens of the tool definitions sent on every model call (changes possible), without and with the tool."""
    encoding = tiktoken.get_encoding("o200k_base")

    def tokens(tools: list) -> int:
        return len(encoding.encode(json.dumps([tool_entry(t) for t in tools], separators=(",", ":"))))
    offered = list(TOOLS.offered(writes=True))
    return tokens([t for t in offered if t.name != TOOL]), tokens(offered)


async def entities(client: SentinelClient) -> list[str]:
    top = await client.get_top_entities(time_window="last_30d", limit=50)
    assert isinstance(top, QueryResult)
    picked = []
    for kind in ("account", "host", "ip"):
        for record in top.records:
            if record.type == kind:
                try:
                    detect(record.value)
                except ValueError:
                    continue
                picked.append(record.value)
                break
    return picked


async def measure(volume: int, runs: int, now: datetime) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    backend = DemoBackend(seed=7, clock=lambda: now, volume=volume)
    backend.prepare_sync()
    conn = backend._conn  # the benchmark reads the tables' sizes straight from the database
    assert conn is not None
    sizes = ", ".join(f"{t} {conn.execute(f'SELECT COUNT(*) FROM {t}').fetchone()[0]}"  # noqa: S608 (our names)
                      for t in ("SigninLogs", "AuditLogs", "DeviceProcessEvents", "EmailEvents",
                                "ThreatIntelIndicators"))
    print(f"\nDemo workspace at {volume}x: {sizes} rows")
    client = SentinelClient(backend)
    wall: dict[str, list[float]] = {}
    each: dict[str, list[float]] = {}
    for value in await entities(client):
        entity = detect(value)
        for _ in range(runs):
            started = time.perf_counter()
            result = await investigate(client, {"entity": value})
            wall.setdefault(f"{entity.kind.value} {value}", []).append((time.perf_counter() - started) * 1000)
            assert isinstance(result, QueryResult), result
            for tool, arguments in plan(entity, TimeWindow.LAST_7D):
                started = time.perf_counter()
                alone = await client.run(tool, arguments)
                assert isinstance(alone, QueryResult), alone
                each.setdefault(tool, []).append((time.perf_counter() - started) * 1000)
    await client.close()
    return wall, each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--volumes", default="1,10")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    runs, volumes = (2, [1]) if args.smoke else (args.runs, [int(v) for v in args.volumes.split(",")])
    started = time.perf_counter()
    before, after = tool_tokens()
    print("== Tool definitions sent on every model call (o200k_base tokens)")
    print(f"without {TOOL}: {before}; with it: {after} (+{after - before})")
    now = datetime.now(UTC).replace(microsecond=0)
    results = {volume: asyncio.run(measure(volume, runs, now)) for volume in volumes}
    print("\n== Investigation wall time (evidence queries concurrent), ms")
    print(f"{'volume':>6} {'entity':<48} {'median':>8} {'p90':>8}")
    for volume, (wall, _) in results.items():
        for entity, timings in wall.items():
            p90 = statistics.quantiles(timings, n=10)[-1] if len(timings) > 1 else timings[0]
            print(f"{volume:>5}x {entity[:48]:<48} {statistics.median(timings):>8.1f} {p90:>8.1f}")
    print("\n== Each query alone, median ms over the entities that run it")
    print(f"{'query':<28}" + "".join(f" {f'{v}x':>8}" for v in volumes))
    for tool in results[volumes[0]][1]:
        print(f"{tool:<28}" + "".join(f" {statistics.median(results[v][1][tool]):>8.1f}" for v in volumes))
    worst = max(statistics.median(t) for t in results[volumes[0]][0].values())
    print(f"\nSlowest investigation median at {volumes[0]}x: {worst:.1f} ms; goal under {GOAL_MS:.0f} ms: "
          f"{'met' if worst < GOAL_MS else 'NOT met'}")
    print(f"Benchmark took {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
