"""Immutable, typed syntax tree of NebulaStream statements, produced by :mod:`.parser`.

Guarantees:

* every node is a frozen dataclass and carries the 1-based ``line`` and ``column`` where its
  text starts, so later stages can point at the offending place;
* identifiers are normalised the way NebulaStream does: unquoted identifiers are upper-cased,
  back-quoted ones keep their text (a doubled back-quote stands for one);
* names of functions, types, time units and option keys are upper-case strings; the parser has
  already checked that type names and time units are ones NebulaStream knows;
* nodes say what was written, nothing more: names are not resolved and nothing is typed here
  (that is :mod:`.binder`'s job).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, TypeAlias, TypeVar
from typing import Literal as TypingLiteral

TIME_UNIT_MILLIS: Final[dict[str, int]] = {
    "MS": 1,
    "MILLISECOND": 1,
    "MILLISECONDS": 1,
    "SEC": 1_000,
    "SECS": 1_000,
    "SECOND": 1_000,
    "SECONDS": 1_000,
    "MIN": 60_000,
    "MINUTE": 60_000,
    "MINUTES": 60_000,
    "HOUR": 3_600_000,
    "HOURS": 3_600_000,
    "DAY": 86_400_000,
    "DAYS": 86_400_000,
}
"""Time units of window sizes, slides and watermarks, in milliseconds."""


@dataclass(frozen=True, kw_only=True)
class Node:
    """Base of every syntax node: where its text starts (1-based line and column)."""

    line: int
    column: int


# ---- expressions ---------------------------------------------------------------------------

LiteralKind: TypeAlias = TypingLiteral["integer", "float", "string", "boolean", "null"]


@dataclass(frozen=True, kw_only=True)
class Literal(Node):
    """A constant as written. ``text`` holds digits (with a leading ``-`` when negative), the
    unescaped string, ``TRUE``/``FALSE`` or ``NULL``."""

    kind: LiteralKind
    text: str

    def python_value(self) -> int | float | str | bool | None:
        """The constant as a Python value (``int`` for integers, exactly)."""
        if self.kind == "integer":
            return int(self.text)
        if self.kind == "float":
            return float(self.text)
        if self.kind == "boolean":
            return self.text == "TRUE"
        if self.kind == "null":
            return None
        return self.text


@dataclass(frozen=True, kw_only=True)
class ColumnRef(Node):
    """A column, possibly qualified: ``id`` is ``("ID",)``, ``s.id`` is ``("S", "ID")``."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True, kw_only=True)
class FunctionCall(Node):
    """``NAME(args)``: a scalar function, an aggregate, or a typed constant like ``UINT64(1)``.

    ``star`` is true for ``COUNT(*)``."""

    name: str
    args: tuple[Expression, ...]
    star: bool = False


BinaryOperator: TypeAlias = TypingLiteral[
    "+", "-", "*", "/", "%", "||", "==", "!=", "<", "<=", ">", ">=", "<=>", "AND", "OR"
]
UnaryOperator: TypeAlias = TypingLiteral["-", "+", "NOT"]


@dataclass(frozen=True, kw_only=True)
class BinaryOp(Node):
    """``left op right``; ``=`` is normalised to ``==`` and ``<>`` to ``!=``."""

    op: BinaryOperator
    left: Expression
    right: Expression


@dataclass(frozen=True, kw_only=True)
class UnaryOp(Node):
    op: UnaryOperator
    operand: Expression


@dataclass(frozen=True, kw_only=True)
class IsNull(Node):
    """``operand IS [NOT] NULL``."""

    operand: Expression
    negated: bool


Expression: TypeAlias = Literal | ColumnRef | FunctionCall | BinaryOp | UnaryOp | IsNull


# ---- schemas and options -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ColumnDef(Node):
    """A column of a ``CREATE`` schema: ``stream.id UINT64 NOT NULL``."""

    name: tuple[str, ...]
    type: str
    not_null: bool

    @property
    def catalog_name(self) -> str:
        """The column's name as the catalog stores it: qualifier parts joined with ``$``
        (``stream.id`` becomes ``STREAM$ID``, as NebulaStream names qualified fields)."""
        return "$".join(self.name)

    @property
    def nullable(self) -> bool:
        return not self.not_null


@dataclass(frozen=True, kw_only=True)
class SchemaValue(Node):
    """``SCHEMA(col TYPE, ...)`` used as an option value (inline sources and sinks)."""

    columns: tuple[ColumnDef, ...]


OptionValue: TypeAlias = Literal | SchemaValue


@dataclass(frozen=True, kw_only=True)
class Option(Node):
    """``value AS key`` inside ``SET(...)`` or an inline source/sink; ``key`` like
    ``("SOURCE", "FILE_PATH")``."""

    key: tuple[str, ...]
    value: OptionValue

    @property
    def key_text(self) -> str:
        return ".".join(self.key)


def options_to_config(options: tuple[Option, ...]) -> dict[str, object]:
    """Options as a plain config dict: ``{"SOURCE.FILE_PATH": "small/a.csv", ...}``.

    Schema values become lists of ``{"name", "type", "nullable"}`` dicts; a key given twice
    keeps its last value."""
    config: dict[str, object] = {}
    for option in options:
        value = option.value
        if isinstance(value, SchemaValue):
            config[option.key_text] = [
                {"name": column.catalog_name, "type": column.type, "nullable": column.nullable}
                for column in value.columns
            ]
        else:
            config[option.key_text] = value.python_value()
    return config


# ---- queries ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Star(Node):
    """``*`` or ``qualifier.*`` in a select list."""

    qualifier: tuple[str, ...] | None


@dataclass(frozen=True, kw_only=True)
class SelectExpression(Node):
    """``expression [AS alias]`` in a select list."""

    expression: Expression
    alias: str | None


SelectItem: TypeAlias = Star | SelectExpression


@dataclass(frozen=True, kw_only=True)
class Duration(Node):
    """``n UNIT`` of a window size, slide or watermark delay."""

    amount: int
    unit: str

    @property
    def millis(self) -> int:
        return self.amount * TIME_UNIT_MILLIS[self.unit]


WindowKind: TypeAlias = TypingLiteral["TUMBLING", "SLIDING", "COUNT"]


@dataclass(frozen=True, kw_only=True)
class WindowSpec(Node):
    """``TUMBLING([ts,] SIZE n unit)``, ``SLIDING([ts,] SIZE n unit, ADVANCE BY n unit)`` or the
    count-based ``TUMBLING(n)`` (``kind == "COUNT"``, ``count`` set, no sizes)."""

    kind: WindowKind
    time_column: ColumnRef | None
    size: Duration | None
    advance: Duration | None = None
    count: int | None = None
    right_time_column: ColumnRef | None = None
    """A join's window may name its right input's event-time column second
    (``TUMBLING(ts1, ts2, SIZE ...)``); None: the right input's column of the same name."""


@dataclass(frozen=True, kw_only=True)
class Watermark(Node):
    """``WATERMARK(ts, n unit)``: the event-time column and how late rows may arrive."""

    time_column: ColumnRef
    delay: Duration


@dataclass(frozen=True, kw_only=True)
class SourceRef(Node):
    """A logical source named in ``FROM`` (``alias`` from ``FROM stream [AS] s``)."""

    name: str
    alias: str | None


@dataclass(frozen=True, kw_only=True)
class SubqueryRef(Node):
    """``( query ) [alias]`` in ``FROM``."""

    query: QueryExpression
    alias: str | None


@dataclass(frozen=True, kw_only=True)
class InlineSource(Node):
    """NebulaStream's inline source ``File(... AS `SOURCE`.FILE_PATH, SCHEMA(...) AS ...)``."""

    source_type: str
    options: tuple[Option, ...]
    alias: str | None


@dataclass(frozen=True, kw_only=True)
class Join(Node):
    """``left [INNER] JOIN right [ON condition] WINDOW ...``: a windowed stream join."""

    left: Relation
    right: Relation
    condition: Expression | None
    window: WindowSpec


Relation: TypeAlias = SourceRef | SubqueryRef | InlineSource | Join


@dataclass(frozen=True, kw_only=True)
class Select(Node):
    """One ``SELECT ... FROM ... [WHERE] [GROUP BY] [WINDOW] [HAVING]`` block."""

    items: tuple[SelectItem, ...]
    source: Relation
    where: Expression | None
    group_by: tuple[Expression, ...]
    window: WindowSpec | None
    watermark: Watermark | None
    having: Expression | None


@dataclass(frozen=True, kw_only=True)
class Union(Node):
    """``left UNION right`` (NebulaStream's UNION keeps duplicates, like SQL's UNION ALL)."""

    left: QueryExpression
    right: QueryExpression


QueryExpression: TypeAlias = Select | Union


@dataclass(frozen=True, kw_only=True)
class SinkRef(Node):
    """``INTO name``: a sink of the catalog."""

    name: str


@dataclass(frozen=True, kw_only=True)
class InlineSink(Node):
    """``INTO File()``, ``INTO Print()``, ``INTO Checksum(...)``: a sink defined in the query."""

    sink_type: str
    options: tuple[Option, ...]

    def schema(self) -> tuple[ColumnDef, ...] | None:
        """The schema given as ``SCHEMA(...) AS SINK.SCHEMA``, if any."""
        for option in reversed(self.options):
            if option.key[-1] == "SCHEMA" and isinstance(option.value, SchemaValue):
                return option.value.columns
        return None


SinkTarget: TypeAlias = SinkRef | InlineSink


# ---- statements ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class QueryStatement(Node):
    """A query: ``SELECT ... [INTO sink] [SET(options)]``. ``sink`` is ``None`` only where the
    statement is the body of ``EXPLAIN``."""

    query: QueryExpression
    sink: SinkTarget | None
    options: tuple[Option, ...]


@dataclass(frozen=True, kw_only=True)
class ExplainStatement(Node):
    statement: QueryStatement


@dataclass(frozen=True, kw_only=True)
class CreateLogicalSource(Node):
    name: str
    columns: tuple[ColumnDef, ...]


@dataclass(frozen=True, kw_only=True)
class CreatePhysicalSource(Node):
    """``CREATE PHYSICAL SOURCE FOR logical TYPE t [SET(...)]``; ``source_type`` upper-case."""

    logical_source: str
    source_type: str
    options: tuple[Option, ...]


@dataclass(frozen=True, kw_only=True)
class CreateSink(Node):
    name: str
    columns: tuple[ColumnDef, ...]
    sink_type: str
    options: tuple[Option, ...]


@dataclass(frozen=True, kw_only=True)
class CreateWorker(Node):
    """``CREATE WORKER name [SET(...)]`` (the name may be a quoted ``'host:port'``)."""

    name: str
    options: tuple[Option, ...]


ShowSubject: TypeAlias = TypingLiteral[
    "QUERIES", "LOGICAL SOURCES", "PHYSICAL SOURCES", "SINKS", "WORKERS"
]
DropSubject: TypeAlias = TypingLiteral[
    "QUERY", "LOGICAL SOURCE", "PHYSICAL SOURCE", "SINK", "WORKER"
]


@dataclass(frozen=True, kw_only=True)
class Filter(Node):
    """``attribute = value`` of ``SHOW ... WHERE`` and ``DROP ... WHERE``."""

    attribute: str
    value: Literal


@dataclass(frozen=True, kw_only=True)
class ShowStatement(Node):
    """``SHOW subject [FOR logical] [WHERE attr = value] [FORMAT TEXT|JSON]``."""

    subject: ShowSubject
    for_logical_source: str | None
    filter: Filter | None
    format: TypingLiteral["TEXT", "JSON"]


@dataclass(frozen=True, kw_only=True)
class DropStatement(Node):
    """``DROP subject WHERE attr = value [CASCADE]``; the shorthand ``DROP SINK name`` becomes
    the filter ``NAME = 'name'`` and ``DROP QUERY 7`` the filter ``ID = 7``."""

    subject: DropSubject
    filter: Filter
    cascade: bool


Statement: TypeAlias = (
    QueryStatement
    | ExplainStatement
    | CreateLogicalSource
    | CreatePhysicalSource
    | CreateSink
    | CreateWorker
    | ShowStatement
    | DropStatement
)


N = TypeVar("N", bound=Node)


def find_all(node: object, kind: type[N]) -> list[N]:
    """Every node of type ``kind`` in a syntax tree, depth first in source order."""
    if isinstance(node, kind):
        return [node]
    children: Iterable[object] = ()
    if isinstance(node, tuple | list):
        children = node
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        children = (getattr(node, f.name) for f in dataclasses.fields(node))
    return [found for child in children for found in find_all(child, kind)]
