"""Durable turns (issue 13): two bot instances, one killed with SIGKILL mid-run and restarted; and the web front alone.

Run: .venv/bin/python bench/bench_durable.py [--conversations N] [--messages M] [--seed S] [--smoke]

Two ``python -m bot serve`` processes with TURN_QUEUE=azure and Blob state on Azurite (tests/azurite), behind
the round-robin proxy of tests/support/round_robin.py on 127.0.0.1; the fake Bot Connector answers their
replies. 20 conversations send 10 activities each (commands, so no model is involved; every third a card press, an
Action.Execute invoke answered once its turn is queued, issue 36), 10% of deliveries are
repeated to the other instance, and instance A gets SIGKILL while turns run (see tests/support/durable_rig.py
for the three parts of the run). Twice: with the workers in the web processes, and with the web processes
taking no turns and a ``python -m bot worker`` process beside each (killed and restarted with it).
Then the same on the local queue (TURN_QUEUE=local): two web processes of one machine sharing the SQLite queue and
state, each starting its own worker process (TURN_WORKER_PROCESSES=1), one killed with its worker.
Printed: lost, answered twice, out of order (goal: all 0), the time from the kill until every turn sent
before it was answered (recovery: bounded by the 15 s lease and visibility of the killed instance's turns), A's
restart time, and the acknowledgement times through the proxy.

Then the web front alone (tests/support/durable_rig.py ``front_acks``), on each queue: one web process that only
checks and enqueues, one ``python -m bot worker`` beside it. Printed: acknowledgement p50/p99 for a burst of 50
conversations it has not seen and the same 50 again (goal p99 < 50 ms), then for steady open-loop rates (turns/s
offered, answered, p50/p99), the highest rate whose p99 stays under 50 ms, and the front's CPU per activity. On Azure
each enqueue is two Storage requests (the conversation's next number, then the queue message; a conversation's first
adds creating its counter), so there the figures are the Azure SDK's CPU and Azurite's speed more than the bot's; on
the local queue an enqueue is a row in a commit shared with the enqueues that arrived with it.

``--smoke`` runs 3 conversations of 3 messages with separate worker processes only, and the fronts at tiny sizes, so
CI can tell that the benchmark (and ``python -m bot worker``) still runs (tests/house/test_benchmarks.py); its figures
are not meaningful.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import durable_rig  # noqa: E402 - after the path is set
from tests.support.azurite import AZURITE_ALL  # noqa: E402

ACK_GOAL_MS = 50.0


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


async def main(conversations: int, messages: int, seed: int, smoke: bool = False) -> int:
    if not AZURITE_ALL.exists():
        print("Azurite is not installed: npm ci --prefix tests/azurite", file=sys.stderr)
        return 2
    if smoke:
        print(f"SMOKE RUN (--smoke): {conversations} conversations of {messages} messages; the figures only show "
              "that it runs")
    failed = False
    # The smoke run takes the separate workers only: the test suite runs the in-web workers itself.
    runs = [("azure", True)] if smoke else [("azure", False), ("azure", True)]
    for queue, separate in [*runs, ("local", True)]:
        with tempfile.TemporaryDirectory(prefix="bench-durable-") as workdir:
            figures = await durable_rig.run(Path(workdir), conversations=conversations, messages=messages,
                                            seed=seed, answer_timeout_s=180, separate_workers=separate, queue=queue,
                                            presses=True)
        where = "separate worker processes (python -m bot worker)" if separate else "workers in the web processes"
        where = (f"Azure Storage (Azurite), {where}: 2 instances" if queue == "azure" else
                 "the local queue (SQLite), a worker process started by each web process: 2 web processes")
        print(f"== Durable turns on {where}, {conversations} conversations x {messages} activities (a third presses), "
              f"{figures.repeated} of {figures.deliveries} deliveries repeated to the other instance, "
              f"instance A killed (SIGKILL) with {figures.held_at_kill} turns' typing indicators held")
        print(f"lost {figures.lost}, answered twice {figures.twice}, out of order {figures.out_of_order}; "
              f"goal all 0: {verdict(figures.lost == figures.twice == figures.out_of_order == 0)}; "
              f"answered just before the kill and again after it (at least once): {figures.answered_again_at_kill}")
        print(f"Recovery: every turn sent before the kill answered {figures.recovery_s:.1f} s after it "
              f"(instance A restarted and ready in {figures.restart_s:.1f} s)")
        acks = figures.acks_ms
        print(f"Acknowledgement through the proxy: median {statistics.median(acks):.1f} ms, "
              f"p99 {figures.ack_p99_ms:.1f} ms over {len(acks)} deliveries; whole run {figures.elapsed_s:.1f} s")
        failed = failed or not figures.lost == figures.twice == figures.out_of_order == 0
    for queue, rates in (("azure", (10, 25, 50, 100)), ("local", (25, 50, 100, 150))):
        with tempfile.TemporaryDirectory(prefix="bench-front-") as workdir:
            fronts = await durable_rig.front_acks(Path(workdir), burst=5 if smoke else 50,
                                                  rates=(5,) if smoke else rates,
                                                  rate_seconds=1.0 if smoke else 3.0, queue=queue)
        print_front(fronts, "Azure Storage (Azurite)" if queue == "azure" else "the local queue (SQLite)")
    return 1 if failed else 0


def print_front(figures: durable_rig.AckFigures, where: str) -> None:
    p99 = durable_rig.percentile
    burst = len(figures.burst_new_ms)
    print(f"== The web front alone on {where}: enqueues only, turns in a separate python -m bot worker; "
          f"goal ack p99 < {ACK_GOAL_MS:.0f} ms")
    for label, acks in ((f"burst of {burst} conversations it has not seen", figures.burst_new_ms),
                        (f"burst of the same {burst} again", figures.burst_known_ms)):
        print(f"{label:<48} ack p50 {p99(acks, 50):7.1f} ms  p99 {p99(acks, 99):7.1f} ms  "
              f"{verdict(p99(acks, 99) < ACK_GOAL_MS)}")
    print(f"{'offered turns/s':>16} {'sent':>5} {'answered/s':>11} {'ack p50 ms':>11} {'ack p99 ms':>11}")
    for rate in figures.rates:
        print(f"{rate.offered_per_s:>16.0f} {rate.sent:>5} {rate.answered_per_s:>11.1f} {rate.ack_p50_ms:>11.1f} "
              f"{rate.ack_p99_ms:>11.1f}")
    within = [r.offered_per_s for r in figures.rates if r.ack_p99_ms < ACK_GOAL_MS]
    print(f"Highest steady rate with ack p99 < {ACK_GOAL_MS:.0f} ms: "
          f"{f'{max(within):.0f} turns/s' if within else 'none of those tried'}; "
          f"the front's CPU per activity {figures.front_cpu_ms:.2f} ms")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.conversations, args.messages = 3, 3
    sys.exit(asyncio.run(main(args.conversations, args.messages, args.seed, args.smoke)))
