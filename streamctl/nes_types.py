"""NebulaStream data types, identifiers and schema validation shared by the catalog and planner.

A schema is a list of columns ``{"name", "type", "nullable"}``. Names are identifiers compared
case-insensitively (as NebulaStream does); types are NebulaStream type names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from streamctl.planner.ast import NES_TYPE_NAMES

# The planner's type names, plus TEXT, which catalogs written by NebulaStream may carry.
NES_TYPES: frozenset[str] = frozenset(NES_TYPE_NAMES) | {"TEXT"}
"""Type names a column may have (``TEXT`` is NebulaStream's alias of ``VARSIZED``)."""

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
