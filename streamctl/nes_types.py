"""NebulaStream data types, identifiers and schema validation: the one home of NES type names.

NebulaStream's data types (:data:`NES_TYPE_NAMES`), the spellings the parser and the catalog
accept for them, their families (integer, unsigned, float, string) and integer ranges; the
source and sink type names; identifiers; and the validation of a schema, a list of columns
``{"name", "type", "nullable"}``. Names are identifiers compared case-insensitively (as
NebulaStream does); types are NebulaStream type names.

A leaf module: it imports nothing of the project, so every package (the catalog, the domain,
the planner, the Spark code, the client) may import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

NES_TYPE_NAMES: Final = (
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "FLOAT32",
    "FLOAT64",
    "BOOLEAN",
    "CHAR",
    "VARSIZED",
)
"""NebulaStream's data types, in their canonical spelling."""

_ALIASES: dict[str, str] = {"TEXT": "VARSIZED"}

# The planner's type names, plus TEXT, which catalogs written by NebulaStream may carry.
NES_TYPES: frozenset[str] = frozenset(NES_TYPE_NAMES) | frozenset(_ALIASES)
"""Type names a column may have (``TEXT`` is NebulaStream's alias of ``VARSIZED``)."""

TYPE_NAME_ALIASES: Final[dict[str, str]] = {
    **{name: name for name in NES_TYPE_NAMES},
    **_ALIASES,
    "VARSIZE": "VARSIZED",
    "TINYINT": "INT8",
    "SMALLINT": "INT16",
    "INT": "INT32",
    "INTEGER": "INT32",
    "BIGINT": "INT64",
    "UNSIGNED TINYINT": "UINT8",
    "UNSIGNED SMALLINT": "UINT16",
    "UNSIGNED INT": "UINT32",
    "UNSIGNED INTEGER": "UINT32",
    "UNSIGNED BIGINT": "UINT64",
    "BOOL": "BOOLEAN",
}
"""Spellings of type names NebulaStream accepts, mapped to the canonical name."""

_INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "INT8": (-(2**7), 2**7 - 1),
    "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1),
    "INT64": (-(2**63), 2**63 - 1),
    "UINT8": (0, 2**8 - 1),
    "UINT16": (0, 2**16 - 1),
    "UINT32": (0, 2**32 - 1),
    "UINT64": (0, 2**64 - 1),
}

INTEGER_TYPES: frozenset[str] = frozenset(_INTEGER_RANGES)
"""Canonical names of NES's integer types."""
UNSIGNED_TYPES: frozenset[str] = frozenset(t for t in _INTEGER_RANGES if t.startswith("U"))
"""Canonical names of NES's unsigned integer types."""
FLOAT_TYPES: frozenset[str] = frozenset({"FLOAT32", "FLOAT64"})
"""Canonical names of NES's floating point types."""
STRING_TYPES: frozenset[str] = frozenset({"CHAR", "VARSIZED"})
"""Canonical names of NES's character types (both are Spark strings)."""


def canonical_type(nes_type: str) -> str:
    """The canonical upper-case NES type name (``text`` -> ``VARSIZED``); ValueError if unknown."""
    name = str(nes_type).strip().upper()
    name = _ALIASES.get(name, name)
    if name not in NES_TYPE_NAMES:
        known = ", ".join(sorted(NES_TYPES))
        raise ValueError(f"unknown NES type {nes_type!r}; expected one of {known}")
    return name


def integer_range(nes_type: str) -> tuple[int, int]:
    """Inclusive ``(min, max)`` of an NES integer type; ValueError for other types."""
    name = canonical_type(nes_type)
    if name not in _INTEGER_RANGES:
        raise ValueError(f"{name} is not an integer type")
    return _INTEGER_RANGES[name]


SOURCE_TYPES: frozenset[str] = frozenset({"FILE", "INLINE", "GENERATOR", "TCP", "KAFKA"})
SINK_TYPES: frozenset[str] = frozenset({"FILE", "PRINT", "VOID", "CHECKSUM", "POSTGRESQL"})

MAX_COLUMNS = 1024
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,127}$")


class SchemaError(ValueError):
    """A schema or identifier that the catalog refuses; the message names the problem."""


class InvalidName(ValueError):
    """An identifier that is not one."""


def check_identifier(value: str, what: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise InvalidName(
            f"{what} {value!r} is not a valid identifier "
            "(a letter or '_', then up to 127 letters, digits, '_' or '$')"
        )
    return value


def normalize_schema(columns: Iterable[Any]) -> list[dict[str, Any]]:
    """Validate a schema and return it as plain dicts with upper-case type names."""
    result: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, column in enumerate(columns):
        name = getattr(column, "name", None)
        type_name = getattr(column, "type", None)
        nullable = getattr(column, "nullable", True)
        where = f"column {position + 1}"
        try:
            check_identifier(name, f"{where} name")  # type: ignore[arg-type]
        except InvalidName as error:
            raise SchemaError(str(error)) from None
        if name.lower() in seen:  # type: ignore[union-attr]
            raise SchemaError(f"column {name!r} appears twice in the schema")
        seen.add(name.lower())  # type: ignore[union-attr]
        canonical = str(type_name).upper()
        if canonical not in NES_TYPES:
            raise SchemaError(
                f"{where} {name!r} has unknown type {type_name!r}; "
                f"expected one of {', '.join(sorted(NES_TYPES))}"
            )
        result.append({"name": name, "type": canonical, "nullable": bool(nullable)})
    if not result:
        raise SchemaError("a schema needs at least one column")
    if len(result) > MAX_COLUMNS:
        raise SchemaError(f"a schema has at most {MAX_COLUMNS} columns, got {len(result)}")
    return result


def check_kind(value: str, allowed: frozenset[str], what: str) -> str:
    canonical = str(value).upper()
    if canonical not in allowed:
        raise SchemaError(
            f"unknown {what} type {value!r}; expected one of {', '.join(sorted(allowed))}"
        )
    return canonical
