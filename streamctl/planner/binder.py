"""Bind a parsed query against the catalog: resolve names, type it, build the plan, check the sink.

:func:`bind_query` turns an :class:`~streamctl.planner.ast.QueryStatement` into a
:class:`BoundQuery` whose :class:`~streamctl.planner.plan.QueryPlan` an agent can run.

Guarantees:

* raises nothing but :class:`~streamctl.planner.planning_errors.PlannerError`; errors carry the line
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
inputs' qualifiers (``ST$START``; three streams: ``STU$START``). A name resolves as
NebulaStream's ``Schema::getFieldByName`` does (:func:`.scopes._matches`): an exact match
first, else the first field of that name in schema order, so a column that joined sources or
window outputs share is the left (first) input's, never an ambiguity error. A window may read
the output of another window or join (stacked windows) with the inner START or END, or a
joined source's timestamp, as its event time; other event times over such an output are
refused (``NOT_SUPPORTED``, :mod:`.stacking`).

Windows and grouping (nes-docs query_api.md "Stateful/Windowed Operators",
watermarking_progress_window_triggering.md, null_handling.md; NebulaStream's grammar
``windowedAggregationClause``/``groupByClause``):

* ``WINDOW TUMBLING(ts, SIZE n unit)`` and ``WINDOW SLIDING(ts, SIZE n unit, ADVANCE BY n
  unit)`` over an event-time column of milliseconds (units MS, SEC, MINUTE(S), HOUR(S),
  DAY(S)); a window covers ``[start, start + size)`` and windows start at multiples of the
  advance from 0 (tumbling: advance = size). A row at ``t`` belongs to every window with
  ``start <= t < start + size``: one for tumbling windows, several when the advance is
  smaller than the size, none when it is larger and ``t`` lies in a gap between windows
  (advance > size is accepted). A row without an event time belongs to no window. A window
  is emitted once, when the watermark passes its end, and only if a row fell into it;
  ``start``/``end`` are UINT64 columns of the output.
* ``GROUP BY`` comes before or after the ``WINDOW`` clause, ``WATERMARK(...)`` after both.
  NebulaStream groups by the fields the clause names: ``GROUP BY a, b``, the row constructor
  ``GROUP BY (a, b)``, parenthesised or nested lists and mixes (``GROUP BY (a, b), c``) name
  the keys in the order written; a key named twice is one key. Keys are columns of the
  window's input (an alias of the select list is not, an alias made in a subquery is); a key
  that is an expression is refused (``NOT_SUPPORTED``, NebulaStream's parser refuses
  arithmetic there too): compute it in a subquery. NULL keys form their own group. Count
  windows (``TUMBLING(n)``) and ingestion-time windows are refused.

Aggregates (query_api.md "Aggregation", null_handling.md "Aggregation Functions"): COUNT,
SUM, MIN, MAX, AVG and MEDIAN in a windowed query's select list. An aggregate's argument is any
expression over the window's input (``SUM(a * b)``); expressions around aggregates
(``SUM(a) / COUNT(a)``, ``MAX(x) - MIN(x)``) and over START, END and the keys are a projection
of the window's output. A WINDOW without aggregate functions outputs START, END and the GROUP
BY keys: one row per non-empty window and key. Aggregates nested in aggregates or in WHERE are
refused. HAVING names the select list's columns and may use aggregates (query_api.md:
``HAVING MAX(price) > FLOAT64(100.0) AND COUNT(*) >= UINT64(10)``), computed by the window
whether or not the select list shows them. What aggregates give over NULLs
is :mod:`streamctl.spark.translate`'s docstring; their nullability is :mod:`.types`'.

Typing follows NebulaStream's C++ rules (:mod:`.types`). The binder is the query visitor
(:class:`_Binder`, selects, unions, windows, joins, sources); it binds expressions with
:mod:`.expressions`, checks sinks with :mod:`.sink_checks` and reads the catalog through
:mod:`.catalog_lookup`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from streamctl.error_codes import (
    INVALID_STATEMENT,
    NOT_SUPPORTED,
    TYPE_MISMATCH,
    UNKNOWN_COLUMN,
    UNKNOWN_SINK,
    UNKNOWN_SOURCE,
)
from streamctl.limits import MAX_WINDOW_MILLIS, MAX_WINDOWS_PER_ROW
from streamctl.nes_types import INTEGER_TYPES, canonical_type
from streamctl.planner import ast, sink_checks, stacking
from streamctl.planner import plan as ir
from streamctl.planner.catalog_lookup import CatalogLookup
from streamctl.planner.expressions import _AGGREGATES, _aggregate_calls, _ExpressionBinder
from streamctl.planner.folding import _cast
from streamctl.planner.planning_errors import PlannerError, _error
from streamctl.planner.scopes import (
    _Bound,
    _Column,
    _column_expr,
    _column_list,
    _describe,
    _find_column,
    _fold,
    _Names,
    _qualifies,
    _Scope,
)
from streamctl.planner.sink_checks import (
    InlineSinkSpec,
    OutputColumn,
    _config_pairs,
    _output_names,
    _sink_column,
)
from streamctl.planner.types import _aggregate_type

__all__ = ["BoundQuery", "bind_query"]


INLINE_SOURCE_TYPES: Final = frozenset({"FILE", "GENERATOR", "TCP", "KAFKA"})


# ---- the result ------------------------------------------------------------------------------


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


# ---- the binder ------------------------------------------------------------------------------


class _Binder(_ExpressionBinder):
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
            target = sink_checks.own_schema(bound, statement)
        elif isinstance(sink, ast.SinkRef):
            info = self.catalog.sink(sink.name)
            if info is None:
                raise PlannerError(
                    UNKNOWN_SINK, f"unknown sink {sink.name!r}", sink.line, sink.column
                )
            sink_name = info.name
            target = sink_checks.check_sink(
                bound, [_sink_column(c) for c in info.columns], info.name, sink
            )
        else:
            inline_sink = sink_checks.inline_sink(sink)
            schema = sink.schema()
            if schema is None:
                target = sink_checks.own_schema(bound, sink)
            else:
                columns = [OutputColumn(c.catalog_name, c.type, c.nullable) for c in schema]
                target = sink_checks.check_sink(bound, columns, f"{sink.sink_type}(...)", sink)
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
        # Stacked windows (a window over a window's or join's output) Spark cannot run are
        # refused now, at create time, not when an agent starts the query.
        stacking.analyze(query_plan.root)
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
        having_calls = list(_aggregate_calls(select.having)) if select.having else []
        return self.window_aggregation(select, source, aggregate_calls, having_calls)

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
        self,
        select: ast.Select,
        source: _Bound,
        aggregate_calls: list[ast.FunctionCall],
        having_calls: Sequence[ast.FunctionCall] = (),
    ) -> _Bound:
        spec = select.window
        assert spec is not None
        window = _window(spec, select.watermark)
        scope = _Scope(source.columns, _describe(source))
        if spec.right_time_column is not None:
            raise _error(
                INVALID_STATEMENT,
                "a window over one input names one event-time column; two are for a join's "
                "window (its left input's, then its right input's)",
                spec.right_time_column,
            )
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
        grouped: set[str] = set()
        for key_node in select.group_by:
            if not isinstance(key_node, ast.ColumnRef):
                raise _error(
                    NOT_SUPPORTED,
                    "GROUP BY takes columns only (NebulaStream groups by the fields it names); "
                    "compute the key in a subquery, FROM (SELECT ..., expression AS k FROM ...), "
                    "and group by k",
                    key_node,
                )
            key_column = self.resolve(key_node, scope)
            if key_column.field.name in grouped:
                continue  # naming a key twice groups the same rows: one key column
            grouped.add(key_column.field.name)
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
        expression_inputs = 0  # aggregates over an expression, numbered as NebulaStream does
        for call in aggregate_calls:
            written = call.args[0] if len(call.args) == 1 else None
            expression_input = None
            if not call.star and not isinstance(written, ast.ColumnRef):
                expression_input, expression_inputs = expression_inputs, expression_inputs + 1
            aggregate, column = self.aggregate(
                call, aliases.get(call), scope, qualifier, names, expression_input
            )
            aggregates.append(aggregate)
            out_columns.append(column)
            aggregate_columns[call] = _column_expr(column)
        # HAVING may use aggregates (query_api.md: ``HAVING MAX(price) > ... AND COUNT(*) >=
        # ...``): one the select list computes is reused, another is computed as well and
        # dropped after the filter.
        select_calls = {_call_shape(call): aggregate_columns[call] for call in aggregate_calls}
        for call in having_calls:
            known = select_calls.get(_call_shape(call))
            if known is None:
                aggregate, column = self.aggregate(call, None, scope, qualifier, names, None)
                aggregates.append(aggregate)
                out_columns.append(column)
                known = select_calls[_call_shape(call)] = _column_expr(column)
            aggregate_columns[call] = known
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
        try:
            projected = self.projection(select.items, windowed, output_scope)
        except PlannerError as error:
            if aggregate_calls or error.code != UNKNOWN_COLUMN:
                raise
            # NebulaStream allows a WINDOW without aggregate functions: it groups the rows by
            # window and key and outputs START, END and the keys only.
            raise PlannerError(
                INVALID_STATEMENT,
                error.message.split(": ", 1)[-1] + "; a WINDOW without aggregate functions "
                "outputs one row per window and GROUP BY key: group by the column, or use at "
                "least one aggregate function over it",
                error.line,
                error.column,
            ) from None
        if select.having is not None:
            projected = self.having(select.having, projected, aggregate_columns, having_calls)
        return projected

    def having(
        self,
        condition: ast.Expression,
        projected: _Bound,
        aggregate_columns: dict[ast.FunctionCall, ir.ColumnExpr],
        having_calls: Sequence[ast.FunctionCall],
    ) -> _Bound:
        """Filter the select list's rows by ``condition``, which names the select list's
        columns and may use aggregates: these are carried through the projection under
        internal names, and projected away after the filter."""
        if not having_calls:
            predicate = self.condition(
                condition, _Scope(projected.columns, "the select list"), "HAVING"
            )
            return _Bound(ir.Filter(projected.operator, predicate), projected.columns)
        project = projected.operator
        assert isinstance(project, ir.Project)
        taken = {column.field.name for column in projected.columns}
        carried: list[ir.NamedExpr] = []
        in_having: dict[ast.FunctionCall, ir.ColumnExpr] = {}
        for number, call in enumerate(having_calls):
            window_column = aggregate_columns[call]
            name = f"_HAVING_{number}"
            while name in taken:
                name = f"_{name}"
            taken.add(name)
            carried.append(ir.NamedExpr(name, window_column))
            in_having[call] = ir.ColumnExpr(name, window_column.type, window_column.nullable)
        extended = ir.Project(project.input, project.columns + tuple(carried))
        scope = _Scope(projected.columns, "the select list", aggregates=in_having)
        predicate = self.expression(condition, scope)
        if predicate.type != "BOOLEAN":
            raise _error(
                TYPE_MISMATCH, f"the HAVING condition is {predicate.type}, not BOOLEAN", condition
            )
        kept = tuple(
            ir.NamedExpr(column.field.name, _column_expr(column)) for column in projected.columns
        )
        return _Bound(ir.Project(ir.Filter(extended, predicate), kept), projected.columns)

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
        expression_input: int | None = None,
    ) -> tuple[ir.Aggregate, _Column]:
        """Bind one aggregate call. Its column is named by its alias, else as NebulaStream names
        it: ``<column>_<FUNCTION>`` over a column, ``_AGG_INPUT_<n>_<FUNCTION>`` (unqualified)
        over the ``n``-th expression argument of the select list (``expression_input``;
        NebulaStream first projects that expression into the field ``_AGG_INPUT_<n>``),
        ``COUNT`` for ``COUNT(*)``."""
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
        elif expression_input is not None:
            # Unqualified, as the field NebulaStream projects the expression into.
            column_qualifier, name = None, f"_AGG_INPUT_{expression_input}_{call.name}"
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
        right_spec = join.window
        if right_spec.right_time_column is not None:
            right_spec = dataclasses.replace(right_spec, time_column=right_spec.right_time_column)
        right_time = self.time_column(
            right_spec, None, _Scope(right.columns, "the join's right input")
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


# ---- windows ---------------------------------------------------------------------------------


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
    lateness = 0 if watermark is None else watermark.delay.millis
    if max(size, slide, lateness) > MAX_WINDOW_MILLIS:
        raise _error(
            INVALID_STATEMENT,
            f"window sizes, slides and lateness are at most {MAX_WINDOW_MILLIS} ms (100 years)",
            spec,
        )
    windows_per_row = -(-size // slide)  # size over slide, rounded up
    if windows_per_row > MAX_WINDOWS_PER_ROW:
        raise _error(
            INVALID_STATEMENT,
            f"a row may fall in at most {MAX_WINDOWS_PER_ROW} sliding windows, and size "
            f"{size} ms over slide {slide} ms puts it in {windows_per_row}",
            spec,
        )
    # slide > size is allowed: windows with gaps between them (rows in a gap join no window).
    kind: ir.WindowKind = "tumbling" if slide == size else "sliding"
    return ir.Window(kind, size, slide, lateness)


def _call_shape(node: object) -> object:
    """An expression without its source positions: two spellings of one aggregate call
    (``MAX(price)`` in the select list and in HAVING) have the same shape."""
    if isinstance(node, tuple):
        return tuple(_call_shape(part) for part in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return (
            type(node).__name__,
            tuple(
                (f.name, _call_shape(getattr(node, f.name)))
                for f in dataclasses.fields(node)
                if f.name not in ("line", "column")
            ),
        )
    return node
