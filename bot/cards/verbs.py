"""What a card button asks the bot to do: the ``action`` in its data, one verb per kind of press.

The Teams handler routes each verb to one handler (its verb table); the buttons that stand for text
(``ASK``: a suggested question, ``COMMAND``: a command on the help card) are answered as if it was typed.
"""

from __future__ import annotations

from enum import StrEnum


class Verb(StrEnum):
    INCIDENT_DETAIL = "incident_detail"  # the Details button of an incident row
    CHANGE_PROPOSE = "change_propose"  # Assign to me, Close..., Severity..., Comment..., Reopen
    CHANGE_CONFIRM = "change_confirm"  # Confirm on a confirmation card
    CHANGE_CANCEL = "change_cancel"  # Cancel on a confirmation card
    PAGE = "page"  # Next under a list: data["listing"] is the next page's list (bot.commands.paging.Listing)
    ASK = "ask"  # a suggested question: data["question"] is answered as typed
    COMMAND = "command"  # a command button on the help card: data["command"] is run as typed

    @classmethod
    def of(cls, value: object) -> Verb | None:
        """The verb in a button's data, or None for typed text and anything unknown."""
        action = value.get("action") if isinstance(value, dict) else None
        try:
            return cls(action) if isinstance(action, str) else None
        except ValueError:
            return None
