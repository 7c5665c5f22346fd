"""Streaming benchmark (issue 16): when the analyst sees the answer start, and when it is complete, against when
the model wrote it.

Run: ./run bench   (or .venv/bin/python bench/bench_streaming.py [--runs N] [--smoke])

A 1:1 question through the real app (aiohttp server, botbuilder adapter, handler) with the fake Bot Connector
and the fake Chat Completions server: round 1 calls a tool, round 2 streams a five-sentence answer at a set pace
(first-chunk latency, then a delay per chunk). For each run, measured at the connector from the POST:
- first streamed text: the first ``streamType: streaming`` update (whole sentences only, fact-checked);
- final message: the ``streamType: final`` message with the cards;
beside the model's own times (its first sentence written; its last chunk sent), so the figures say what the
bot adds: pacing (one update a second, as Teams asks) and the check. Ratios side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer
from botbuilder.core import MemoryStorage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if not os.environ.get("TIKTOKEN_CACHE_DIR") and (ROOT.parent / "shared" / "tiktoken").is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(ROOT.parent / "shared" / "tiktoken")

from bot.app import Components, create_app  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.demo.backend import DemoBackend  # noqa: E402
from bot.orchestrator.llm import ChatModel, create_client  # noqa: E402
from bot.orchestrator.loop import Orchestrator  # noqa: E402
from bot.orchestrator.memory import Memory, TokenCounter  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.tools.toolbox import ToolBox  # noqa: E402
from tests.support import connector_fake as teams  # noqa: E402
from tests.support import openai_fake as oa  # noqa: E402

ANSWER = ("Here is the week's high-severity picture. The newest incident is first in the table below. Several are "
          "still open and need an owner. Closed ones show how they were classified. Ask for any of them by its "
          "number for the detail.")
CHUNK_CHARS = 12
# (model latency before its first chunk, delay between chunks) in seconds
SETTINGS = ((0.5, 0.05), (1.0, 0.10))
SMOKE_SETTINGS = ((0.3, 0.04),)
_ids = itertools.count(1)


async def one_run(url: str, connector: teams.FakeConnector, fake: oa.FakeOpenAI, latency: float,
                  delay: float) -> tuple[float, float, float, float]:
    """(first streamed text, final message, model's first sentence, model's last chunk), seconds from the POST."""
    connector.sent.clear()
    fake.latency_s, fake.stream_chunk_delay_s, fake.stream_chunk_chars = latency, delay, CHUNK_CHARS
    fake.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d", "min_severity": "High"})),
                oa.text(ANSWER))
    activity = teams.personal("what high-severity incidents came in this week?",
                              activity_id=f"1800000{next(_ids):06d}", service_url=connector.url)
    started = time.monotonic()
    async with aiohttp.ClientSession() as session, session.post(url, json=activity) as response:
        await response.read()
    sent = await connector.wait_for(lambda s: any(x.type == "message" for x in s), timeout=60)
    streaming = [s for s in sent if s.type == "typing" and (s.stream_info or {}).get("streamType") == "streaming"]
    final = next(s for s in sent if s.type == "message")
    if not streaming:  # the whole answer came within the progress grace period: nothing to stream
        print(f"  (a run without streamed text: {[(s.type, (s.stream_info or {}).get('streamType')) for s in sent]})")
        streaming = [final]
    # The model: two calls of ``latency`` each (round 2 starts when round 1's tool ran), then its chunks.
    chunks_to_first_sentence = ANSWER.index(". ") // CHUNK_CHARS + 1
    chunks = -(-len(ANSWER) // CHUNK_CHARS) + 2  # content chunks plus the role and finish chunks
    model_first = 2 * latency + chunks_to_first_sentence * delay
    model_done = 2 * latency + chunks * delay
    return streaming[0].at - started, final.at - started, model_first, model_done


async def main(runs: int, settings: tuple[tuple[float, float], ...]) -> None:
    begun = time.monotonic()
    connector = await teams.FakeConnector().start()
    sentinel = SentinelClient(DemoBackend(seed=7))
    await sentinel.prepare()
    print("== Streamed answers in a 1:1 chat: seconds from the request")
    print(f"{'model latency':>14} {'chunk delay':>12} | {'first text':>10} {'model 1st':>10} {'final':>8} "
          f"{'model done':>10} | {'final - done':>12}")
    gaps: list[float] = []
    try:
        async with oa.FakeOpenAI() as fake:
            client = create_client(openai_api_key="sk-bench", base_url=f"{fake.endpoint}/v1", max_retries=0)
            orchestrator = Orchestrator(ChatModel(client, "gpt-4o"), ToolBox(sentinel), Memory(TokenCounter()),
                                        demo=True)
            app = create_app(Components(Settings.from_env({}, dotenv_path=None), sentinel, orchestrator),
                             MemoryStorage())
            server = TestServer(app, host="127.0.0.1")
            await server.start_server()
            url = str(server.make_url("/api/messages"))
            try:
                for latency, delay in settings:
                    rows = [await one_run(url, connector, fake, latency, delay) for _ in range(runs)]
                    first, final, model_first, model_done = (statistics.median(column)
                                                             for column in zip(*rows, strict=True))
                    gaps.append(final - model_done)
                    print(f"{latency:14.2f} {delay:12.2f} | {first:10.2f} {model_first:10.2f} {final:8.2f} "
                          f"{model_done:10.2f} | {final - model_done:12.2f}")
            finally:
                await server.close()
    finally:
        await connector.stop()
    print(f"Medians over {runs} run(s) per row. The final message came at most {max(gaps):.2f} s after the model "
          "finished (the last streamed update waits out Teams' one-update-per-second pace).")
    print(f"Benchmark took {time.monotonic() - begun:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one quick run (figures not meaningful)")
    options = parser.parse_args()
    if options.smoke:
        print("SMOKE RUN (--smoke): one run at a short latency; the figures only show that it runs")
    asyncio.run(main(1 if options.smoke else options.runs, SMOKE_SETTINGS if options.smoke else SETTINGS))
