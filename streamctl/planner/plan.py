"""The plan IR: a typed tree of relational operators that the coordinator stores and an agent runs.

Guarantees:

* every node is a frozen dataclass of plain values, so equal plans compare equal and hash;
* :meth:`QueryPlan.to_json` gives plain dicts/lists/strings/bools/ints only, and
  ``QueryPlan.from_json(plan.to_json()) == plan`` (numeric constants travel as strings, so
  no precision is lost, UINT64 included); :meth:`QueryPlan.to_json_text` is canonical
  (sorted keys, no whitespace): the same query always gives byte-identical text, so a query
  restarted from its Spark checkpoint gets an identical Spark plan;
* :meth:`QueryPlan.from_json` validates what it reads (structure, types, that expressions read
  existing input columns with their types, unique field names) and raises only
  :class:`~streamctl.planner.planning_errors.PlannerError` (``INVALID_STATEMENT``) on malformed
  input;
* the binder produces only well-typed plans: every call's arguments already have the types
  the function needs (the binder inserts explicit ``cast`` calls for NebulaStream's implicit
  conversions), so a translator never re-derives typing rules.

Field names inside a plan are internal identifiers made of ``[A-Za-z0-9_$]``, unique within
each operator's output (case-insensitively); the root's field names are the sink's column
names. Types are NebulaStream type names (``INT8`` ... ``VARSIZED``).

Operators (the ``"op"`` of their JSON): ``scan`` (a catalog logical source), ``inline_scan``
(an inline ``File(...)``/``Generator(...)`` source), ``filter``, ``project``, ``union``,
``window_aggregate`` (tumbling/sliding, group keys, aggregates), ``window_join``. Expressions
(their ``"kind"``): ``column``, ``literal``, ``call`` (see :data:`FUNCTIONS`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, cast

from streamctl.error_codes import INVALID_STATEMENT
from streamctl.nes_types import NES_TYPE_NAMES
from streamctl.planner.planning_errors import PlannerError

PLAN_FORMAT_VERSION: Final = 1

FUNCTIONS: Final[dict[str, int | None]] = {
    # arithmetic on one numeric type (arguments and result share it; C/C++ semantics:
    # integers wrap, division truncates, modulo takes the dividend's sign)
    "add": 2,
    "sub": 2,
    "mul": 2,
    "div": 2,
    "mod": 2,
    "neg": 1,
    "abs": 1,
    "ceil": 1,
    "floor": 1,
    "round": 1,
    # numeric -> FLOAT64
    "sqrt": 1,
    "exp": 1,
    "pow": 2,
    # comparisons of two values of one type -> BOOLEAN
    "eq": 2,
    "ne": 2,
    "lt": 2,
    "le": 2,
    "gt": 2,
    "ge": 2,
    "eq_null_safe": 2,
    # three-valued logic
    "and": 2,
    "or": 2,
    "not": 1,
    "is_null": 1,
    # text
    "concat": 2,
    "unix_ms_to_iso_text": 1,  # CASTFROMUNIXTS: UINT64 ms -> '1970-01-01T00:00:00.000Z'
    "iso_text_to_unix_ms": 1,  # CASTTOUNIXTS: ISO-8601 text -> UINT64 ms
    # conversion to the call's type (C/C++ static_cast semantics between numeric types)
    "cast": 1,
}
"""Functions a ``call`` expression may name, with their number of arguments."""

AGGREGATE_FUNCTIONS: Final = frozenset({"count", "sum", "min", "max", "avg", "median"})


def _fail(message: str) -> PlannerError:
    return PlannerError(INVALID_STATEMENT, f"malformed plan: {message}")


# ---- fields and expressions ----------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One column of an operator's output."""

    name: str
    type: str
    nullable: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable}

    @staticmethod
    def from_json(data: Any) -> Field:
        mapping = _mapping(data, "field")
        return Field(
            name=_string(mapping, "name"),
            type=_type(mapping, "type"),
            nullable=_bool(mapping, "nullable"),
        )


@dataclass(frozen=True)
class ColumnExpr:
    """A column of the operator's input, by field name."""

    name: str
    type: str
    nullable: bool

    def to_json(self) -> dict[str, Any]:
        return {"kind": "column", "name": self.name, "type": self.type, "nullable": self.nullable}


@dataclass(frozen=True)
class LiteralExpr:
    """A constant. ``value`` is its canonical text (integers in decimal, floats in Python's
    ``repr``, ``TRUE``/``FALSE``, the string itself) or ``None`` for NULL."""

    value: str | None
    type: str

    @property
    def nullable(self) -> bool:
        return self.value is None

    def to_json(self) -> dict[str, Any]:
        return {"kind": "literal", "value": self.value, "type": self.type}


@dataclass(frozen=True)
class CallExpr:
    """``function(args)`` computing a value of ``type``."""

    function: str
    args: tuple[Expr, ...]
    type: str
    nullable: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "call",
            "function": self.function,
            "args": [arg.to_json() for arg in self.args],
            "type": self.type,
            "nullable": self.nullable,
        }


Expr: TypeAlias = ColumnExpr | LiteralExpr | CallExpr


def expr_from_json(data: Any) -> Expr:
    mapping = _mapping(data, "expression")
    kind = mapping.get("kind")
    if kind == "column":
        return ColumnExpr(
            name=_string(mapping, "name"),
            type=_type(mapping, "type"),
            nullable=_bool(mapping, "nullable"),
        )
    if kind == "literal":
        value = mapping.get("value")
        if value is not None and not isinstance(value, str):
            raise _fail(f"literal value must be a string or null, got {value!r}")
        return LiteralExpr(value=value, type=_type(mapping, "type"))
    if kind == "call":
        function = _string(mapping, "function")
        if function not in FUNCTIONS:
            raise _fail(f"unknown function {function!r}")
        args = tuple(expr_from_json(arg) for arg in _list(mapping, "args"))
        if FUNCTIONS[function] is not None and len(args) != FUNCTIONS[function]:
            raise _fail(f"{function} takes {FUNCTIONS[function]} arguments, got {len(args)}")
        return CallExpr(
            function=function,
            args=args,
            type=_type(mapping, "type"),
            nullable=_bool(mapping, "nullable"),
        )
    raise _fail(f"unknown expression kind {kind!r}")


@dataclass(frozen=True)
class NamedExpr:
    """An output column computed by an expression (projection items, group keys)."""

    name: str
    expr: Expr

    @property
    def field(self) -> Field:
        return Field(self.name, self.expr.type, self.expr.nullable)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "expr": self.expr.to_json()}

    @staticmethod
    def from_json(data: Any) -> NamedExpr:
        mapping = _mapping(data, "named expression")
        return NamedExpr(name=_string(mapping, "name"), expr=expr_from_json(mapping.get("expr")))


# ---- operators -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scan:
    """Read the catalog logical source ``source``; ``source_columns[i]`` (the catalog's column
    name) becomes ``fields[i]``."""

    source: str
    source_columns: tuple[str, ...]
    fields: tuple[Field, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "scan",
            "source": self.source,
            "source_columns": list(self.source_columns),
            "fields": [field.to_json() for field in self.fields],
        }


@dataclass(frozen=True)
class InlineScan:
    """An inline source of the query (``FROM File(...)``). ``config`` holds the options as
    written (``("SOURCE.FILE_PATH", "small/a.csv")`` pairs, sorted by key, values as canonical
    JSON text); ``source_columns`` are the names of its ``SCHEMA(...)``."""

    id: str
    source_type: str
    config: tuple[tuple[str, str], ...]
    source_columns: tuple[str, ...]
    fields: tuple[Field, ...]

    def config_dict(self) -> dict[str, Any]:
        return {key: json.loads(value) for key, value in self.config}

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "inline_scan",
            "id": self.id,
            "source_type": self.source_type,
            "config": [[key, value] for key, value in self.config],
            "source_columns": list(self.source_columns),
            "fields": [field.to_json() for field in self.fields],
        }


@dataclass(frozen=True)
class Filter:
    input: Operator
    predicate: Expr

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.input.fields

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "filter",
            "input": self.input.to_json(),
            "predicate": self.predicate.to_json(),
        }


@dataclass(frozen=True)
class Project:
    input: Operator
    columns: tuple[NamedExpr, ...]

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(column.field for column in self.columns)

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "project",
            "input": self.input.to_json(),
            "columns": [column.to_json() for column in self.columns],
        }


@dataclass(frozen=True)
class Union:
    """Rows of both inputs (duplicates kept). Inputs have equal types column by column; the
    output has the left input's names (the right input is matched by position)."""

    left: Operator
    right: Operator

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(
            Field(left.name, left.type, left.nullable or right.nullable)
            for left, right in zip(self.left.fields, self.right.fields, strict=True)
        )

    def to_json(self) -> dict[str, Any]:
        return {"op": "union", "left": self.left.to_json(), "right": self.right.to_json()}


WindowKind: TypeAlias = Literal["tumbling", "sliding"]


@dataclass(frozen=True)
class Window:
    """Event-time windows over a millisecond column. Windows start at multiples of ``slide_ms``
    from 0 (NebulaStream creates no windows before time 0); a tumbling window has
    ``slide_ms == size_ms``. ``allowed_lateness_ms`` is the watermark delay."""

    kind: WindowKind
    size_ms: int
    slide_ms: int
    allowed_lateness_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "size_ms": self.size_ms,
            "slide_ms": self.slide_ms,
            "allowed_lateness_ms": self.allowed_lateness_ms,
        }

    @staticmethod
    def from_json(data: Any) -> Window:
        mapping = _mapping(data, "window")
        kind = mapping.get("kind")
        if kind not in ("tumbling", "sliding"):
            raise _fail(f"unknown window kind {kind!r}")
        window = Window(
            kind=cast(WindowKind, kind),
            size_ms=_int(mapping, "size_ms"),
            slide_ms=_int(mapping, "slide_ms"),
            allowed_lateness_ms=_int(mapping, "allowed_lateness_ms"),
        )
        if window.size_ms <= 0 or window.slide_ms <= 0 or window.allowed_lateness_ms < 0:
            raise _fail(f"window sizes must be positive: {mapping}")
        return window


@dataclass(frozen=True)
class Aggregate:
    """``function(argument)`` over a window's rows (``argument`` is None for ``COUNT(*)``)."""

    name: str
    function: str
    argument: Expr | None
    type: str
    nullable: bool

    @property
    def field(self) -> Field:
        return Field(self.name, self.type, self.nullable)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "function": self.function,
            "argument": None if self.argument is None else self.argument.to_json(),
            "type": self.type,
            "nullable": self.nullable,
        }

    @staticmethod
    def from_json(data: Any) -> Aggregate:
        mapping = _mapping(data, "aggregate")
        function = _string(mapping, "function")
        if function not in AGGREGATE_FUNCTIONS:
            raise _fail(f"unknown aggregate function {function!r}")
        argument = mapping.get("argument")
        return Aggregate(
            name=_string(mapping, "name"),
            function=function,
            argument=None if argument is None else expr_from_json(argument),
            type=_type(mapping, "type"),
            nullable=_bool(mapping, "nullable"),
        )


@dataclass(frozen=True)
class WindowAggregate:
    """Group the input's rows by window (on ``time_column``, milliseconds) and ``keys``.

    Output: ``start_field``, ``end_field`` (UINT64 ms, not null), the keys, the aggregates;
    one row per non-empty window and key, emitted when the watermark passes the window's end.
    """

    input: Operator
    window: Window
    time_column: str
    keys: tuple[NamedExpr, ...]
    aggregates: tuple[Aggregate, ...]
    start_field: str
    end_field: str

    @property
    def fields(self) -> tuple[Field, ...]:
        return (
            Field(self.start_field, "UINT64", False),
            Field(self.end_field, "UINT64", False),
            *(key.field for key in self.keys),
            *(aggregate.field for aggregate in self.aggregates),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "window_aggregate",
            "input": self.input.to_json(),
            "window": self.window.to_json(),
            "time_column": self.time_column,
            "keys": [key.to_json() for key in self.keys],
            "aggregates": [aggregate.to_json() for aggregate in self.aggregates],
            "start_field": self.start_field,
            "end_field": self.end_field,
        }


@dataclass(frozen=True)
class WindowJoin:
    """Inner join of rows of ``left`` and ``right`` that fall into the same window (by their own
    time columns) and satisfy ``condition`` (over left and right fields; None: all pairs).

    A pair is produced once per common window (so sliding windows can repeat it). Output:
    ``start_field``, ``end_field`` (UINT64 ms), the left fields, the right fields (all names
    distinct)."""

    left: Operator
    right: Operator
    window: Window
    left_time_column: str
    right_time_column: str
    condition: Expr | None
    start_field: str
    end_field: str

    @property
    def fields(self) -> tuple[Field, ...]:
        return (
            Field(self.start_field, "UINT64", False),
            Field(self.end_field, "UINT64", False),
            *self.left.fields,
            *self.right.fields,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "window_join",
            "left": self.left.to_json(),
            "right": self.right.to_json(),
            "window": self.window.to_json(),
            "left_time_column": self.left_time_column,
            "right_time_column": self.right_time_column,
            "condition": None if self.condition is None else self.condition.to_json(),
            "start_field": self.start_field,
            "end_field": self.end_field,
        }


Operator: TypeAlias = Scan | InlineScan | Filter | Project | Union | WindowAggregate | WindowJoin


def operator_from_json(data: Any) -> Operator:
    mapping = _mapping(data, "operator")
    op = mapping.get("op")
    if op == "scan":
        fields = _fields(mapping)
        columns = tuple(_string_list(mapping, "source_columns"))
        if len(columns) != len(fields):
            raise _fail("scan source_columns and fields differ in length")
        return Scan(source=_string(mapping, "source"), source_columns=columns, fields=fields)
    if op == "inline_scan":
        fields = _fields(mapping)
        columns = tuple(_string_list(mapping, "source_columns"))
        if len(columns) != len(fields):
            raise _fail("inline_scan source_columns and fields differ in length")
        config: list[tuple[str, str]] = []
        for pair in _list(mapping, "config"):
            if not (
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
            ):
                raise _fail(f"inline_scan config entries are [key, json] pairs, got {pair!r}")
            config.append((pair[0], pair[1]))
        return InlineScan(
            id=_string(mapping, "id"),
            source_type=_string(mapping, "source_type"),
            config=tuple(config),
            source_columns=columns,
            fields=fields,
        )
    if op == "filter":
        return Filter(
            input=operator_from_json(mapping.get("input")),
            predicate=expr_from_json(mapping.get("predicate")),
        )
    if op == "project":
        return Project(
            input=operator_from_json(mapping.get("input")),
            columns=tuple(NamedExpr.from_json(c) for c in _list(mapping, "columns")),
        )
    if op == "union":
        union = Union(
            left=operator_from_json(mapping.get("left")),
            right=operator_from_json(mapping.get("right")),
        )
        if [f.type for f in union.left.fields] != [f.type for f in union.right.fields]:
            raise _fail("union inputs have different column types")
        return union
    if op == "window_aggregate":
        return WindowAggregate(
            input=operator_from_json(mapping.get("input")),
            window=Window.from_json(mapping.get("window")),
            time_column=_string(mapping, "time_column"),
            keys=tuple(NamedExpr.from_json(k) for k in _list(mapping, "keys")),
            aggregates=tuple(Aggregate.from_json(a) for a in _list(mapping, "aggregates")),
            start_field=_string(mapping, "start_field"),
            end_field=_string(mapping, "end_field"),
        )
    if op == "window_join":
        condition = mapping.get("condition")
        return WindowJoin(
            left=operator_from_json(mapping.get("left")),
            right=operator_from_json(mapping.get("right")),
            window=Window.from_json(mapping.get("window")),
            left_time_column=_string(mapping, "left_time_column"),
            right_time_column=_string(mapping, "right_time_column"),
            condition=None if condition is None else expr_from_json(condition),
            start_field=_string(mapping, "start_field"),
            end_field=_string(mapping, "end_field"),
        )
    raise _fail(f"unknown operator {op!r}")


def children(operator: Operator) -> tuple[Operator, ...]:
    """The inputs of an operator (left before right)."""
    if isinstance(operator, Scan | InlineScan):
        return ()
    if isinstance(operator, Union | WindowJoin):
        return (operator.left, operator.right)
    return (operator.input,)


def walk(operator: Operator) -> list[Operator]:
    """All operators of a tree in pre-order (parents before children, left before right)."""
    result: list[Operator] = []
    pending = [operator]
    while pending:
        current = pending.pop()
        result.append(current)
        pending.extend(reversed(children(current)))
    return result


@dataclass(frozen=True)
class QueryPlan:
    """A bound query's operator tree; ``root.fields`` is what the query writes into its sink."""

    root: Operator
    version: int = PLAN_FORMAT_VERSION

    @property
    def output(self) -> tuple[Field, ...]:
        return self.root.fields

    @property
    def windowed(self) -> bool:
        return any(isinstance(op, WindowAggregate | WindowJoin) for op in walk(self.root))

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "root": self.root.to_json()}

    def to_json_text(self) -> str:
        """Canonical JSON text (sorted keys, compact): byte-identical for equal plans."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @staticmethod
    def from_json(data: Any) -> QueryPlan:
        try:
            mapping = _mapping(data, "plan")
            version = mapping.get("version")
            if version != PLAN_FORMAT_VERSION:
                raise _fail(f"unsupported plan format version {version!r}")
            query_plan = QueryPlan(root=operator_from_json(mapping.get("root")))
            query_plan.validate()
            return query_plan
        except PlannerError:
            raise
        except RecursionError:
            raise _fail("plan is nested too deeply") from None
        except Exception as error:  # defensive: the contract is "only PlannerError"
            raise _fail(str(error)) from None

    @staticmethod
    def from_json_text(text: str) -> QueryPlan:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise _fail(f"not JSON: {error}") from None
        return QueryPlan.from_json(data)

    def validate(self) -> None:
        """Check what the binder guarantees: unique field names per operator, and expressions
        reading existing input columns with their types. Raises PlannerError otherwise."""
        for operator in walk(self.root):
            _check_unique(operator.fields)
            inputs = {f.name: f for child in children(operator) for f in child.fields}
            if isinstance(operator, Filter):
                _check_reads(operator.predicate, inputs)
                if operator.predicate.type != "BOOLEAN":
                    raise _fail("a filter's predicate must be BOOLEAN")
            elif isinstance(operator, Project):
                for column in operator.columns:
                    _check_reads(column.expr, inputs)
            elif isinstance(operator, WindowAggregate):
                _check_column(operator.time_column, inputs)
                for key in operator.keys:
                    _check_reads(key.expr, inputs)
                for aggregate in operator.aggregates:
                    if aggregate.argument is not None:
                        _check_reads(aggregate.argument, inputs)
            elif isinstance(operator, WindowJoin):
                _check_column(operator.left_time_column, {f.name: f for f in operator.left.fields})
                _check_column(
                    operator.right_time_column, {f.name: f for f in operator.right.fields}
                )
                if operator.condition is not None:
                    _check_reads(operator.condition, inputs)

    def explain(self) -> str:
        """A human-readable rendering of the operator tree, one operator per line."""
        lines: list[str] = []
        pending: list[tuple[Operator, int]] = [(self.root, 0)]
        while pending:
            operator, depth = pending.pop()
            lines.append("  " * depth + describe_operator(operator))
            pending.extend((child, depth + 1) for child in reversed(children(operator)))
        return "\n".join(lines)


def describe_operator(operator: Operator) -> str:
    """One line naming an operator and its parameters."""
    if isinstance(operator, Scan):
        return f"SCAN {operator.source} -> {_field_list(operator.fields)}"
    if isinstance(operator, InlineScan):
        return f"INLINE SCAN {operator.id} {operator.source_type} -> {_field_list(operator.fields)}"
    if isinstance(operator, Filter):
        return f"FILTER {describe_expr(operator.predicate)}"
    if isinstance(operator, Project):
        items = ", ".join(f"{describe_expr(c.expr)} AS {c.name}" for c in operator.columns)
        return f"PROJECT {items}"
    if isinstance(operator, Union):
        return "UNION"
    if isinstance(operator, WindowAggregate):
        keys = ", ".join(key.name for key in operator.keys)
        aggregates = ", ".join(
            f"{a.function.upper()}({'*' if a.argument is None else describe_expr(a.argument)})"
            f" AS {a.name}"
            for a in operator.aggregates
        )
        return (
            f"WINDOW AGGREGATE {_describe_window(operator.window)} ON {operator.time_column}"
            f" KEYS [{keys}] {aggregates}"
        )
    condition = "TRUE" if operator.condition is None else describe_expr(operator.condition)
    return (
        f"WINDOW JOIN {_describe_window(operator.window)} ON {operator.left_time_column}"
        f"/{operator.right_time_column} WHERE {condition}"
    )


def describe_expr(expression: Expr) -> str:
    if isinstance(expression, ColumnExpr):
        return expression.name
    if isinstance(expression, LiteralExpr):
        return "NULL" if expression.value is None else f"{expression.type}({expression.value!r})"
    if expression.function == "cast":
        return f"{expression.type}({describe_expr(expression.args[0])})"
    arguments = ", ".join(describe_expr(arg) for arg in expression.args)
    return f"{expression.function}({arguments})"


def _describe_window(window: Window) -> str:
    if window.kind == "tumbling":
        return f"TUMBLING({window.size_ms} ms)"
    return f"SLIDING({window.size_ms} ms, {window.slide_ms} ms)"


def _field_list(fields: Sequence[Field]) -> str:
    return (
        "["
        + ", ".join(f"{f.name} {f.type}{'' if f.nullable else ' NOT NULL'}" for f in fields)
        + "]"
    )


# ---- validation helpers ----------------------------------------------------------------------


def _check_unique(fields: Sequence[Field]) -> None:
    seen: set[str] = set()
    for field in fields:
        key = field.name.casefold()
        if key in seen:
            raise _fail(f"field {field.name!r} appears twice in one operator's output")
        seen.add(key)


def _check_column(name: str, inputs: Mapping[str, Field]) -> None:
    if name not in inputs:
        raise _fail(f"column {name!r} is not an input column")


def _check_reads(expression: Expr, inputs: Mapping[str, Field]) -> None:
    pending: list[Expr] = [expression]
    while pending:
        current = pending.pop()
        if isinstance(current, ColumnExpr):
            _check_column(current.name, inputs)
            if inputs[current.name].type != current.type:
                raise _fail(
                    f"column {current.name!r} is {inputs[current.name].type}, not {current.type}"
                )
        elif isinstance(current, CallExpr):
            pending.extend(current.args)


# ---- JSON reading helpers --------------------------------------------------------------------


def _mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _fail(f"{what} must be an object, got {type(data).__name__}")
    return data


def _string(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str):
        raise _fail(f"{key!r} must be a string, got {value!r}")
    return value


def _bool(mapping: Mapping[str, Any], key: str) -> bool:
    value = mapping.get(key)
    if not isinstance(value, bool):
        raise _fail(f"{key!r} must be a boolean, got {value!r}")
    return value


def _int(mapping: Mapping[str, Any], key: str) -> int:
    value = mapping.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(f"{key!r} must be an integer, got {value!r}")
    return value


def _type(mapping: Mapping[str, Any], key: str) -> str:
    value = _string(mapping, key)
    if value not in NES_TYPE_NAMES:
        raise _fail(f"unknown type {value!r}")
    return value


def _list(mapping: Mapping[str, Any], key: str) -> list[Any]:
    value = mapping.get(key)
    if not isinstance(value, list):
        raise _fail(f"{key!r} must be a list, got {value!r}")
    return value


def _string_list(mapping: Mapping[str, Any], key: str) -> list[str]:
    values = _list(mapping, key)
    if not all(isinstance(value, str) for value in values):
        raise _fail(f"{key!r} must be a list of strings")
    return values


def _fields(mapping: Mapping[str, Any]) -> tuple[Field, ...]:
    return tuple(Field.from_json(field) for field in _list(mapping, "fields"))
