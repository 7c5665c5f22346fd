"""Conversation memory: token counting, compaction of old tool results, warning, trimming.

Tokens are counted with tiktoken (o200k_base for gpt-4o class models), including the system prompt and
the tool definitions, and cached per message. History is trimmed a whole turn at a time (a turn runs
from one user message to the next), so an assistant message with tool_calls is never separated from
its tool results. The analyst is warned before the first trim.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import tiktoken

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.items import Item, ToolResult, UserMessage, turn_starts
from bot.orchestrator.llm import wire_message

log = logging.getLogger(__name__)
TRIM_WARNING = "Context getting long, older messages will be trimmed."
TRIMMED_NOTICE = "Older messages were trimmed to make room; ask again if you need something from earlier."
# Per-message overhead of the chat format (role, separators), as OpenAI documents for gpt-4 class models.
MESSAGE_OVERHEAD = 4
DIGEST_LINES = 6
DIGEST_LINE_CHARS = 400


@dataclass(frozen=True)
class MemoryPolicy:
    max_turns: int = 30
    history_tokens: int = 24_000  # history budget, on top of the system prompt and tools
    warn_ratio: float = 0.8
    compact_old_tool_results: bool = True


class TokenCounter:
    """tiktoken counts, with the time spent counting kept for the benchmarks."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        self.seconds = 0.0
        try:
            self._encoding: Any = tiktoken.get_encoding(encoding)
        except Exception as error:  # noqa: BLE001 - offline without a pre-seeded TIKTOKEN_CACHE_DIR
            log.warning("tiktoken encoding %s unavailable (%s): estimating tokens as characters / 4. Pre-seed "
                        "TIKTOKEN_CACHE_DIR for exact counts.", encoding, type(error).__name__)
            self._encoding = None

    def text(self, text: str) -> int:
        started = time.perf_counter()
        try:
            if self._encoding is None:
                return len(text) // 4 + 1
            return len(self._encoding.encode(text, disallowed_special=()))
        finally:
            self.seconds += time.perf_counter() - started

    def message(self, message: dict[str, Any]) -> int:
        total = MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            total += self.text(content)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            total += self.text(function.get("name", "")) + self.text(function.get("arguments", "")) + 3
        return total

    def messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return sum(self.message(m) for m in messages)

    def item(self, item: Item) -> int:
        """An item's tokens as the model will receive it."""
        return self.message(wire_message(item))

    def tools(self, schemas: Sequence[dict[str, Any]]) -> int:
        return self.text(json.dumps(list(schemas), separators=(",", ":")))


def digest(item: ToolResult, what: str = "result", *, lines: int = DIGEST_LINES,
           line_chars: int = DIGEST_LINE_CHARS) -> ToolResult:
    """A tool result cut to its first ``lines`` lines (each at most ``line_chars``), marked ``compacted``;
    the item itself when it is short enough already."""
    kept = item.content.splitlines()
    long_lines = any(len(line) > line_chars for line in kept[:lines])
    if item.compacted or (len(kept) <= lines and not long_lines):
        return item
    shown = [line if len(line) <= line_chars else line[:line_chars] + "..." for line in kept[:lines]]
    if len(kept) > lines:
        shown.append(f"({what} shortened: {len(kept) - lines} more lines; call the tool again for them)")
    return replace(item, content="\n".join(shown), compacted=True)


class Memory:
    def __init__(self, counter: TokenCounter, policy: MemoryPolicy = MemoryPolicy()) -> None:
        self.counter = counter
        self.policy = policy

    def append(self, conversation: Conversation, items: Sequence[Item]) -> None:
        self._sync_counts(conversation)
        for item in items:
            conversation.history.append(item)
            conversation.token_counts.append(self.counter.item(item))

    def history_tokens(self, conversation: Conversation) -> int:
        self._sync_counts(conversation)
        return sum(conversation.token_counts)

    def result_tokens(self, conversation: Conversation) -> int:
        """Tokens of the tool results the history holds: what earlier queries returned, carried along."""
        self._sync_counts(conversation)
        return sum(count for item, count in zip(conversation.history, conversation.token_counts, strict=True)
                   if isinstance(item, ToolResult))

    def turn_starts(self, conversation: Conversation) -> list[int]:
        return turn_starts(conversation.history)

    def before_turn(self, conversation: Conversation) -> list[str]:
        """Make room for the next turn; the notices to show the analyst."""
        self._sync_counts(conversation)
        # The new user message will start one more turn.
        removed = self.trim(conversation, max_turns=self.policy.max_turns - 1,
                            max_tokens=self.policy.history_tokens)
        if removed and not conversation.trim_warned:
            conversation.trim_warned = True
            return [TRIMMED_NOTICE]
        return []

    def after_turn(self, conversation: Conversation) -> list[str]:
        """Shorten this turn's predecessors' tool results; warn once when trimming is near."""
        if self.policy.compact_old_tool_results:
            self._compact_old_tool_results(conversation)
        turns = len(self.turn_starts(conversation))
        near = (turns >= self.policy.max_turns - 2
                or self.history_tokens(conversation) >= self.policy.warn_ratio * self.policy.history_tokens)
        if near and not conversation.trim_warned:
            conversation.trim_warned = True
            return [TRIM_WARNING]
        return []

    def trim(self, conversation: Conversation, *, max_turns: int, max_tokens: int) -> int:
        """Drop the oldest whole turns until both limits hold (the newest turn always stays). Turns removed."""
        removed = 0
        while True:
            starts = self.turn_starts(conversation)
            over = len(starts) > max_turns or sum(conversation.token_counts) > max_tokens
            if not over or len(starts) <= 1:
                break
            cut = starts[1]
            del conversation.history[:cut]
            del conversation.token_counts[:cut]
            removed += 1
        # History must start at a user message: drop any leading orphans (e.g. from old, damaged state).
        while conversation.history and not isinstance(conversation.history[0], UserMessage):
            conversation.history.pop(0)
            conversation.token_counts.pop(0)
        return removed

    def shed(self, conversation: Conversation) -> Iterator[str]:
        """What to let go of when the stored conversation is too big, least missed first, one step per item (the
        step's name): the older half of the fact check's rows (an answer about them is then left unchecked, never
        wrongly marked: near their bound they are most of the state, and the conversation itself matters more);
        then the oldest whole turns one at a time, the last one whole; then the facts' older half again; the
        analyst's [n] last ("tell me more about [2]" must keep working). The caller (the state store) measures what
        it stores after each step and stops when it fits; the steps end when nothing is left to drop."""
        conversation.facts.halve()
        yield "older facts"
        while conversation.history:
            turns = len(self.turn_starts(conversation))
            if turns <= 1:
                conversation.history.clear()
                conversation.token_counts.clear()
            else:
                self.trim(conversation, max_turns=turns - 1, max_tokens=10**9)
            yield "oldest turn"
        conversation.facts.halve()
        yield "older facts"
        references = conversation.references
        references.items = references.items[len(references.items) // 2:]
        conversation.references = type(references).from_dict(references.to_dict())
        yield "older references"

    def drop_half(self, conversation: Conversation) -> int:
        """After a context-length error: keep only the newest half of the turns."""
        turns = len(self.turn_starts(conversation))
        return self.trim(conversation, max_turns=max(1, turns // 2), max_tokens=10**9)

    def _compact_old_tool_results(self, conversation: Conversation) -> None:
        starts = self.turn_starts(conversation)
        if len(starts) < 2:
            return
        for i in range(starts[-1]):
            item = conversation.history[i]
            if not isinstance(item, ToolResult) or item.compacted:
                continue
            shortened = digest(item, "older result", line_chars=10**9)
            if shortened is item:
                continue
            conversation.history[i] = shortened
            conversation.token_counts[i] = self.counter.item(conversation.history[i])

    def _sync_counts(self, conversation: Conversation) -> None:
        if len(conversation.token_counts) != len(conversation.history):
            conversation.token_counts[:] = [self.counter.item(m) for m in conversation.history]
