"""Cards the bot sends on its own: welcome, help and errors."""

from __future__ import annotations

from bot.cards.common import Element, actions, card, plain, submit, subtle, text
from bot.cards.verbs import Verb
from bot.sentinel.models import DEMO_NOTICE

COMMANDS = (
    ("incidents [window] [severity]", "Incidents created in a window, most severe first"),
    ("incidents open mine", "Filters: open, new, active, closed; mine, unassigned; newest; host, ip, account X"),
    ("incidents search WORDS", "Incidents whose title or description contains the words"),
    ("incident N", "One incident with its alerts and entities (also: incident [2])"),
    ("alerts [window] [severity]", "Recent alerts (also: alerts host WS-FIN-160, alerts open)"),
    ("entity X [window]", "One host, account, IP, hash or URL: its alerts, first and last seen"),
    ("investigate X [window]", "One account, host, IP, hash, URL or domain across the evidence tables, with the bot's "
                               "assessment (7 days unless said)"),
    ("summary N", "One incident in one step: timeline, entities' levels, similar incidents, a suggested "
                  "classification and next actions (also: summary [2])"),
    ("trend [window] [severity]", "Alert counts over time, per severity"),
    ("entities [window] [severity]", "The accounts, hosts and IPs in the most alerts"),
    ("who is on call", "Who is on shift now and next, from the OnCall watchlist (also: oncall)"),
    ("kql [window] QUERY", "Your own read-only KQL, where the access policy lets you (24h, 100 rows)"),
    ("prefer [window] [severity]", "Your defaults for this conversation (prefer reset clears them)"),
    ("watch high open", "Post new incidents matching the filters here as they arrive (watches, unwatch [N])"),
    ("more  ·  page N", "The next page of the last list (its card's Next button), or page N of it"),
    ("help", "This list"),
    ("clear", "Forget this conversation (preferences are kept)"),
)
OPTIONS = "window: 1h, 24h, 3d, 7d, 14d, 30d · severity: high, medium, low, informational (and above)"
EXAMPLE_QUESTIONS = (  # (button title, the question it sends)
    ("High incidents this week", "What high-severity incidents came in this week?"),
    ("Most-hit hosts this week", "Which hosts were hit most this week?"),
    ("Is alert volume unusual?", "Is the alert volume unusual this week?"),
    ("Alerts today", "Show me the alerts from the last 24 hours"),
)
# Each answers with rows whenever a first user presses it: in the demo, 24 h holds no High incident at some hours of
# the day, and 1 h no alert (tests/commands/test_first_hour.py presses them all).
EXAMPLE_COMMANDS = ("incidents 7d high", "incidents open mine", "alerts 24h", "entities 30d")


def error(title: str, message: str, hint: str | None = None) -> Element:
    """What happened, and what to do next."""
    body = [text(plain(title, 120), weight="bolder", color="attention", size="medium", style="heading")]
    body += [text(plain(line, 500)) for line in message.splitlines()[:6] if line.strip()]
    if hint:
        body.append(text(f"What to do next: {plain(hint, 300)}", isSubtle=True, size="small"))
    return card(body)


def welcome(demo: bool, model_enabled: bool) -> Element:
    body = [
        text("Sentinel assistant", weight="bolder", size="large", style="heading"),
        text("I answer questions about your Microsoft Sentinel workspace: incidents, alerts, alert trends and the "
             "accounts, hosts and addresses involved. Every number comes from the workspace, and each answer says "
             "which queries it ran."),
    ]
    if demo:
        body.append({"type": "Container", "style": "warning", "items": [text(DEMO_NOTICE, weight="bolder")]})
    if model_enabled:
        body.append(text("Try asking:", weight="bolder", spacing="medium"))
        body.append(actions(*(_ask(title, question) for title, question in EXAMPLE_QUESTIONS)))
    else:
        body.append({"type": "Container", "style": "warning", "spacing": "medium", "items": [
            text("Plain-language questions need a language model, and none is configured. "
                 "The commands below work without one.")]})
        body.append(actions(*(_command(command) for command in EXAMPLE_COMMANDS)))
    body += _commands()
    return card(body)


def help_card() -> Element:
    body = [text("Help", weight="bolder", size="medium", style="heading"),
            text("Ask in plain language, or use these commands:", size="small")]
    body += _commands()
    body.append(actions(*(_command(command) for command in EXAMPLE_COMMANDS), spacing="medium"))
    return card(body)


def _commands() -> list[Element]:
    body = [text("Commands", weight="bolder", separator=True, spacing="medium")]
    for command, meaning in COMMANDS:
        body += [text(command, fontType="monospace", weight="bolder", spacing="small"), subtle(meaning)]
    body.append(subtle(OPTIONS, spacing="small"))
    return body


def _ask(title: str, question: str) -> Element:
    return submit(title, {"action": Verb.ASK, "question": question})


def _command(command: str) -> Element:
    return submit(command, {"action": Verb.COMMAND, "command": command})
