"""The console of ``python -m bot serve``: what it runs, said once at start-up, and nothing per turn.

The bot is started as a process (as ``./run`` starts it) in front of the fake Bot Connector, asked the same questions
twice, stopped, and its console read.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import aiohttp
import pytest

from bot.app import describe_model, running
from bot.config import Settings
from tests.support.connector_fake import FakeConnector, personal
from tests.support.playground import free_port, repo_root, start_bot


def settings(**env: str) -> Settings:
    return Settings.from_env(env, dotenv_path=None)


def test_the_model_line_names_the_endpoint_and_the_deployment_or_model() -> None:
    azure = describe_model(settings(AZURE_OPENAI_ENDPOINT="https://soc.openai.azure.com/",
                                    AZURE_OPENAI_DEPLOYMENT="gpt-4o"))
    assert "Azure OpenAI https://soc.openai.azure.com" in azure and "deployment gpt-4o" in azure
    assert "Entra ID" in azure
    keyed = describe_model(settings(AZURE_OPENAI_ENDPOINT="https://soc.openai.azure.com",
                                    AZURE_OPENAI_DEPLOYMENT="gpt-4o", AZURE_OPENAI_API_KEY="secret-key"))
    assert "API key" in keyed and "secret-key" not in keyed
    local = describe_model(settings(OPENAI_BASE_URL="http://127.0.0.1:8011/v1"))
    assert local == "OpenAI-compatible server http://127.0.0.1:8011/v1, model gpt-4o (the default: OPENAI_MODEL unset)"
    ollama = describe_model(settings(OPENAI_BASE_URL="http://127.0.0.1:11434/v1", OPENAI_MODEL="llama3.1"))
    assert ollama == "OpenAI-compatible server http://127.0.0.1:11434/v1, model llama3.1"
    assert describe_model(settings(OPENAI_API_KEY="sk-x", OPENAI_MODEL="gpt-4.1")) == "OpenAI, model gpt-4.1"
    assert describe_model(settings()).startswith("none, commands only")


def test_the_start_up_lines_name_workspace_state_queue_and_audit() -> None:
    demo = running(settings(DEMO_INBOX=".data/demo-inbox.jsonl", AUDIT_LOG_FILE=".data/audit.jsonl"))
    assert demo[0] == "workspace: the demo workspace (generated sample data, seed 42); new incidents from " \
                      ".data/demo-inbox.jsonl"
    assert "state: SQLite .data/state.db" in demo and "turns: queued in .data/turns.db" in demo
    assert "audit: .data/audit.jsonl" in demo
    live = running(settings(SENTINEL_WORKSPACE_ID="11111111-2222-3333-4444-555555555555", STATE_STORE="memory",
                            TURN_QUEUE="off", APPLICATIONINSIGHTS_CONNECTION_STRING="InstrumentationKey=abc"))
    assert live[0] == "workspace: Log Analytics workspace 11111111-2222-3333-4444-555555555555"
    assert "state: in memory (lost when the bot stops)" in live and "turns: run in this process, not queued" in live
    assert "audit: the log (stderr), one JSON line per query" in live and "telemetry: to Application Insights" in live
    assert "InstrumentationKey" not in " ".join(live)


@pytest.mark.slow
async def test_the_console_says_what_runs_once_and_nothing_per_turn(tmp_path: Path) -> None:
    connector = await FakeConnector().start()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AZURE_", "OPENAI_", "SENTINEL_", "LOG_", "AUDIT_", "APPLICATIONINSIGHTS_", "TURN_"))}
    env |= {"PORT": str(free_port()), "HOST": "127.0.0.1", "MICROSOFT_APP_ID": "", "PYTHONPATH": str(repo_root()),
            "STATE_STORE": f"sqlite:///{tmp_path}/state.db", "TURN_QUEUE_PATH": f"{tmp_path}/turns.db",
            "AUDIT_LOG_FILE": f"{tmp_path}/audit.jsonl", "DEMO_INBOX": f"{tmp_path}/inbox.jsonl",
            "WATCH_POLL_SECONDS": "0"}
    bot = await start_bot([sys.executable, "-m", "bot", "serve"], tmp_path, name="serve", env=env, cwd=tmp_path)
    try:
        questions = ["who is on call", "incidents 24h high", "who is on call", "incidents 24h high"]
        async with aiohttp.ClientSession() as http:
            for number, text in enumerate(questions, 1):
                body = personal(text, activity_id=f"console-{number}", service_url=connector.url)
                async with http.post(f"http://127.0.0.1:{bot.port}/api/messages", json=body) as answer:
                    assert answer.status in (200, 201, 202)
                await connector.wait_for(lambda sent, n=number: sum(
                    s.type == "message" and s.method == "POST" for s in sent) >= n, timeout=60)
    finally:
        await bot.stop()
        await connector.stop()
    console = (tmp_path / "serve.log").read_text(encoding="utf-8")
    lines = [line for line in console.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if "Sentinel assistant listening on" in line)
    said = "\n".join(lines[start:start + 7])
    for expected in ("workspace: the demo workspace", f"new incidents from {tmp_path}/inbox.jsonl",
                     "model: none, commands only", f"state: SQLite {tmp_path}/state.db",
                     f"turns: queued in {tmp_path}/turns.db", f"audit: {tmp_path}/audit.jsonl"):
        assert expected in said, console
    before = lines[:start]
    assert not [line for line in before if " WARNING " in line and "LOCAL MODE" not in line and "tiktoken" not in
                line], console
    turns = [line for line in lines[start + 7:] if not re.search(r"shutting down|shutdown: ", line)]
    # The demo roster's two rows broken on purpose are said once each (the first call), never again.
    assert len(turns) == 2 and all("skipped an on-call row" in line for line in turns), console
    assert "Traceback" not in console
