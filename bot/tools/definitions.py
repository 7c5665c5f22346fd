"""The read tools the model may call, as typed definitions; their JSON schemas are generated from these.

Enums, defaults and ranges come from ``sentinel.params`` so the schema the model sees can never drift
from what the data layer accepts. Descriptions steer the model: incidents vs alerts vs trends vs
entities, and follow-ups about one incident go to get_incident_detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.sentinel.params import (
    DEFAULT_ENTITY_LIMIT,
    DEFAULT_LIMIT,
    MAX_ENTITY_LIMIT,
    MAX_LIMIT,
    BinSize,
    Severity,
    TimeWindow,
)
from bot.sentinel.queries import QUERY_NAMES, parameter_names


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

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.kind, "description": self.description}
        if self.enum:
            schema["enum"] = list(self.enum)
        if self.default is not None:
            schema["default"] = self.default
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: tuple[Parameter, ...]
    status_text: str  # shown to the analyst while the tool runs

    def schema(self) -> dict[str, Any]:
        """The Chat Completions tool entry (no strict mode: arguments are validated by us)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.schema() for p in self.parameters},
                    "required": [p.name for p in self.parameters if p.required],
                },
            },
        }


def _window(default: TimeWindow) -> Parameter:
    return Parameter(
        "time_window",
        "How far back, ending now (\"overnight\"/\"today\" = last_24h, \"this week\" = last_7d).",
        enum=tuple(w.value for w in TimeWindow),
        default=default.value,
    )


_SEVERITY = Parameter(
    "min_severity",
    "Lowest severity to include (Medium = Medium and High).",
    enum=tuple(s.value for s in Severity),
    default=Severity.INFORMATIONAL.value,
)


def _limit(default: int, maximum: int, what: str) -> Parameter:
    return Parameter("limit", f"Max {what}.", kind="integer", default=default,
                     minimum=1, maximum=maximum)


READ_TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        "query_incidents",
        "Incidents created in a window, most severe first (severity, status, owner, alerts, tactics). For "
        "the queue, what came in, who is on what.",
        (_window(TimeWindow.LAST_24H), _SEVERITY, _limit(DEFAULT_LIMIT, MAX_LIMIT, "incidents")),
        "Querying incidents...",
    ),
    ToolDefinition(
        "get_incident_detail",
        "One incident in depth: description, alerts, entities, owner, classification, portal link. For "
        "follow-ups like \"tell me more about [2]\" or \"that incident\" (take its number from the references).",
        (
            Parameter(
                "incident_ref",
                "Incident number (e.g. \"42\"), or words from its title.",
                required=True,
            ),
        ),
        "Looking up incident details...",
    ),
    ToolDefinition(
        "query_alerts",
        "Individual alerts in a window, most severe first, with product and main entities. For alerts and "
        "detections, including ones not in an incident.",
        (_window(TimeWindow.LAST_24H), _SEVERITY, _limit(DEFAULT_LIMIT, MAX_LIMIT, "alerts")),
        "Querying alerts...",
    ),
    ToolDefinition(
        "get_alert_trend",
        "Alert counts per time bin and severity, zero-filled. For volume, spikes and \"is this unusual?\".",
        (
            _window(TimeWindow.LAST_7D),
            _SEVERITY,
            Parameter(
                "bin_size",
                "auto = hourly up to 3 days, else daily.",
                enum=tuple(b.value for b in BinSize),
                default=BinSize.AUTO.value,
            ),
        ),
        "Analyzing alert trends...",
    ),
    ToolDefinition(
        "get_top_entities",
        "Accounts, hosts, IPs, URLs, files... in the most alerts of a window, with High-severity counts. For "
        "\"which hosts/users were hit most\".",
        (_window(TimeWindow.LAST_7D), _SEVERITY, _limit(DEFAULT_ENTITY_LIMIT, MAX_ENTITY_LIMIT, "entities")),
        "Finding top targeted entities...",
    ),
)

TOOLS_BY_NAME: dict[str, ToolDefinition] = {tool.name: tool for tool in READ_TOOLS}

# The definitions must describe exactly the data layer's queries and parameters.
assert tuple(TOOLS_BY_NAME) == QUERY_NAMES
assert all(tuple(p.name for p in t.parameters) == parameter_names(t.name) for t in READ_TOOLS)
