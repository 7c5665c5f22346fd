"""The fact check: what every query returned, kept as typed facts, and each answer checked against them.

It owns the facts a conversation keeps (``facts``: the incidents, alerts, roster, trend, sightings, identifiers
and counts the queries returned, the relations between them, and the changes the conversation confirmed; one
``@recorder`` per record type; stored compactly with the conversation, bounded), what an answer cites
(``identifiers``: incident numbers, [n], IPs, hosts, accounts, hashes, URLs, normalised), how it is built
(``structure``: headings, list items under their heading, label lines, table rows under their headers, and
whether a sentence asserts anything), what it states about a record (``claims``: severity, status, owner,
classification, times, counts, actions) and between records (``relations``), what it states about any row of a
record type that declares its facts (``declared``: ``bot/sentinel/semantics.py``; values, counts, distinct counts,
shares, first and last times and flags of the rows its subjects belong to, and what a confirmed change set, with no code
per record type), and the check itself
(``grounding``): ``check`` finds the mismatches, ``annotate`` marks them at the claim, puts ``summary_notice`` on
top and withholds risky sentences, ``mark`` marks a streamed piece; ``StreamCheck`` (``stream``) checks a
streamed answer piece by piece, each finished sentence once.

The loop and the conversation use only what is exported here. Of the orchestrator it imports only
``references`` (the [n] an answer cites), never the loop, the model or the memory
(``tests/house/test_architecture.py``).
"""

from bot.orchestrator.factcheck.facts import Facts
from bot.orchestrator.factcheck.grounding import Finding, annotate, check, mark, summary_notice
from bot.orchestrator.factcheck.stream import StreamCheck

__all__ = ["Facts", "Finding", "StreamCheck", "annotate", "check", "mark", "summary_notice"]
