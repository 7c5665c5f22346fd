"""One conversation's memory as plain, serialisable data (it lives in Teams conversation state).

History is a list of typed items (``items.py``); a parallel list caches each item's token count so
nothing is re-counted every turn. The stored form carries a version, and state written by older
versions is migrated when it is read. The facts (what every query returned, as typed records) are what
the fact check verifies answers against; they are bounded like everything else here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.orchestrator.changes.pending import (
    MAX_FINISHED_ACTIONS,
    MAX_PENDING_ACTIONS,
    FinishedAction,
    OutcomeStatus,
    PendingAction,
    same_user,
)
from bot.orchestrator.factcheck import Facts
from bot.orchestrator.items import HISTORY_VERSION, Item, from_stored, to_stored
from bot.orchestrator.references import References
from bot.sentinel.changes import Owner
from bot.sentinel.models import QueryResult


@dataclass
class Conversation:
    history: list[Item] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    references: References = field(default_factory=References)
    preferences: dict[str, str] = field(default_factory=dict)
    summary: str | None = None
    facts: Facts = field(default_factory=Facts)
    trim_warned: bool = False
    turns: int = 0
    # Proposed incident changes awaiting their Confirm: at most one per requester, oldest first.
    pending_actions: list[PendingAction] = field(default_factory=list)
    finished_actions: list[FinishedAction] = field(default_factory=list)  # recent outcomes, newest last
    listing: dict[str, Any] | None = None  # the last list shown, for "more" (bot.commands.paging.Listing)

    def remember(self, result: QueryResult, at: datetime | None = None) -> None:
        """Record what a query returned: its [n] references and its records as facts answers are checked against."""
        self.references.register(result)
        self.facts.observe(result, at or datetime.now(UTC))

    def pending(self, action_id: str) -> PendingAction | None:
        """The pending action ``action_id``, if it still waits."""
        return next((a for a in self.pending_actions if a.id == action_id), None)

    def pending_for(self, user: Owner) -> PendingAction | None:
        """What ``user`` (by Entra object id) proposed and has not confirmed yet."""
        return next((a for a in self.pending_actions if same_user(a.requester, user)), None)

    def add_pending(self, action: PendingAction) -> None:
        """``action`` waits for its Confirm. The caller has finished its requester's previous one."""
        self.pending_actions = [a for a in self.pending_actions if not same_user(a.requester, action.requester)]
        self.pending_actions.append(action)
        for lapsed in self.pending_actions[:-MAX_PENDING_ACTIONS]:  # a late press on its card is told why
            self.finish_action(lapsed.id, OutcomeStatus.EXPIRED,
                               "Lapsed: more changes were waiting in this conversation than it keeps. Ask again.")

    def finish_action(self, action_id: str, outcome: OutcomeStatus, headline: str) -> None:
        """The pending action ``action_id`` (if it waits) is over; remember how it ended."""
        self.pending_actions = [a for a in self.pending_actions if a.id != action_id]
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
        self.listing = None
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
            "facts": self.facts.to_dict(),
            "trim_warned": self.trim_warned,
            "turns": self.turns,
            "pending_actions": [a.to_dict() for a in self.pending_actions],
            "finished_actions": [a.to_dict() for a in self.finished_actions],
            "listing": self.listing,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Conversation:
        data = data or {}
        history = from_stored(data.get("history", []), int(data.get("version", 1)))
        counts = [int(c) for c in data.get("token_counts", [])]
        if len(counts) != len(history):
            counts = []  # recounted on the next turn
        facts = Facts.from_dict(data.get("facts"))
        facts.migrate(data.get("known_incidents", []), data.get("known_values", []))  # state from before facts
        return cls(
            history=history,
            token_counts=counts,
            references=References.from_dict(data.get("references")),
            preferences=dict(data.get("preferences", {})),
            summary=data.get("summary"),
            facts=facts,
            trim_warned=bool(data.get("trim_warned", False)),
            turns=int(data.get("turns", 0)),
            pending_actions=_pending(data),
            finished_actions=[FinishedAction.from_dict(a) for a in data.get("finished_actions", [])
                              if isinstance(a, dict) and a.get("id")][-MAX_FINISHED_ACTIONS:],
            listing=data["listing"] if isinstance(data.get("listing"), dict) else None,
        )


def _pending(data: dict[str, Any]) -> list[PendingAction]:
    """The stored pending actions (state from before they were kept per requester has one, ``pending_action``),
    one per requester, the newest kept; any that no longer validates is left out (it then simply cannot be
    confirmed; the analyst asks again)."""
    stored = data.get("pending_actions")
    if not isinstance(stored, list):
        stored = [data.get("pending_action")]
    actions: list[PendingAction] = []
    for item in stored:
        if not isinstance(item, dict):
            continue
        try:
            action = PendingAction.from_dict(item)
        except (TypeError, ValueError, KeyError):
            continue
        actions = [a for a in actions if not same_user(a.requester, action.requester)] + [action]
    return actions[-MAX_PENDING_ACTIONS:]
