"""The terminal chat: in-process with the rule-based model, and `python -m bot chat` as a user runs it."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.orchestrator.prompts import EXAMPLE_DATA_REFUSAL
from bot.terminal.chat import TerminalChat
from bot.tools.toolbox import ToolBox
from tests.support import rule_model
from tests.support.openai_fake import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]


def chat_with_model(fake: FakeOpenAI, sentinel) -> tuple[TerminalChat, io.StringIO]:
    client = create_client(openai_api_key="sk-test", base_url=f"{fake.endpoint}/v1")
    orchestrator = Orchestrator(ChatModel(client, "rule-model"), ToolBox(sentinel), Memory(TokenCounter()),
                                demo=True)
    status = io.StringIO()
    return TerminalChat(sentinel, orchestrator, out=io.StringIO(), status=status), status


async def test_commands_work_without_a_model_and_say_how_to_enable_questions(demo_client) -> None:
    chat = TerminalChat(demo_client, None, out=io.StringIO(), status=io.StringIO())
    assert "AZURE_OPENAI_ENDPOINT" in chat.banner() and "OPENAI_API_KEY" in chat.banner()
    listing = await chat.answer("incidents 7d high")
    assert "[1]" in listing and "HIGH" in listing and "Demo workspace" in listing
    number = chat.conversation.references.get(1).key
    detail = await chat.answer("incident [1]")
    assert f"Incident #{number}" in detail and "Open in Sentinel" in detail
    assert "get_incident_detail(incident_ref=" in await chat.answer("/sources")
    question = await chat.answer("what happened overnight?")
    assert "OPENAI_BASE_URL" in question and "help" in question
    assert "no [99]" in await chat.answer("incident [99]")
    assert "Usage" in await chat.answer("alerts 90d")
    await chat.answer("prefer 7d high")
    assert "time_window=last_7d, min_severity=High" in await chat.answer("incidents")
    await chat.answer("clear")
    assert chat.conversation.preferences == {"time_window": "last_7d", "min_severity": "High"}


async def test_an_investigation_reads_as_the_bots_assessment_and_tables_with_whole_values(demo_client) -> None:
    chat = TerminalChat(demo_client, None, out=io.StringIO(), status=io.StringIO())
    shown = await chat.answer("investigate ws-fin-023 30d")
    assert "Investigation of host ws-fin-023, last 30d" in shown and "Assessment: " in shown
    assert "computed by the bot" in shown and "state it as given" not in shown, "words for the model, not for people"
    assert "Processes (" in shown and "Source: investigate_entity(" in shown
    assert re.search(r"(?m)^E1 .* \[\d+\] *$", shown), "the row's E number first, its [n] last, apart"
    hashes = [token for token in shown.split() if len(token) == 64 and all(c in "0123456789abcdef" for c in token)]
    assert hashes, "a file event's SHA-256 is shown whole (copied into a hunt or a block list)"
    follow = await chat.answer("investigate [1] 7d")
    assert "Investigation of" in follow


async def test_questions_go_through_the_model_with_status_on_stderr(fake_openai: FakeOpenAI, demo_client) -> None:
    fake_openai.brain = rule_model.brain
    chat, status = chat_with_model(fake_openai, demo_client)
    answer = await chat.answer("what high-severity incidents came in this week?")
    assert "most severe first: [1] #" in answer
    assert "Data sources (demo workspace" in answer and "query_incidents(time_window=last_7d" in answer
    assert status.getvalue().splitlines() == ["Thinking...", "Querying incidents..."]
    detail = await chat.answer("tell me more about [1]")
    number = chat.conversation.references.get(1).key
    assert f"#{number}" in detail and "Open in Sentinel" in detail
    assert "SecurityIncident" in await chat.answer("/sources")
    refusal = await chat.answer("give me some example alerts")
    assert refusal.startswith(EXAMPLE_DATA_REFUSAL)
    cleared = await chat.answer("/clear")
    assert "cleared" in cleared and chat.conversation.history == [] and chat.conversation.summary


@pytest.mark.slow
async def test_python_m_bot_chat_as_a_user_runs_it(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.brain = rule_model.brain
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "OPENAI_", "SENTINEL_"))}
    env |= {"OPENAI_BASE_URL": f"{fake_openai.endpoint}/v1", "OPENAI_MODEL": "rule-model"}
    lines = "which hosts were hit most this week?\nincidents 24h\n/quit\n"
    done = await _run_chat(env, lines, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Most targeted hosts: [" in done.stdout and "Finding top targeted entities..." in done.stderr
    assert "Querying incidents..." in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert "Finding top targeted" not in done.stdout, "status lines stay on stderr"


@pytest.mark.slow
async def test_log_lines_stay_out_of_the_conversation_with_a_log_file(tmp_path: Path) -> None:
    """./run chat sets LOG_FILE: the roster's warnings (two rows broken on purpose) go there, not to the terminal."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "OPENAI_", "SENTINEL_", "LOG_"))}
    plain = await _run_chat(env, "who is on call\n/quit\n", tmp_path)
    assert "WARNING" in plain.stderr, "without a log file the warnings show (what ./run chat no longer does)"
    quiet = await _run_chat(env | {"LOG_FILE": str(tmp_path / "logs" / "chat.log")}, "who is on call\n/quit\n",
                            tmp_path)
    assert quiet.returncode == 0 and "On shift" in quiet.stdout
    assert "WARNING" not in quiet.stderr + quiet.stdout
    assert "skipped an on-call row" in (tmp_path / "logs" / "chat.log").read_text(encoding="utf-8")


@pytest.mark.slow
async def test_chat_reports_bad_configuration_clearly(tmp_path: Path) -> None:
    env = dict(os.environ, SENTINEL_WORKSPACE_ID="not-a-guid")
    done = await _run_chat(env, "/quit\n", tmp_path)
    assert done.returncode == 2 and "SENTINEL_WORKSPACE_ID" in done.stderr and "Traceback" not in done.stderr


async def _run_chat(env: dict[str, str], stdin: str, cwd: Path) -> subprocess.CompletedProcess:
    import asyncio

    env = dict(env, PYTHONPATH=str(ROOT))
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "bot", "chat"], input=stdin, capture_output=True, text=True,
        timeout=120, env=env, cwd=cwd,
    )


async def test_an_unknown_reference_names_what_exists_without_asking_the_model(fake_openai: FakeOpenAI,
                                                                            demo_client) -> None:
    fake_openai.brain = rule_model.brain
    chat, _status = chat_with_model(fake_openai, demo_client)
    empty = await chat.answer("tell me more about [2]")
    assert empty.startswith("There is no [2] in this conversation.") and "incidents 24h" in empty
    await chat.answer("incidents 7d high")
    last = chat.conversation.references.items[-1]
    missing = await chat.answer("compare [1] with [99]")
    assert missing.startswith("There is no [99] in this conversation. References here: [")
    assert f"[{last.n}] incident #{last.key} " in missing
    assert fake_openai.chat_requests == [], "answered without the model"
    assert "[x]" not in await chat.answer("- [x] contained the host")  # not a reference: goes to the model
    assert len(fake_openai.chat_requests) >= 1


async def test_a_summary_in_the_terminal_with_and_without_the_model(fake_openai: FakeOpenAI, demo_client) -> None:
    chat = TerminalChat(demo_client, None, out=io.StringIO(), status=io.StringIO())
    await chat.answer("incidents 7d high")
    number = chat.conversation.references.get(1).key
    shown = await chat.answer("summary [1]")
    assert f"Summary of incident #{number} [1]" in shown and "Suggested classification: " in shown
    assert "Recommended next actions" in shown and "Timeline (UTC)" in shown and "Source: summarize_incident(" in shown
    fake_openai.brain = rule_model.brain
    narrated, status = chat_with_model(fake_openai, demo_client)
    answer = await narrated.answer(f"summarize incident {number}")
    assert f"The bot's summary of incident #{number}: suggested classification: " in answer
    assert "Summarizing the incident" in status.getvalue()
