"""One conversation's memory as plain, serialisable data (it lives in Teams conversation state).

History is a list of typed items (``items.py``); a parallel list caches each item's token count so
nothing is re-counted every turn. The stored form carries a version, and state written by older
versions is migrated when it is read. The known identifiers (incident numbers, entity values, alert ids)
are what the grounding check verifies answers against; they are bounded like everything else here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.orchestrator.items import HISTORY_VERSION, Item, from_stored, to_stored
from bot.orchestrator.pending import MAX_FINISHED_ACTIONS, FinishedAction, OutcomeStatus, PendingAction
from bot.orchestrator.references import References
from bot.sentinel.models import AlertSummary, EntityCount, Incident, IncidentDetail, QueryResult

MAX_KNOWN_INCIDENTS = 2000
MAX_KNOWN_VALUES = 3000


@dataclass
class Conversation:
    history: list[Item] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    references: References = field(default_factory=References)
    preferences: dict[str, str] = field(default_factory=dict)
    summary: str | None = None
    known_incidents: list[int] = field(default_factory=list)
    known_values: list[str] = field(default_factory=list)
    trim_warned: bool = False
    turns: int = 0
    pending_action: PendingAction | None = None  # a proposed incident change awaiting its Confirm
    finished_actions: list[FinishedAction] = field(default_factory=list)  # recent outcomes, newest last

    def remember(self, result: QueryResult) -> None:
        """Record what a query returned: its [n] references and the identifiers answers may cite."""
        self.references.register(result)
        numbers: list[int] = []
        values: list[str] = []
        for record in result.records:
            if isinstance(record, Incident):
                numbers.append(record.number)
            elif isinstance(record, IncidentDetail):
                numbers.append(record.incident.number)
                numbers += [m.number for m in record.other_matches]
                values += [a.alert_id for a in record.alerts] + [e.value for e in record.entities]
            elif isinstance(record, AlertSummary):
                values.append(record.alert_id)
                values += [label.split(": ", 1)[-1] for label in record.entities]
            elif isinstance(record, EntityCount):
                values.append(record.value)
        self.known_incidents = _bounded_union(self.known_incidents, numbers, MAX_KNOWN_INCIDENTS)
        self.known_values = _bounded_union(self.known_values, values, MAX_KNOWN_VALUES)

    def finish_action(self, action_id: str, outcome: OutcomeStatus, headline: str) -> None:
        """The pending action (if it is ``action_id``) is over; remember how it ended."""
        if self.pending_action is not None and self.pending_action.id == action_id:
            self.pending_action = None
        self.finished_actions = [a for a in self.finished_actions if a.id != action_id]
        self.finished_actions.append(FinishedAction(action_id, outcome, headline))
        del self.finished_actions[:-MAX_FINISHED_ACTIONS]

    def finished(self, action_id: str) -> FinishedAction | None:
        return next((a for a in self.finished_actions if a.id == action_id), None)

    def clear(self, summary: str | None) -> None:
        """Forget the discussion but keep preferences, the summary, and what was verified."""
        self.history.clear()
        self.token_counts.clear()
        self.references = References()
        self.summary = summary
        self.trim_warned = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": HISTORY_VERSION,
            "history": [to_stored(item) for item in self.history],
            "token_counts": self.token_counts,
            "references": self.references.to_dict(),
            "preferences": self.preferences,
            "summary": self.summary,
            "known_incidents": self.known_incidents,
            "known_values": self.known_values,
            "trim_warned": self.trim_warned,
            "turns": self.turns,
            "pending_action": self.pending_action.to_dict() if self.pending_action else None,
            "finished_actions": [a.to_dict() for a in self.finished_actions],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Conversation:
        data = data or {}
        history = from_stored(data.get("history", []), int(data.get("version", 1)))
        counts = [int(c) for c in data.get("token_counts", [])]
        if len(counts) != len(history):
            counts = []  # recounted on the next turn
        return cls(
            history=history,
            token_counts=counts,
            references=References.from_dict(data.get("references")),
            preferences=dict(data.get("preferences", {})),
            summary=data.get("summary"),
            known_incidents=[int(n) for n in data.get("known_incidents", [])],
            known_values=[str(v) for v in data.get("known_values", [])],
            trim_warned=bool(data.get("trim_warned", False)),
            turns=int(data.get("turns", 0)),
            pending_action=_pending(data.get("pending_action")),
            finished_actions=[FinishedAction.from_dict(a) for a in data.get("finished_actions", [])
                              if isinstance(a, dict) and a.get("id")][-MAX_FINISHED_ACTIONS:],
        )


def _pending(data: Any) -> PendingAction | None:
    """The stored pending action, or None when there is none or it no longer validates (it then simply
    cannot be confirmed; the analyst asks again)."""
    if not isinstance(data, dict):
        return None
    try:
        return PendingAction.from_dict(data)
    except (TypeError, ValueError, KeyError):
        return None


def _bounded_union(existing: list, new: list, limit: int) -> list:
    """Existing items plus new ones (most recent last, no duplicates), keeping the newest ``limit``."""
    if not new:
        return existing
    fresh = set(new)
    merged = [item for item in existing if item not in fresh] + list(dict.fromkeys(new))
    return merged[-limit:]
