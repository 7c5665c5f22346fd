"""The "Data sources" footnote: one line per query, the KQL behind a toggle, notices, disclaimer, demo banner."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.cards.common import (
    MAX_CARD_BYTES,
    Element,
    actions,
    card,
    card_size,
    fit,
    plain,
    subtle,
    text,
    unlink,
)
from bot.sentinel.models import DEMO_NOTICE, count_label

MAX_SOURCES = 8
MAX_NOTICES = 5
# Per query: the whole KQL the query ran, so it can be copied into Sentinel; fewer characters only when the
# footnote would not fit the card size limit, and then the card says so (whole lines are kept).
MAX_KQL_CHARS = 20_000
DISCLAIMER = "AI-generated analysis: verify it against the source data before you act on it."


@dataclass(frozen=True)
class SourceLine:
    """One query behind an answer: a readable line ("query_incidents(...) on Log Analytics, 12 rows, 340 ms")
    and the exact KQL."""

    text: str
    kql: str = ""


def footer(sources: Sequence[SourceLine], *, demo: bool, disclaimer: bool, notices: Sequence[str]) -> Element | None:
    """The footnote card, or None when there is nothing to show. The demo banner labels data: an answer that ran no
    query and has no disclaimer or notice gets no footnote (a card holding only the banner says nothing)."""
    if not (sources or disclaimer or notices):
        return None
    return fit(lambda kql_chars: _footer(sources[:MAX_SOURCES], demo, disclaimer, notices, kql_chars), MAX_KQL_CHARS)


def attach(result_card: Element, footnote: Element) -> Element | None:
    """The result card with the footnote at its end, so an answer is one message: None when the two would
    not fit one card (then they go as two)."""
    combined = dict(result_card)
    combined["body"] = [*result_card.get("body", []),
                        {"type": "Container", "separator": True, "spacing": "large", "items": footnote["body"]}]
    return combined if card_size(combined) <= MAX_CARD_BYTES else None


def _footer(sources: Sequence[SourceLine], demo: bool, disclaimer: bool, notices: Sequence[str],
            kql_chars: int) -> Element:
    body: list[Element] = []
    if demo:
        body.append({"type": "Container", "style": "warning", "items": [text(DEMO_NOTICE, weight="bolder")]})
    if notices:  # on the warning background in the default text colour: yellow text on white is hard to read
        body.append({"type": "Container", "style": "warning", "items": [
            text(plain(notice, 300), size="small") for notice in notices[:MAX_NOTICES]]})
    if len(notices) > MAX_NOTICES:
        body.append(subtle(f"{count_label(len(notices) - MAX_NOTICES, 'more notice')} not shown."))
    if disclaimer:
        body.append(text(DISCLAIMER, size="small", isSubtle=True))
    if sources:
        body.append(text("Data sources", size="small", weight="bolder", separator=bool(body)))
    targets = [f"kql-{index}" for index, source in enumerate(sources, start=1) if source.kql.strip()]
    if targets:
        # The button comes before what it opens, so the query appears below it, where the reader looks.
        toggle = {"type": "Action.ToggleVisibility", "title": "Show query" if len(targets) == 1 else "Show queries",
                  "targetElements": targets}
        body.append(actions(toggle, spacing="small"))
    for index, source in enumerate(sources, start=1):
        body.append(subtle(plain(source.text, 300)))
        if source.kql.strip():
            body.append({"type": "Container", "id": f"kql-{index}", "isVisible": False,
                         "items": kql_lines(source.kql, kql_chars)})
    return card(body)


def kql_lines(kql: str, limit: int) -> list[Element]:
    """The query in monospace, one line per block. TextRuns are not read as markdown, so `*`, `_` and `[`
    stay as typed and the query can be copied; links and tags are still broken in case a client does. When the
    card's size limit leaves room for only part of it, whole lines are shown and a note says how much."""
    lines = [line for line in kql.splitlines() if line.strip()]
    shown: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > limit:
            break
        shown.append(line)
        used += len(line) + 1
    blocks: list[Element] = [{"type": "RichTextBlock", "inlines": [
        {"type": "TextRun", "text": _code(line), "fontType": "monospace", "size": "small"}]} for line in shown]
    if len(shown) < len(lines):
        blocks.append(subtle(f"Shortened to fit the card: {len(shown)} of {len(lines)} lines shown. The whole query: "
                             "ask again for this one result alone, or run ./run kql with the tool's arguments."))
    return blocks


def _code(line: str) -> str:
    if not line.isprintable():
        line = "".join(ch if ch.isprintable() else " " for ch in line)
    body = line.lstrip(" ")
    indent = "\u00a0" * (len(line) - len(body))  # kept: plain spaces at the start of a block are dropped
    return indent + unlink(body)
