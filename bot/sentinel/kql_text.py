"""KQL text read as Kusto's lexer reads it, for the guard on an analyst's own query (``queries/analyst_kql.py``).

Tokens: whitespace (Unicode spaces and format characters too: a zero-width space or a byte-order mark is nothing to
Kusto's grammar, so it must be nothing here: ".show" after one is still a management command), comments (``//`` to
the end of the line), string literals ("..." and '...' with backslash escapes, ``@"..."`` verbatim with a doubled
quote inside, ``h"..."``/``H'...'`` obfuscated, ```` ```...``` ```` and ``~~~...~~~`` multi-line), names (letters,
digits, ``_``, ``$``; ``['name']`` and ``["name"]`` quoted names, which are names like any other), typed literals read
whole as Kusto does (``datetime(...)``, ``timespan(...)``, ``guid(...)``), numbers with a timespan or size suffix
(``14d``, ``1.5h``), and single punctuation characters. Statements are split on ``;`` outside
brackets, so a ``let`` function or view whose body holds a ``;`` is one statement.

Sources: Microsoft Learn "Syntax conventions", "The string data type" (string literal forms), "Entity names"
(bracket-quoted names), "The timespan data type" (literal suffixes), "Query statements".
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import timedelta

STRING, COMMENT, NAME, NUMBER, PUNCT, SPACE = "string", "comment", "name", "number", "punct", "space"
LITERAL = "literal"  # a typed literal read whole: datetime(...), timespan(...), guid(...)
_LITERAL_FORMS = frozenset({"datetime", "timespan", "time", "guid"})


class Unterminated(ValueError):
    """A string literal or comment block that does not end."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str  # as written
    start: int
    value: str = ""  # a name's name (without brackets and quotes), a string's contents (best effort)

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def word(self) -> str:
        """A name's name in lower case ("" for anything else)."""
        return self.value.lower() if self.kind == NAME else ""


def is_blank(ch: str) -> bool:
    """Whitespace to Kusto, and to this reading: any Unicode space or format character (zero-width, BOM, bidi)."""
    return ch.isspace() or unicodedata.category(ch) in ("Cf", "Zs", "Zl", "Zp")


def tokens(text: str) -> list[Token]:
    """``text`` as tokens; ``Unterminated`` when a string or a multi-line literal does not end."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        token = _token(text, i)
        out.append(token)
        i = token.end
    return out


def _token(text: str, i: int) -> Token:
    ch = text[i]
    if is_blank(ch):
        j = i
        while j < len(text) and is_blank(text[j]):
            j += 1
        return Token(SPACE, text[i:j], i)
    if text.startswith("//", i):
        j = text.find("\n", i)
        j = len(text) if j < 0 else j
        return Token(COMMENT, text[i:j], i)
    string_end = _string_at(text, i)
    if string_end:
        return Token(STRING, text[i:string_end], i, _contents(text[i:string_end]))
    if ch == "[" and text[i + 1:i + 2] in ("'", '"'):  # ['name'] or ["name"]
        inner_end = _string_at(text, i + 1)
        if inner_end and text[inner_end:inner_end + 1] == "]":
            return Token(NAME, text[i:inner_end + 1], i, _contents(text[i + 1:inner_end]))
    if ch.isalpha() or ch in "_$":
        j = i
        while j < len(text) and (text[j].isalnum() or text[j] in "_$"):
            j += 1
        close = text.find(")", j) if text[i:j].lower() in _LITERAL_FORMS and text[j:j + 1] == "(" else -1
        if close >= 0:  # datetime(2026-12-01), timespan(1d), guid(...): one literal, whatever is inside
            return Token(LITERAL, text[i:close + 1], i, text[j + 1:close])
        return Token(NAME, text[i:j], i, text[i:j])
    if ch.isdigit():
        j = i
        while j < len(text) and (text[j].isalnum() or text[j] == "."):
            j += 1
        return Token(NUMBER, text[i:j], i, text[i:j])
    return Token(PUNCT, ch, i, ch)


def _string_at(text: str, i: int) -> int:
    """The end of the string literal starting at ``i`` (0 when none starts there); Unterminated when it does not
    end."""
    j = i
    if text[j:j + 1] in ("h", "H") and text[j + 1:j + 2] in ("'", '"', "@"):
        j += 1  # obfuscated: h"..." or h@"..."
        if text[j] == "@" and text[j + 1:j + 2] not in ("'", '"'):
            return 0
    fence = text[j:j + 3]
    if fence in ("```", "~~~"):
        close = text.find(fence, j + 3)
        if close < 0:
            raise Unterminated("a multi-line string does not end")
        return close + 3
    verbatim = text[j:j + 1] == "@" and text[j + 1:j + 2] in ("'", '"')
    if verbatim:
        j += 1
    if text[j:j + 1] not in ("'", '"'):
        return 0
    quote, k = text[j], j + 1
    while k < len(text):
        c = text[k]
        if c == "\\" and not verbatim:
            k += 2
            continue
        if c == quote:
            if verbatim and text[k + 1:k + 2] == quote:
                k += 2
                continue
            return k + 1
        if c == "\n" and not verbatim:
            break
        k += 1
    raise Unterminated("a string does not end")


def _contents(literal: str) -> str:
    body = literal.lstrip("hH@")
    if body[:3] in ("```", "~~~"):
        return body[3:-3]
    return body[1:-1]


def code(toks: list[Token]) -> list[Token]:
    """The tokens that are code: no whitespace, no comments."""
    return [t for t in toks if t.kind not in (SPACE, COMMENT)]


def statements(toks: list[Token]) -> list[list[Token]]:
    """The code tokens split into statements at ``;`` outside brackets (empty statements dropped)."""
    out: list[list[Token]] = [[]]
    depth = 0
    for token in code(toks):
        if token.kind == PUNCT and token.text in "([{":
            depth += 1
        elif token.kind == PUNCT and token.text in ")]}":
            depth = max(depth - 1, 0)
        if token.kind == PUNCT and token.text == ";" and depth == 0:
            out.append([])
            continue
        out[-1].append(token)
    return [s for s in out if s]


_UNITS = {"d": timedelta(days=1), "day": timedelta(days=1), "days": timedelta(days=1),
          "h": timedelta(hours=1), "hr": timedelta(hours=1), "hrs": timedelta(hours=1), "hour": timedelta(hours=1),
          "hours": timedelta(hours=1), "m": timedelta(minutes=1), "min": timedelta(minutes=1),
          "minute": timedelta(minutes=1), "minutes": timedelta(minutes=1), "s": timedelta(seconds=1),
          "sec": timedelta(seconds=1), "second": timedelta(seconds=1), "seconds": timedelta(seconds=1)}


def timespan(token: Token) -> timedelta | None:
    """A timespan literal's length (``14d``, ``1.5h``, ``30min``), or None."""
    if token.kind != NUMBER:
        return None
    number = token.text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = token.text[len(number):].lower()
    if unit not in _UNITS:
        return None
    try:
        return float(number) * _UNITS[unit]
    except (ValueError, OverflowError):
        return None
