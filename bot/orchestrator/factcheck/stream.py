"""The fact check of an answer as it streams: each finished piece is checked once, never the whole answer again.

``StreamCheck.advance`` takes the answer so far and returns what may be shown: the marked text of every piece
checked so far, ending at the last finished sentence (a table row only at its line's end, so its cells stay
together). A piece is checked with a small context, not with what came before it: the heading and the lead-in
line it hangs under, its table's header, and the sentence before it (for "it"), each cut to a few hundred
characters. So the cost of a streamed answer grows with its length, not with its square. The final answer is
checked whole once more (``grounding.check``); the streamed marks only stand until it replaces them.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from bot.orchestrator.factcheck.facts import Facts
from bot.orchestrator.factcheck.grounding import Finding, check, mark
from bot.orchestrator.references import References

_SENTENCE_END = re.compile(r"[.!?:](?=\s)|\n")
_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s|\*\*[^*]+\*\*\s*:?\s*$)")
_ITEM = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_LAST_SENTENCE = re.compile(r"(?:^|[.!?]\s+)([^.!?]*[.!?]?)\s*$")
CONTEXT_CHARS = 400  # per context line: a hostile 100 KB heading must not be read again with every sentence


class StreamCheck:
    def __init__(self, facts: Facts, references: References, now: datetime) -> None:
        self.facts, self.references, self.now = facts, references, now
        self.shown: list[str] = []  # the marked pieces, in order
        self.findings: list[Finding] = []  # spans relative to the whole answer
        self.done = 0  # how much of the answer has been checked
        self.headings: list[tuple[int, str]] = []  # the open headings (level, line), outermost first
        self.lead_in = ""
        self.table: list[str] = []  # the current table's header and rule lines
        self.line = ""  # the line in progress up to ``done`` (its list marker and last sentence are context)

    def advance(self, so_far: str) -> str | None:
        """The marked answer up to its last finished sentence, or None when nothing new is finished."""
        cut = self._cut(so_far)
        if cut <= self.done:
            return None
        piece = so_far[self.done:cut]
        context = self._context()
        found = check(piece, self.facts, self.references, self.now, context=context)
        self.findings += [_shifted(f, self.done) for f in found]
        self.shown.append(mark(piece, found))
        self._learn(piece)
        self.done = cut
        return "".join(self.shown).rstrip()

    def _cut(self, so_far: str) -> int:
        ends = [m.end() for m in _SENTENCE_END.finditer(so_far, self.done)]
        if not ends:
            return self.done
        cut = ends[-1]
        line_start = so_far.rfind("\n", 0, cut - 1) + 1
        if so_far[line_start:].lstrip().startswith("|") and so_far[cut - 1] != "\n":
            cut = line_start  # a table row is checked whole, when its line ends
        return cut

    def _context(self) -> str:
        lines = [line for line in (*(h for _, h in self.headings), self.lead_in, *self.table) if line]
        current = self.line
        if current:
            marker = _ITEM.match(current)
            last = _LAST_SENTENCE.search(current)
            tail = (last.group(1) if last else current)[-CONTEXT_CHARS:]
            current = (marker.group(0) if marker and not tail.startswith(marker.group(0)) else "") + tail
        if not current:  # the piece starts a line
            return "".join(line + "\n" for line in lines)
        return "\n".join([*lines, current])

    def _learn(self, piece: str) -> None:
        """Keep the context the next piece needs: its heading, lead-in, table header and the line in progress."""
        lines = (self.line + piece).split("\n")
        for line in lines[:-1]:
            self._finished(line)
        self.line = lines[-1][-4 * CONTEXT_CHARS:]

    def _finished(self, line: str) -> None:
        text = line[:CONTEXT_CHARS]
        stripped = line.strip()
        if not stripped:
            self.table = []
            return
        if stripped.startswith("|"):
            if len(self.table) < 2:
                self.table.append(text)
            return
        self.table = []
        if _HEADING.match(line):
            level = len(line.lstrip()) - len(line.lstrip().lstrip("#")) or 7
            self.headings = [(lv, h) for lv, h in self.headings if lv < level][-5:] + [(level, text)]
            self.lead_in = ""
        elif _ITEM.match(line):
            return
        else:
            self.lead_in = text if stripped.endswith(":") else ""


def _shifted(finding: Finding, offset: int) -> Finding:
    return replace(finding, start=finding.start + offset, end=finding.end + offset,
                   sentence=(finding.sentence[0] + offset, finding.sentence[1] + offset))
