"""A rule-based stand-in for the language model, served by the fake Chat Completions server.

It reads the analyst's last message, picks tools by keywords (the way a real model would use the tool
descriptions), and answers by citing the rows the tools returned, so every number it says is
grounded. Used for end-to-end tests and local demos without a model:

    python -m tests.support.rule_model --port 8011
    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 ./run chat
"""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

from tests.support import openai_fake as oa

_WINDOWS = [
    (r"\b(last|past)\s+hour\b|\b1h\b", "last_1h"),
    (r"\b3\s*d(ays)?\b|three days", "last_3d"),
    (r"\bweek\b|\b7\s*d(ays)?\b", "last_7d"),
    (r"\b14\s*d(ays)?\b|two weeks|fortnight", "last_14d"),
    (r"\bmonth\b|\b30\s*d(ays)?\b", "last_30d"),
    (r"overnight|today|\b24\s*h|yesterday|last day", "last_24h"),
]
_SEVERITY = [(r"\bhigh\b", "High"), (r"\bmedium\b", "Medium"), (r"\blow\b", "Low")]


def brain(body: dict[str, Any]) -> oa.Step:
    messages = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user < 0:
        return oa.text("Hello! Ask me about your Sentinel incidents and alerts.")
    question = str(messages[last_user].get("content", ""))
    results = [m for m in messages[last_user + 1:] if m.get("role") == "tool"]
    if not body.get("tools") or results:
        return oa.text(_answer(question, results))
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    calls = _plan_change(question, system) if "assign_incident" in offered else []
    calls = calls or _plan(question, system)
    if not calls:
        return oa.text("I'm your Sentinel assistant, so that one is outside my beat. I can list incidents, explain "
                       "one in detail, show alerts, alert trends and the most targeted accounts, hosts and IPs.")
    return oa.tool_calls(*calls)


def _plan(question: str, system: str) -> list[tuple[str, dict[str, Any]]]:
    text = question.lower()
    window = next((w for pattern, w in _WINDOWS if re.search(pattern, text)), None)
    severity = next((s for pattern, s in _SEVERITY if re.search(pattern, text)), None)
    common = {k: v for k, v in (("time_window", window), ("min_severity", severity)) if v}
    reference = re.search(r"\[(\d+)\]", text)
    if reference or "that incident" in text:
        number = _referenced_incident(system, reference.group(1) if reference else None)
        if number:
            return [("get_incident_detail", {"incident_ref": number})]
    named = re.search(r"(?:incident\s*#?|#)(\d{2,})", text)
    if named:
        return [("get_incident_detail", {"incident_ref": named.group(1)})]
    calls: list[tuple[str, dict[str, Any]]] = []
    if re.search(r"trend|volume|unusual|spike|over time", text):
        calls.append(("get_alert_trend", dict(common)))
    if re.search(r"host|user|account|entit|\bips?\b|targeted|hit most", text):
        calls.append(("get_top_entities", dict(common)))
    if re.search(r"\balerts?\b|detection", text) and not calls:
        calls.append(("query_alerts", dict(common)))
    if re.search(r"incident|queue|came in|overnight|what happened|anyone on it", text):
        calls.append(("query_incidents", dict(common)))
    return calls


def _plan_change(question: str, system: str) -> list[tuple[str, dict[str, Any]]]:
    """Incident changes asked for in plain words (the write tools only propose; the analyst confirms)."""
    text = question.lower()
    reference = re.search(r"\[(\d+)\]", text)
    named = re.search(r"(?:incident\s*#?|#)(\d{2,})", text)
    number = named.group(1) if named else _referenced_incident(system, reference.group(1) if reference else None) \
        if (reference or re.search(r"\b(that|this) incident\b|\bit\b", text)) else None
    if not number:
        return []
    if re.search(r"\bassign\b.*\b(me|myself)\b|\btake (it|that|this)\b", text):
        return [("assign_incident", {"incident_ref": number, "assignee": "me"})]
    severity = re.search(r"\b(raise|lower|set|change)\b.*\b(high|medium|low|informational)\b", text)
    if severity:
        return [("set_incident_severity", {"incident_ref": number, "severity": severity.group(2).title()})]
    if re.search(r"\breopen\b", text):
        return [("set_incident_status", {"incident_ref": number, "status": "Active"})]
    return []


def _referenced_incident(system: str, n: str | None) -> str | None:
    if n is not None:
        match = re.search(rf"^\[{n}\] incident #(\d+)", system, re.MULTILINE)
        return match.group(1) if match else None
    match = re.search(r'"that incident" most likely means incident (\d+)', system)
    return match.group(1) if match else None


def _answer(question: str, results: list[dict[str, Any]]) -> str:
    if not results:
        return "I have no query results to go on for that."
    parts = []
    for message in results:
        lines = str(message.get("content", "")).splitlines()
        head = lines[0] if lines else ""
        if head.startswith(("Proposed", "Not proposed")):
            parts.append(head.split(" Tell the analyst")[0])
            continue
        if "ERROR" in head:
            parts.append("A query failed: " + head.split("ERROR", 1)[1].strip())
            continue
        if "no rows" in head:
            parts.append("Nothing matched. Try a wider time window or a lower minimum severity.")
            continue
        if head.startswith("get_incident_detail"):
            number = re.search(r"number (\d+)", lines[1] if len(lines) > 1 else "")
            ref = re.search(r"ref (\[\d+\])", lines[1] if len(lines) > 1 else "")
            status = lines[2] if len(lines) > 2 else ""
            if number:
                parts.append(f"Incident {ref.group(1) if ref else ''} #{number.group(1)}: {status}.".replace("  ", " "))
            continue
        rows = [line.split("|") for line in lines if re.match(r"^\[\d+\]\|", line)]
        if head.startswith("query_incidents") and rows:
            shown = ", ".join(f"{r[0]} #{r[1]} ({r[2]}, {r[3]})" for r in rows[:3])
            parts.append(f"{_count(head)} incidents; most severe first: {shown}.")
        elif head.startswith("query_alerts") and rows:
            parts.append(f"{_count(head)} alerts; top: " + ", ".join(f"{r[0]} {r[5]} ({r[1]})" for r in rows[:2]) + ".")
        elif head.startswith("get_top_entities") and rows:
            parts.append("Most targeted: " + ", ".join(f"{r[0]} {r[2]} ({r[3]} alerts)" for r in rows[:3]) + ".")
        elif head.startswith("get_alert_trend"):
            counts = [int(line.split("|")[2]) for line in lines[2:] if line.count("|") == 2]
            if counts:
                parts.append(f"Alert counts per bin range from {min(counts)} to {max(counts)}.")
    return " ".join(parts) or "The queries returned nothing I can summarise."


def _count(head: str) -> str:
    match = re.search(r"-> (\d+(?: of \d+)?) ", head)
    return match.group(1) if match else "Some"


async def _serve(port: int) -> None:
    server = oa.FakeOpenAI(brain=brain)
    await server.start(port=port)
    print(f"rule-based model listening on {server.endpoint}/v1 (Ctrl+C to stop)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8011)
    asyncio.run(_serve(parser.parse_args().port))
