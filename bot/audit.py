"""The audit trail of reads and refusals: one structured record per event on the ``bot.audit`` logger.

Incident changes write theirs in orchestrator/changes/confirmations.py; this module adds the two the workspace's
own logs cannot show, because every query runs with the bot's identity:

- ``read``: every workspace query, with who asked (the analyst the surface set with ``asking``), where, which
  tool with which validated arguments, how many rows came back, when, and whose identity ran it (``identity``:
  ``bot``, or ``user`` in on-behalf-of mode, where Log Analytics' own log names the analyst too);
- ``access.refused``: an activity turned away at the door, and why.

Records carry identifiers, names, counts and codes; never message text or row values, except the one text an analyst
asks to run as it is: the ``kql`` command's query, recorded in full (its read's ``arguments``, or ``query_text``
when it failed or was refused: ``kql.refused``). The bot's own reads that
found nothing (the watch poller's quiet polls, every interval) are recorded at DEBUG, so they do not bury the rest.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from bot.sentinel.client import SentinelClient
from bot.sentinel.identity import running_as
from bot.sentinel.models import QueryError, QueryResult

audit_log = logging.getLogger("bot.audit")
ANALYST_QUERY = "analyst_kql"  # the kql command's query: audited with its full text


@dataclass(frozen=True)
class Asker:
    """Who asked, and where: set by the surface for the length of a turn."""

    actor_object_id: str | None
    actor: str | None  # display name (Teams activities carry no UPN)
    conversation_id: str
    conversation_type: str
    tenant_id: str | None = None
    correlation_id: str | None = None


_asker: ContextVar[Asker | None] = ContextVar("bot_audit_asker", default=None)


@contextmanager
def asking(asker: Asker) -> Iterator[None]:
    """Reads inside (tasks started inside too: they copy the context) are recorded as ``asker``'s."""
    token = _asker.set(asker)
    try:
        yield
    finally:
        _asker.reset(token)


def record(event: str, asker: Asker | None = None, level: int = logging.INFO, **fields: Any) -> dict[str, Any]:
    """Write one audit record: the event, when, who and where, and ``fields`` (None values left out)."""
    who = asker or _asker.get()
    entry: dict[str, Any] = {"event": event, "at": datetime.now(UTC).isoformat()}
    entry |= {k: v for k, v in (asdict(who) if who else {}).items() if v is not None}
    entry |= {k: v for k, v in fields.items() if v is not None}
    if audit_log.isEnabledFor(level):
        audit_log.log(level, "audit %s", json.dumps(entry, sort_keys=True, default=str), extra={"audit": entry})
    return entry


class AuditedSentinelClient(SentinelClient):
    """The workspace client, recording every read (the surfaces and the model's tools all read through ``run``)."""

    async def run(self, tool: str, arguments: Mapping[str, object] | None = None, /,
                  **more: object) -> QueryResult | QueryError:
        started = time.perf_counter()
        result = await super().run(tool, arguments, **more)
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        if isinstance(result, QueryResult):
            meta = result.metadata
            asker = _asker.get()
            own = asker is None or asker.actor_object_id is None  # no analyst: the bot's own (the watch poller)
            quiet = own and meta.returned == 0
            record("read", level=logging.DEBUG if quiet else logging.INFO, tool=meta.tool, arguments=meta.parameters,
                   rows=meta.returned, total=meta.total, truncated=meta.truncated, source=meta.source,
                   elapsed_ms=elapsed_ms, result="ok", identity=running_as())
        else:  # the arguments may be the model's raw text: only their names
            names = sorted({*(arguments or {}), *more})
            # An analyst's own KQL is theirs (never the model's), and what was run is the point: its full text.
            text = str({**(arguments or {}), **more}.get("query", ""))[:10_000] if tool == ANALYST_QUERY else None
            record("read", tool=tool[:64], argument_names=[str(n)[:64] for n in names], rows=0,
                   source=self.source, elapsed_ms=elapsed_ms, result=result.code, identity=running_as(),
                   query_text=text)
        return result
