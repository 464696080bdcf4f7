"""Where a query's rows go: its output checked against the sink, and inline sinks.

* :func:`check_sink`: the output must match the sink: same number of columns, each output type
  assignable to the sink column's type (equal, or a lossless widening), no NULL-able column
  into a ``NOT NULL`` one, and equal column names up to NebulaStream's qualifier
  (``STREAM$ID`` matches ``id`` and ``stream.id``; columns computed without a name match any);
* :func:`own_schema`: a query whose sink has no schema (``EXPLAIN``'s body, an inline sink
  without ``SCHEMA``) writes its own column names, which must then be unique;
* :func:`inline_sink`: ``INTO File(...)`` names one of :data:`INLINE_SINK_TYPES` and its
  options (:class:`InlineSinkSpec`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from streamctl.error_codes import INVALID_STATEMENT, NOT_SUPPORTED, SINK_SCHEMA_MISMATCH
from streamctl.nes_types import canonical_type
from streamctl.planner import ast
from streamctl.planner.catalog_lookup import CatalogColumn
from streamctl.planner.planning_errors import PlannerError
from streamctl.planner.scopes import _Bound, _fold, _Names, _unqualified
from streamctl.planner.types import _assignable

INLINE_SINK_TYPES: Final = frozenset({"FILE", "PRINT", "VOID", "CHECKSUM"})


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class InlineSinkSpec:
    """``INTO File(...)``: the sink type and its options (config keys as written, upper-case)."""

    sink_type: str
    config: tuple[tuple[str, str], ...]

    def config_dict(self) -> dict[str, Any]:
        return {key: json.loads(value) for key, value in self.config}


def own_schema(bound: _Bound, where: ast.Node) -> list[OutputColumn]:
    seen: dict[str, str] = {}
    for column in bound.columns:
        key = _fold(column.nes_name)
        if key in seen:
            raise PlannerError(
                INVALID_STATEMENT,
                f"the query produces the column {column.nes_name!r} twice; "
                "rename one of them with AS",
                where.line,
                where.column,
            )
        seen[key] = column.nes_name
    return [OutputColumn(c.nes_name, c.field.type, c.field.nullable) for c in bound.columns]


def check_sink(
    bound: _Bound, sink_columns: list[OutputColumn], sink: str, where: ast.Node
) -> list[OutputColumn]:
    produced = ", ".join(f"{c.nes_name} {c.field.type}" for c in bound.columns)
    expected = ", ".join(f"{c.name} {c.type}" for c in sink_columns)
    if len(bound.columns) != len(sink_columns):
        raise PlannerError(
            SINK_SCHEMA_MISMATCH,
            f"the query produces {len(bound.columns)} column(s) ({produced}) but sink "
            f"{sink!r} has {len(sink_columns)} ({expected})",
            where.line,
            where.column,
        )
    for position, (column, target) in enumerate(zip(bound.columns, sink_columns, strict=True), 1):
        problem = None
        if not _assignable(column.field.type, target.type):
            problem = f"type {column.field.type} cannot be written as {target.type}"
        elif not column.generated and _fold(column.name) != _fold(_unqualified(target.name)):
            problem = "the names differ"
        elif column.field.nullable and not target.nullable:
            problem = "the query's column may be NULL but the sink column is NOT NULL"
        if problem:
            raise PlannerError(
                SINK_SCHEMA_MISMATCH,
                f"column {position} of sink {sink!r} is {target.name} {target.type}, but the "
                f"query produces {column.nes_name} {column.field.type}: {problem} "
                f"(query: {produced}; sink: {expected})",
                where.line,
                where.column,
            )
    return sink_columns


def inline_sink(sink: ast.InlineSink) -> InlineSinkSpec:
    if sink.sink_type not in INLINE_SINK_TYPES:
        raise PlannerError(
            NOT_SUPPORTED,
            f"inline sink type {sink.sink_type!r} is not supported; "
            f"expected one of {', '.join(sorted(INLINE_SINK_TYPES))}",
            sink.line,
            sink.column,
        )
    return InlineSinkSpec(sink.sink_type, _config_pairs(sink.options))


def _sink_column(column: CatalogColumn) -> OutputColumn:
    try:
        type_name = canonical_type(column.type)
    except ValueError as error:
        raise PlannerError(INVALID_STATEMENT, f"sink column {column.name!r}: {error}") from None
    return OutputColumn(column.name, type_name, bool(column.nullable))


def _output_names(columns: Sequence[OutputColumn]) -> list[str]:
    """Spark column names of the query's output: the sink's names, made unique."""
    names = _Names()
    return [names.allocate(column.name) for column in columns]


def _config_pairs(options: tuple[ast.Option, ...]) -> tuple[tuple[str, str], ...]:
    config = ast.options_to_config(options)
    return tuple(sorted((key, json.dumps(value, sort_keys=True)) for key, value in config.items()))
