"""An investigation of an account or host searches the evidence by every key the alerts know it by: a person named
by UPN, DOMAIN\\name or SID, a device by name, FQDN or device id, gets the same evidence (``get_entity_identity``,
then each evidence query's ``also``). The keys come from alert data, so each must be a valid value of the kind."""

from __future__ import annotations

from typing import Any

import pytest

from bot.cards.investigation import investigation_card
from bot.investigation.run import investigate, other_keys, planned_queries
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryMetadata, QueryResult
from bot.sentinel.queries import COLUMNS, kql_of, make_query
from bot.sentinel.queries.entity_identity import IdentityKey
from bot.sentinel.queries.evidence.entity import EntityKind, detect
from tests.conftest import NOW, SEED
from tests.support import kusto
from tests.support.demo import copied_demo, copy_of_build
from tests.support.loganalytics_fake import RESULT_TYPES


@pytest.fixture(scope="module")
def client() -> SentinelClient:
    return SentinelClient(copied_demo(SEED, lambda: NOW))


def _domain_named_account() -> tuple[str, str]:
    """A person the demo's endpoint alerts name as CONTOSO\\name only, and the UPN other alerts give them."""
    conn = copy_of_build(SEED, NOW)[0]
    row = conn.execute("""SELECT e.EntityValue, i.IdentityKey FROM AlertEntity AS e JOIN AlertIdentity AS i
                          ON i.AlertRowId = e.AlertRowId AND i.EntityType = 'account' AND e.EntityType = 'account'
                          WHERE e.EntityValue LIKE 'CONTOSO\\%' AND i.IdentityKey LIKE '%@%'
                          ORDER BY e.EntityValue LIMIT 1""").fetchone()
    return row[0], row[1]


def _totals(result: QueryResult | QueryError) -> list[tuple[str, int]]:
    assert isinstance(result, QueryResult), result
    return [(s.title, s.total) for s in result.records[0].sections]


async def test_an_account_by_upn_domain_name_or_sid_gets_the_same_evidence(client: SentinelClient) -> None:
    domain_name, upn = _domain_named_account()
    by_upn = await investigate(client, {"entity": upn, "time_window": "last_30d"})
    assert isinstance(by_upn, QueryResult)
    also = by_upn.records[0].also
    sid = next(k for k in also if k.startswith("s-1-5-21-"))
    for asked in (domain_name, sid, upn.upper()):
        other = await investigate(client, {"entity": asked, "time_window": "last_30d", "entity_type": "account"})
        assert _totals(other) == _totals(by_upn), asked
        assert upn in other.records[0].also or asked.lower() == upn  # type: ignore[union-attr]
    assert sum(total for _, total in _totals(by_upn)) > 10


async def test_a_device_by_name_fqdn_or_device_id_gets_the_same_evidence(client: SentinelClient) -> None:
    by_name = await investigate(client, {"entity": "ws-fin-160", "time_window": "last_7d", "entity_type": "host"})
    assert isinstance(by_name, QueryResult)
    also = by_name.records[0].also
    fqdn = next(k for k in also if k.endswith(".corp.contoso.com"))
    device = next(k for k in also if len(k) == 40)
    for asked in (fqdn, device):
        other = await investigate(client, {"entity": asked, "time_window": "last_7d", "entity_type": "host"})
        assert _totals(other) == _totals(by_name), asked


async def test_the_card_and_the_texts_say_what_else_was_searched(client: SentinelClient) -> None:
    _, upn = _domain_named_account()
    result = await investigate(client, {"entity": upn, "time_window": "last_7d"})
    assert isinstance(result, QueryResult)
    card = investigation_card(result, lambda kind, key: None, NOW)
    texts = [item.get("text", "") for item in card["body"]]
    at = texts.index("Also searched as (the same account in the alerts):")
    assert texts[at + 1: at + 1 + len(result.records[0].also)] == list(result.records[0].also)
    assert all((("account", v) in result.records[0].identifiers()) for v in result.records[0].also)


class _Answers:
    """A client that answers the identity look-up as told and records what the evidence queries were asked."""

    source = "test"

    def __init__(self, identity: QueryResult | QueryError) -> None:
        self.identity = identity
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def run(self, tool: str, arguments: dict[str, Any]) -> QueryResult | QueryError:
        self.asked.append((tool, arguments))
        if tool == "get_entity_identity":
            return self.identity
        return QueryError("timeout", "slow", retry_possible=True, tool=tool)


def _identity(*keys: str) -> QueryResult:
    records = tuple(IdentityKey("account", "nina@contoso.com", k) for k in keys)
    return QueryResult(records, QueryMetadata(tool="get_entity_identity", parameters={}, total=len(records),
                                              returned=len(records), truncated=False, elapsed_ms=1.0, kql="",
                                              timespan="P90D", source="test"))


async def test_keys_from_alert_data_that_are_not_valid_values_are_dropped() -> None:
    hostile = ["nina@contoso.com", "S-1-5-21-1-2-3-1104", "a b\nc", "x|where 1==1", "nína@contoso.com", "\u202eevil",
               "CONTOSO\\nina", "0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87", "z" * 600]
    answers = _Answers(_identity(*hostile))
    found = await other_keys(answers, detect("nina@contoso.com"))  # type: ignore[arg-type]
    assert found == ("S-1-5-21-1-2-3-1104", "CONTOSO\\nina", "0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87")


async def test_a_failed_look_up_leaves_the_value_alone() -> None:
    answers = _Answers(QueryError("throttled", "busy", retry_possible=True, tool="get_entity_identity"))
    await investigate(answers, {"entity": "nina@contoso.com"})  # type: ignore[arg-type]
    evidence = [args for tool, args in answers.asked if tool.startswith("evidence_")]
    assert evidence and all("also" not in args for args in evidence)
    ip = _Answers(_identity("10.0.0.9"))
    assert await other_keys(ip, detect("10.0.0.1")) == ()  # type: ignore[arg-type]
    assert ip.asked == []  # not asked for kinds known by one key


def test_the_queries_parse_with_their_contract_columns() -> None:
    queries = planned_queries({"entity": "CONTOSO\\nina", "entity_type": "account"})
    queries += [make_query("evidence_signins", {"entity": "nina@contoso.com", "also": [
        "S-1-5-21-1-2-3-1104", "CONTOSO\\nina", '0f6c2b1e-5d3a-4c1b-9f00-3e2d1c0b9a87']}),
        make_query("get_entity_identity", {"entity": '"; SecurityAlert | take 100000 //'})]
    assert queries[0].tool == "get_entity_identity"
    texts = [kql_of(q) for q in queries]
    for query, result in zip(queries, kusto.check(texts), strict=True):
        assert result["ok"], (query.tool, result["errors"])
        columns = [(c["name"], c["type"]) for c in result["result_columns"]]
        assert [name for name, _ in columns] == list(COLUMNS[query.tool]), query.tool
        assert all(RESULT_TYPES.get(t, t) for _, t in columns)


def test_other_keys_must_be_of_the_entity_s_kind() -> None:
    from bot.sentinel.params import InvalidParameter

    with pytest.raises(InvalidParameter):
        make_query("evidence_signins", {"entity": "nina@contoso.com", "also": ["10.0.0.1 | take 1"]})
    with pytest.raises(InvalidParameter):
        make_query("evidence_signins", {"entity": "nina@contoso.com", "also": "S-1-5-21-1-2-3"})
    assert detect("ws1.corp.contoso.com", EntityKind.HOST).kind is EntityKind.HOST


# --- issue 35: an account by its sign-in name alone, as analysts write it ---

async def test_a_sign_in_name_alone_is_the_account_the_alerts_know_by_it(client: SentinelClient) -> None:
    _, upn = _domain_named_account()
    name = upn.split("@")[0]  # "first.last": reads as a domain too
    by_upn = await investigate(client, {"entity": upn, "time_window": "last_7d"})
    for arguments in ({"entity": name}, {"entity": name.upper(), "entity_type": "account"}):
        named = await investigate(client, arguments | {"time_window": "last_7d"})
        assert isinstance(named, QueryResult), named
        found = named.records[0]
        assert (found.entity_kind, found.entity) == ("account", upn) and _totals(named) == _totals(by_upn)
        assert found.read_as.startswith(f"{arguments['entity']} is the sign-in name of {upn}")
        assert found.read_as.endswith("not as a domain.") == ("entity_type" not in arguments)
    card = investigation_card(named, lambda kind, key: None, NOW)
    assert any(item.get("text", "").startswith(name.upper()) for item in card["body"])
    domain = await investigate(client, {"entity": "contoso.com", "time_window": "last_7d"})
    assert isinstance(domain, QueryResult)
    assert domain.records[0].entity_kind == "domain" and "read as a domain" in domain.records[0].read_as


async def test_a_sign_in_name_of_two_accounts_asks_which() -> None:
    answers = _Answers(QueryResult(tuple(IdentityKey("account", upn, upn) for upn in
                                         ("nina@contoso.com", "nina@fabrikam.com", "contoso\\nina")),
                                   QueryMetadata(tool="get_entity_identity", parameters={}, total=3, returned=3,
                                                 truncated=False, elapsed_ms=1.0, kql="", timespan="P90D",
                                                 source="test")))
    result = await investigate(answers, {"entity": "nina", "entity_type": "account"})  # type: ignore[arg-type]
    assert isinstance(result, QueryError) and result.code == "invalid_argument"
    assert "nina@contoso.com, nina@fabrikam.com" in result.message and "contoso\\nina" not in result.message
    assert [tool for tool, _ in answers.asked] == ["get_entity_identity"]  # nothing else ran


def test_the_sign_in_name_look_up_parses_and_keeps_the_value_one_literal() -> None:
    hostile = "victor.alvarez\" | union * //"
    queries = [make_query("get_entity_identity", {"entity": "victor.alvarez", "sign_in_name": True}),
               make_query("get_entity_identity", {"entity": hostile, "sign_in_name": True})]
    results = kusto.check([kql_of(q) for q in queries])
    assert all(r["ok"] for r in results), [r["errors"] for r in results]
    assert hostile in [lit["value"] for lit in results[1]["string_literals"]]
    assert detect("victor.alvarez", EntityKind.ACCOUNT).value == "victor.alvarez"


async def test_evidence_values_on_the_card_are_whole(client: SentinelClient) -> None:
    """Issue 35: hashes and command lines on the investigation card were cut at 60 characters with "…"; each
    cell is whole now (the card sheds rows, not the ends of values, when it is over its size)."""
    result = await investigate(client, {"entity": "ws-fin-160", "entity_type": "host", "time_window": "last_7d"})
    assert isinstance(result, QueryResult)
    card = " ".join(item.get("text", "") for item in investigation_card(result, lambda kind, key: None, NOW)["body"]
                    if isinstance(item, dict))
    processes = next(s for s in result.records[0].sections if s.name == "evidence_processes")
    long_lines = [r.command_line for r in processes.records if len(r.command_line) > 60 and "*" not in r.command_line
                  and "://" not in r.command_line]
    assert long_lines, "the demo host should run a command line longer than 60 characters"
    assert any(line in card for line in long_lines)
    files = next(s for s in result.records[0].sections if s.name == "evidence_files")
    hashes = [c for r in files.records for c in r.cells() if len(c) == 64]
    assert hashes and any(h in card for h in hashes)


async def test_a_sign_in_name_found_asks_the_look_up_once() -> None:
    upn, sid = "nina@contoso.com", "S-1-5-21-1-2-3-1104"
    answers = _Answers(QueryResult(tuple(IdentityKey("account", upn, key) for key in (upn, sid.lower())),
                                   QueryMetadata(tool="get_entity_identity", parameters={}, total=2, returned=2,
                                                 truncated=False, elapsed_ms=1.0, kql="", timespan="P90D",
                                                 source="test")))
    await investigate(answers, {"entity": "nina", "entity_type": "account"})  # type: ignore[arg-type]
    assert [tool for tool, _ in answers.asked].count("get_entity_identity") == 1
    evidence = [args for tool, args in answers.asked if tool.startswith("evidence_")]
    assert evidence and all(args["entity"] == upn and args["also"] == [sid.lower()] for args in evidence)


async def test_a_dotted_name_the_alerts_know_as_a_host_is_investigated_as_that_host(client: SentinelClient) -> None:
    by_name = await investigate(client, {"entity": "ws-fin-160", "time_window": "last_7d", "entity_type": "host"})
    assert isinstance(by_name, QueryResult)
    fqdn = next(k for k in by_name.records[0].also if k.endswith(".corp.contoso.com"))
    asked = await investigate(client, {"entity": fqdn.upper(), "time_window": "last_7d"})  # no type: reads as a domain
    assert isinstance(asked, QueryResult), asked
    found = asked.records[0]
    assert (found.entity_kind, found.entity) == ("host", "ws-fin-160") and _totals(asked) == _totals(by_name)
    assert found.read_as == f"{fqdn.upper()} is a name of host ws-fin-160 in the alerts: investigated as that host, " \
                            "not as a domain."
    typed = await investigate(client, {"entity": fqdn, "time_window": "last_7d", "entity_type": "domain"})
    assert isinstance(typed, QueryResult) and typed.records[0].entity_kind == "domain"  # a type given is kept


async def test_a_host_name_two_devices_share_stays_a_domain() -> None:
    answers = _Answers(QueryResult(tuple(IdentityKey("host", host, "web.contoso.com") for host in ("web-1", "web-2")),
                                   QueryMetadata(tool="get_entity_identity", parameters={}, total=2, returned=2,
                                                 truncated=False, elapsed_ms=1.0, kql="", timespan="P90D",
                                                 source="test")))
    await investigate(answers, {"entity": "web.contoso.com"})  # type: ignore[arg-type]
    evidence = [arguments for tool, arguments in answers.asked if tool.startswith("evidence_")]
    assert evidence and all(a["entity_type"] == "domain" and a["entity"] == "web.contoso.com" for a in evidence)


@pytest.mark.parametrize(("value", "kind", "said"), [
    ("10.0.0.5", "account", "'10.0.0.5' is an IP address, not an account: send it without a type"),
    ("https://x.example/a", "host", "is a URL, not a host"),
    ("d41d8cd98f00b204e9800998ecf8427e", "account", "is a file hash, not an account"),
    ("10.0.0.5", "domain", "is an IP address, not a domain"),
])
async def test_a_type_the_value_cannot_be_is_refused_with_the_form_to_send(
        client: SentinelClient, value: str, kind: str, said: str) -> None:
    result = await investigate(client, {"entity": value, "entity_type": kind})
    assert isinstance(result, QueryError) and result.code == "invalid_argument", result
    assert said in result.message and f"investigate {value}" in result.message


def test_a_device_id_given_as_a_host_is_a_host_though_it_looks_like_a_sha1() -> None:
    device = "0" * 8 + "a" * 32
    assert detect(device, EntityKind.HOST).kind is EntityKind.HOST
