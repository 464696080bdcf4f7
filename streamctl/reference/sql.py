"""Translate a bound plan (:class:`~streamctl.planner.plan.QueryPlan`) into DuckDB SQL.

:func:`translate` gives a :class:`SqlProgram`: one ``CREATE TEMP TABLE opN AS SELECT ...``
per operator, children first, and the query reading the root's rows. Every operator's table
has the columns ``c0``, ``c1``, ... in the order of the operator's ``fields`` (positional
names: plan field names never collide with the reference's own columns, whatever their case).

Set-based, operator at a time, like NebulaStream's operators on a bounded input:

* every subexpression of an operator is computed into a column of its own, one layer of
  ``SELECT *, ...`` per expression depth, so each is evaluated once on every row that reaches
  the operator (a documented run-time failure, such as an integer division by zero, fails the
  query even when a later operator would drop the row), and fragments of
  :mod:`.nes_semantics` may repeat their operands freely;
* a window aggregation joins each row with the windows that hold its event time (a list of
  window numbers, unnested) and groups by window number and keys: one row per non-empty
  window and key;
* a window join assigns windows on both sides, joins on equal window number, then filters
  the pairs by the join predicate; a pair appears once per common window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from streamctl.planner import plan
from streamctl.reference import nes_semantics as nes
from streamctl.reference.reference_errors import ReferenceUnsupported

__all__ = ["SqlProgram", "column_name", "quote", "translate"]


@dataclass(frozen=True)
class SqlProgram:
    """Statements to run in order, then ``query`` gives the plan's output rows (columns in the
    order of ``fields``)."""

    statements: tuple[str, ...]
    query: str
    fields: tuple[plan.Field, ...]

    def text(self) -> str:
        """The whole program, for reading."""
        return ";\n".join((*self.statements, self.query)) + ";"


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def column_name(position: int) -> str:
    """The name of an operator table's column at ``position``."""
    return f"c{position}"


def translate(query_plan: plan.QueryPlan, source_tables: Mapping[str, str]) -> SqlProgram:
    """The SQL of ``query_plan``. ``source_tables`` maps each leaf's key (see
    :func:`source_key`) to a table with the leaf's fields as columns ``c0``, ``c1``, ...

    Raises :class:`ReferenceUnsupported` for what the reference does not translate."""
    translator = _Translator(source_tables)
    try:
        root = translator.operator(query_plan.root)
    except RecursionError:
        raise ReferenceUnsupported("plan nested too deeply") from None
    columns = ", ".join(quote(column_name(i)) for i in range(len(query_plan.root.fields)))
    query = f"SELECT {columns} FROM {root}"
    return SqlProgram(tuple(translator.statements), query, query_plan.root.fields)


def source_key(leaf: plan.Scan | plan.InlineScan) -> str:
    """The key a leaf's rows are given under: a logical source's name, an inline source's id."""
    return leaf.source if isinstance(leaf, plan.Scan) else leaf.id


@dataclass
class _Layers:
    """Subexpressions computed into columns ``e0``, ``e1``, ... by depth."""

    names: dict[plan.Expr, str] = field(default_factory=dict)
    levels: dict[plan.Expr, int] = field(default_factory=dict)
    by_level: dict[int, list[tuple[str, str]]] = field(default_factory=dict)


class _Translator:
    def __init__(self, source_tables: Mapping[str, str]) -> None:
        self.source_tables = source_tables
        self.statements: list[str] = []
        self.aliases = 0

    def alias(self) -> str:
        self.aliases += 1
        return f"q{self.aliases}"

    def table(self, select: str) -> str:
        name = f"op{len(self.statements)}"
        self.statements.append(f"CREATE TEMP TABLE {name} AS {select}")
        return name

    # -- operators

    def operator(self, operator: plan.Operator) -> str:
        """Translate ``operator`` (children first); returns its table's name."""
        if isinstance(operator, plan.Scan | plan.InlineScan):
            key = source_key(operator)
            if key not in self.source_tables:
                raise ReferenceUnsupported(f"no rows given for source {key!r}")
            columns = ", ".join(quote(column_name(i)) for i in range(len(operator.fields)))
            return self.table(f"SELECT {columns} FROM {quote(self.source_tables[key])}")
        if isinstance(operator, plan.Filter):
            return self.filter(operator)
        if isinstance(operator, plan.Project):
            return self.project(operator)
        if isinstance(operator, plan.Union):
            left = self.operator(operator.left)
            right = self.operator(operator.right)
            return self.table(f"SELECT * FROM {left} UNION ALL SELECT * FROM {right}")
        if isinstance(operator, plan.WindowAggregate):
            return self.window_aggregate(operator)
        if isinstance(operator, plan.WindowJoin):
            return self.window_join(operator)
        raise ReferenceUnsupported(f"operator {type(operator).__name__}")

    def filter(self, operator: plan.Filter) -> str:
        source = self.operator(operator.input)
        env = _environment(operator.input.fields)
        relation, (predicate,) = self.compute(source, env, [operator.predicate])
        columns = ", ".join(env.values())
        return self.table(f"SELECT {columns} FROM {relation} WHERE {predicate}")

    def project(self, operator: plan.Project) -> str:
        source = self.operator(operator.input)
        env = _environment(operator.input.fields)
        relation, values = self.compute(source, env, [c.expr for c in operator.columns])
        items = _items(values)
        return self.table(f"SELECT {items} FROM {relation}")

    def windowed_rows(
        self, operator: plan.Operator, time_column: str, window: plan.Window, extra: list[str]
    ) -> str:
        """SQL of the rows of ``operator``'s table (columns as ``extra`` names them) with
        column ``w``: one row per window that holds the row's event time."""
        source = self.operator(operator)
        time_type = next((f.type for f in operator.fields if f.name == time_column), None)
        if time_type is None:
            raise ReferenceUnsupported(f"event-time column {time_column!r} is not an input")
        position = [f.name for f in operator.fields].index(time_column)
        time = nes.event_time(quote(column_name(position)), time_type)
        inner = self.alias()
        with_time = f"(SELECT *, {time} AS t FROM {source}) AS {inner}"
        outer = self.alias()
        indexes = nes.window_indexes("t", window)
        listed = ", ".join(extra) if extra else "*"
        return f"(SELECT {listed}, unnest({indexes}) AS w FROM {with_time}) AS {outer}"

    def window_aggregate(self, operator: plan.WindowAggregate) -> str:
        source = self.operator(operator.input)
        env = _environment(operator.input.fields)
        arguments = [a.argument for a in operator.aggregates if a.argument is not None]
        # An aggregate's argument by a zero divisor: whether NES evaluates it for a row of no
        # window (a gap) or for an aggregate no output uses is left open (Spark prunes both).
        first = len(operator.keys)
        relation, values = self.compute(
            source,
            env,
            [k.expr for k in operator.keys] + arguments + [_time_expr(operator)],
            frozenset(range(first, first + len(arguments))),
        )
        keys = values[: len(operator.keys)]
        argument_values = iter(values[len(operator.keys) : -1])
        time = values[-1]
        prepared_items = [f"{time} AS ts"]
        prepared_items += [
            f"{nes.group_key(value, key.expr.type)} AS k{i}"
            for i, (value, key) in enumerate(zip(keys, operator.keys, strict=True))
        ]
        aggregate_items: list[str] = []
        for i, aggregate in enumerate(operator.aggregates):
            if aggregate.argument is None:
                counted = nes.aggregate(aggregate.function, None, None, aggregate.type)
                aggregate_items.append(counted)
                continue
            prepared_items.append(f"{next(argument_values)} AS a{i}")
            aggregate_items.append(
                nes.aggregate(aggregate.function, f"a{i}", aggregate.argument.type, aggregate.type)
            )
        prepared = self.table(f"SELECT {', '.join(prepared_items)} FROM {relation}")
        time_type = _time_expr(operator).type
        time_sql = nes.event_time("ts", time_type)
        inner = self.alias()
        key_names = [f"k{i}" for i in range(len(operator.keys))]
        argument_names = [f"a{i}" for i, a in enumerate(operator.aggregates) if a.argument]
        listed = ", ".join([*key_names, *argument_names]) or "ts"
        indexes = nes.window_indexes("t", operator.window)
        windowed = (
            f"(SELECT {listed}, unnest({indexes}) AS w "
            f"FROM (SELECT *, {time_sql} AS t FROM {prepared}) AS {inner}) AS {self.alias()}"
        )
        outputs = [
            nes.window_start("w", operator.window),
            nes.window_end("w", operator.window),
            *key_names,
            *aggregate_items,
        ]
        group = ", ".join(["w", *key_names])
        return self.table(f"SELECT {_items(outputs)} FROM {windowed} GROUP BY {group}")

    def window_join(self, operator: plan.WindowJoin) -> str:
        left_count, right_count = len(operator.left.fields), len(operator.right.fields)
        left_names = [f"lc{i}" for i in range(left_count)]
        right_names = [f"rc{i}" for i in range(right_count)]
        left = self.windowed_rows(
            operator.left,
            operator.left_time_column,
            operator.window,
            [f"{quote(column_name(i))} AS {n}" for i, n in enumerate(left_names)],
        )
        right = self.windowed_rows(
            operator.right,
            operator.right_time_column,
            operator.window,
            [f"{quote(column_name(i))} AS {n}" for i, n in enumerate(right_names)],
        )
        left_alias, right_alias = _alias_of(left), _alias_of(right)
        selected = [f"{left_alias}.w AS w", *left_names, *right_names]
        pairs = (
            f"SELECT {', '.join(selected)} FROM {left} JOIN {right} "
            f"ON {left_alias}.w = {right_alias}.w"
        )
        outputs = [
            nes.window_start("w", operator.window),
            nes.window_end("w", operator.window),
            *left_names,
            *right_names,
        ]
        if operator.condition is None:
            return self.table(f"SELECT {_items(outputs)} FROM ({pairs}) AS {self.alias()}")
        paired = self.table(pairs)
        env = {
            f.name: name
            for f, name in zip(
                (*operator.left.fields, *operator.right.fields),
                (*left_names, *right_names),
                strict=True,
            )
        }
        relation, (condition,) = self.compute(paired, env, [operator.condition])
        return self.table(f"SELECT {_items(outputs)} FROM {relation} WHERE {condition}")

    # -- expressions

    def compute(
        self,
        source: str,
        env: Mapping[str, str],
        expressions: Sequence[plan.Expr],
        open_failures: frozenset[int] = frozenset(),
    ) -> tuple[str, list[str]]:
        """A relation over ``source`` (whose columns ``env`` names by field) with every call
        of ``expressions`` computed into a column; returns it and each expression's SQL (a
        column or a constant)."""
        layers = _Layers()
        values = [
            self.expression(e, env, layers, i in open_failures) for i, e in enumerate(expressions)
        ]
        relation = f"{source} AS {self.alias()}"
        for level in sorted(layers.by_level):
            items = ", ".join(f"{sql} AS {name}" for name, sql in layers.by_level[level])
            relation = f"(SELECT *, {items} FROM {relation}) AS {self.alias()}"
        if not layers.by_level:
            return relation, values
        # Stored, so every call is evaluated on every row of ``source``: over a subquery,
        # DuckDB pushes a conjunct of a later WHERE below the calls (``ts > ABS(ts)`` dropped
        # the row before ``a1 % 0`` was computed) and prunes columns, and a refusal or failure
        # would depend on its optimizer rather than on the NES rule.
        return self.table(f"SELECT * FROM {relation}"), values

    def expression(
        self, node: plan.Expr, env: Mapping[str, str], layers: _Layers, in_logic: bool = False
    ) -> str:
        if isinstance(node, plan.ColumnExpr):
            if node.name not in env:
                raise ReferenceUnsupported(f"column {node.name!r} is not an input column")
            return env[node.name]
        if isinstance(node, plan.LiteralExpr):
            return nes.literal(node.value, node.type)
        if node in layers.names:
            return layers.names[node]
        in_logic = in_logic or node.function in ("and", "or")
        args = [self.expression(arg, env, layers, in_logic) for arg in node.args]
        level = 1 + max((layers.levels.get(arg, 0) for arg in node.args), default=0)
        types = [arg.type for arg in node.args]
        sql = nes.call(node.function, args, types, node.type, in_logic)
        name = f"e{len(layers.names)}"
        layers.names[node] = name
        layers.levels[node] = level
        layers.by_level.setdefault(level, []).append(
            (name, f"CAST({sql} AS {nes.duckdb_type(node.type)})")
        )
        return name


def _environment(fields: Sequence[plan.Field]) -> dict[str, str]:
    return {f.name: quote(column_name(i)) for i, f in enumerate(fields)}


def _items(values: Sequence[str]) -> str:
    return ", ".join(f"{value} AS {quote(column_name(i))}" for i, value in enumerate(values))


def _alias_of(relation: str) -> str:
    return relation.rsplit(" AS ", 1)[1]


def _time_expr(operator: plan.WindowAggregate) -> plan.ColumnExpr:
    time = next((f for f in operator.input.fields if f.name == operator.time_column), None)
    if time is None:
        raise ReferenceUnsupported(f"event-time column {operator.time_column!r} is not an input")
    return plan.ColumnExpr(time.name, time.type, time.nullable)
