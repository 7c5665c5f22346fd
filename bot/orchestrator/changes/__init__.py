"""Incident changes with a human in the loop: the write guard, proposals, the Confirm, escalation.

It owns everything between a request to change an incident and the change written: ``write_guard`` (a model
may propose a change only when the analyst's own words ask for it), ``confirmations`` (``ConfirmationDesk``:
propose, confirm by the same analyst, re-read, write with the etag, audit; ``WritePolicy``: who may),
``pending`` (the proposals a conversation keeps waiting, one per requester, and recent outcomes, as plain
stored data) and ``escalation`` (what an escalation posts, and the ``Notifier`` a surface implements to post it).

The loop, the surfaces and the composition root use only what is exported here; the conversation stores
``pending``'s records. Of the orchestrator it imports only ``references`` (and ``conversation``'s type), never
the loop, the model, the memory or the fact check (``tests/house/test_architecture.py``).
"""

from bot.orchestrator.changes.confirmations import (
    Actor,
    ConfirmationDesk,
    Outcome,
    Proposal,
    ProposalStatus,
    WritePolicy,
)
from bot.orchestrator.changes.escalation import EscalationNotice, Named, Notifier, NotifyError, Posted
from bot.orchestrator.changes.pending import FinishedAction, OutcomeStatus, PendingAction
from bot.orchestrator.changes.write_guard import WriteGuard

__all__ = [
    "Actor",
    "ConfirmationDesk",
    "EscalationNotice",
    "FinishedAction",
    "Named",
    "Notifier",
    "NotifyError",
    "Outcome",
    "OutcomeStatus",
    "PendingAction",
    "Posted",
    "Proposal",
    "ProposalStatus",
    "WriteGuard",
    "WritePolicy",
]
