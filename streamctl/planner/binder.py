"""Bind a parsed query against the catalog: resolve names, type it, build the plan, check the sink.

:func:`bind_query` turns an :class:`~streamctl.planner.ast.QueryStatement` into a
:class:`BoundQuery` whose :class:`~streamctl.planner.plan.QueryPlan` an agent can run.

Guarantees:

* raises nothing but :class:`~streamctl.planner.errors.PlannerError`; errors carry the line
  and column of the offending text and name what is wrong (``unknown column 'SPEEED' in
  source 'S'; columns are speed, altitude``);
* a query reads only catalog logical sources and NebulaStream inline sources (``FROM
  File(...)``); inline sources are listed in :attr:`BoundQuery.inline_sources` so the
  coordinator can confine their paths -- there is no other way for SQL text to name a file;
* deterministic: the same statement against the same catalog yields an equal plan;
* the output is checked against the sink: same number of columns, each output type
  assignable to the sink column's type (equal, or a lossless widening), no NULL-able column
  into a ``NOT NULL`` one, and equal column names up to NebulaStream's qualifier
  (``STREAM$ID`` matches ``id`` and ``stream.id``; columns computed without a name match any);
* constructs whose NebulaStream semantics Spark cannot reproduce faithfully are refused with
  ``NOT_SUPPORTED`` and the reason, never translated approximately.

Names follow NebulaStream: unquoted identifiers are upper-cased and compared
case-insensitively; a source's column ``id`` is the field ``STREAM$ID`` (``stream.id`` and
```STREAM$ID``` name it too); aliases are unqualified (``x AS y`` is ``Y``) except on
aggregates, which keep their argument's qualifier (``SUM(value) AS s`` is ``STREAM$S``);
an unnamed aggregate is ``<argument>_<FUNCTION>`` (``STREAM$VALUE_SUM``); window bounds are
``<qualifier>$START``/``$END`` (UINT64 milliseconds); a join's bounds are qualified by both
inputs' qualifiers (``ST$START``).

Typing follows NebulaStream, whose operators compute on C++ machine types:

* integer operands are promoted like C++ (``INT8``/``INT16``/``UINT8``/``UINT16`` become
  ``INT32``), then both operands get the usual arithmetic conversion's common type (a
  signed/unsigned pair of equal rank becomes unsigned: ``INT32 + UINT32`` is ``UINT32``;
  ``INT64 + UINT32`` is ``INT64``); any ``FLOAT64`` operand makes ``FLOAT64``, else any
  ``FLOAT32`` makes ``FLOAT32``. Comparisons convert their operands the same way (so
  ``INT8(-1) < UINT32(1)`` is false, as in C++);
* ``ABS``, ``CEIL``, ``FLOOR``, ``ROUND`` keep their argument's type; ``SQRT``, ``EXP``,
  ``POW`` give ``FLOAT64``;
* aggregates: ``COUNT`` is ``UINT64``; ``SUM``, ``MIN``, ``MAX`` keep the argument's type;
  ``AVG`` and ``MEDIAN`` are ``FLOAT64``;
* constants are typed with a type constructor (``UINT64(1)``, ``FLOAT64(3.14)``,
  ``VARSIZED("x")``, ``BOOLEAN(TRUE)``); as an extension, a bare integer constant is
  ``INT32`` (``INT64``/``UINT64`` if it needs to be), a bare decimal ``FLOAT64``, a bare string
  ``VARSIZED``; a type constructor applied to an expression is a C-style conversion.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from streamctl.error_codes import (
    AMBIGUOUS_COLUMN,
    INVALID_STATEMENT,
    NOT_SUPPORTED,
    SINK_SCHEMA_MISMATCH,
    TYPE_MISMATCH,
    UNKNOWN_COLUMN,
    UNKNOWN_SINK,
    UNKNOWN_SOURCE,
)
from streamctl.nes_types import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    NES_TYPE_NAMES,
    STRING_TYPES,
    TYPE_NAME_ALIASES,
    UNSIGNED_TYPES,
    canonical_type,
    integer_range,
)
from streamctl.planner import ast
from streamctl.planner import plan as ir
from streamctl.planner.errors import PlannerError

__all__ = [
    "BoundQuery",
    "CatalogColumn",
    "CatalogLookup",
    "InlineSinkSpec",
    "LogicalSourceInfo",
    "MemoryCatalog",
    "OutputColumn",
    "SinkInfo",
    "bind_query",
]

INLINE_SOURCE_TYPES: Final = frozenset({"FILE", "GENERATOR", "TCP", "KAFKA"})
INLINE_SINK_TYPES: Final = frozenset({"FILE", "PRINT", "VOID", "CHECKSUM"})

_AGGREGATES: Final[dict[str, str]] = {
    "COUNT": "count",
    "SUM": "sum",
    "MIN": "min",
    "MAX": "max",
    "AVG": "avg",
    "MEDIAN": "median",
}
_SAME_TYPE_FUNCTIONS: Final[dict[str, str]] = {
    "ABS": "abs",
    "CEIL": "ceil",
    "FLOOR": "floor",
    "ROUND": "round",
}
_FLOAT64_FUNCTIONS: Final[dict[str, str]] = {"SQRT": "sqrt", "EXP": "exp"}
_SCALAR_FUNCTION_NAMES: Final = (
    "ABS",
    "CEIL",
    "FLOOR",
    "ROUND",
    "SQRT",
    "EXP",
    "POW",
    "POWER",
    "CONCAT",
    "ISNULL",
    "CASTTOUNIXTS",
    "CASTFROMUNIXTS",
)
_COMPARISONS: Final[dict[str, str]] = {
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "<=>": "eq_null_safe",
}
_ARITHMETIC: Final[dict[str, str]] = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}
_NUMERIC_TYPES: Final = INTEGER_TYPES | FLOAT_TYPES
_INTEGER_BITS: Final[dict[str, int]] = {
    name: (integer_range(name)[1] - integer_range(name)[0]).bit_length() for name in INTEGER_TYPES
}
_SIGNED_OF: Final[dict[str, str]] = {"UINT32": "INT32", "UINT64": "INT64"}
_UNSIGNED_OF: Final[dict[str, str]] = {"INT32": "UINT32", "INT64": "UINT64"}
_INTERNAL_NAME: Final = re.compile(r"[^A-Za-z0-9_$]")


# ---- the catalog interface -------------------------------------------------------------------


class CatalogColumn(Protocol):
    """A catalog column (e.g. ``streamctl.workflows.messages.ColumnSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def nullable(self) -> bool: ...


@dataclass(frozen=True)
class LogicalSourceInfo:
    """A catalog logical source: its name as the catalog spells it, and its columns."""

    name: str
    columns: Sequence[CatalogColumn]


@dataclass(frozen=True)
class SinkInfo:
    """A catalog sink: its columns (names as the catalog stores them, e.g. ``STREAM$ID``), its
    type and its config."""

    name: str
    columns: Sequence[CatalogColumn]
    type: str
    config: Mapping[str, Any] = field(default_factory=dict)


class CatalogLookup(Protocol):
    """What the binder needs from a catalog snapshot. Lookups are case-insensitive (the binder
    passes names upper-cased when they were written unquoted) and return None when absent."""

    def logical_source(self, name: str) -> LogicalSourceInfo | None: ...

    def sink(self, name: str) -> SinkInfo | None: ...


class MemoryCatalog:
    """A :class:`CatalogLookup` over dicts (tests, tools): names compared case-insensitively."""

    def __init__(
        self,
        sources: Mapping[str, Sequence[CatalogColumn]] | None = None,
        sinks: Sequence[SinkInfo] = (),
    ) -> None:
        self._sources = {
            _fold(name): LogicalSourceInfo(name, tuple(columns))
            for name, columns in (sources or {}).items()
        }
        self._sinks = {_fold(info.name): info for info in sinks}

    def add_source(self, name: str, columns: Sequence[CatalogColumn]) -> None:
        self._sources[_fold(name)] = LogicalSourceInfo(name, tuple(columns))

    def add_sink(self, info: SinkInfo) -> None:
        self._sinks[_fold(info.name)] = info

    def logical_source(self, name: str) -> LogicalSourceInfo | None:
        return self._sources.get(_fold(name))

    def sink(self, name: str) -> SinkInfo | None:
        return self._sinks.get(_fold(name))


# ---- the result ------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class BoundQuery:
    """A query ready to run.

    * ``plan`` -- the operator tree (store ``ir.to_json()``; agents run it);
    * ``output_schema`` -- what the query writes: the sink's column names with the sink's
      types (for an inline sink without a schema, the query's NebulaStream column names);
    * ``logical_sources`` -- catalog logical sources read (as the catalog spells them, sorted);
    * ``inline_sources`` -- inline sources read (``FROM File(...)``), for the coordinator to
      vet and confine (file paths!) before anything runs;
    * ``sink_name`` / ``inline_sink`` -- where the rows go (exactly one is set);
    * ``windowed`` -- whether the query has a window aggregation or join;
    * ``event_time_columns`` -- the NebulaStream names of the event-time columns its windows
      use (milliseconds).
    """

    plan: ir.QueryPlan
    output_schema: tuple[OutputColumn, ...]
    logical_sources: tuple[str, ...]
    inline_sources: tuple[ir.InlineScan, ...]
    sink_name: str | None
    inline_sink: InlineSinkSpec | None
    windowed: bool
    event_time_columns: tuple[str, ...]


def bind_query(
    query: ast.QueryStatement, catalog: CatalogLookup, *, allow_missing_sink: bool = False
) -> BoundQuery:
    """Bind ``query`` against ``catalog``.

    ``allow_missing_sink`` admits a query without ``INTO`` (the body of ``EXPLAIN``); its
    output then keeps the query's own column names."""
    try:
        return _Binder(catalog).bind(query, allow_missing_sink)
    except PlannerError:
        raise
    except RecursionError:
        raise PlannerError(
            INVALID_STATEMENT, "query is nested too deeply", query.line, query.column
        ) from None
    except Exception as error:  # defensive: the contract is "only PlannerError"
        raise PlannerError(
            INVALID_STATEMENT, f"cannot bind query: {type(error).__name__}: {error}"
        ) from None


# ---- scopes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    """A column visible to expressions: its plan field and its NebulaStream name."""

    field: ir.Field
    qualifier: str | None
    name: str
    aliases: tuple[str, ...] = ()
    generated: bool = False
    display: str | None = None

    @property
    def nes_name(self) -> str:
        return f"{self.qualifier}${self.name}" if self.qualifier else self.name

    @property
    def shown(self) -> str:
        return self.display or self.nes_name

    def with_field(self, new_field: ir.Field) -> _Column:
        return _Column(
            new_field, self.qualifier, self.name, self.aliases, self.generated, self.display
        )


@dataclass(frozen=True)
class _Bound:
    """A bound relation: the operator producing it and its columns (in field order)."""

    operator: ir.Operator
    columns: tuple[_Column, ...]


@dataclass
class _Scope:
    """Columns an expression may use; ``aggregates`` maps aggregate calls (in a windowed select
    list) to the window's output columns."""

    columns: tuple[_Column, ...]
    description: str
    aggregates: dict[ast.FunctionCall, ir.ColumnExpr] | None = None
    aggregate_hint: str | None = None


def _fold(name: str) -> str:
    return name.casefold()


def _unqualified(name: str) -> str:
    """The last part of a NebulaStream or catalog column name (``STREAM$ID``, ``stream.id``)."""
    return re.split(r"[$.]", name)[-1]


class _Names:
    """Allocates internal field names: sanitized, unique case-insensitively within one output."""

    def __init__(self, taken: Sequence[str] = ()) -> None:
        self._taken = {_fold(name) for name in taken}

    def allocate(self, wanted: str) -> str:
        base = _INTERNAL_NAME.sub("_", wanted) or "_"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "_" + base
        candidate, counter = base, 1
        while _fold(candidate) in self._taken:
            counter += 1
            candidate = f"{base}_{counter}"
        self._taken.add(_fold(candidate))
        return candidate


# ---- the binder ------------------------------------------------------------------------------


class _Binder:
    def __init__(self, catalog: CatalogLookup) -> None:
        self.catalog = catalog
        self.logical_sources: dict[str, str] = {}
        self.inline_sources: list[ir.InlineScan] = []
        self.event_time_columns: list[str] = []

    def bind(self, statement: ast.QueryStatement, allow_missing_sink: bool) -> BoundQuery:
        if statement.options:
            option = statement.options[0]
            raise PlannerError(
                NOT_SUPPORTED,
                f"query options (SET(...) after the query) are not supported: {option.key_text}",
                option.line,
                option.column,
            )
        bound = self.query_expression(statement.query)
        sink_name: str | None = None
        inline_sink: InlineSinkSpec | None = None
        sink = statement.sink
        if sink is None:
            if not allow_missing_sink:
                raise PlannerError(
                    INVALID_STATEMENT,
                    "the query has no INTO clause; name a sink (INTO sink) to write into",
                    statement.line,
                    statement.column,
                )
            target = self.own_schema(bound, statement)
        elif isinstance(sink, ast.SinkRef):
            info = self.catalog.sink(sink.name)
            if info is None:
                raise PlannerError(
                    UNKNOWN_SINK, f"unknown sink {sink.name!r}", sink.line, sink.column
                )
            sink_name = info.name
            target = self.check_sink(
                bound, [_sink_column(c) for c in info.columns], info.name, sink
            )
        else:
            inline_sink = self.inline_sink(sink)
            schema = sink.schema()
            if schema is None:
                target = self.own_schema(bound, sink)
            else:
                columns = [OutputColumn(c.catalog_name, c.type, c.nullable) for c in schema]
                target = self.check_sink(bound, columns, f"{sink.sink_type}(...)", sink)
        root = ir.Project(
            bound.operator,
            tuple(
                ir.NamedExpr(
                    name,
                    _cast(ir.ColumnExpr(c.field.name, c.field.type, c.field.nullable), out.type),
                )
                for c, out, name in zip(bound.columns, target, _output_names(target), strict=True)
            ),
        )
        query_plan = ir.QueryPlan(root)
        return BoundQuery(
            plan=query_plan,
            output_schema=tuple(target),
            logical_sources=tuple(sorted(self.logical_sources.values())),
            inline_sources=tuple(self.inline_sources),
            sink_name=sink_name,
            inline_sink=inline_sink,
            windowed=query_plan.windowed,
            event_time_columns=tuple(dict.fromkeys(self.event_time_columns)),
        )

    # -- sinks

    def own_schema(self, bound: _Bound, where: ast.Node) -> list[OutputColumn]:
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
        self, bound: _Bound, sink_columns: list[OutputColumn], sink: str, where: ast.Node
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
        for position, (column, target) in enumerate(
            zip(bound.columns, sink_columns, strict=True), 1
        ):
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

    def inline_sink(self, sink: ast.InlineSink) -> InlineSinkSpec:
        if sink.sink_type not in INLINE_SINK_TYPES:
            raise PlannerError(
                NOT_SUPPORTED,
                f"inline sink type {sink.sink_type!r} is not supported; "
                f"expected one of {', '.join(sorted(INLINE_SINK_TYPES))}",
                sink.line,
                sink.column,
            )
        return InlineSinkSpec(sink.sink_type, _config_pairs(sink.options))

    # -- query expressions

    def query_expression(self, query: ast.QueryExpression) -> _Bound:
        if isinstance(query, ast.Union):
            return self.union(query)
        return self.select(query)

    def union(self, union: ast.Union) -> _Bound:
        left = self.query_expression(union.left)
        right = self.query_expression(union.right)
        if len(left.columns) != len(right.columns):
            raise PlannerError(
                TYPE_MISMATCH,
                f"UNION inputs have {len(left.columns)} and {len(right.columns)} columns "
                f"({_column_list(left.columns)} vs {_column_list(right.columns)})",
                union.line,
                union.column,
            )
        for position, (a, b) in enumerate(zip(left.columns, right.columns, strict=True), 1):
            if a.field.type != b.field.type:
                raise PlannerError(
                    TYPE_MISMATCH,
                    f"UNION inputs differ in column {position}: {a.nes_name} {a.field.type} vs "
                    f"{b.nes_name} {b.field.type}",
                    union.line,
                    union.column,
                )
        operator = ir.Union(left.operator, right.operator)
        columns = tuple(
            column.with_field(output)
            for column, output in zip(left.columns, operator.fields, strict=True)
        )
        return _Bound(operator, columns)

    def select(self, select: ast.Select) -> _Bound:
        source = self.relation(select.source)
        if select.where is not None:
            predicate = self.condition(
                select.where, _Scope(source.columns, _describe(source)), "WHERE"
            )
            source = _Bound(ir.Filter(source.operator, predicate), source.columns)
        aggregate_calls = [
            call
            for item in select.items
            if isinstance(item, ast.SelectExpression)
            for call in _aggregate_calls(item.expression)
        ]
        if select.window is None:
            if select.watermark is not None:
                raise _error(INVALID_STATEMENT, "WATERMARK needs a WINDOW clause", select.watermark)
            if select.group_by:
                raise _error(
                    NOT_SUPPORTED,
                    "GROUP BY without WINDOW is not supported: streams aggregate per window",
                    select.group_by[0],
                )
            if aggregate_calls:
                raise _error(
                    NOT_SUPPORTED,
                    f"aggregate function {aggregate_calls[0].name} needs a WINDOW clause",
                    aggregate_calls[0],
                )
            if select.having is not None:
                raise _error(INVALID_STATEMENT, "HAVING needs a WINDOW clause", select.having)
            return self.projection(select.items, source, _Scope(source.columns, _describe(source)))
        return self.window_aggregation(select, source, aggregate_calls)

    def projection(self, items: Sequence[ast.SelectItem], source: _Bound, scope: _Scope) -> _Bound:
        names = _Names()
        outputs: list[ir.NamedExpr] = []
        columns: list[_Column] = []
        for item in items:
            for expression, column in self.select_item(item, scope):
                internal = names.allocate(column.nes_name)
                outputs.append(ir.NamedExpr(internal, expression))
                columns.append(
                    column.with_field(ir.Field(internal, expression.type, expression.nullable))
                )
        return _Bound(ir.Project(source.operator, tuple(outputs)), tuple(columns))

    def select_item(self, item: ast.SelectItem, scope: _Scope) -> Iterator[tuple[ir.Expr, _Column]]:
        if isinstance(item, ast.Star):
            matched = [
                column
                for column in scope.columns
                if item.qualifier is None or _qualifies(column, item.qualifier)
            ]
            if not matched:
                qualifier = ".".join(item.qualifier or ())
                raise _error(UNKNOWN_COLUMN, f"no columns match {qualifier}.*", item)
            for column in matched:
                yield _column_expr(column), column
            return
        expression = self.expression(item.expression, scope)
        node = item.expression
        aggregate_column = (
            scope.aggregates.get(node)
            if scope.aggregates and isinstance(node, ast.FunctionCall)
            else None
        )
        if aggregate_column is not None:
            # An aggregate keeps the name the window gave it (its alias, qualified).
            yield expression, _find_column(scope.columns, aggregate_column.name)
        elif item.alias is not None:
            yield (
                expression,
                _Column(ir.Field("", expression.type, expression.nullable), None, item.alias),
            )
        elif isinstance(node, ast.ColumnRef):
            yield expression, self.resolve(node, scope)
        else:
            yield (
                expression,
                _Column(
                    ir.Field("", expression.type, expression.nullable),
                    None,
                    f"EXPR{item.line}_{item.column}",
                    generated=True,
                ),
            )

    # -- windows

    def window_aggregation(
        self, select: ast.Select, source: _Bound, aggregate_calls: list[ast.FunctionCall]
    ) -> _Bound:
        spec = select.window
        assert spec is not None
        window = _window(spec, select.watermark)
        if not aggregate_calls:
            raise _error(
                INVALID_STATEMENT,
                "a WINDOW clause needs at least one aggregate function in the select list",
                spec,
            )
        scope = _Scope(source.columns, _describe(source))
        time_column = self.time_column(spec, select.watermark, scope)
        names = _Names()
        qualifier = source.columns[0].qualifier if source.columns else None
        start_name = names.allocate(f"{qualifier}$START" if qualifier else "START")
        end_name = names.allocate(f"{qualifier}$END" if qualifier else "END")
        out_columns: list[_Column] = [
            _Column(ir.Field(start_name, "UINT64", False), qualifier, "START"),
            _Column(ir.Field(end_name, "UINT64", False), qualifier, "END"),
        ]
        keys: list[ir.NamedExpr] = []
        for key_node in select.group_by:
            if not isinstance(key_node, ast.ColumnRef):
                raise _error(NOT_SUPPORTED, "GROUP BY supports columns only", key_node)
            key_column = self.resolve(key_node, scope)
            internal = names.allocate(key_column.nes_name)
            keys.append(ir.NamedExpr(internal, _column_expr(key_column)))
            out_columns.append(
                key_column.with_field(
                    ir.Field(internal, key_column.field.type, key_column.field.nullable)
                )
            )
        aliases = {
            item.expression: item.alias
            for item in select.items
            if isinstance(item, ast.SelectExpression)
            and isinstance(item.expression, ast.FunctionCall)
        }
        aggregates: list[ir.Aggregate] = []
        aggregate_columns: dict[ast.FunctionCall, ir.ColumnExpr] = {}
        for call in aggregate_calls:
            aggregate, column = self.aggregate(call, aliases.get(call), scope, qualifier, names)
            aggregates.append(aggregate)
            out_columns.append(column)
            aggregate_columns[call] = _column_expr(column)
        operator = ir.WindowAggregate(
            input=source.operator,
            window=window,
            time_column=time_column.field.name,
            keys=tuple(keys),
            aggregates=tuple(aggregates),
            start_field=start_name,
            end_field=end_name,
        )
        windowed = _Bound(operator, tuple(out_columns))
        output_scope = _Scope(
            windowed.columns,
            "the window's output (window START/END, GROUP BY keys and aggregates)",
            aggregates=aggregate_columns,
            aggregate_hint="after a window, only GROUP BY keys, START, END and aggregates are "
            "available",
        )
        projected = self.projection(select.items, windowed, output_scope)
        if select.having is not None:
            predicate = self.condition(
                select.having, _Scope(projected.columns, "the select list"), "HAVING"
            )
            projected = _Bound(ir.Filter(projected.operator, predicate), projected.columns)
        return projected

    def time_column(
        self, spec: ast.WindowSpec, watermark: ast.Watermark | None, scope: _Scope
    ) -> _Column:
        """The window's event-time column (``_window`` has already refused count windows)."""
        if spec.time_column is None:
            raise _error(
                NOT_SUPPORTED,
                "windows over ingestion time are not supported; name the event-time column: "
                "TUMBLING(ts, SIZE ...)",
                spec,
            )
        column = self.resolve(spec.time_column, scope)
        if column.field.type not in INTEGER_TYPES:
            raise _error(
                TYPE_MISMATCH,
                f"the event-time column {column.nes_name} must be an integer (milliseconds), "
                f"not {column.field.type}",
                spec.time_column,
            )
        if watermark is not None:
            marked = self.resolve(watermark.time_column, scope)
            if marked.field.name != column.field.name:
                raise _error(
                    INVALID_STATEMENT,
                    f"WATERMARK names {marked.nes_name} but the window uses {column.nes_name}",
                    watermark.time_column,
                )
        self.event_time_columns.append(column.nes_name)
        return column

    def aggregate(
        self,
        call: ast.FunctionCall,
        alias: str | None,
        scope: _Scope,
        qualifier: str | None,
        names: _Names,
    ) -> tuple[ir.Aggregate, _Column]:
        function = _AGGREGATES[call.name]
        argument: ir.Expr | None
        if call.star:
            if function != "count":
                raise _error(
                    INVALID_STATEMENT, f"{call.name}(*) is not an aggregate; use COUNT(*)", call
                )
            argument, argument_column = None, None
        else:
            if len(call.args) != 1:
                raise _error(INVALID_STATEMENT, f"{call.name} takes one argument", call)
            nested = [inner for arg in call.args for inner in _aggregate_calls(arg)]
            if nested:
                raise _error(INVALID_STATEMENT, "aggregate functions cannot be nested", nested[0])
            argument = self.expression(call.args[0], scope)
            argument_column = (
                self.resolve(call.args[0], scope)
                if isinstance(call.args[0], ast.ColumnRef)
                else None
            )
        result_type, nullable = _aggregate_type(function, argument, call)
        if argument_column is not None:
            column_qualifier, base = argument_column.qualifier, argument_column.name
        else:
            column_qualifier, base = qualifier, None
        if alias is not None:
            name = alias
        elif base is not None:
            name = f"{base}_{call.name}"
        else:
            name = call.name
        column = _Column(
            ir.Field("", result_type, nullable),
            column_qualifier,
            name,
            generated=alias is None and base is None,
        )
        internal = names.allocate(column.nes_name)
        column = column.with_field(ir.Field(internal, result_type, nullable))
        return ir.Aggregate(internal, function, argument, result_type, nullable), column

    # -- relations

    def relation(self, relation: ast.Relation) -> _Bound:
        if isinstance(relation, ast.SourceRef):
            return self.source(relation)
        if isinstance(relation, ast.SubqueryRef):
            bound = self.query_expression(relation.query)
            if relation.alias is None:
                return bound
            return _Bound(
                bound.operator,
                tuple(
                    _Column(
                        c.field,
                        c.qualifier,
                        c.name,
                        (*c.aliases, relation.alias),
                        c.generated,
                        c.display,
                    )
                    for c in bound.columns
                ),
            )
        if isinstance(relation, ast.InlineSource):
            return self.inline_source(relation)
        return self.join(relation)

    def source(self, reference: ast.SourceRef) -> _Bound:
        info = self.catalog.logical_source(reference.name)
        if info is None:
            raise PlannerError(
                UNKNOWN_SOURCE,
                f"unknown logical source {reference.name!r}",
                reference.line,
                reference.column,
            )
        self.logical_sources.setdefault(_fold(info.name), info.name)
        return self.scan_columns(
            [(c.name, c.type, c.nullable) for c in info.columns],
            info.name.upper(),
            reference.alias,
            lambda fields, names: ir.Scan(info.name, names, fields),
            reference,
        )

    def inline_source(self, source: ast.InlineSource) -> _Bound:
        if source.source_type not in INLINE_SOURCE_TYPES:
            raise _error(
                NOT_SUPPORTED,
                f"inline source type {source.source_type!r} is not supported; "
                f"expected one of {', '.join(sorted(INLINE_SOURCE_TYPES))}",
                source,
            )
        schema = next(
            (
                option.value.columns
                for option in reversed(source.options)
                if option.key[-1] == "SCHEMA" and isinstance(option.value, ast.SchemaValue)
            ),
            None,
        )
        if schema is None:
            raise _error(
                INVALID_STATEMENT,
                "an inline source needs a schema: SCHEMA(col TYPE, ...) AS `SOURCE`.`SCHEMA`",
                source,
            )
        identifier = f"inline:{len(self.inline_sources)}"
        config = _config_pairs(
            tuple(o for o in source.options if not isinstance(o.value, ast.SchemaValue))
        )

        def build(fields: tuple[ir.Field, ...], names: tuple[str, ...]) -> ir.Operator:
            scan = ir.InlineScan(identifier, source.source_type, config, names, fields)
            self.inline_sources.append(scan)
            return scan

        return self.scan_columns(
            [(c.catalog_name, c.type, c.nullable) for c in schema],
            None,
            source.alias,
            build,
            source,
        )

    def scan_columns(
        self,
        columns: Sequence[tuple[str, str, bool]],
        qualifier: str | None,
        alias: str | None,
        build: Callable[[tuple[ir.Field, ...], tuple[str, ...]], ir.Operator],
        where: ast.Node,
    ) -> _Bound:
        names = _Names()
        fields: list[ir.Field] = []
        scope_columns: list[_Column] = []
        for column_name, type_name, nullable in columns:
            try:
                nes_type = canonical_type(type_name)
            except ValueError as error:
                raise _error(INVALID_STATEMENT, f"column {column_name!r}: {error}", where) from None
            column = _Column(
                ir.Field("", nes_type, bool(nullable)),
                qualifier,
                column_name.upper(),
                (alias,) if alias else (),
                display=column_name,
            )
            internal = names.allocate(column.nes_name)
            fields.append(ir.Field(internal, nes_type, bool(nullable)))
            scope_columns.append(column.with_field(fields[-1]))
        operator = build(tuple(fields), tuple(name for name, _, _ in columns))
        return _Bound(operator, tuple(scope_columns))

    def join(self, join: ast.Join) -> _Bound:
        left = self.relation(join.left)
        right = self.relation(join.right)
        window = _window(join.window, None)
        left_time = self.time_column(
            join.window, None, _Scope(left.columns, "the join's left input")
        )
        right_time = self.time_column(
            join.window, None, _Scope(right.columns, "the join's right input")
        )
        left_qualifier = left.columns[0].qualifier if left.columns else None
        right_qualifier = right.columns[0].qualifier if right.columns else None
        qualifier = (left_qualifier or "") + (right_qualifier or "") or None
        taken = [c.field.name for c in left.columns]
        names = _Names(taken)
        renamed: list[ir.NamedExpr] = []
        right_columns: list[_Column] = []
        for column in right.columns:
            internal = names.allocate(column.field.name)
            renamed.append(ir.NamedExpr(internal, _column_expr(column)))
            right_columns.append(
                column.with_field(ir.Field(internal, column.field.type, column.field.nullable))
            )
        right_operator = right.operator
        if any(n.name != c.field.name for n, c in zip(renamed, right.columns, strict=True)):
            right_operator = ir.Project(right.operator, tuple(renamed))
        right_time_name = right_columns[right.columns.index(right_time)].field.name
        start_name = names.allocate(f"{qualifier}$START" if qualifier else "START")
        end_name = names.allocate(f"{qualifier}$END" if qualifier else "END")
        both = (*left.columns, *right_columns)
        condition = None
        if join.condition is not None:
            condition = self.condition(join.condition, _Scope(both, "the join's inputs"), "ON")
        operator = ir.WindowJoin(
            left=left.operator,
            right=right_operator,
            window=window,
            left_time_column=left_time.field.name,
            right_time_column=right_time_name,
            condition=condition,
            start_field=start_name,
            end_field=end_name,
        )
        columns = (
            _Column(ir.Field(start_name, "UINT64", False), qualifier, "START"),
            _Column(ir.Field(end_name, "UINT64", False), qualifier, "END"),
            *both,
        )
        return _Bound(operator, columns)

    # -- names

    def resolve(self, reference: ast.ColumnRef, scope: _Scope) -> _Column:
        parts = reference.parts
        matches: list[_Column] = []
        if len(parts) == 1:
            wanted = _fold(parts[0])
            matches = [
                c for c in scope.columns if _fold(c.name) == wanted or _fold(c.nes_name) == wanted
            ]
        elif len(parts) == 2:
            matches = [
                c
                for c in scope.columns
                if _fold(c.name) == _fold(parts[1]) and _qualifies(c, parts[:1])
            ]
        distinct = list({c.field.name: c for c in matches}.values())
        if len(distinct) == 1:
            return distinct[0]
        if len(distinct) > 1:
            candidates = ", ".join(c.nes_name.replace("$", ".") for c in distinct)
            raise _error(
                AMBIGUOUS_COLUMN,
                f"column {reference.text!r} is ambiguous: it could be {candidates}; qualify it",
                reference,
            )
        available = ", ".join(c.shown.replace("$", ".") for c in scope.columns)
        message = (
            f"unknown column {reference.text!r} in {scope.description}; columns are {available}"
        )
        if scope.aggregate_hint:
            message += f" ({scope.aggregate_hint})"
        raise _error(UNKNOWN_COLUMN, message, reference)

    # -- expressions

    def condition(self, node: ast.Expression, scope: _Scope, clause: str) -> ir.Expr:
        calls = list(_aggregate_calls(node))
        if calls:
            raise _error(
                NOT_SUPPORTED,
                f"aggregate functions in {clause} are not supported; give the aggregate a name in "
                "the select list (MAX(x) AS m) and use the name in HAVING",
                calls[0],
            )
        expression = self.expression(node, scope)
        if expression.type != "BOOLEAN":
            raise _error(
                TYPE_MISMATCH, f"the {clause} condition is {expression.type}, not BOOLEAN", node
            )
        return expression

    def expression(self, node: ast.Expression, scope: _Scope) -> ir.Expr:
        if isinstance(node, ast.Literal):
            return _bare_literal(node)
        if isinstance(node, ast.ColumnRef):
            return _column_expr(self.resolve(node, scope))
        if isinstance(node, ast.FunctionCall):
            return self.function(node, scope)
        if isinstance(node, ast.IsNull):
            operand = self.operand(node.operand, scope, None)
            result: ir.Expr = ir.CallExpr("is_null", (operand,), "BOOLEAN", False)
            if node.negated:
                result = ir.CallExpr("not", (result,), "BOOLEAN", False)
            return result
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, scope)
        return self.binary(node, scope)

    def operand(self, node: ast.Expression, scope: _Scope, null_type: str | None) -> ir.Expr:
        """Bind an operand; a bare NULL takes ``null_type`` (the other operand's type)."""
        if isinstance(node, ast.Literal) and node.kind == "null":
            if null_type is None:
                raise _error(
                    TYPE_MISMATCH,
                    "the type of NULL is unknown here; write a typed NULL such as INT32(NULL)",
                    node,
                )
            return ir.LiteralExpr(None, null_type)
        return self.expression(node, scope)

    def pair(
        self, left: ast.Expression, right: ast.Expression, scope: _Scope
    ) -> tuple[ir.Expr, ir.Expr]:
        if isinstance(left, ast.Literal) and left.kind == "null":
            bound_right = self.operand(right, scope, None)
            return self.operand(left, scope, bound_right.type), bound_right
        bound_left = self.expression(left, scope)
        return bound_left, self.operand(right, scope, bound_left.type)

    def unary(self, node: ast.UnaryOp, scope: _Scope) -> ir.Expr:
        if node.op == "NOT":
            operand = self.operand(node.operand, scope, "BOOLEAN")
            _require(operand, {"BOOLEAN"}, "NOT", node)
            return ir.CallExpr("not", (operand,), "BOOLEAN", operand.nullable)
        operand = self.expression(node.operand, scope)
        _require(operand, _NUMERIC_TYPES, f"unary {node.op}", node)
        promoted = _cast(operand, _promote(operand.type))
        if node.op == "+":
            return promoted
        return ir.CallExpr("neg", (promoted,), promoted.type, promoted.nullable)

    def binary(self, node: ast.BinaryOp, scope: _Scope) -> ir.Expr:
        left, right = self.pair(node.left, node.right, scope)
        nullable = left.nullable or right.nullable
        if node.op in ("AND", "OR"):
            _require(left, {"BOOLEAN"}, node.op, node.left)
            _require(right, {"BOOLEAN"}, node.op, node.right)
            return ir.CallExpr(node.op.lower(), (left, right), "BOOLEAN", nullable)
        if node.op == "||":
            return self.concat(left, right, node)
        if node.op in _ARITHMETIC:
            _require(left, _NUMERIC_TYPES, node.op, node.left)
            _require(right, _NUMERIC_TYPES, node.op, node.right)
            common = _common_numeric(left.type, right.type)
            return ir.CallExpr(
                _ARITHMETIC[node.op], (_cast(left, common), _cast(right, common)), common, nullable
            )
        common = _comparison_type(left, right, node)
        function = _COMPARISONS[node.op]
        if function == "eq_null_safe":
            nullable = False
        return ir.CallExpr(
            function, (_cast(left, common), _cast(right, common)), "BOOLEAN", nullable
        )

    def concat(self, left: ir.Expr, right: ir.Expr, node: ast.Node) -> ir.Expr:
        _require(left, STRING_TYPES, "CONCAT", node)
        _require(right, STRING_TYPES, "CONCAT", node)
        return ir.CallExpr(
            "concat",
            (_cast(left, "VARSIZED"), _cast(right, "VARSIZED")),
            "VARSIZED",
            left.nullable or right.nullable,
        )

    def function(self, call: ast.FunctionCall, scope: _Scope) -> ir.Expr:
        name = call.name
        if name in _AGGREGATES:
            if scope.aggregates is None or call not in scope.aggregates:
                raise _error(
                    INVALID_STATEMENT,
                    f"aggregate function {name} is only allowed in a windowed query's select list",
                    call,
                )
            return scope.aggregates[call]
        if call.star:
            raise _error(
                INVALID_STATEMENT, f"{name}(*) is not a function call; did you mean COUNT(*)?", call
            )
        type_name = TYPE_NAME_ALIASES.get(name)
        if type_name is not None:
            return self.type_constructor(type_name, call, scope)
        if name in ("CONCAT",):
            if len(call.args) < 2:
                raise _error(INVALID_STATEMENT, "CONCAT takes at least two arguments", call)
            result = self.expression(call.args[0], scope)
            for arg in call.args[1:]:
                result = self.concat(result, self.expression(arg, scope), arg)
            return result
        if name not in _SCALAR_FUNCTION_NAMES:
            raise _error(
                INVALID_STATEMENT,
                f"unknown function {name}; functions are {', '.join(_SCALAR_FUNCTION_NAMES)}, "
                f"the aggregates {', '.join(_AGGREGATES)} and the type constructors "
                f"{', '.join(NES_TYPE_NAMES)}",
                call,
            )
        expected_arguments = 2 if name in ("POW", "POWER") else 1
        if len(call.args) != expected_arguments:
            raise _error(
                INVALID_STATEMENT,
                f"{name} takes {expected_arguments} argument(s), got {len(call.args)}",
                call,
            )
        if name == "ISNULL":
            return ir.CallExpr(
                "is_null", (self.operand(call.args[0], scope, "BOOLEAN"),), "BOOLEAN", False
            )
        args = [self.expression(arg, scope) for arg in call.args]
        nullable = any(arg.nullable for arg in args)
        if name in _SAME_TYPE_FUNCTIONS:
            _require(args[0], _NUMERIC_TYPES, name, call)
            return ir.CallExpr(_SAME_TYPE_FUNCTIONS[name], (args[0],), args[0].type, nullable)
        if name in _FLOAT64_FUNCTIONS:
            _require(args[0], _NUMERIC_TYPES, name, call)
            return ir.CallExpr(
                _FLOAT64_FUNCTIONS[name], (_cast(args[0], "FLOAT64"),), "FLOAT64", nullable
            )
        if name in ("POW", "POWER"):
            for value, written in zip(args, call.args, strict=True):
                _require(value, _NUMERIC_TYPES, name, written)
            return ir.CallExpr("pow", tuple(_cast(a, "FLOAT64") for a in args), "FLOAT64", nullable)
        if name == "CASTTOUNIXTS":
            _require(args[0], STRING_TYPES, name, call)
            return ir.CallExpr(
                "iso_text_to_unix_ms", (_cast(args[0], "VARSIZED"),), "UINT64", nullable
            )
        _require(args[0], INTEGER_TYPES, name, call)  # CASTFROMUNIXTS
        return ir.CallExpr("unix_ms_to_iso_text", (_cast(args[0], "UINT64"),), "VARSIZED", nullable)

    def type_constructor(self, type_name: str, call: ast.FunctionCall, scope: _Scope) -> ir.Expr:
        if len(call.args) != 1:
            raise _error(INVALID_STATEMENT, f"{call.name}(...) takes exactly one value", call)
        argument = call.args[0]
        if isinstance(argument, ast.Literal):
            return _typed_literal(type_name, argument)
        value = self.expression(argument, scope)
        if value.type == type_name:
            return value
        if value.type in _NUMERIC_TYPES and type_name in _NUMERIC_TYPES:
            return _cast(value, type_name)
        if value.type in STRING_TYPES and type_name in STRING_TYPES:
            return _cast(value, type_name)
        raise _error(TYPE_MISMATCH, f"cannot convert {value.type} to {type_name}", call)


# ---- typing rules ----------------------------------------------------------------------------


def _error(code: str, message: str, node: ast.Node) -> PlannerError:
    return PlannerError(code, message, node.line, node.column)


def _require(
    expression: ir.Expr, allowed: frozenset[str] | set[str], what: str, node: ast.Node
) -> None:
    if expression.type not in allowed:
        kinds = "a number" if allowed == _NUMERIC_TYPES else " or ".join(sorted(allowed))
        raise _error(TYPE_MISMATCH, f"{what} needs {kinds}, got {expression.type}", node)


def _promote(type_name: str) -> str:
    """C++ integral promotion: integer types narrower than 32 bits compute as INT32."""
    if type_name in INTEGER_TYPES and _INTEGER_BITS[type_name] < 32:
        return "INT32"
    return type_name


def _common_numeric(a: str, b: str) -> str:
    """C++'s usual arithmetic conversions on NebulaStream's numeric types."""
    if a in FLOAT_TYPES or b in FLOAT_TYPES:
        return "FLOAT64" if "FLOAT64" in (a, b) else "FLOAT32"
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    a_unsigned, b_unsigned = a in UNSIGNED_TYPES, b in UNSIGNED_TYPES
    if a_unsigned == b_unsigned:
        return a if _INTEGER_BITS[a] >= _INTEGER_BITS[b] else b
    unsigned, signed = (a, b) if a_unsigned else (b, a)
    if _INTEGER_BITS[unsigned] >= _INTEGER_BITS[signed]:
        return unsigned
    low, high = integer_range(signed)
    if low <= integer_range(unsigned)[0] and integer_range(unsigned)[1] <= high:
        return signed
    return _UNSIGNED_OF[signed]


def _comparison_type(left: ir.Expr, right: ir.Expr, node: ast.BinaryOp) -> str:
    a, b = left.type, right.type
    if a in _NUMERIC_TYPES and b in _NUMERIC_TYPES:
        return _common_numeric(a, b)
    if a in STRING_TYPES and b in STRING_TYPES:
        return a if a == b else "VARSIZED"
    if a == b == "BOOLEAN":
        return "BOOLEAN"
    if {a, b} & STRING_TYPES and "BOOLEAN" in (a, b):
        raise _error(
            NOT_SUPPORTED,
            f"comparing {a} with {b}: NebulaStream compares text with a boolean by the text's "
            "validity, which has no faithful Spark equivalent",
            node,
        )
    raise _error(TYPE_MISMATCH, f"cannot compare {a} with {b} ({node.op})", node)


def _assignable(source: str, target: str) -> bool:
    """Whether a value of ``source`` type can be written into a ``target`` column exactly."""
    if source == target:
        return True
    if source in INTEGER_TYPES and target in INTEGER_TYPES:
        low, high = integer_range(source)
        target_low, target_high = integer_range(target)
        return target_low <= low and high <= target_high
    if source in INTEGER_TYPES and target in FLOAT_TYPES:
        mantissa = 24 if target == "FLOAT32" else 53
        return _INTEGER_BITS[source] <= mantissa
    if source == "FLOAT32" and target == "FLOAT64":
        return True
    return source == "CHAR" and target == "VARSIZED"


def _aggregate_type(
    function: str, argument: ir.Expr | None, call: ast.FunctionCall
) -> tuple[str, bool]:
    if function == "count":
        return "UINT64", False
    assert argument is not None
    if function in ("min", "max"):
        if argument.type not in _NUMERIC_TYPES | STRING_TYPES:
            raise _error(
                TYPE_MISMATCH, f"{call.name} needs a number or text, got {argument.type}", call
            )
        return argument.type, argument.nullable
    _require(argument, _NUMERIC_TYPES, call.name, call)
    if function == "sum":
        return argument.type, argument.nullable
    return "FLOAT64", argument.nullable


def _window(spec: ast.WindowSpec, watermark: ast.Watermark | None) -> ir.Window:
    if spec.kind == "COUNT" or spec.size is None:
        raise _error(
            NOT_SUPPORTED,
            "count-based windows are not supported: Spark windows by event time only",
            spec,
        )
    size = spec.size.millis
    slide = spec.advance.millis if spec.advance is not None else size
    if size <= 0 or slide <= 0:
        raise _error(INVALID_STATEMENT, "window size and slide must be positive", spec)
    if slide > size:
        raise _error(
            NOT_SUPPORTED,
            f"a sliding window that advances ({slide} ms) by more than its size ({size} ms) is not "
            "supported",
            spec,
        )
    lateness = 0 if watermark is None else watermark.delay.millis
    kind: ir.WindowKind = "tumbling" if slide == size else "sliding"
    return ir.Window(kind, size, slide, lateness)


# ---- constants -------------------------------------------------------------------------------


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _wrap_integer(value: int, type_name: str) -> int:
    low, high = integer_range(type_name)
    return (value - low) % (high - low + 1) + low


def _float_text(value: float, type_name: str) -> str:
    return repr(_float32(value) if type_name == "FLOAT32" else value)


def _bare_literal(node: ast.Literal) -> ir.LiteralExpr:
    """A constant written without a type constructor (an extension of NebulaStream)."""
    if node.kind == "integer":
        value = int(node.text)
        for candidate in ("INT32", "INT64", "UINT64"):
            low, high = integer_range(candidate)
            if low <= value <= high:
                return ir.LiteralExpr(str(value), candidate)
        raise _error(TYPE_MISMATCH, f"integer constant {node.text} is out of range", node)
    if node.kind == "float":
        return ir.LiteralExpr(repr(float(node.text)), "FLOAT64")
    if node.kind == "string":
        return ir.LiteralExpr(node.text, "VARSIZED")
    if node.kind == "boolean":
        return ir.LiteralExpr(node.text, "BOOLEAN")
    raise _error(
        TYPE_MISMATCH,
        "the type of NULL is unknown here; write a typed NULL such as INT32(NULL)",
        node,
    )


def _typed_literal(type_name: str, node: ast.Literal) -> ir.LiteralExpr:
    """``TYPE(constant)``: NebulaStream's typed constants (``UINT64(1)``, ``BOOLEAN(TRUE)``)."""
    if node.kind == "null":
        return ir.LiteralExpr(None, type_name)
    text = node.text
    problem = (
        f"{type_name}({text if node.kind != 'string' else repr(text)}) is not a valid {type_name}"
    )
    if type_name in INTEGER_TYPES:
        try:
            value = int(text.strip()) if node.kind in ("integer", "string") else None
        except ValueError:
            value = None
        if value is None:
            raise _error(TYPE_MISMATCH, problem, node)
        low, high = integer_range(type_name)
        if not low <= value <= high:
            raise _error(
                TYPE_MISMATCH, f"{value} is out of range for {type_name} ({low}..{high})", node
            )
        return ir.LiteralExpr(str(value), type_name)
    if type_name in FLOAT_TYPES:
        try:
            number = float(text) if node.kind in ("integer", "float", "string") else None
        except ValueError:
            number = None
        if number is None:
            raise _error(TYPE_MISMATCH, problem, node)
        return ir.LiteralExpr(_float_text(number, type_name), type_name)
    if type_name == "BOOLEAN":
        truth = {"TRUE": "TRUE", "FALSE": "FALSE", "1": "TRUE", "0": "FALSE"}.get(
            text.strip().upper()
        )
        if truth is None or node.kind == "float":
            raise _error(TYPE_MISMATCH, problem, node)
        return ir.LiteralExpr(truth, "BOOLEAN")
    if type_name == "CHAR" and len(text) != 1:
        raise _error(TYPE_MISMATCH, f"CHAR holds one character, got {text!r}", node)
    return ir.LiteralExpr(text, type_name)


def _cast(expression: ir.Expr, type_name: str) -> ir.Expr:
    """Convert to ``type_name`` with C++ semantics; constants are converted right away."""
    if expression.type == type_name:
        return expression
    if isinstance(expression, ir.LiteralExpr):
        folded = _fold_constant(expression, type_name)
        if folded is not None:
            return folded
    return ir.CallExpr("cast", (expression,), type_name, expression.nullable)


def _fold_constant(literal: ir.LiteralExpr, type_name: str) -> ir.LiteralExpr | None:
    if literal.value is None:
        return ir.LiteralExpr(None, type_name)
    if literal.type in INTEGER_TYPES and type_name in INTEGER_TYPES:
        return ir.LiteralExpr(str(_wrap_integer(int(literal.value), type_name)), type_name)
    if literal.type in _NUMERIC_TYPES and type_name in FLOAT_TYPES:
        return ir.LiteralExpr(_float_text(float(literal.value), type_name), type_name)
    if literal.type in STRING_TYPES and type_name == "VARSIZED":
        return ir.LiteralExpr(literal.value, type_name)
    return None


# ---- helpers ---------------------------------------------------------------------------------


def _column_expr(column: _Column) -> ir.ColumnExpr:
    return ir.ColumnExpr(column.field.name, column.field.type, column.field.nullable)


def _find_column(columns: Sequence[_Column], internal: str) -> _Column:
    return next(column for column in columns if column.field.name == internal)


def _qualifies(column: _Column, qualifier: Sequence[str]) -> bool:
    if len(qualifier) != 1:
        return False
    wanted = _fold(qualifier[0])
    return (column.qualifier is not None and _fold(column.qualifier) == wanted) or any(
        _fold(alias) == wanted for alias in column.aliases
    )


def _aggregate_calls(node: ast.Expression) -> Iterator[ast.FunctionCall]:
    """Aggregate calls inside an expression (outermost first, not descending into them)."""
    pending: list[ast.Expression] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.FunctionCall):
            if current.name in _AGGREGATES:
                yield current
                continue
            pending.extend(reversed(current.args))
        elif isinstance(current, ast.BinaryOp):
            pending.extend((current.right, current.left))
        elif isinstance(current, ast.UnaryOp | ast.IsNull):
            pending.append(current.operand)


def _describe(bound: _Bound) -> str:
    qualifiers = {c.qualifier for c in bound.columns}
    if len(qualifiers) == 1 and None not in qualifiers:
        return f"source {next(iter(qualifiers))!r}"
    return "the query's input"


def _column_list(columns: Sequence[_Column]) -> str:
    return ", ".join(f"{c.nes_name} {c.field.type}" for c in columns)


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
