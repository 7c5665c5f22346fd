"""The table catalog (bot/sentinel/catalog.py, tables.json): every entity column, hunt default and hot column it names
is a column of its table (or a path into a dynamic one, or a hunt's virtual column), and the evidence queries, the
hunt and the demo store all read it rather than lists of their own."""

from __future__ import annotations

import importlib

import pytest

from bot.sentinel import catalog
from bot.sentinel.hunt.catalog import tables as hunt_tables
from bot.sentinel.queries.evidence import EVIDENCE
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind


def _column_of(table: catalog.Table, name: str) -> tuple[str, str]:
    """(column, type) an entity name reads: the column itself, or the dynamic column a path starts in."""
    column = name.split(".")[0].split("[")[0]
    types = dict(table.columns)
    assert column in types, f"{table.name}: {name} names no column"
    return column, types[column]


@pytest.mark.parametrize("name", catalog.ACTIVITY_TABLES)
def test_entity_columns_are_columns_of_their_table(name: str) -> None:
    table = catalog.table(name)
    for kind, names in table.entities.items():
        assert kind in catalog.ENTITY_KINDS and names, (name, kind)
        for entity in names:
            column, kind_type = _column_of(table, entity)
            if catalog.entity_sql(entity) == entity:
                assert kind_type == "string", (name, entity, kind_type)
            else:
                expression = catalog.entity_sql(entity)
                assert kind_type == "dynamic" and expression.startswith(f"json_extract({column}, "), entity


def test_the_hunt_reads_its_allow_list_and_hot_columns_from_the_catalog() -> None:
    allowed = [name for name, table in catalog.tables().items() if table.hunt]
    assert list(hunt_tables()) == allowed and "SecurityIncident" not in allowed
    for name, hot in catalog.HUNT_INDEXED.items():
        assert name in allowed, name
        for column in (*hot, *catalog.table(name).hunt):
            assert hunt_tables()[name].find(column) is not None, (name, column)


def test_the_settled_entity_columns() -> None:
    """The four entries the evidence queries, the demo and the test oracle once wrote differently, decided from the
    reference schemas: an account is a UPN (AccountName is a bare user name) or its SID or object id, a process's or
    file's hash is in its own MD5/SHA1/SHA256 columns (not its parent's), and RemoteUrl holds a domain as often as a
    URL."""
    processes, files = catalog.table("DeviceProcessEvents"), catalog.table("DeviceFileEvents")
    assert processes.entity_columns("account") == ("AccountUpn", "AccountSid", "AccountObjectId")
    assert processes.entity_columns("hash") == files.entity_columns("hash") == ("MD5", "SHA1", "SHA256")
    assert catalog.table("DeviceNetworkEvents").entity_columns("domain") == ("RemoteUrl",)
    assert {"AccountName", "InitiatingProcessSHA256"} <= set(processes.hot)  # still indexed for hunts


def test_every_evidence_list_matches_the_catalogs_columns() -> None:
    lists = 0
    for query_spec, cls in EVIDENCE:
        assert cls.title and cls.tool == query_spec.name, cls  # its section's heading, declared with the query
        rows = vars(importlib.import_module(cls.__module__)).get("ROWS")
        if isinstance(rows, RowList):
            lists += 1
            assert query_spec.demo == rows.demo
            for kind in cls.kinds - set(rows.custom):
                assert catalog.table(rows.table).entity_columns(kind.value), (cls.tool, kind)
    assert lists, "no evidence query declares a RowList"


def test_an_evidence_query_for_a_kind_the_catalog_lacks_is_refused_at_declaration() -> None:
    class Nowhere(EvidenceQuery):
        tool = "evidence_nowhere"
        kinds = frozenset({EntityKind.HASH})

    rows = RowList(table="DeviceLogonEvents", columns=(Column("TimeGenerated", "datetime"),),
                   order=(("TimeGenerated", True),), what="logons")
    with pytest.raises(ValueError, match="names no hash column in DeviceLogonEvents"):
        spec(Nowhere, rows, lambda row: row, keys=())


def test_a_malformed_entity_name_is_refused() -> None:
    assert catalog.entity_sql("TargetResources[0].userPrincipalName") == \
        "json_extract(TargetResources, '$[0].userPrincipalName')"
    with pytest.raises(ValueError, match="not a column or a path"):
        catalog.entity_sql("InitiatedBy.user'); DROP TABLE x; --")
