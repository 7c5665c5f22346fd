"""Shared pieces of every card: safe text, ages, severity styles, tables, buttons, headers and size.

Titles, descriptions, alert names, entity values and owners are written by whoever triggered the
alert, so they are data, never markup: ``plain`` flattens them to one printable line, breaks the
markdown Teams renders in TextBlocks and FactSets, and cuts them to a width. Text the cards write
themselves never contains markdown either, so a hostile value cannot pair up with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.cards.inert import holds_url, is_url_token, unlink, unlinked_urls
from bot.cards.verbs import Verb
from bot.sentinel.models import QueryMetadata, QueryResult, one_line
from bot.sentinel.params import PAGE_ROWS

# The "generally 28 KB" card limit (a Microsoft Q&A answer; 28 KB is also the documented incoming-webhook
# limit). Teams' bot message limit is higher (Microsoft Learn, "Format your bot messages").
MAX_CARD_BYTES = 28_000
MAX_TABLE_ROWS = PAGE_ROWS  # a list card shows one page; the Next button and "more" show the next
RefFor = Callable[[str, str], "int | None"]  # (kind, key) -> the conversation's [n]
Element = dict[str, Any]

SEVERITIES = ("High", "Medium", "Low", "Informational")
# Container styles, not text colours: Teams draws each style's background from its light, dark or high-contrast
# theme and keeps the default text colour readable on it, while coloured text (the yellow "warning" above all)
# is hard to read on a white card and shifts with the theme.
SEVERITY_STYLE = {"High": "attention", "Medium": "warning", "Low": "accent"}
SEVERITY_SHORT = {"Informational": "Info"}

_HTML_ENTITY = re.compile(r"&(?=#?\w{1,10};)")  # &lt;at&gt; must not turn back into <at>
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")  # _italic_ (snake_case stays)
# A "*" that can open emphasis (before a non-space) and a later one that can close it (after a non-space): only then
# are the stars markup to Teams' markdown.
_EMPHASIS = re.compile(r"\*(?=\S).*?(?<=\S)\*")
_UNDERSCORES = re.compile(r"(?<![0-9A-Za-z])_(?=\S).*?(?<=\S)_(?![0-9A-Za-z])")  # the same with "_", at word edges
_NUMBERED = re.compile(r"^(\d{1,9}[.)]) ")  # "1. " would start a numbered list
# heading, quote, list, rule: "#" and ">" always; "-", "+", "=", "*" only before a space or as a rule ("+1 425 555"
# is a phone number, kept as typed so it can be dialled and copied)
_LEADING = str.maketrans({"#": "＃", ">": "›", "-": "‐", "+": "＋", "=": "＝", "*": "∗"})


def plain(value: object, width: int = 80) -> str:
    """``value`` as inert text: one printable line, no markdown Teams would render and no live link
    (``bot.cards.inert``), at most ``width`` chars."""
    text = one_line(value, width * 8 + 256)  # cut to ``width`` below, after the replacements
    text = unlink(text)
    if _EMPHASIS.search(text):  # **bold**, *italic*; a lone "*" (del *.tmp, /d * /f) is kept as the record has it
        text = text.replace("*", "∗")
    text = _HTML_ENTITY.sub("＆", text)
    if _UNDERSCORES.search(text):  # _italic_; a lone one ($_.Name, __init__ inside a path) is kept
        text = _EDGE_UNDERSCORE.sub("＿", text)
    text = _NUMBERED.sub("\\1\u00a0", text)
    if text and text[0] in "#>-+=*" and (text[:1] in "#>" or text[1:2] in ("", " ", text[0])):
        text = text[0].translate(_LEADING) + text[1:]
    text = unlinked_urls(text)  # last, so the URL's characters are the record's (bot.cards.inert)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def breakable(value: str) -> str:
    """``value`` (already ``plain``, so already inert: ``bot.cards.inert``) with nothing changed: the name stays
    from when long tokens were broken too, which made copied values differ from the records."""
    return unlinked_urls(value)


def exact(value: object, width: int = 2048, **style: Any) -> Element:
    """An identifier (hash, URL, email, host, phone) shown as the record holds it, character for character (only
    control characters and line breaks become spaces; a value over ``width`` is cut with "…"). A TextBlock (which
    wraps a long token by layout) when markdown would leave it as it is; a URL in a TextRun, which is not read as
    markdown, so nothing in it needs escaping and it is not made a link. A value with spaces and markup is no
    identifier: it is shown as free text is (``plain``, URLs broken)."""
    shown = one_line(value, width)
    if plain(shown, width) == shown and not holds_url(shown):
        return text(shown, **style)
    if is_url_token(shown):
        return {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": shown, **style}]}
    return text(breakable(plain(shown, width)), **style)  # not an identifier: free text with markup, made inert


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def age(moment: datetime | None, now: datetime) -> str:
    """A short age: "5m ago", "14h ago", "3d ago"."""
    if moment is None:
        return "-"
    seconds = (as_utc(now) - as_utc(moment)).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"


def when(moment: datetime | None, now: datetime) -> str:
    """Age plus the UTC time: "14h ago (20 Nov 01:30 UTC)"."""
    if moment is None:
        return "-"
    moment = as_utc(moment)
    stamp = moment.strftime("%d %b %H:%M" if moment.year == as_utc(now).year else "%d %b %Y %H:%M")
    return f"{age(moment, now)} ({stamp} UTC)"


def activity_span(start: datetime | None, end: datetime | None, now: datetime) -> str:
    """When an alert's activity ran, with its zone: "20 Nov 13:02 – 13:23 UTC", one time when it was one
    moment, the end's date when it ended another day, the year when not this one; "" when neither is known."""
    if start is None and end is None:
        return ""
    first, last = as_utc(start or end), as_utc(end or start)  # type: ignore[arg-type]
    if last < first:
        first, last = last, first
    year = "" if first.year == as_utc(now).year else " %Y"
    stamp = first.strftime(f"%d %b{year} %H:%M")
    if (last - first).total_seconds() < 60:
        return f"{stamp} UTC"
    tail = last.strftime("%H:%M" if last.date() == first.date() else f"%d %b{year} %H:%M")
    return f"{stamp} – {tail} UTC"


# Microsoft's portals an alert's AlertLink may open on a card (Defender XDR and its government clouds, Azure,
# Entra, Defender for Cloud Apps, Purview). Any other host is shown as inert text, never a button.
PORTAL_HOSTS = ("security.microsoft.com", "security.microsoft.us", "security.apps.mil", "mto.security.microsoft.com",
                "portal.azure.com", "portal.azure.us", "portal.azure.cn", "entra.microsoft.com",
                "portal.cloudappsecurity.com", "compliance.microsoft.com", "purview.microsoft.com")
_PORTAL_URL = re.compile(r"https://([A-Za-z0-9.-]{1,253})(?:[/?#][^\s\"'<>\\^`{|}]{0,2040})?")


def portal_url(url: str) -> str | None:
    """``url`` when it is a plain https link to one of Microsoft's portals (PORTAL_HOSTS, or a tenant's own
    ``*.portal.cloudappsecurity.com``), with no user, password or port; else None."""
    match = _PORTAL_URL.fullmatch(url.strip())
    if not match:
        return None
    host = match.group(1).lower().rstrip(".")
    if host in PORTAL_HOSTS or host.endswith(".portal.cloudappsecurity.com"):
        return url.strip()
    return None


def severity_label(severity: str) -> str:
    return SEVERITY_SHORT.get(severity, plain(severity, 13))


def severity_text(severity: str, suffix: str = "", *, size: str = "default", **style: Any) -> Element:
    """Severity as a word on its style's background (a chip as wide as the word), so colour is never the only
    signal and never the text's own; Informational and unknown values as subtle text."""
    label = text(severity_label(severity) + suffix, weight="bolder", size=size)
    if severity not in SEVERITY_STYLE:
        return {**label, "isSubtle": True, **style}
    return {"type": "ColumnSet", "columns": [
        {"type": "Column", "width": "auto", "style": SEVERITY_STYLE[severity], "items": [label]}], **style}


def severity_and_details(severity: str, number: int) -> Element:
    """The cell of a list row that holds its severity chip over its Details button: a column of its own for the
    severity is narrower than "Medium" on a phone, and broke it mid-word ("Me/diu/m")."""
    return cell(severity_text(severity, size="small"), actions(details_action(number), spacing="small"))


def text(value: str, **style: Any) -> Element:
    """A wrapping TextBlock. ``value`` must already be safe: cards' own words plus ``plain`` pieces."""
    return {"type": "TextBlock", "text": value, "wrap": True, **style}


def subtle(value: str, **style: Any) -> Element:
    return text(value, **{"isSubtle": True, "size": "small", "spacing": "none", **style})


def ref(ref_for: RefFor, kind: str, key: str) -> str:
    n = ref_for(kind, key)
    return f"[{n}]" if n is not None else ""


def cell(*items: Element) -> Element:
    return {"type": "TableCell", "items": list(items)}


# Fixed column widths where a relative one breaks words at a phone's 320 px (the layout test, tests/cards): the
# "[n]" column, and a column holding a severity chip over one "Details" button.
REF_COLUMN = "44px"
BUTTON_COLUMN = "100px"


def table(headers: Sequence[str], widths: Sequence[int | str], rows: Sequence[Sequence[Element]]) -> Element:
    """A Table with a bold header row; each row is a list of TableCells. A width is a weight, or "Npx"."""
    head = {"type": "TableRow", "cells": [cell(text(h, weight="bolder", size="small")) for h in headers]}
    return {
        "type": "Table",
        "columns": [{"width": w} for w in widths],
        "firstRowAsHeader": True,
        "showGridLines": False,
        "rows": [head, *({"type": "TableRow", "cells": list(r)} for r in rows)],
    }


def submit(title: str, data: dict[str, Any]) -> Element:
    """A plain Action.Submit: Teams sends ``data`` as the activity's value. (Not messageBack: the Agents
    Playground's page sends nothing for those, so its buttons would look dead where people first try the bot.)"""
    return {"type": "Action.Submit", "title": title, "data": data}


def details_action(number: int, title: str = "Details") -> Element:
    return submit(title, {"action": Verb.INCIDENT_DETAIL, "incident": number})


# Buttons keep one line and are cut with "…" when a row of them is wider than the card; a phone's card is about
# 290 px inside. A row is filled while the labels' estimated width fits (bold 14 px: up to ~9 px a character,
# 20 px of padding, 8 px between buttons), measured by the layout test (tests/cards).
ROW_PX = 260


def _button_px(button: Element) -> int:
    return 22 + 9 * len(str(button.get("title", "")))


def button_rows(buttons: Sequence[Element]) -> list[list[Element]]:
    """``buttons`` in rows that fit a phone's card, in order."""
    rows: list[list[Element]] = []
    used = ROW_PX + 1
    for button in buttons:
        wanted = _button_px(button)
        if rows and used + 8 + wanted <= ROW_PX:
            rows[-1].append(button)
            used += 8 + wanted
        else:
            rows.append([button])
            used = wanted
    return rows


def actions(*buttons: Element, **style: Any) -> Element:
    """One ActionSet, or a Container of several (each a row that fits a phone) when one row would not."""
    rows = button_rows(buttons)
    if len(rows) <= 1:
        return {"type": "ActionSet", "actions": list(buttons), **style}
    return {"type": "Container", "items": [
        {"type": "ActionSet", "actions": row, **({"spacing": "small"} if index else {})}
        for index, row in enumerate(rows)], **style}


def card(body: Sequence[Element], buttons: Sequence[Element] = ()) -> Element:
    """The card with its own buttons at its foot: the first row that fits a phone; the others (say "Open in
    Sentinel" beside Confirm and Cancel) as a row at the end of the body, just above."""
    out: Element = {"type": "AdaptiveCard", "version": "1.5", "body": list(body)}
    rows = button_rows(buttons)
    if rows:
        out["actions"] = rows[0]
    if len(rows) > 1:
        out["body"].append(actions(*(b for row in rows[1:] for b in row), spacing="medium"))
    return out


def header(title: str, *, demo: bool, subtitle: str | None = None) -> list[Element]:
    """The heading of a result card, with a DEMO DATA label when the data is generated."""
    heading = text(title, weight="bolder", size="medium", style="heading")
    if demo:  # on the warning background in the default text colour (see SEVERITY_STYLE)
        label = text("DEMO DATA", weight="bolder", size="small", wrap=False)
        heading = {"type": "ColumnSet", "columns": [
            {"type": "Column", "width": "stretch", "items": [heading]},
            {"type": "Column", "width": "auto", "verticalContentAlignment": "center", "style": "warning",
             "items": [label]},
        ]}
    return [heading] + ([subtle(subtitle)] if subtitle else [])


def warnings(lines: Sequence[str], limit: int = 3) -> list[Element]:
    if not lines:
        return []
    return [{"type": "Container", "style": "warning", "items": [
        text(f"Note: {plain(line, 200)}", size="small") for line in lines[:limit]]}]


def window_label(value: object) -> str:
    match = re.fullmatch(r"last_(\d{1,4})([hd])", str(value or ""))
    if not match:
        return plain(str(value or "selected window").replace("_", " "), 30)
    n, unit = int(match.group(1)), "hour" if match.group(2) == "h" else "day"
    return f"last {unit}" if n == 1 else f"last {n} {unit}s"


def scope_label(parameters: dict[str, Any]) -> str:
    """ "last 24 hours, High and above" from a query's parameters."""
    severity = str(parameters.get("min_severity") or "Informational")
    if severity == "Informational":
        shown = "all severities"
    elif severity == "High":
        shown = "High only"
    else:
        shown = f"{plain(severity, 13)} and above"
    return f"{window_label(parameters.get('time_window'))}, {shown}"


def shown_note(shown: int, total: int, plural: str, hint: str) -> str | None:
    """ "Showing 25 of 80 incidents; 55 not shown. <hint>" when rows were left out."""
    if shown >= total:
        return None
    return f"Showing {shown} of {total} {plural}; {total - shown} not shown. {hint}"


def page_note(meta: QueryMetadata, shown: int, plural: str, reach: int | None, *, button: bool) -> str | None:
    """Where a page of a list is, and how to see the next: "Showing 26-50 of 97 incidents. Type "more" (or press
    Next) for the next page."; the last page and the end of what paging reaches say so. None when the list fits."""
    total = max(meta.total, meta.offset + shown)
    first, last = meta.offset + 1, meta.offset + shown
    if meta.offset == 0 and last >= total:
        return None
    where = f"Showing {first}–{last} of {total} {plural}."
    if last >= total:
        return f"{where} That is the last page."
    if reach is not None and last >= reach:
        return (f"{where} A list pages to its first {reach}: narrow it (a shorter window, a higher severity, a "
                "filter) to see the others.")
    return f'{where} Type "more"' + (" (or press Next)" if button else "") + " for the next page."


def next_page(meta: QueryMetadata, shown: int, reach: int | None) -> Element | None:
    """The Next button of a page that has one: its data is the next page's listing (``commands.paging.Listing``),
    so a press pages this card's list however old it is."""
    total, end = max(meta.total, meta.offset + shown), meta.offset + shown
    if end >= total or (reach is not None and end >= reach):
        return None
    arguments = {k: v for k, v in meta.parameters.items() if k != "limit"}
    return submit("Next", {"action": Verb.PAGE, "listing": {"tool": meta.tool, "arguments": arguments,
                                                              "offset": end, "rows": shown, "total": total}})


def list_card(result: QueryResult, title: Callable[[int], str], plural: str,
              make_table: Callable[[Sequence[Any]], Element], reach: int) -> Element:
    """Header, warnings and one table of a list result: a page, as many rows as the size limit allows, with where
    it is in the list and a Next button when there is more (``reach``: how far the list pages)."""
    meta = result.metadata
    if not result.records:
        return nothing_matched(result)
    total = max(meta.total, meta.offset + len(result.records))

    def build(limit: int) -> Element:
        shown = result.records[:limit]
        body = header(f"{title(total)} ({scope_label(meta.parameters)})", demo=meta.is_demo,
                      subtitle=page_note(meta, len(shown), plural, reach, button=True))
        button = next_page(meta, len(shown), reach)
        return card([*body, *warnings(meta.warnings), make_table(shown)], [button] if button else [])

    return fit(build, MAX_TABLE_ROWS)


_NOTHING = {"query_incidents": "No incidents", "query_alerts": "No alerts", "get_alert_trend": "No alerts",
            "get_top_entities": "No entities", "get_incident_detail": "No incident found"}


def nothing_matched(result: QueryResult, searched: str = "") -> Element:
    """The small card for an empty result: what was really searched (window, severity and ``searched``: the
    filters in words, ``filters.filter_label``) and what is left to try: a wider window only when it is not the
    widest, a lower severity only when it is not already all of them, fewer filters when there are some."""
    meta = result.metadata
    if meta.tool == "get_incident_detail":
        wanted = meta.parameters.get("incident_ref", "")
        if isinstance(wanted, int):
            what = f"No incident #{wanted} in the last 90 days."
        else:
            what = f'No incident title matched "{plain(wanted, 80)}" in the last 90 days.'
        hint = "Check the incident number, or try other words from its title."
    else:
        what, hint = nothing_matched_text(meta.parameters, searched)
    return card([*header(_NOTHING.get(meta.tool, "No results"), demo=meta.is_demo), text(what),
                 subtle(hint, spacing="small"), *warnings(meta.warnings)])


def nothing_matched_text(parameters: dict[str, Any], searched: str = "") -> tuple[str, str]:
    """What an empty list searched, in words, and what is left to try (the card's and the terminal's words)."""
    what = f"Nothing matched in the {scope_label(parameters)}" + (f", {searched}" if searched else "") + "."
    return what, _widen_hint(parameters, bool(searched))


def _widen_hint(parameters: dict[str, Any], filtered: bool) -> str:
    tries = []
    if str(parameters.get("time_window") or "") not in ("", "last_30d"):
        tries.append("a wider time window (7d or 30d)")
    if str(parameters.get("min_severity") or "Informational").lower() != "informational":
        tries.append("a lower minimum severity")
    if filtered:
        tries.append("fewer filters")
    if not tries:
        return "Nothing is left to widen: this is every severity in the widest window."
    return "Try " + (", ".join(tries[:-1]) + " or " + tries[-1] if len(tries) > 1 else tries[0]) + "."


def card_size(value: Element) -> int:
    """Bytes of the card as compact UTF-8 JSON, the way it goes over the wire."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def fit(build: Callable[[int], Element], limit: int) -> Element:
    """``build(limit)``, or ``build`` with fewer rows while the card is over MAX_CARD_BYTES."""
    result = build(limit)
    while card_size(result) > MAX_CARD_BYTES and limit > 1:
        limit = limit * 2 // 3
        result = build(limit)
    return result
