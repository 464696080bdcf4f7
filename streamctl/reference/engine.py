"""Run a plan on DuckDB over given rows: :func:`run_reference`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]

from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, STRING_TYPES, integer_range
from streamctl.planner import plan
from streamctl.reference import nes_semantics as nes
from streamctl.reference.reference_errors import NesQueryFailure, ReferenceUnsupported
from streamctl.reference.sql import SqlProgram, column_name, source_key, translate

__all__ = ["run_reference", "to_sql"]

_THREADS: Final = 4
"""DuckDB threads per run: the reference runs beside Spark and the tests, so it stays light."""

_ARROW_TYPES: Final[dict[str, Any]] = {
    "INT8": pa.int8(),
    "INT16": pa.int16(),
    "INT32": pa.int32(),
    "INT64": pa.int64(),
    "UINT8": pa.uint8(),
    "UINT16": pa.uint16(),
    "UINT32": pa.uint32(),
    "UINT64": pa.uint64(),
    "FLOAT32": pa.float32(),
    "FLOAT64": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "CHAR": pa.string(),
    "VARSIZED": pa.string(),
}


def _leaves(root: plan.Operator) -> dict[str, plan.Scan | plan.InlineScan]:
    leaves: dict[str, plan.Scan | plan.InlineScan] = {}
    for operator in plan.walk(root):
        if isinstance(operator, plan.Scan | plan.InlineScan):
            key = source_key(operator)
            known = leaves.get(key)
            if known is not None and _column_types(known) != _column_types(operator):
                raise ReferenceUnsupported(f"source {key!r} is read with two different schemas")
            leaves[key] = operator
    return leaves


def _column_types(leaf: plan.Scan | plan.InlineScan) -> list[tuple[str, bool]]:
    return [(f.type, f.nullable) for f in leaf.fields]


def to_sql(query_plan: plan.QueryPlan) -> SqlProgram:
    """The SQL :func:`run_reference` runs for ``query_plan`` (source ``i`` is table ``src_i``,
    in the order of the plan's leaves)."""
    leaves = _leaves(query_plan.root)
    return translate(query_plan, {key: f"src_{i}" for i, key in enumerate(leaves)})


def run_reference(
    query_plan: plan.QueryPlan, rows_by_source: Mapping[str, Iterable[Sequence[Any]]]
) -> list[tuple[Any, ...]]:
    """The rows NebulaStream writes for ``query_plan`` over bounded input.

    ``rows_by_source`` gives each leaf's rows: a logical source under its name (as the plan's
    ``Scan.source`` spells it; a case-insensitive match is accepted), an inline source under
    its id (``inline:0``). A row holds plain Python values (``int``, ``float``, ``bool``,
    ``str``, ``None``) in the order of the source's columns; a large input may instead be
    given as an Arrow table with the source's columns in order, of the Arrow types of their
    NES types. Rows come back the same way, in
    the order of ``query_plan.output``, sorted (compare them as multisets).

    Raises :class:`ReferenceUnsupported` where the reference cannot tell NES's answer,
    :class:`NesQueryFailure` where NES documents that the query fails, and ``ValueError`` for
    rows that do not fit their schema (a NULL in a ``NOT NULL`` column, a value out of its
    type's range)."""
    leaves = _leaves(query_plan.root)
    tables = {key: f"src_{i}" for i, key in enumerate(leaves)}
    program = translate(query_plan, tables)
    connection = duckdb.connect(":memory:", config={"threads": _THREADS})
    try:
        for key, leaf in leaves.items():
            given = _given_for(key, rows_by_source)
            arrow = (
                _renamed_table(key, leaf.fields, given)
                if isinstance(given, pa.Table)
                else _arrow_table(key, leaf.fields, list(given))
            )
            connection.register(f"{tables[key]}_arrow", arrow)
            connection.execute(
                f'CREATE TEMP TABLE "{tables[key]}" AS SELECT * FROM "{tables[key]}_arrow"'
            )
            connection.unregister(f"{tables[key]}_arrow")
        try:
            for statement in program.statements:
                connection.execute(statement)
            ordering = ", ".join(f'"{column_name(i)}"' for i in range(len(program.fields)))
            result = connection.execute(f"{program.query} ORDER BY {ordering}").fetchall()
        except duckdb.Error as error:
            raise _translate_error(error) from None
    finally:
        connection.close()
    return [tuple(row) for row in result]


def _translate_error(error: duckdb.Error) -> Exception:
    message = str(error)
    for marker, kind in (
        (nes.UNSUPPORTED_MARKER, ReferenceUnsupported),
        (nes.FAILURE_MARKER, NesQueryFailure),
    ):
        at = message.find(marker)
        if at >= 0:
            reason = message[at + len(marker) :].splitlines()[0].strip()
            return kind(reason)
    return error


def _given_for(key: str, rows_by_source: Mapping[str, Any]) -> Any:
    if key in rows_by_source:
        return rows_by_source[key]
    matches = [name for name in rows_by_source if name.casefold() == key.casefold()]
    if len(matches) == 1:
        return rows_by_source[matches[0]]
    raise ValueError(f"no rows given for source {key!r} (given: {sorted(rows_by_source)})")


def _renamed_table(key: str, fields: Sequence[plan.Field], table: Any) -> Any:
    """A source given as an Arrow table (large inputs): its columns in the source's order,
    each of the type the schema names, NULL only in nullable columns."""
    if table.num_columns != len(fields):
        raise ValueError(f"source {key!r}: {table.num_columns} columns, expected {len(fields)}")
    for f, column in zip(fields, table.columns, strict=True):
        if column.type != _ARROW_TYPES[f.type]:
            raise ValueError(f"source {key!r} column {f.name}: {column.type}, expected {f.type}")
        if column.null_count and not f.nullable:
            raise ValueError(f"source {key!r} column {f.name} is NOT NULL, got NULL")
    return table.rename_columns([column_name(i) for i in range(len(fields))])


def _arrow_table(key: str, fields: Sequence[plan.Field], rows: list[Sequence[Any]]) -> Any:
    width = len(fields)
    wrong = [number for number, row in enumerate(rows) if len(row) != width]
    if wrong:
        got = len(rows[wrong[0]])
        raise ValueError(f"source {key!r} row {wrong[0]}: {got} values, expected {width}")
    columns = [[row[i] for row in rows] for i in range(width)]
    arrays = []
    for f, values in zip(fields, columns, strict=True):
        _check_values(key, f, values)
        arrays.append(pa.array(values, type=_ARROW_TYPES[f.type]))
    names = [column_name(i) for i in range(width)]
    return pa.Table.from_arrays(arrays, names=names)


_PYTHON_TYPES: Final[dict[str, frozenset[type]]] = {
    **{name: frozenset({int}) for name in INTEGER_TYPES},
    **{name: frozenset({int, float}) for name in FLOAT_TYPES},
    "BOOLEAN": frozenset({bool}),
    **{name: frozenset({str}) for name in STRING_TYPES},
}


def _check_values(key: str, f: plan.Field, values: list[Any]) -> None:
    where = f"source {key!r} column {f.name} ({f.type})"
    kinds = set(map(type, values))
    if type(None) in kinds:
        if not f.nullable:
            raise ValueError(f"{where} is NOT NULL, got NULL")
        kinds.discard(type(None))
    foreign = kinds - _PYTHON_TYPES[f.type]
    if foreign:
        example = next(v for v in values if type(v) in foreign)
        raise ValueError(f"{where}: {example!r} is not a {f.type} value")
    present = [v for v in values if v is not None]
    if not present:
        return
    if f.type in INTEGER_TYPES:
        low, high = integer_range(f.type)
        for bound in (min(present), max(present)):
            if not low <= bound <= high:
                raise ValueError(f"{where}: {bound!r} is not a {f.type}")
    elif f.type == "FLOAT32":
        finite = [abs(v) for v in present if math.isfinite(v)]
        if finite and max(finite) > 3.4028234663852886e38:
            raise ValueError(f"{where}: {max(finite)!r} is out of FLOAT32's range")
    elif f.type in STRING_TYPES:
        if f.type == "CHAR" and any(len(v) != 1 for v in present):
            raise ValueError(f"{where}: a value is not one character")
        if any("\x00" in v for v in present):
            raise ReferenceUnsupported("text containing NUL characters")
