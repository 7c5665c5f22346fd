"""What a tool is: one object that carries everything about it, read or write.

A tool declares its name and description for the model, its typed parameters (the JSON schema is
generated from them; ``read_tool`` takes them from a query's declaration), an example of valid arguments, the
status text the analyst sees while it runs, and what its result becomes: compact text for the model, an Adaptive
Card for Teams (with a card of its own for no rows), plain text for the terminal and the questions an analyst
usually asks next (read tools), or the kind of incident change it proposes (write tools, which
``needs_confirmation``: they never run on the model's word, the analyst confirms them on a card). A read tool runs
its declared query, or its own ``run`` (an investigation runs several); ``command_only`` keeps it from the model.
The loop and the surfaces ask the registry (``TOOLS``) for a result's card, text or follow-ups and never name a
tool themselves (tests/house/test_architecture.py holds that no surface module spells a tool's name).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from bot.cards import CardBuilder
from bot.cards.common import Element, RefFor
from bot.cards.plaintext import PlainBuilder
from bot.sentinel.changes import ChangeKind
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.spec import QuerySpec
from bot.tools.compact import TextBuilder


@dataclass(frozen=True)
class Parameter:
    name: str
    description: str
    kind: str = "string"  # JSON schema type
    enum: tuple[str, ...] = ()
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    required: bool = False
    items: Any = None  # an array's item schema

    def schema(self) -> dict[str, Any]:
        # Every token here is sent on every model call: an empty description is left out.
        schema: dict[str, Any] = {"type": self.kind} | ({"description": self.description} if self.description else {})
        if self.items is not None:
            schema["items"] = self.items
        if self.enum:
            schema["enum"] = list(self.enum)
        if self.default is not None:
            schema["default"] = self.default
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


# (result with at least one record, [n] lookup) -> questions an analyst usually asks next, naming rows by their [n]
FollowUps = Callable[[QueryResult, RefFor], list[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: tuple[Parameter, ...]
    status_text: str  # shown to the analyst while the tool runs
    example: str  # a valid arguments object, quoted back when the model sends unreadable JSON
    text: TextBuilder | None = None  # read tools: the result as compact text for the model
    card: CardBuilder | None = None  # read tools: the result as an Adaptive Card
    change: ChangeKind | None = None  # write tools: the kind of incident change proposed
    empty: Callable[[QueryResult], Element] | None = None  # read tools: the card for no rows (default: generic)
    terminal: PlainBuilder | None = None  # read tools: the result as the terminal prints it (default: ``text``)
    terminal_empty: Callable[[QueryResult], str] | None = None  # read tools: the terminal's no rows (default: generic)
    follow_ups: FollowUps | None = None  # read tools: what an analyst usually asks next about a result with rows
    command_only: bool = False  # run by a command only (an analyst's own KQL), never offered to the model
    # A read tool that runs several queries itself (an investigation) instead of its one declared query.
    run: Callable[[SentinelClient, dict[str, Any]], Awaitable[QueryResult | QueryError]] | None = None
    # Parameters told to the model only on turns where they are likely of use (``widened``): their tokens would not
    # fit on every call. One named as a base parameter replaces its description. The tool accepts them always.
    extended: tuple[Parameter, ...] = ()

    @property
    def needs_confirmation(self) -> bool:
        """A write tool only proposes; the analyst who asked must confirm on a card before anything changes."""
        return self.change is not None

    async def read(self, sentinel: SentinelClient, arguments: dict[str, Any]) -> QueryResult | QueryError:
        """Run this read tool: its own runner, or its declared query through the client."""
        if self.run is not None:
            return await self.run(sentinel, arguments)
        return await sentinel.run(self.name, arguments)

    def widened(self) -> Tool:
        """This tool as offered where its extended parameters are likely of use (itself when it has none)."""
        if not self.extended:
            return self
        merged = {p.name: p for p in self.parameters} | {p.name: p for p in self.extended}
        return replace(self, parameters=tuple(merged.values()), extended=())

    def parameters_schema(self) -> dict[str, Any]:
        required = [p.name for p in self.parameters if p.required]
        return {"type": "object", "properties": {p.name: p.schema() for p in self.parameters}} | (
            {"required": required} if required else {})


def read_tool(spec: QuerySpec, description: str, status_text: str, *, text: TextBuilder, card: CardBuilder,
              example: str = "{}", empty: Callable[[QueryResult], Element] | None = None,
              terminal: PlainBuilder | None = None, terminal_empty: Callable[[QueryResult], str] | None = None,
              follow_ups: FollowUps | None = None) -> Tool:
    """A read tool from its query's declaration: the parameters' schema is the declaration's, so it cannot drift
    from what the data layer accepts."""
    parameters = tuple(Parameter(p.name, p.description, p.kind, p.enum, p.default, p.minimum, p.maximum,
                                 bool(p.required), p.items) for p in spec.params)
    return Tool(spec.name, description, parameters, status_text, example, text=text, card=card, empty=empty,
                terminal=terminal, terminal_empty=terminal_empty, follow_ups=follow_ups, command_only=spec.internal)
