"""The structure of an answer, as the fact check reads it: headings, paragraphs, sentences, list items (with the
line they hang under), "Label: value" lines, and markdown table rows with their cells under their headers.

A unit is the smallest piece a claim is read in. Its ``parent`` is the line whose subject it inherits when it
names none itself: a list item under "### #14448" or under "#14448:" is about #14448; a "Label: value" line
and a table row carry their values as cells (``Cell``), so "Severity: High" and "| 14448 | High |" state a
field of the record, however the label is worded. ``mood`` says whether a sentence asserts anything: an
instruction ("Set Status to Closed"), a recommendation ("I'd assign it to Chen", "Consider ..."), a question or
a hypothetical asserts no fact about a record (identifiers in it are still checked).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    header: str  # the column header or the label, as written
    value: str
    start: int  # span of the value in the answer
    end: int


@dataclass(frozen=True)
class Unit:
    start: int
    end: int
    kind: str  # "heading", "item", "row", "text"
    cells: tuple[Cell, ...] | None = None  # a table row or a "Label: value" line
    parents: tuple[tuple[int, int], ...] = ()  # the lines whose subject it inherits, nearest first

    @property
    def parent(self) -> tuple[int, int] | None:
        return self.parents[0] if self.parents else None


_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s+\S|\*\*[^*]+\*\*\s*:?\s*$|__[^_]+__\s*$)")
_ITEM = re.compile(r"^(\s*)(?:[-*•+]|\d{1,3}[.)])\s+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LABEL = re.compile(r"^(?P<lead>[\s*_>]*)(?P<label>[A-Za-z][A-Za-z ()/.-]{0,28}?)[*_]*\s*:\s*[*_]*\s*"
                    r"(?P<value>[^\s*_].*?)[*_]*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z#\[*(\d✅⚠\"'])")
# What makes a line a lead-in for the list that follows ("Open incidents:", "#14448 - what I found:").
_LEAD_IN = re.compile(r":\s*$")


def read(answer: str) -> Iterator[Unit]:
    """Every unit of ``answer`` in order."""
    headers: list[str] | None = None
    headings: list[tuple[int, tuple[int, int]]] = []  # open headings: (level, span), the innermost last
    lead_in: tuple[int, int] | None = None
    items: list[tuple[int, tuple[int, int]]] = []  # open list items: (indent, span), for nested lists
    offset = 0
    lines = answer.split("\n")
    for index, line in enumerate(lines):
        start = offset
        offset += len(line) + 1
        end = start + len(line)
        if not line.strip():
            headers = None
            continue
        if line.lstrip().startswith("|"):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if headers is None and _TABLE_RULE.match(following):
                headers = [c.strip().strip("*_ ") for c in line.strip().strip("|").split("|")]
                continue
            if _TABLE_RULE.match(line):
                continue
            chain = _chain(headings)
            yield Unit(start, end, "row", tuple(_cells(line, start, headers or [])),
                       (lead_in, *chain) if lead_in else chain)
            continue
        headers = None
        if _HEADING.match(line):
            level = len(line.lstrip()) - len(line.lstrip().lstrip("#")) or 7  # a bold line is the innermost
            headings = [(lv, span) for lv, span in headings if lv < level] + [(level, (start, end))]
            lead_in, items = None, []
            yield Unit(start, end, "heading", None, _chain(headings[:-1]))
            continue
        item = _ITEM.match(line)
        if item:
            indent = len(item.group(1))
            items = [(i, span) for i, span in items if i < indent]
            near = items[-1][1] if items else lead_in
            items.append((indent, (start, end)))
            chain = _chain(headings)
            yield from _line(line, start, "item", (near, *chain) if near else chain, item.end())
            continue
        items = []
        lead_in = (start, end) if _LEAD_IN.search(line) and not _LABEL.match(line.rstrip(": ")) else None
        yield from _line(line, start, "text", _chain(headings), 0)


def _chain(headings: list[tuple[int, tuple[int, int]]]) -> tuple[tuple[int, int], ...]:
    return tuple(span for _, span in reversed(headings))


def _line(line: str, start: int, kind: str, parent: tuple[tuple[int, int], ...], body: int) -> Iterator[Unit]:
    """A list item or a paragraph line: "Label: value" cells, or its sentences."""
    text = line[body:]
    pairs = _pairs(text, start + body)
    if pairs:
        yield Unit(start, start + len(line), kind, pairs, parent)
        return
    label = _LABEL.match(text)
    if label and len(label.group("label").split()) <= 3 and len(text) <= 160 and not _SENTENCE_END.search(text):
        value_start = start + body + label.start("value")
        cell = Cell(label.group("label").strip(" .-"), label.group("value"), value_start,
                    value_start + len(label.group("value")))
        yield Unit(start, start + len(line), kind, (cell,), parent)
        return
    position = 0
    for m in _SENTENCE_END.finditer(line):
        yield Unit(start + position, start + m.start(), kind, None, parent)
        position = m.end()
    if line[position:].strip():
        yield Unit(start + position, start + len(line), kind, None, parent)


_SEPARATOR = re.compile(r"\s*[·|•;]\s*|\s{2,}")


def _pairs(text: str, offset: int) -> tuple[Cell, ...]:
    """"**Severity:** High · **Status:** Active · **Owner:** Chen": several labels on one line, one cell each."""
    if len(text) > 300 or text.count(":") < 2:
        return ()
    cells = []
    position = 0
    pieces = [*_SEPARATOR.finditer(text), None]
    for separator in pieces:
        end = separator.start() if separator else len(text)
        piece = text[position:end]
        label = _LABEL.match(piece)
        if not label or len(label.group("label").split()) > 3:
            return ()
        value_start = offset + position + label.start("value")
        cells.append(Cell(label.group("label").strip(" .-"), label.group("value"), value_start,
                          value_start + len(label.group("value"))))
        position = separator.end() if separator else end
    return tuple(cells) if len(cells) >= 2 else ()


def _cells(line: str, offset: int, headers: list[str]) -> list[Cell]:
    cells = []
    position = line.index("|") + 1
    for index, cell in enumerate(line.strip().strip("|").split("|")):
        start = line.index(cell, position) if cell else position
        header = headers[index] if index < len(headers) else ""
        stripped = cell.strip()
        lead = start + (len(cell) - len(cell.lstrip()))
        cells.append(Cell(header, stripped, offset + lead, offset + lead + len(stripped)))
        position = start + len(cell) + 1
    return cells


# -- mood ------------------------------------------------------------------------------------------------------

# Verbs an instruction starts with in a SOC answer. An imperative asserts nothing about a record.
_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:set|pick|choose|select|confirm|check|verify|review|consider|close|assign|reassign|escalate|"
    r"isolate|disable|block|reset|revoke|run|ask|page|notify|contact|open|look|investigate|pivot|search|query|hunt|"
    r"triage|prioriti[sz]e|start|focus|raise|lower|lower|mark|add|comment|tag|monitor|watch|keep|make|ensure|"
    r"validate|correlate|compare|collect|export|quarantine|remove|delete|enable|enforce|require|rotate|restrict|"
    r"follow|reach|call|email|message|use|go|navigate|filter|sort|see|note|treat|tell|let|give|take|work|handle|"
    r"get|find|identify|determine|re-?run|rerun|document|update|change|move|schedule|wait|hold|leave|skip|pull|"
    r"fetch|grab|dig|scope|contain|sweep|inspect|examine|reimage|re-image|patch)\b",
    re.IGNORECASE)
_HEDGED = re.compile(
    r"^(?:i'd|i would|i'd suggest|i suggest|i recommend|we should|we could|you should|you could|you may|you might|"
    r"you can|you'll want|it'd be|it would be|it may be worth|it might be worth|it's worth|worth|consider|"
    r"recommended|recommendation|suggestion|suggested|to\s+\w+|if|when|once|in case|should|would|could|might|"
    r"may|want me to|shall i|do you want|let me know|ideally|optionally)\b", re.IGNORECASE)
# What leads a sentence without being its verb: a list mark, "Next step:", a numbered ticket label ("Note 2:").
_LEAD = re.compile(r"^[\s\-*•+>#\d.)_`✅☐⬜🔲☑️⚠]*(?:(?:next steps?|action|actions|to do|todo|step \d+|then|and|also|"
                   r"finally|first|second|third|now|[a-z]{2,12}\s+#?\d{1,3}(?=\s*:))\s*[:,-]?\s*)?", re.IGNORECASE)


# A label whose value is advice, not a record's field ("Next step: ...", "Recommendation: ...").
ADVICE_LABEL = re.compile(r"^\W*(?:next steps?|recommendations?|recommended actions?|suggested actions?|actions?|"
                          r"to ?do|follow[- ]up|remediation|mitigation)\W*$", re.IGNORECASE)


def asserts(sentence: str) -> bool:
    """Whether a sentence states facts (not an instruction, a recommendation, a hypothetical or a question)."""
    text = sentence.strip()
    if not text or text.endswith("?"):
        return False
    body = _LEAD.sub("", text, count=1).lstrip("*_ ")
    return not (_IMPERATIVE.match(body) or _HEDGED.match(body))
