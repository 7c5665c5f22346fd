"""Evaluates the small part of KQL the entity extraction is written in, on one row's dynamic values.

``kql.nested_entities`` and ``kql.entity_value_expression`` are generated text; this evaluator reads that text
(not the Python tables it was generated from) and computes what Log Analytics would: ``pack_array``, ``case``,
``iff``, ``strcat``, ``tostring``, ``tolower``, ``isnotempty``, ``==``, ``!=``, ``contains``, ``!contains``,
``startswith``, ``and``, ``or``, and member access ``V["k"]`` /
``V[0]`` on dynamic values (null when absent). So a test can compare the KQL's answer with the Python decoding on
the same real rows without a Kusto engine. Anything outside that subset raises, so a change to the generated KQL
that this cannot read fails the test instead of passing unread.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.sentinel.entities import kql_tostring as tostring  # KQL's tostring() of a JSON value

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>\d+)|(?P<op>!contains|==|!=|[()\[\],])'
                    r'|(?P<name>[A-Za-z_]\w*))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"cannot read KQL at {text[pos:pos + 30]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    def __init__(self, text: str, variables: dict[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.vars = variables

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise ValueError(f"expected {value!r}, got {token[1]!r}")
        self.pos += 1
        return token

    def expression(self) -> Any:
        left = self.conjunction()
        while self.peek() == ("name", "or"):
            self.take()
            right = self.conjunction()
            left = bool(left) or bool(right)
        return left

    def conjunction(self) -> Any:
        left = self.comparison()
        while self.peek() == ("name", "and"):
            self.take()
            right = self.comparison()
            left = bool(left) and bool(right)
        return left

    def comparison(self) -> Any:
        left = self.primary()
        if self.peek()[1] == "==":
            self.take()
            return tostring(left) == tostring(self.primary())
        if self.peek()[1] == "!=":
            self.take()
            return tostring(left) != tostring(self.primary())
        if self.peek()[1] == "!contains":
            self.take()
            return tostring(self.primary()).lower() not in tostring(left).lower()
        if self.peek() == ("name", "contains"):  # Kusto's contains and startswith ignore letter case
            self.take()
            return tostring(self.primary()).lower() in tostring(left).lower()
        if self.peek() == ("name", "startswith"):
            self.take()
            return tostring(left).lower().startswith(tostring(self.primary()).lower())
        return left

    def arguments(self) -> list[Any]:
        self.take("(")
        args = [self.expression()]
        while self.peek()[1] == ",":
            self.take()
            args.append(self.expression())
        self.take(")")
        return args

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "str":
            return json.loads(value)
        if kind == "num":
            return int(value)
        if value == "(":  # a parenthesized expression
            inner = self.expression()
            self.take(")")
            return inner
        if kind != "name":
            raise ValueError(f"unexpected {value!r}")
        if self.peek()[1] == "(":
            return self.call(value)
        if value not in self.vars:
            raise ValueError(f"unknown name {value!r}")
        return self.member(self.vars[value])

    def member(self, current: Any) -> Any:
        while self.peek()[1] == "[":
            self.take("[")
            key = self.primary()
            self.take("]")
            if isinstance(key, int):
                current = current[key] if isinstance(current, list) and key < len(current) else None
            else:
                current = current.get(key) if isinstance(current, dict) else None
        return current

    def call(self, name: str) -> Any:
        args = self.arguments()
        if name == "pack_array":
            return args
        if name == "tostring":
            return tostring(args[0])
        if name == "tolower":
            return tostring(args[0]).lower()
        if name == "isnotempty":
            return tostring(args[0]) != ""
        if name == "strcat":
            return "".join(tostring(a) for a in args)
        if name == "iff":
            return args[1] if args[0] else args[2]
        if name == "case":
            for i in range(0, len(args) - 1, 2):
                if args[i]:
                    return args[i + 1]
            return args[-1]
        raise ValueError(f"function {name} is outside the evaluated subset")


def evaluate(text: str, **variables: Any) -> Any:
    """The value of one KQL expression over the given dynamic values (all arguments are evaluated, as in KQL)."""
    parser = _Parser(text, variables)
    result = parser.expression()
    if parser.pos != len(parser.tokens):
        raise ValueError(f"unread KQL: {parser.tokens[parser.pos:][:5]}")
    return result
