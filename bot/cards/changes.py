"""Cards for incident write actions: the confirmation a named person answers, and the outcome it turns into.

A change is only ever proposed (by the model or a command); a person confirms it on
``change_confirmation``, and the bot then replaces that card with ``change_outcome``. Titles, comments
and owner names are attacker-written, so they go through ``plain`` like every other card's text; the
request sent to Sentinel is shown as JSON whose markup characters are JSON-escaped, so it stays both
exact and inert.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from bot.cards.common import (
    Element,
    actions,
    as_utc,
    card,
    cell,
    fit,
    header,
    plain,
    subtle,
    table,
    text,
    unlink,
    unlinked_urls,
)
from bot.cards.verbs import Verb
from bot.sentinel.changes import (
    MAX_COMMENT_CHARS,
    ChangeKind,
    IncidentChange,
    IncidentSnapshot,
    Owner,
    escalation_comment,
)

OUTCOMES = ("executed", "noop", "cancelled", "expired", "superseded", "failed")
OUTCOME_STYLE = {"executed": "good", "failed": "attention"}  # the heading's container; default otherwise
OUTCOME_ICON = {"executed": "✅", "noop": "☑️", "cancelled": "✖️", "expired": "⌛", "superseded": "🔁",
                "failed": "⚠️"}
PORTAL_HOSTS = frozenset({"portal.azure.com", "security.microsoft.com"})
EMPTY = "—"
MAX_SENT_CHARS = 6_000  # the request body shown under "View action"; less when the card would not fit
MAX_SENT_LINES = 60
MAX_SENT_ITEMS = 20  # list items per JSON array shown
MAX_TEXT_LINES = 30  # lines of a comment shown as separate blocks; the rest joins the last one
_SAFE_URL = re.compile(r"https://[^\s\"'<>\\^`{|}]{1,2040}")
_ID_CHARS = re.compile(r"[^A-Za-z0-9-]")
_PHONE = re.compile(r"\+?\d[\d ()./-]{2,39}")  # shown as is, so it can be dialled ("+1" starts no markdown list)
# JSON escapes for the characters markdown or HTML would read; the escaped JSON means the same.
_JSON_INERT = (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("*", "\\u002a"), ("](", "]\\u0028"))


def change_confirmation(change: IncidentChange, incident: IncidentSnapshot, *, action_id: str, requester: str,
                        expires_at: datetime, now: datetime, demo: bool, notice: str | None = None,
                        requester_sign_in: str | None = None) -> Element:
    """The change as before -> after (a comment in full), who may confirm it until when, Confirm and Cancel.
    ``requester_sign_in``: how the incident comment will name the requester (an escalation's card shows it)."""
    who = Owner(name=requester, user_principal_name=requester_sign_in)
    return fit(lambda chars: _confirmation(change, incident, action_id, who, expires_at, now, demo, notice,
                                           chars), 2 * MAX_COMMENT_CHARS)  # room for "](" -> "] ("


def _confirmation(change: IncidentChange, incident: IncidentSnapshot, action_id: str, who: Owner,
                  expires_at: datetime, now: datetime, demo: bool, notice: str | None, chars: int) -> Element:
    requester = who.label
    body = header(f"Confirm: {plain(change.summary(), 200)}", demo=demo)
    body.append(text(_incident_line(change, incident), spacing="small"))
    if notice:
        body.append({"type": "Container", "style": "warning",
                     "items": [text(plain(notice, 300), weight="bolder")]})
    if change.kind is ChangeKind.COMMENT:
        body.append(text("Comment to add", weight="bolder", spacing="medium"))
        body += _long_text(change.comment, chars)
    elif change.kind is ChangeKind.ESCALATE:
        body += _escalation_plan(change, incident, who, chars)
    else:
        after = change.target_fields()
        body.append(_before_after(list(after), incident.fields(), after, spacing="medium"))
    body.append(subtle(f"Only {plain(requester, 80)} can confirm this. {_expiry(expires_at, now)}",
                       spacing="medium"))
    buttons = [
        {"type": "Action.Submit", "title": "Confirm", "style": "positive",
         "data": {"action": Verb.CHANGE_CONFIRM, "id": action_id}},
        {"type": "Action.Submit", "title": "Cancel", "data": {"action": Verb.CHANGE_CANCEL, "id": action_id}},
    ]
    return card(body, buttons + _open_in_sentinel(incident))


def _escalation_plan(change: IncidentChange, incident: IncidentSnapshot, requester: Owner,
                     chars: int) -> list[Element]:
    """Who the escalation goes to (the roster's row) and what Confirm will do, step by step."""
    on_call = change.on_call
    if on_call is None:
        return [text("Nobody to escalate to.", spacing="medium")]
    name = plain(on_call.person.label, 80)
    out: list[Element] = [
        text("On call now", weight="bolder", spacing="medium"),
        {"type": "FactSet", "facts": [{"title": plain(k, 40), "value": v if _PHONE.fullmatch(v) else plain(v, 200)}
                                      for k, v in on_call.details().items()]},
        text("Confirm will", weight="bolder", spacing="medium"),
    ]
    steps = []
    if change.assign:
        steps.append(f"assign #{incident.number or change.incident_number} to {name}")
    steps += [f"post here an @mention of {name} with the incident's summary (if Teams cannot find them in this "
              "conversation, their name is written in plain text and you are told)",
              "add this comment to the incident:"]
    out += [text(f"{i}. {step}", spacing="none" if i > 1 else "small") for i, step in enumerate(steps, 1)]
    preview = escalation_comment(on_call, requester, change.comment, change.assign)
    out += _long_text(preview, min(chars, 1000))
    if change.assign:
        after = change.target_fields()
        out.append(_before_after(["Owner"], incident.fields(), after, spacing="small"))
    return out


def change_outcome(change: IncidentChange, before: IncidentSnapshot, *, outcome: str, headline: str,
                   detail: str | None = None, after: IncidentSnapshot | None = None, requester: str,
                   confirmed_by: str | None = None, sent: dict[str, Any] | None = None,
                   audit_comment: str | None = None, demo: bool, action_id: str | None = None,
                   posted: dict[str, Any] | None = None, audit_record: dict[str, Any] | None = None) -> Element:
    """What became of a proposed change, in place of its confirmation card; no buttons to answer any more.

    ``outcome`` is one of OUTCOMES. "View action" (for executed, and for noop or failed when there is a
    request or a result to show) opens the parameters, the incident before and after, the request sent
    and the audit comment; for an escalation also the message posted in Teams (``posted``: exactly as sent,
    and whom it notified) and, for any change, the audit record. ``action_id`` names the hidden container,
    so each card's toggle has its own id.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
    shown = _Shown(sent, audit_comment, posted, audit_record)
    return fit(lambda chars: _outcome(change, before, outcome, headline, detail, after, requester, confirmed_by,
                                      shown, demo, action_id, chars), MAX_SENT_CHARS)


@dataclass(frozen=True)
class _Shown:
    """What the View action shows beside the action and the incident."""

    sent: dict[str, Any] | None
    audit_comment: str | None
    posted: dict[str, Any] | None
    audit_record: dict[str, Any] | None


def _outcome(change: IncidentChange, before: IncidentSnapshot, outcome: str, headline: str, detail: str | None,
             after: IncidentSnapshot | None, requester: str, confirmed_by: str | None, shown: _Shown, demo: bool,
             action_id: str | None, chars: int) -> Element:
    body = header(f"{OUTCOME_ICON[outcome]} {plain(headline, 300)}", demo=demo)
    _style_heading(body, OUTCOME_STYLE.get(outcome, "default"))
    if detail:
        body += [text(plain(line, 500), spacing="small") for line in detail.splitlines()[:6] if line.strip()]
    body.append(subtle(_incident_line(change, before), spacing="small"))
    if outcome != "executed":
        body.append(subtle(f"Requested change: {plain(change.summary(), 200)}"))
    who = f"Requested by {plain(requester, 80)}"
    if confirmed_by:
        who += f", confirmed by {plain(confirmed_by, 80)}"
    body.append(subtle(who + "."))
    if outcome == "executed" or (outcome in ("noop", "failed") and (shown.sent is not None or after is not None)):
        target = _container_id(change, action_id)
        body.append(actions({"type": "Action.ToggleVisibility", "title": "View action", "targetElements": [target]},
                            spacing="small"))
        body.append({"type": "Container", "id": target, "isVisible": False,
                     "items": _details(change, before, after, shown, chars)})
    return card(body, _open_in_sentinel(before))


def _details(change: IncidentChange, before: IncidentSnapshot, after: IncidentSnapshot | None, shown: _Shown,
             chars: int) -> list[Element]:
    width = max(min(chars // 3, MAX_COMMENT_CHARS), 100)
    items = [_section("Action", first=True),
             {"type": "FactSet", "facts": [{"title": plain(key, 40), "value": _param(value, width)}
                                           for key, value in change.parameters().items()]}]
    items.append(_section("Incident"))
    before_fields = before.fields()
    if after is not None:
        items.append(_before_after(list(before_fields), before_fields, after.fields()))
    else:
        items.append({"type": "FactSet", "facts": [{"title": name, "value": _shown(value, 300)}
                                                   for name, value in before_fields.items()]})
    if shown.posted is not None:
        items.append(_section("Message posted in Teams"))
        items += _posted(shown.posted, chars)
    if shown.sent is not None:
        items.append(_section("Request sent to Sentinel"))
        items += _request(shown.sent, chars)
    if shown.audit_comment:
        items.append(_section("Audit comment written to Sentinel"))
        items += _long_text(shown.audit_comment, width)
    if shown.audit_record is not None:
        items.append(_section("Audit record"))
        items += _json_lines(shown.audit_record, chars // 2)
    return items


def _posted(posted: Mapping[str, Any], chars: int) -> list[Element]:
    """To whom (mentioned with their Teams id, or named in plain text and why), then the message as sent."""
    facts = []
    for person in posted.get("named") or []:
        if not isinstance(person, Mapping):
            continue
        how = (f"@mentioned (Teams id {person.get('teams_id')})" if person.get("mentioned")
               else f"not in this conversation ({person.get('not_notified') or 'unknown'}); sent a 1:1 message "
                    f"(chat {person.get('direct_chat')})" if person.get("direct_chat")
               else f"named in plain text, not notified: {person.get('not_notified') or 'unknown'}")
        facts.append({"title": plain(f"To ({person.get('role') or '?'})", 40),
                      "value": plain(f"{person.get('name') or '?'}: {how}", 300)})
    out: list[Element] = [{"type": "FactSet", "facts": facts}] if facts else []
    message = posted.get("message")
    said = message.get("text") if isinstance(message, Mapping) else None
    if isinstance(said, str) and said.strip():  # what people read in Teams; the JSON below escapes its markup
        out.append(subtle("As it reads in Teams:", spacing="small"))
        out += [text(plain(_as_read(line), 500), spacing="none") for line in said.splitlines()[:MAX_TEXT_LINES]
                if line.strip()]
    out.append(subtle(f"In conversation {plain(posted.get('conversation_id') or '?', 200)}, message "
                      f"{plain(posted.get('activity_id') or '?', 80)}. Exactly as sent (markup characters "
                      "JSON-escaped):", spacing="small"))
    return out + _json_lines(message, chars)


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MENTION = re.compile(r"<at>(.*?)</at>", re.IGNORECASE)


def _as_read(line: str) -> str:
    """A line of the bot's own message as Teams shows it: **bold** as its words, <at>Name</at> as @Name."""
    return _MENTION.sub(r"@\1", _BOLD.sub(r"\1", line))


def _request(sent: Mapping[str, Any], chars: int) -> list[Element]:
    line = f"{plain(sent.get('method') or '?', 10)} {plain(sent.get('path') or '', 600)}".strip()
    out = [text(line, fontType="monospace", size="small", spacing="small")]
    if "body" not in sent or sent.get("body") is None:
        return out
    return out + _json_lines(sent["body"], chars)


def _json_lines(data: Any, chars: int) -> list[Element]:
    """``data`` as indented JSON, one monospace line per block, markup characters escaped (exact and inert)."""
    out: list[Element] = []
    value, cut = _shorten(data, max(chars // 6, 60))
    dumped = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    for raw, escaped in _JSON_INERT:
        dumped = dumped.replace(raw, escaped)
    lines = dumped.splitlines()
    if len(dumped) > chars or len(lines) > MAX_SENT_LINES:
        cut = True
        kept: list[str] = []
        used = 0
        for part in lines[: MAX_SENT_LINES - 1]:
            if used + len(part) > chars:
                break
            kept.append(part)
            used += len(part) + 1
        lines = kept + ["…"]
    out += [{"type": "RichTextBlock", "spacing": "none", "inlines": [
        {"type": "TextRun", "text": _code(part), "fontType": "monospace", "size": "small"}]} for part in lines]
    if cut:
        out.append(subtle("Shortened to fit the card: long values and lines are cut (…). What was sent was "
                          "complete.", spacing="small"))
    return out


def _shorten(value: Any, width: int) -> tuple[Any, bool]:
    """``value`` with long strings and lists cut, and whether anything was."""
    if isinstance(value, str):
        return (value, False) if len(value) <= width else (value[: width - 1] + "…", True)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        cut = len(value) > MAX_SENT_ITEMS * 3
        for key, item in list(value.items())[:MAX_SENT_ITEMS * 3]:
            shown, item_cut = _shorten(item, width)
            out[str(key)[:width]] = shown
            cut = cut or item_cut
        return out, cut
    if isinstance(value, (list, tuple)):
        items = [_shorten(item, width) for item in value[:MAX_SENT_ITEMS]]
        shown = [item for item, _ in items]
        if len(value) > MAX_SENT_ITEMS:
            shown.append(f"… {len(value) - MAX_SENT_ITEMS} more")
        return shown, len(value) > MAX_SENT_ITEMS or any(item_cut for _, item_cut in items)
    return value, False


def _code(line: str) -> str:
    """A JSON line for a monospace TextRun: its indent kept (plain spaces at the start of a block are
    dropped), invisible characters (bidi overrides, zero-width) JSON-escaped, so the line still says
    exactly what was sent, and links and tags broken in case a client reads markdown (the escapes
    already removed them)."""
    if not line.isprintable():  # only inside strings: JSON's own syntax is printable ASCII
        line = "".join(ch if ch.isprintable() else _json_escape(ch) for ch in line)
    body = line.lstrip(" ")
    return "\u00a0" * (len(line) - len(body)) + unlink(body)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _param(value: Any, width: int) -> str:
    if isinstance(value, Mapping):
        return unlinked_urls(plain(", ".join(f"{k}: {v}" for k, v in value.items()), width)) or EMPTY
    return _shown(value, width)


def _before_after(names: Sequence[str], before: Mapping[str, str], after: Mapping[str, str],
                  **style: Any) -> Element:
    """Field | Before | After; the values a change sets in bold."""
    rows = []
    for name in names:
        old, new = (_shown(_spaced(name, values.get(name)), 300) for values in (before, after))
        rows.append([cell(text(plain(name, 40), weight="bolder", size="small")), cell(text(old, size="small")),
                     cell(text(new, size="small", **({"weight": "bolder"} if new != old else {})))])
    return {**table(["Field", "Before", "After"], ["112px", 1, 1], rows), **style}


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def _spaced(name: str, value: str | None) -> str | None:
    """A classification or reason as words ("Incorrect Alert Logic"): on a phone a column is narrower than
    "IncorrectAlertLogic", which then broke mid-word (the layout test, tests/cards)."""
    return _CAMEL.sub(" ", value) if value and name in ("Classification", "Reason") else value


def _long_text(value: str | None, chars: int) -> list[Element]:
    """Multi-line user text, each line inert and wrapped, at most ``chars`` characters in all."""
    lines = [line for line in (value or "").splitlines() if line.strip()]
    if len(lines) > MAX_TEXT_LINES:
        lines = lines[: MAX_TEXT_LINES - 1] + [" ".join(lines[MAX_TEXT_LINES - 1:])]
    out: list[Element] = []
    left, cut = chars, False
    for line in lines:
        if left < 2:
            cut = True
            break
        full = plain(line, 2 * len(line) + 2)  # plain may lengthen a line ("](" becomes "] (")
        shown = full if len(full) <= left else full[: left - 1] + "…"
        cut = cut or shown != full
        out.append(text(unlinked_urls(shown), spacing="none" if out else "small"))
        left -= len(shown)
    if not out:
        out.append(text(EMPTY, spacing="small"))
    if cut:
        out.append(subtle("Shortened to fit the card."))
    return out


def _shown(value: Any, width: int) -> str:
    shown = unlinked_urls(plain(value if value is not None else "", width))
    return shown or EMPTY


def _incident_line(change: IncidentChange, incident: IncidentSnapshot) -> str:
    return f"#{incident.number or change.incident_number} {unlinked_urls(plain(incident.title, 200))}".strip()


def _expiry(expires_at: datetime, now: datetime) -> str:
    expires_at = as_utc(expires_at)
    stamp = expires_at.strftime("%H:%M")
    seconds = (expires_at - as_utc(now)).total_seconds()
    if seconds <= 0:
        return f"This request expired at {stamp} UTC."
    minutes = max(1, math.floor(seconds / 60 + 0.5))
    return f"Expires in {minutes} minute{'s' if minutes != 1 else ''} ({stamp} UTC)."


def _open_in_sentinel(incident: IncidentSnapshot) -> list[Element]:
    url = (incident.url or "").strip()
    return [{"type": "Action.OpenUrl", "title": "Open in Sentinel", "url": url}] if _portal_url(url) else []


def _portal_url(url: str) -> bool:
    """An https link to the Azure portal or the Defender portal, with no credentials or port tricks."""
    if not _SAFE_URL.fullmatch(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (parts.scheme == "https" and (parts.hostname or "") in PORTAL_HOSTS and parts.username is None
            and parts.password is None and port in (None, 443))


def _container_id(change: IncidentChange, action_id: str | None) -> str:
    """A valid element id for the hidden details: letters, digits and hyphens, starting with a letter."""
    cleaned = _ID_CHARS.sub("", action_id or "")[:64]
    return f"action-{cleaned}" if cleaned else f"action-{change.kind.value}-{change.incident_number}"


def _section(title: str, first: bool = False) -> Element:
    return text(title, weight="bolder", size="small", **({} if first else {"separator": True, "spacing": "medium"}))


def _style_heading(body: list[Element], style: str) -> None:
    """Puts the heading ``header`` made on a container of ``style`` (good: done, attention: failed). Its text keeps
    the default colour: green or red text is hard to read on a white card, and Teams adapts container styles to
    its dark theme."""
    if style != "default":
        body[0] = {"type": "Container", "style": style, "items": [body[0]]}

