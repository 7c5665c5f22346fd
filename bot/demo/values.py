"""Small deterministic helpers shared by every part of the demo generator.

Stable hashing and draws from a seeded ``random.Random`` (the output is a pure function of the seed, so
randomness comes only from these and the Random itself), and the storage form of values: fixed-width UTC
timestamps of naive datetimes (aware ones: ``bot.sentinel.demo_sql.iso``), compact JSON text, and texts with their
``{placeholders}`` filled from a cast.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import uuid
from datetime import datetime

from bot.demo.catalog import DEMO_SUFFIX


def stable_int(*parts: object) -> int:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:16], "big")


def static_guid(seed: int, *parts: object) -> str:
    return str(uuid.UUID(int=stable_int("sentinel-demo", seed, "guid", *parts), version=4))


def row_guid(*parts: object) -> str:
    """A version-4-shaped GUID from a hash of ``parts``: the activity tables' row ids (cheaper than static_guid,
    which the incident rows keep)."""
    h = hashlib.blake2b("|".join(str(p) for p in parts).encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_GUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_GUID_SET = (0x4000 << 64) | (0x8000 << 48)


def guid(rng: random.Random) -> str:
    """str(uuid.UUID(int=rng.getrandbits(128), version=4)), formatted directly (several times faster)."""
    h = f"{(rng.getrandbits(128) & _GUID_CLEAR) | _GUID_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def timestamp(moment: datetime) -> str:
    # Internal datetimes are naive UTC; the storage form is fixed-width with a Z.
    return moment.isoformat(timespec="microseconds") + "Z"


_ENCODER = json.JSONEncoder(separators=(",", ":"))
try:  # the C encoder behind JSONEncoder.encode, built once instead of on every call (a third faster)
    from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]

    _C_ENCODE = c_make_encoder(None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", False, False, True)
except (ImportError, TypeError):  # pragma: no cover - interpreters without the C accelerator
    _C_ENCODE = None


def compact_json(value: object) -> str:
    """Compact JSON text, exactly json.dumps(value, separators=(",", ":"))."""
    if _C_ENCODE is None or isinstance(value, str):  # pragma: no cover
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def choice(rng: random.Random, options):
    # Faster than rng.choice (one float draw, no rejection sampling); same determinism.
    return options[int(rng.random() * len(options))]


def randrange(rng: random.Random, start: int, stop: int) -> int:
    return start + int(rng.random() * (stop - start))


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return low * (high / low) ** rng.random()


def weighted_index(rng: random.Random, weights: tuple[float, ...]) -> int:
    """An index drawn with probability proportional to its weight (a zero weight is never drawn)."""
    total = sum(weights)
    point = rng.random() * total
    running = 0.0
    for index, weight in enumerate(weights):
        running += weight
        if point < running and weight > 0:
            return index
    return max(i for i, w in enumerate(weights) if w > 0)


def describe(text: str, cast: dict) -> str:
    """A description: the filled text, the attacker's string when the text has no slot for it, the demo label."""
    described = fill(text, cast)
    if cast.get("hostile") and not any(slot in text for slot in ("{cmd}", "{subject}", "{rule}")):
        described += f" User agent of the source request: \"{cast['user_agent']}\"."
    return described + DEMO_SUFFIX


_PLACEHOLDER = re.compile(r"\{([a-z0-9_]+)\}")


def fill(text: str, cast: dict) -> str:
    """Replace {key} with cast[key]; other braces (e.g. bcdedit's {default}) stay as they are."""
    if "{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: str(cast[m.group(1)]) if m.group(1) in cast else m.group(0), text)
