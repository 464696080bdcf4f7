"""Hostile messages: every message kind, every field, with extreme and wrong values.

:func:`generate_case` draws one :class:`AdversarialCase` from a ``random.Random``, so the same
generator serves ``streamctl bench adversarial`` (seeded, thousands of cases) and the property
tests (hypothesis hands it a ``Random`` it controls and can shrink). A case is a raw envelope
(what a client library, the gateway or a raw Temporal caller could put on the wire) or a
NebulaStream statement with extreme values spliced into it; nothing here knows what the
coordinator should answer. The property checked elsewhere is only: every case is answered or
dropped, the coordinator goes on answering, and no workflow task fails.
"""

from __future__ import annotations

import dataclasses
import random
import typing
from dataclasses import dataclass
from typing import Any

from streamctl.protocol import messages as m

BIG_STRING_BYTES = 1024 * 1024

EXTREME_INTEGERS = (
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**20,
    -(10**30),
)
EXTREME_FLOATS = (0.0, -0.0, 1e-320, 1.5, 1e308, -1e308, 2.0**63, float("inf"), float("nan"))


def _extreme_strings(rng: random.Random) -> list[str]:
    return [
        "",
        "\x00",
        "a\x00b",
        "\ud800",
        "x\udfffy",
        "😀" * 3,
        "x" * 129,
        "x" * 300,
        "KEY",
        "password",
        "../../etc/passwd",
        "'; DROP TABLE workers; --",
        "SELECT",
        "\u202e\u200b",
        "a" * rng.choice((1000, 70_000)),
    ]


@dataclass(frozen=True)
class AdversarialCase:
    """One hostile message: ``channel`` says how it travels (``request``, ``event`` or
    ``statement``); ``envelope`` is the raw wire form (id, kind, v, body)."""

    channel: str
    envelope: dict[str, Any]
    note: str

    @property
    def kind(self) -> str:
        kind = self.envelope.get("kind")
        return kind if isinstance(kind, str) else repr(kind)[:40]


def _nested(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


def _wrong_value(rng: random.Random) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return rng.choice(EXTREME_INTEGERS)
    if choice == 1:
        return rng.choice(EXTREME_FLOATS)
    if choice == 2:
        return rng.choice(_extreme_strings(rng))
    if choice == 3:
        return rng.choice((True, False, None))
    if choice == 4:
        return [rng.choice(EXTREME_INTEGERS), "x", None]
    if choice == 5:
        return {"k": rng.choice(_extreme_strings(rng)), "n": rng.choice(EXTREME_INTEGERS)}
    if choice == 6:
        return _nested(rng.choice((40, 200)))
    if choice == 7:
        return "m" * BIG_STRING_BYTES
    return {}


def _value_for(annotation: str, rng: random.Random) -> Any:
    """A value of the annotated type, often extreme; sometimes of another type entirely."""
    if rng.random() < 0.3:
        return _wrong_value(rng)
    if "ColumnSpec" in annotation:
        columns = []
        for _ in range(rng.choice((0, 1, 2, 300))):
            columns.append(
                {
                    "name": rng.choice(["id", "v", "KEY", *_extreme_strings(rng)]),
                    "type": rng.choice(["UINT64", "FLOAT64", "VARSIZED", "NOPE", "\x00"]),
                    "nullable": rng.choice([True, False, "yes", 2**70]),
                }
            )
        return columns
    if annotation.startswith("dict"):
        return {
            rng.choice(["file_path", "KEY", "password", "x" * 300, "\x00"]): _wrong_value(rng)
            for _ in range(rng.randrange(4))
        }
    if "int" in annotation:
        return rng.choice(EXTREME_INTEGERS)
    if "float" in annotation:
        return rng.choice(EXTREME_FLOATS)
    if "bool" in annotation:
        return rng.choice((True, False))
    return rng.choice(_extreme_strings(rng))


_STATEMENTS = (
    "CREATE WORKER {name} SET({int} AS CAPACITY)",
    "CREATE LOGICAL SOURCE {name}(id UINT64 NOT NULL, v INT32)",
    "CREATE SINK {name}(id UINT64 NOT NULL) TYPE Print SET({int} AS `SINK`.X)",
    "SELECT id * {int} AS id FROM {name} WHERE v > {float} INTO {name}",
    "SELECT id FROM {name} WINDOW TUMBLING(ts, SIZE {int} MS) INTO {name}",
    "DROP QUERY WHERE id = {int}",
    "SHOW QUERIES WHERE id = {int}",
    "EXPLAIN SELECT {string} AS s FROM {name} INTO {name}",
    "CREATE PHYSICAL SOURCE FOR {name} TYPE File SET({string} AS `SOURCE`.FILE_PATH)",
    "{string}",
)


def _statement(rng: random.Random) -> str:
    template = rng.choice(_STATEMENTS)
    return template.format(
        name=rng.choice(["s", "KEY", "`x\x00y`", "a" * 200, "`😀`"]),
        int=rng.choice(EXTREME_INTEGERS),
        float=rng.choice(("1e308", "1e999", "-0.0", "NaN")),
        string=repr(rng.choice(_extreme_strings(rng)))[:100_000],
    )


def _message_id(rng: random.Random, serial: int) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return f"adv-{serial}-{rng.getrandbits(40):x}"
    return rng.choice(["", "x" * 300, "id\x00", "\ud800", 42, None, "dup-id"])


def generate_case(rng: random.Random, serial: int = 0) -> AdversarialCase:
    """One hostile message, drawn from ``rng``."""
    roll = rng.random()
    if roll < 0.2:
        text = _statement(rng)
        envelope = {"id": _message_id(rng, serial), "kind": "ExecuteStatement", "v": 1}
        envelope["body"] = {"text": text}
        return AdversarialCase("statement", envelope, "statement")
    channel = "event" if roll < 0.55 else "request"
    types: dict[str, Any] = m.EVENT_TYPES if channel == "event" else m.REQUEST_TYPES
    kind = rng.choice(sorted(types))
    cls = types[kind]
    hints = typing.get_type_hints(cls)
    body: Any = {}
    for field in dataclasses.fields(cls):
        if rng.random() < 0.1:
            continue  # a missing field
        body[field.name] = _value_for(str(hints.get(field.name, "")), rng)
    note = "fields"
    extra = rng.random()
    if extra < 0.05:
        body["unknown_field"] = 1
        note = "unknown field"
    elif extra < 0.1:
        body = rng.choice(([1, 2], "body", 7, None))
        note = "body of a wrong type"
    elif extra < 0.13:
        kind = rng.choice(["", "Nope", "\x00", "x" * 300])
        note = "unknown kind"
    version: Any = 1 if rng.random() < 0.95 else rng.choice((0, 2, "1", None, 2**64))
    envelope = {"id": _message_id(rng, serial), "kind": kind, "v": version, "body": body}
    return AdversarialCase(channel, envelope, note)
