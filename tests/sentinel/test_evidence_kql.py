"""Every evidence query an investigation can run, for every entity kind it reads and every window, goes through
Microsoft's Kusto parser against the Sentinel schemas: no errors, its result columns exactly its declaration's, and a
hostile entity value (each of HOSTILE_REFS, built past the detection that would refuse most of them) kept as one
string literal decoding to that text, with every other literal unchanged."""

from __future__ import annotations

import pytest

from bot.sentinel.params import TimeWindow
from bot.sentinel.queries import kql_of
from bot.sentinel.queries.evidence import EVIDENCE
from bot.sentinel.queries.evidence.entity import Entity, EntityKind
from tests.sentinel.test_kql_parser import HOSTILE_REFS, _expected_value
from tests.support import kusto

SAMPLES = {EntityKind.ACCOUNT: "alice@contoso.com", EntityKind.HOST: "WS-FIN-042", EntityKind.IP: "203.0.113.7",
           EntityKind.HASH: "a" * 64, EntityKind.URL: "https://evil.example/login", EntityKind.DOMAIN: "evil.example"}


def _variants() -> list:
    queries = []
    for _spec, cls in EVIDENCE:
        for kind in sorted(cls.kinds, key=lambda k: k.value):
            values = [SAMPLES[kind]] + (["b" * 32, "c" * 40] if kind is EntityKind.HASH else [])
            for value in values:
                for window in TimeWindow:
                    queries.append(cls(Entity(kind, value), window))
    return queries


@pytest.mark.slow
def test_every_evidence_query_parses_with_its_declared_columns() -> None:
    queries = _variants()
    assert len(queries) > 150
    results = kusto.check([kql_of(q) for q in queries])
    for query, result in zip(queries, results, strict=True):
        assert result["ok"], (query.tool, query.entity, result["errors"][:2])
        columns = tuple((c["name"], c["type"]) for c in result["result_columns"])
        spec = next(s for s, cls in EVIDENCE if cls is type(query))
        assert columns == spec.result, (query.tool, query.entity.kind)


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "cls"), EVIDENCE, ids=[spec.name for spec, _ in EVIDENCE])
def test_hostile_entity_values_stay_one_string_literal(spec, cls) -> None:
    for kind in cls.kinds:
        benign = SAMPLES[kind]
        hostile = HOSTILE_REFS + ["аlice@contoso.com", "ａｌｉｃｅ", "x\" or 1==1 or \"", "a | union *",
                                  ".drop table SigninLogs", "externaldata(x:string)[@\"http://x\"]"]
        queries = [cls(Entity(kind, benign), TimeWindow.LAST_7D)] + \
                  [cls(Entity(kind, value), TimeWindow.LAST_7D) for value in hostile]
        results = kusto.check([kql_of(q) for q in queries])
        base = [lit["value"] for lit in results[0]["string_literals"]]
        assert base.count(benign) == 1, (spec.name, kind)
        position = base.index(benign)
        for value, result in zip(hostile, results[1:], strict=True):
            assert result["ok"], (spec.name, kind, value[:40], result["errors"][:2])
            literals = [lit["value"] for lit in result["string_literals"]]
            assert literals[position] == _expected_value(value), (spec.name, value[:40])
            assert literals[:position] + literals[position + 1:] == base[:position] + base[position + 1:]
            assert tuple(c["name"] for c in result["result_columns"]) == spec.columns
