"""Counts, on the real alert samples in tests/data/sample-rows (and optionally the demo), the entities the alert rows
hold against those the bot recovers, per sample file and per type, and the identifiers that reach the analyst.

Sample files are either developed on (the entity rules were written and fixed looking at them) or held out (picked
before they were read, never used to change a rule); their figures are printed apart, held-out ones last.

"Held": every object with a Type anywhere in an alert's Entities (top level or inline), once per ``$id``; Defender's
``remediation-provider`` objects (the state of a remediation, no entity) are counted apart.
"Recovered": the (type, value) pairs the queries count and pivot on. "Shown": identifiers that reach a card or the
model: the values, plus (where this code has the entity model) the other identifiers the incident detail shows.
Run with the code of any revision on the path to compare before and after; it reads whichever entity reading that
revision has (``bot.sentinel.entities`` or the older top-level ``entity_value``).

    python bench/entity_recovery.py [--demo]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "data" / "sample-rows"
# Identifiers counted as shown, by kind: SIDs, object ids (Entra, AD, Exchange), device ids (Entra, Defender, Azure).
IDS = {"hash": ("filehash",), "Sid": ("account",), "AadUserId": ("account",), "ObjectGuid": ("account",),
       "AadId": ("mailbox",), "AadDeviceId": ("host",), "MdatpDeviceId": ("host",), "MachineId": ("host",),
       "OMSAgentID": ("host",), "AzureID": ("host",)}
NOT_ENTITIES = ("remediation-provider",)


def _stixshifter_alert() -> list[Any]:
    rows = json.loads((SAMPLES / "stixshifter_test_rows.json").read_text())
    grouped = next(v for k, v in rows.items() if k.endswith("::DATA1"))["Entities"]
    items: list[Any] = []
    for value in grouped.values():
        items.extend(value if isinstance(value, list) else [value])
    return items


def _evidence_alerts(name: str) -> list[Any]:
    """Defender AlertEvidence rows: each row's entity object (AdditionalFields) as a one-entity alert."""
    return [[row["AdditionalFields"]] for row in json.loads((SAMPLES / name).read_text())["rows"]]


def samples() -> list[tuple[str, bool, list[Any]]]:
    """(sample file, held out, its alerts' Entities)."""
    msticpy = json.loads((SAMPLES / "msticpy_sample_alert_with_Entities.json").read_text())["Entities"]
    return [("msticpy_sample_alert_with_Entities.json (Defender for Cloud)", False, [msticpy]),
            ("sekoia_m365d_alert_evidence.json (Defender XDR)", False,
             _evidence_alerts("sekoia_m365d_alert_evidence.json")),
            ("stixshifter_test_rows.json DATA1 (Defender for Cloud)", True, [_stixshifter_alert()]),
            ("sekoia_m365d_alert_evidence_heldout.json (Defender XDR)", True,
             _evidence_alerts("sekoia_m365d_alert_evidence_heldout.json"))]


def demo_alerts() -> list[Any]:
    from bot.demo import generator

    return [json.loads(r["Entities"]) for r in generator.generate(7, datetime(2026, 3, 1, tzinfo=UTC), 7).alert_rows]


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _objects(item)
    elif isinstance(node, dict):
        if "Type" in node:
            yield node
        for value in node.values():
            yield from _objects(value)


def held(alert: list[Any]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for index, obj in enumerate(_objects(alert)):
        seen.setdefault(str(obj.get("$id", f"#{index}")), obj)
    return list(seen.values())


def recovered(alert: list[Any]) -> tuple[set[tuple[str, str]], list[tuple[str, str, str]]]:
    """(type, lower value) pairs counted, and (type, field, text) identifiers shown beyond the values."""
    try:
        from bot.sentinel.entities import alert_entity_values, defined_entities, entity_value, other_identifiers
    except ImportError:  # an older revision: top-level items, one value each
        from bot.sentinel.queries import entity_value as old_value

        values = {(str(i["Type"]), v.lower()) for i in alert[:128] if (v := old_value(i))}
        return values, []
    values = set(alert_entity_values(alert))
    extra = [(str(o["Type"]), f, t) for o in defined_entities(alert) if (v := entity_value(o))
             for f, t in other_identifiers(o, v)]
    return values, extra


def measure(alerts: list[Any]) -> Counter:
    """Per alert list: held.<type>, recovered.<type>, shown.<identifier>, not_entities, upn_missing."""
    counts: Counter = Counter()
    seen: set[tuple[str, str]] = set()  # identifiers shown, each once over the alerts (as held_identifiers counts)
    for alert in alerts:
        objects = held(alert)
        for o in objects:
            kind = str(o["Type"])
            counts["not_entities" if kind in NOT_ENTITIES else f"held.{kind}"] += 1
        values, extra = recovered(alert)
        counts.update(f"recovered.{t}" for t, _ in values)
        upns = {str(o.get("UserPrincipalName", "")).lower() for o in objects if o.get("Type") == "account"}
        counts["upn_missing"] += sum(1 for t, v in values if t == "account" and "@" in v and v not in upns)
        for kind, value in values:
            if kind in ("filehash", "process") and (kind, value) not in seen:
                seen.add((kind, value))
                counts["shown.hash" if kind == "filehash" else "shown.process"] += 1
        for o in objects:  # an identifier is shown when it is an entity's value or listed beside it
            for field, types in IDS.items():
                text = str(o.get(field) or "").lower()
                if field == "hash" or not text or o.get("Type") not in types or (field, text) in seen:
                    continue
                if (o["Type"], text) in values or (o["Type"], field, str(o.get(field))) in extra:
                    seen.add((field, text))
                    counts[f"shown.{field}"] += 1
    return counts


def held_identifiers(alerts: list[Any]) -> Counter:
    """Distinct identifiers of each kind the alerts hold (what could be shown)."""
    found: dict[str, set[str]] = {}
    for alert in alerts:
        for o in held(alert):
            for field, types in IDS.items():
                if field == "hash":
                    text = str(o.get("Value") or "") if o.get("Type") == "filehash" else ""
                else:
                    text = str(o.get(field) or "") if o.get("Type") in types else ""
                if text:
                    found.setdefault(field, set()).add(text.lower())
    return Counter({field: len(texts) for field, texts in found.items()})


def report(name: str, alerts: list[Any]) -> Counter:
    counts = measure(alerts)
    kinds = sorted({k.split(".", 1)[1] for k in counts if k.startswith(("held.", "recovered."))})
    print(f"\n{name}: {len(alerts)} alert(s)")
    print(f"  {'type':<22}{'held':>6}{'recovered':>11}")
    for kind in kinds:
        print(f"  {kind:<22}{counts['held.' + kind]:>6}{counts['recovered.' + kind]:>11}")
    held_total = sum(v for k, v in counts.items() if k.startswith("held."))
    got_total = sum(v for k, v in counts.items() if k.startswith("recovered."))
    print(f"  total{'':<17}{held_total:>6}{got_total:>11}")
    if counts["not_entities"]:
        print(f"  (and {counts['not_entities']} {'/'.join(NOT_ENTITIES)} object(s), no entity)")
    holds = held_identifiers(alerts)
    counts.update({f"holds.{k}": v for k, v in holds.items()})
    print("  shown (of held): " + ", ".join(
        f"{k} {counts['shown.' + k]}" + (f"/{holds[k]}" if k != "process" else "")
        for k in ("hash", "process", *[k for k in IDS if k != "hash"])))
    print(f"  accounts shown that are in no UserPrincipalName of the alert: {counts['upn_missing']}")
    return counts


def total(label: str, counts: list[Counter]) -> None:
    whole: Counter = sum(counts, Counter())
    held_total = sum(v for k, v in whole.items() if k.startswith("held."))
    got_total = sum(v for k, v in whole.items() if k.startswith("recovered."))
    shown = ", ".join(f"{k} {whole['shown.' + k]}" + (f"/{whole['holds.' + k]}" if k != "process" else "")
                      for k in ("hash", "process", *[k for k in IDS if k != "hash"]))
    print(f"\n{label}: held {held_total}, recovered {got_total}; shown: {shown}; accounts shown that are in no "
          f"UserPrincipalName: {whole['upn_missing']}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", action="store_true", help="also the demo's alerts of 7 days")
    args = parser.parse_args()
    sets = samples()
    developed = [report(f"{name} [developed on]", alerts) for name, out, alerts in sets if not out]
    held_out = [report(f"{name} [HELD OUT]", alerts) for name, out, alerts in sets if out]
    total("All developed-on samples", developed)
    total("All held-out samples", held_out)
    if args.demo:
        report("demo (seed 7, 7 days)", demo_alerts())
    return 0


if __name__ == "__main__":
    sys.path.append(str(ROOT))  # after PYTHONPATH: another revision given there is the one measured
    raise SystemExit(main())
