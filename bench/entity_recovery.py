"""Counts, on the real alert samples in tests/data/sample-rows (and optionally the demo), the entities the alert rows
hold against those the bot recovers, per type, and the identifiers that reach the analyst.

"Held": every object with a Type anywhere in an alert's Entities (top level or inline), once per ``$id``.
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
IDS = {"hash": ("filehash",), "Sid": ("account",), "AadUserId": ("account",), "ObjectGuid": ("account",),
       "AadDeviceId": ("host",), "MdatpDeviceId": ("host",), "OMSAgentID": ("host",), "AzureID": ("host",)}


def samples() -> dict[str, list[Any]]:
    msticpy = json.loads((SAMPLES / "msticpy_sample_alert_with_Entities.json").read_text())["Entities"]
    rows = json.loads((SAMPLES / "stixshifter_test_rows.json").read_text())
    grouped = next(v for k, v in rows.items() if k.endswith("::DATA1"))["Entities"]
    held_out: list[Any] = []
    for value in grouped.values():
        held_out.extend(value if isinstance(value, list) else [value])
    return {"msticpy (developed on)": [msticpy], "stix-shifter Defender for Cloud (held out)": [held_out]}


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


def report(name: str, alerts: list[Any]) -> None:
    held_types: Counter = Counter()
    got_types: Counter = Counter()
    shown: Counter = Counter()
    upns_missing = 0
    for alert in alerts:
        objects = held(alert)
        held_types.update(str(o["Type"]) for o in objects)
        values, extra = recovered(alert)
        got_types.update(t for t, _ in values)
        upns = {str(o.get("UserPrincipalName", "")).lower() for o in objects if o.get("Type") == "account"}
        upns_missing += sum(1 for t, v in values if t == "account" and "@" in v and v not in upns)
        shown["hash"] += sum(1 for t, _ in values if t == "filehash")
        shown["process"] += sum(1 for t, _ in values if t == "process")
        for o in objects:  # an identifier is shown when it is an entity's value or listed beside it
            for field, types in IDS.items():
                text = str(o.get(field, "")).lower()
                if field != "hash" and text and o.get("Type") in types and (
                        (o["Type"], text) in values or (o["Type"], field, str(o.get(field))) in extra):
                    shown[field] += 1
    print(f"\n{name}: {len(alerts)} alert(s)")
    print(f"  {'type':<22}{'held':>6}{'recovered':>11}")
    for kind in sorted(held_types):
        print(f"  {kind:<22}{held_types[kind]:>6}{got_types[kind]:>11}")
    print(f"  total{'':<17}{sum(held_types.values()):>6}{sum(got_types.values()):>11}")
    print("  shown: " + ", ".join(f"{k} {shown[k]}" for k in ("hash", "process", *[k for k in IDS if k != "hash"])))
    print(f"  accounts shown that are in no UserPrincipalName of the alert: {upns_missing}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", action="store_true", help="also the demo's alerts of 7 days")
    args = parser.parse_args()
    for name, alerts in samples().items():
        report(name, alerts)
    if args.demo:
        report("demo (seed 7, 7 days)", demo_alerts())
    return 0


if __name__ == "__main__":
    sys.path.append(str(ROOT))  # after PYTHONPATH: another revision given there is the one measured
    raise SystemExit(main())
