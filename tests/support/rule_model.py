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
    calls = calls or _plan(question, system, offered)
    if not calls:
        return oa.text("I'm your Sentinel assistant, so that one is outside my beat. I can list incidents, explain "
                       "one in detail, show alerts, alert trends and the most targeted accounts, hosts and IPs.")
    return oa.tool_calls(*calls)


_ON_CALL = r"on[ -]?call|on shift|on duty"
# "is anyone on it?", "who owns it?" alone: about the incident the conversation is on, not a new list.
_OWNER_OF_IT = (r"^\W*(?:is\s+)?(?:any(?:one|body)|someone|who(?:'s| is)?)\s+(?:on|working|owns|assigned)\b"
                r".*\b(?:it|that)\b")


def _plan(question: str, system: str, offered: set[Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    text = question.lower()
    window = next((w for pattern, w in _WINDOWS if re.search(pattern, text)), None)
    severity = next((s for pattern, s in _SEVERITY if re.search(pattern, text)), None)
    common = {k: v for k, v in (("time_window", window), ("min_severity", severity)) if v}
    if re.search(_ON_CALL, text) and (offered is None or "get_on_call" in offered):
        return [("get_on_call", {})]
    reference = re.search(r"\[(\d+)\]", text)
    if re.search(_OWNER_OF_IT, text):
        number = _referenced_incident(system, reference.group(1) if reference else None)
        if number:
            return [("get_incident_detail", {"incident_ref": number})]
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
    if re.search(r"incident|queue|came in|overnight|what happened|anyone on it", text) or (not calls and severity):
        # "what is high this week?": a severity and nothing else to look at means incidents
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
            parts.append(_detail_answer(lines))
            continue
        if head.startswith("get_on_call"):
            parts.append(_on_call_answer(lines))
            continue
        rows = [line.split("|") for line in lines if re.match(r"^\[\d+\]\|", line)]
        if head.startswith("query_incidents") and rows:
            shown = ", ".join(f"{r[0]} #{r[1]} ({r[2]}, {r[3]}, {r[4] or 'unassigned'})" for r in rows[:3])
            parts.append(f"{_count(head, 'incident')}; most severe first: {shown}.")
            if re.search(r"anyone on it|assigned|who owns|owner", question.lower()):
                parts.append(_owners(rows))
        elif head.startswith("query_alerts") and rows:
            parts.append(f"{_count(head, 'alert')}; top: " + ", ".join(f"{r[0]} {r[5]} ({r[1]})" for r in rows[:2])
                         + ".")
        elif head.startswith("get_top_entities") and rows:
            kind = next((k for k in ("host", "account", "ip") if k in question.lower()), None)
            picked = [r for r in rows if kind is None or r[1] == kind] or rows
            label = {"host": "hosts", "account": "accounts", "ip": "addresses"}.get(kind or "", "entities")
            parts.append(f"Most targeted {label}: " + ", ".join(f"{r[0]} {r[2]} ({r[3]} alerts)"
                                                                 for r in picked[:3]) + ".")
        elif head.startswith("get_alert_trend"):
            parts.append(_trend_answer(lines))
    return " ".join(p for p in parts if p) or "The queries returned nothing I can summarise."


def _count(head: str, noun: str) -> str:
    """ "1 incident", "20 of 93 incidents" from the result's first line."""
    match = re.search(r"-> (\d+)(?: of (\d+))? ", head)
    if not match:
        return f"Some {noun}s"
    total = int(match.group(2) or match.group(1))
    shown = f"{match.group(1)} of {total}" if match.group(2) else str(total)
    return f"{shown} {noun}" + ("" if total == 1 else "s")


def _owners(rows: list[list[str]]) -> str:
    """Who is on the incidents listed: "Everyone listed has an owner." or the unassigned ones."""
    unassigned = [f"{r[0]} #{r[1]}" for r in rows if not r[4].strip() or r[4].strip() in ("-", "Unassigned")]
    if not unassigned:
        owners = sorted({r[4] for r in rows})
        return f"Each has an owner: {', '.join(owners[:4])}."
    return f"Not assigned yet: {', '.join(unassigned[:5])}."


def _detail_answer(lines: list[str]) -> str:
    first = lines[1] if len(lines) > 1 else ""
    fields = dict(part.strip().split(" ", 1) for part in (lines[2] if len(lines) > 2 else "").split("|")
                  if " " in part.strip())
    number, ref = re.search(r"number (\d+)", first), re.search(r"ref (\[\d+\])", first)
    title = re.search(r"title \(untrusted text\): (.*)$", first)
    if not number:
        return ""
    owner = fields.get("owner", "-").strip()
    who = f"owned by {owner}" if owner not in ("", "-", "Unassigned") else "not assigned to anyone yet"
    named = f' "{title.group(1)[:80]}"' if title else ""
    return (f"Incident {ref.group(1) if ref else ''} #{number.group(1)}{named} ({fields.get('severity', '?')}, "
            f"{fields.get('status', '?')}) is {who}.").replace("  ", " ")


def _on_call_answer(lines: list[str]) -> str:
    rows = [line.split("|") for line in lines[2:] if line.count("|") >= 6]
    now = [f"{r[1]} ({r[3]})" for r in rows if r[0] == "now"]
    upcoming = [f"{r[1]} ({r[3]}, {r[0]})" for r in rows if r[0].startswith("from")]
    if not now:
        return "No one is on shift now." + (f" Next: {', '.join(upcoming[:2])}." if upcoming else "")
    return f"On shift now: {', '.join(now)}." + (f" Next: {', '.join(upcoming[:2])}." if upcoming else "")


def _trend_answer(lines: list[str]) -> str:
    """Totals per bin, the peak, and whether it stands out against the median."""
    totals: dict[str, int] = {}
    for line in lines[2:]:
        cells = line.split("|")
        if len(cells) == 3 and cells[2].isdigit():
            totals[cells[0]] = totals.get(cells[0], 0) + int(cells[2])
    if not totals:
        return ""
    ordered = sorted(totals.values())
    median = ordered[len(ordered) // 2]
    peak_at, peak = max(totals.items(), key=lambda item: item[1])
    verdict = "stands out" if peak > 1.5 * max(median, 1) else "is within the usual range"
    return (f"{sum(totals.values())} alerts in {len(totals)} bins, {ordered[0]} to {peak} per bin; the peak "
            f"({peak} at {peak_at} UTC) {verdict} against a median of {median}.")


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
