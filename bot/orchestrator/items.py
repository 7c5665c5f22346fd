"""A conversation's history as typed items, independent of any model provider's wire format.

The loop, the memory and the stored conversation state speak these types; only ``llm.py`` turns them
into a provider's messages (and the provider's answer back into a ``ModelMessage``). Stored state has
a version: version 1 kept raw Chat Completions messages, and ``from_stored`` still reads those, so
conversations saved before the change keep their history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

HISTORY_VERSION = 2


@dataclass(frozen=True)
class ToolCall:
    """The model asks for one tool run. ``arguments`` is the JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class UserMessage:
    """What the analyst asked (one turn starts here)."""

    text: str


@dataclass(frozen=True)
class ModelMessage:
    """The model's words, with the tool calls it made in that round (an answer has none)."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """The text the model got back for one tool call. ``compacted``: shortened to a digest later."""

    call_id: str
    tool: str
    content: str
    compacted: bool = False


@dataclass(frozen=True)
class Notice:
    """What the bot said in the model's place (why there was no answer). The model sees it as its own reply."""

    text: str


@dataclass(frozen=True)
class Instruction:
    """A system instruction for one request: the prompt, the context, a round's extra rule. Never stored."""

    text: str


Item: TypeAlias = UserMessage | ModelMessage | ToolResult | Notice
Message: TypeAlias = Instruction | Item


def turn_starts(items: Iterable[Item]) -> list[int]:
    """The index of each turn's first item (a user message)."""
    return [i for i, item in enumerate(items) if isinstance(item, UserMessage)]


def tool_results(items: Iterable[Item]) -> Iterator[ToolResult]:
    return (item for item in items if isinstance(item, ToolResult))


# ---- stored form --------------------------------------------------------------------------------------------

def to_stored(item: Item) -> dict[str, Any]:
    if isinstance(item, UserMessage):
        return {"type": "user", "text": item.text}
    if isinstance(item, ModelMessage):
        stored: dict[str, Any] = {"type": "model", "text": item.text}
        if item.tool_calls:
            stored["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in item.tool_calls]
        return stored
    if isinstance(item, ToolResult):
        stored = {"type": "tool_result", "call_id": item.call_id, "tool": item.tool, "content": item.content}
        return stored | ({"compacted": True} if item.compacted else {})
    return {"type": "notice", "text": item.text}


def from_stored(data: Any, version: int) -> list[Item]:
    """Stored history back into items; version 1 (raw Chat Completions messages) is migrated."""
    if not isinstance(data, list):
        return []
    if version < HISTORY_VERSION:
        return _from_chat_messages(data)
    return [_item(d) for d in data if isinstance(d, dict)]


def _item(data: dict[str, Any]) -> Item:
    kind = data.get("type")
    if kind == "user":
        return UserMessage(str(data.get("text") or ""))
    if kind == "model":
        calls = tuple(ToolCall(str(c["id"]), str(c["name"]), str(c.get("arguments") or ""))
                      for c in data.get("tool_calls") or [])
        return ModelMessage(data.get("text"), calls)
    if kind == "tool_result":
        return ToolResult(str(data["call_id"]), str(data.get("tool") or ""), str(data.get("content") or ""),
                          bool(data.get("compacted", False)))
    if kind == "notice":
        return Notice(str(data.get("text") or ""))
    raise ValueError(f"unknown history item type {str(kind)[:40]!r}")


def _from_chat_messages(messages: list[Any]) -> list[Item]:
    """Version 1 state: Chat Completions messages (user, assistant with or without tool_calls, tool)."""
    items: list[Item] = []
    tool_names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role == "user":
            items.append(UserMessage(str(content or "")))
        elif role == "assistant" and message.get("tool_calls"):
            calls = tuple(ToolCall(str(c["id"]), str(c["function"]["name"]), str(c["function"].get("arguments") or ""))
                          for c in message["tool_calls"])
            tool_names |= {c.id: c.name for c in calls}
            items.append(ModelMessage(content, calls))
        elif role == "assistant" and str(content or "").startswith("(No answer: "):
            items.append(Notice(str(content)))
        elif role == "assistant":
            items.append(ModelMessage(content))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            items.append(ToolResult(call_id, tool_names.get(call_id, ""), str(content or ""),
                                    bool(message.get("compacted", False))))
    return items
