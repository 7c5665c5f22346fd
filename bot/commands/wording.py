"""Why a command could not run, in the analyst's words, with what to type instead.

A query refuses a value with its parameter's name ("entity: 'alice' could be an account or a host: give
entity_type ..."): the words the model needs, since it fills those parameters. An analyst typed a command, not
parameters: ``in_words`` says the same thing about what they typed, and what to type instead ("investigate alice
account"), and it is never "that query failed": nothing failed, the command needs one more word.
"""

from __future__ import annotations

import re

from bot.commands.parser import INVESTIGATE, Command, usage

_PARAMETER = re.compile(r"^(?P<name>[a-z_]{2,30}): (?P<problem>.+)$", re.DOTALL)
_AMBIGUOUS = re.compile(r"^(?P<value>'[^']*'|\"[^\"]*\") could be an account or a host")
_RANGE = re.compile(r"^(?P<value>-?\d+) is out of range: use 1 to (?P<maximum>\d+)")


def in_words(problem: str, command: Command) -> str:
    """The refusal of ``command``'s query (``name: problem``) as the analyst reads it."""
    match = _PARAMETER.match(problem.strip())
    if match is None:
        return problem
    name, said = match.group("name"), match.group("problem")
    entity = str(command.arguments.get("entity", ""))
    if name == "entity" and command.tool == INVESTIGATE and (_AMBIGUOUS.match(said) or "entity_type" in said):
        return (f'"{entity}" could be an account or a host. Say which: "investigate {entity} account" or '
                f'"investigate {entity} host" (or give the account\'s sign-in name, name@domain).')
    if name == "owner" and said.startswith('"me"'):
        return ('"mine" means you, as signed in to Teams, and nobody is signed in here (the terminal chat has no '
                'Teams user). Ask for "unassigned" incidents, or ask in Teams.')
    if name == "limit" and (limit := _RANGE.match(said)):
        return (f"{limit.group('value')} rows is more than one list holds: ask for 1 to {limit.group('maximum')}. "
                'A long list comes a page at a time anyway: type "more" for the next page.')
    said = said.rstrip(".")
    return f"{said[:1].upper()}{said[1:]}." + _usage(command)


def _usage(command: Command) -> str:
    """The command's usage, after a refusal that names no fix of its own."""
    if command.name in ("incidents", "alerts", "trend", "entities"):
        return f" {usage(command.name)}"
    return ""
