"""The read tools, in the order the model is offered them: one module each in ``bot.tools.queries``, made from its
query's declaration (``bot.sentinel.queries``), so the schema the model sees is what the data layer accepts.
Descriptions steer the model: incidents vs alerts vs trends vs entities, follow-ups about one incident to
get_incident_detail. The data layer's internal queries (incident_changes, for the watch poller) have no tool.
"""

from __future__ import annotations

from bot.sentinel.queries import MODEL_QUERY_NAMES
from bot.tools.queries import (
    alert_trend,
    alerts,
    hunt,
    incident_detail,
    incidents,
    investigate,
    on_call,
    summary,
    top_entities,
)
from bot.tools.tool import Tool

READ_TOOLS: tuple[Tool, ...] = (incidents.TOOL, incident_detail.TOOL, alerts.TOOL, alert_trend.TOOL, top_entities.TOOL,
                                on_call.TOOL, hunt.TOOL, investigate.TOOL, summary.TOOL)

# Every query the model may use has its tool, and no tool names a query the data layer does not declare (a tool
# with its own runner, the investigation, runs the data layer's internal evidence queries instead).
assert tuple(t.name for t in READ_TOOLS if t.run is None) == MODEL_QUERY_NAMES
