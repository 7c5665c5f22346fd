"""How far back an analyst's KQL looks by its own words, so the API's time range can cover it (``analyst_kql``).

The Log Analytics API applies its ``timespan`` on top of the query: a query that writes ``ago(14d)`` under the
default 24 hours silently reads one day, and a "first seen" hunt calls everything new. This reads the time
expressions the query writes, from its tokens (``kql_text``), as small arithmetic over two kinds of value: a
*span* (``14d``, ``timespan(14d)``, ``totimespan("14.00:00:00")``, a number times a span) and a *point* (how far
back from now: ``ago(span)``, ``now()``, ``now(-span)``, ``point - span``, ``startofday(point)``, which reaches back
to that day's start, so a day more; a week and a month for ``startofweek``/``startofmonth``). ``let`` names bound
to either are resolved (a later binding wins, bodies of functions included). The lookback is the farthest point
written anywhere. What it cannot read (a column, a ``datetime(...)`` date, ``datetime_add``) counts for nothing:
the analyst can still give the window (``kql 30d ...``). Every ``ago()`` counts, whatever column it is compared with,
so a filter on another time column may widen the range more than needed (never less).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from bot.sentinel import kql_text
from bot.sentinel.kql_text import LITERAL, NAME, NUMBER, STRING, Token

MAX_DEPTH = 40  # nested expressions and names resolved through names: a hostile text cannot recurse without end
_START_OF = {"startofday": timedelta(days=1), "startofweek": timedelta(days=7), "startofmonth": timedelta(days=31),
             "startofyear": timedelta(days=366)}


@dataclass(frozen=True)
class _Value:
    kind: str  # "span", "point" (back from now) or "number"
    amount: float = 0.0  # a number's value
    span: timedelta = timedelta()


_NOTHING = None


def lookback(statements: list[list[Token]]) -> timedelta | None:
    """The farthest point back from now that the statements write, or None."""
    reader = _Reader()
    for statement in statements:
        reader.bind(statement)
    points = [reader.value(tokens, 0, 0)[0] for tokens in reader.names.values()]  # let start = ago(1d) - 14d
    for statement in statements:
        points += [reader.value(statement, index, 0)[0] for index, token in enumerate(statement)
                   if token.word in ("ago", "now") or token.word in _START_OF]
    spans = [p.span for p in points if p is not None and p.kind == "point" and p.span > timedelta()]
    return max(spans, default=None)


class _Reader:
    def __init__(self) -> None:
        self.names: dict[str, list[Token]] = {}

    def bind(self, tokens: list[Token]) -> None:
        """``let name = <expression>`` anywhere in the tokens (function bodies too): the expression's tokens."""
        for index, token in enumerate(tokens):
            if token.word == "let" and index + 2 < len(tokens) and tokens[index + 1].kind == NAME \
                    and tokens[index + 2].text == "=":
                end = index + 3
                depth = 0
                while end < len(tokens) and not (depth == 0 and tokens[end].text in (";", "}", ")")):
                    depth += tokens[end].text in "([{"
                    depth -= tokens[end].text in ")]}"
                    end += 1
                self.names[tokens[index + 1].word] = tokens[index + 3:end]

    # expression := term (("+" | "-") term)*; term := factor (("*" | "/") factor)*
    def value(self, tokens: list[Token], at: int, depth: int) -> tuple[_Value | None, int]:
        left, at = self._term(tokens, at, depth)
        while at < len(tokens) and tokens[at].text in ("+", "-"):
            operator = tokens[at].text
            right, at = self._term(tokens, at + 1, depth)
            left = _combine(left, operator, right)
        return left, at

    def _term(self, tokens: list[Token], at: int, depth: int) -> tuple[_Value | None, int]:
        left, at = self._factor(tokens, at, depth)
        while at < len(tokens) and tokens[at].text in ("*", "/"):
            operator = tokens[at].text
            right, at = self._factor(tokens, at + 1, depth)
            left = _combine(left, operator, right)
        return left, at

    def _factor(self, tokens: list[Token], at: int, depth: int) -> tuple[_Value | None, int]:
        if at >= len(tokens) or depth > MAX_DEPTH:
            return _NOTHING, at + 1
        token = tokens[at]
        if token.text == "(":
            inner, at = self.value(tokens, at + 1, depth + 1)
            return inner, _past(tokens, at, ")")
        if token.text == "-":
            inner, at = self._factor(tokens, at + 1, depth + 1)
            return _combine(_Value("number", -1.0), "*", inner), at
        if token.kind == NUMBER:
            span = kql_text.timespan(token)
            return (_Value("span", span=span) if span is not None else _number(token.text)), at + 1
        if token.kind == LITERAL and token.text.lower().startswith("timespan"):
            return _span_text(token.value), at + 1
        if token.kind == NAME and at + 1 < len(tokens) and tokens[at + 1].text == "(":
            return self._call(tokens, at, depth)
        if token.kind == NAME and token.word in self.names:
            bound, _ = self.value(self.names[token.word], 0, depth + 1)
            return bound, at + 1
        return _NOTHING, at + 1

    def _call(self, tokens: list[Token], at: int, depth: int) -> tuple[_Value | None, int]:
        name = tokens[at].word
        if at + 2 < len(tokens) and tokens[at + 2].text == ")":  # no arguments: now()
            return (_Value("point") if name == "now" else _NOTHING), at + 3
        argument, end = self.value(tokens, at + 2, depth + 1)
        end = _past(tokens, end, ")")
        if name == "ago" and argument is not None and argument.kind == "span":
            return _Value("point", span=argument.span), end
        if name == "now" and argument is not None and argument.kind == "span":
            return _Value("point", span=-argument.span), end
        if name in _START_OF and argument is not None and argument.kind == "point":
            return _Value("point", span=argument.span + _START_OF[name]), end
        if name == "totimespan":  # of a text ("14d", "14.00:00:00") or of a span already
            if tokens[at + 2].kind == STRING:
                return _span_text(tokens[at + 2].value), end
            return (argument if argument is not None and argument.kind == "span" else _NOTHING), end
        return _NOTHING, end


def _past(tokens: list[Token], at: int, closing: str) -> int:
    return at + 1 if at < len(tokens) and tokens[at].text == closing else at


def _number(text: str) -> _Value | None:
    try:
        return _Value("number", float(text))
    except ValueError:
        return _NOTHING


def _span_text(text: str) -> _Value | None:
    """A timespan written as text: "14d", "1.5h" or "[d.]hh:mm[:ss]"."""
    text = text.strip()
    span = kql_text.timespan(Token(NUMBER, text, 0))
    if span is not None:
        return _Value("span", span=span)
    days, _, clock = text.rpartition(".") if text.count(":") and "." in text.split(":")[0] else ("0", "", text)
    parts = clock.split(":")
    try:
        hours, minutes, seconds = (float(p) for p in (parts + ["0", "0"])[:3])
        return _Value("span", span=timedelta(days=float(days or 0), hours=hours, minutes=minutes, seconds=seconds))
    except (ValueError, OverflowError):
        return _NOTHING


def _combine(left: _Value | None, operator: str, right: _Value | None) -> _Value | None:
    if left is None or right is None:
        return _NOTHING
    kinds = (left.kind, right.kind)
    try:
        if operator in "+-":
            sign = 1 if operator == "+" else -1
            if kinds == ("span", "span"):
                return _Value("span", span=left.span + sign * right.span)
            if kinds == ("point", "span"):  # a point minus a span is further back
                return _Value("point", span=left.span - sign * right.span)
            if kinds == ("point", "point") and operator == "-":
                return _Value("span", span=right.span - left.span)
            if kinds == ("number", "number"):
                return _Value("number", left.amount + sign * right.amount)
            return _NOTHING
        if kinds == ("span", "number"):
            return _Value("span", span=left.span * right.amount if operator == "*" else left.span / right.amount)
        if kinds == ("number", "span") and operator == "*":
            return _Value("span", span=right.span * left.amount)
        if kinds == ("number", "number"):
            return _Value("number", left.amount * right.amount if operator == "*" else left.amount / right.amount)
    except (OverflowError, ZeroDivisionError, ValueError):
        return _NOTHING
    return _NOTHING

