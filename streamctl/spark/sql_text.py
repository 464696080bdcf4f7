"""Column expressions built as Spark SQL text, so that a column costs one call into the JVM.

Why: a pyspark ``Column`` is a JVM object, and every node of an expression built with
``pyspark.sql.functions`` (``F.when``, ``F.lit``, ``&``, ``cast`` ...) is a py4j round trip
(~0.17 ms here). The source and sink connectors build thousands of such nodes per query start
(NES's parsing and formatting rules, column by column): 5,500 round trips, most of a planned
query's start. An :class:`Sql` is the same expression as text, built in Python; it reaches the
JVM once, as a whole projection (:func:`project`: ``selectExpr``) or one column
(:meth:`Sql.column`), where Spark's own parser turns it into the expression tree that the
``functions`` calls would have built. A chain of projections and filters can go further as
a :class:`Relation`: one query's text, parsed and analysed by Spark once for the whole chain.

Rules that keep the text the same expression as the ``functions`` call it replaces:

* every operator and every call is parenthesised as a unit, so Python's precedence is the
  only precedence (``a & b | c`` means what it means on pyspark Columns);
* identifiers are always quoted (:func:`~streamctl.spark.spark_types.quote_identifier`), so reserved
  words (``end``) and any other character are names -- but for ``${...}``, which Spark's parser
  substitutes everywhere in the text before it reads it, quotes or not: sessions that build
  these expressions turn that off (``spark.sql.variable.substitute``,
  :data:`streamctl.spark.translate.EXECUTION_CONF`), and string literals do not depend on it
  (:func:`string_literal`);
* literals have the type ``F.lit`` gives the same Python value (:func:`lit`): ``int`` an
  ``INT`` or ``BIGINT`` by its size, ``float`` a ``DOUBLE`` (``D``; NaN and the infinities
  by a cast of their name), ``Decimal`` a ``DECIMAL`` of its own digits (``BD``), ``str`` a
  string literal with ``\\`` and ``'`` escaped (Spark's default, unescaping string literals:
  ``spark.sql.parser.escapedStringLiterals`` off, as on every session an agent makes).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import uuid
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Union, overload

from streamctl.spark import relation_blocks
from streamctl.spark.relation_blocks import Step
from streamctl.spark.session_kind import is_connect
from streamctl.spark.spark_types import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "Case",
    "ColumnRef",
    "Named",
    "Relation",
    "Sql",
    "call",
    "col",
    "explainable",
    "lit",
    "project",
    "string_literal",
    "when",
    "where",
]

Operand = Union["Sql", str, bytes, int, float, bool, Decimal, None]
"""What an operator takes: an expression, or a Python value taken as a literal (:func:`lit`)."""

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


class Sql:
    """One Spark SQL expression as text (module docstring), with pyspark ``Column``'s
    operators and the methods the connectors use."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"

    # Python's truth of an expression is a mistake (as on pyspark Columns): `a and b`
    def __bool__(self) -> bool:
        raise TypeError("an Sql expression has no truth value: use & | ~ for AND, OR, NOT")

    def _binary(self, operator: str, other: Operand) -> Sql:
        return Sql(f"({self.text} {operator} {_sql(other).text})")

    def _reflected(self, operator: str, other: Operand) -> Sql:
        return Sql(f"({_sql(other).text} {operator} {self.text})")

    def __and__(self, other: Operand) -> Sql:
        return self._binary("AND", other)

    def __or__(self, other: Operand) -> Sql:
        return self._binary("OR", other)

    def __invert__(self) -> Sql:
        return Sql(f"(NOT {self.text})")

    def __eq__(self, other: Operand) -> Sql:  # type: ignore[override]
        return self._binary("=", other)

    def __ne__(self, other: Operand) -> Sql:  # type: ignore[override]
        return self._binary("!=", other)

    def __lt__(self, other: Operand) -> Sql:
        return self._binary("<", other)

    def __le__(self, other: Operand) -> Sql:
        return self._binary("<=", other)

    def __gt__(self, other: Operand) -> Sql:
        return self._binary(">", other)

    def __ge__(self, other: Operand) -> Sql:
        return self._binary(">=", other)

    def __add__(self, other: Operand) -> Sql:
        return self._binary("+", other)

    def __radd__(self, other: Operand) -> Sql:
        return self._reflected("+", other)

    def __sub__(self, other: Operand) -> Sql:
        return self._binary("-", other)

    def __rsub__(self, other: Operand) -> Sql:
        return self._reflected("-", other)

    def __mul__(self, other: Operand) -> Sql:
        return self._binary("*", other)

    def __rmul__(self, other: Operand) -> Sql:
        return self._reflected("*", other)

    def __truediv__(self, other: Operand) -> Sql:
        return self._binary("/", other)

    def __mod__(self, other: Operand) -> Sql:
        return self._binary("%", other)

    def __neg__(self) -> Sql:
        return Sql(f"(- {self.text})")

    __hash__ = None  # type: ignore[assignment]

    def cast(self, type_ddl: str) -> Sql:
        """``CAST``: ``type_ddl`` in Spark's DDL spelling (``BIGINT``, ``DECIMAL(20,0)``)."""
        return Sql(f"CAST({self.text} AS {type_ddl})")

    def try_cast(self, type_ddl: str) -> Sql:
        return Sql(f"TRY_CAST({self.text} AS {type_ddl})")

    def isNull(self) -> Sql:  # pyspark's spelling: code reads as with Columns
        return Sql(f"({self.text} IS NULL)")

    def isNotNull(self) -> Sql:
        return Sql(f"({self.text} IS NOT NULL)")

    def isin(self, *values: Operand) -> Sql:
        return Sql(f"({self.text} IN ({', '.join(_sql(v).text for v in values)}))")

    def between(self, low: Operand, high: Operand) -> Sql:
        """``low <= self <= high``, as ``Column.between`` builds it."""
        return (self >= low) & (self <= high)

    def rlike(self, pattern: str) -> Sql:
        """Java regular expression ``pattern`` found in the text (``find``, as ``RLIKE``)."""
        return Sql(f"({self.text} RLIKE {string_literal(pattern)})")

    def startswith(self, prefix: str) -> Sql:
        return call("startswith", self, prefix)

    def endswith(self, suffix: str) -> Sql:
        return call("endswith", self, suffix)

    def contains(self, part: str) -> Sql:
        return call("contains", self, part)

    def getField(self, name: str) -> Sql:
        """A struct's field ``name``, as ``Column.getField`` (an extraction by a string key,
        never read as a table qualifier)."""
        return Sql(f"{self.text}[{string_literal(name)}]")

    def __getitem__(self, index: int) -> Sql:
        """An array's element at ``index`` (from 0), as ``Column[index]``."""
        return Sql(f"{self.text}[{int(index)}]")

    def alias(self, name: str) -> Named:
        """The expression named ``name``: an item of a projection (:func:`project`), no
        longer an operand."""
        reference = self.name if isinstance(self, ColumnRef) else None
        return Named(f"{self.text} AS {quote_identifier(name)}", name, self.text, reference)

    def column(self, name: str | None = None) -> Column:
        """The pyspark ``Column`` (one call into the JVM), named ``name`` when given."""
        from pyspark.sql import functions as F

        return F.expr(self.alias(name) if name is not None else self.text)


class Named(str):
    """A projection item: the text ``expression AS name``, the ``name`` it gives, the
    ``expression``, and the column the expression is, when it is a bare column
    (``reference``: a renaming)."""

    name: str
    expression: str
    reference: str | None

    def __new__(cls, text: str, name: str, expression: str, reference: str | None) -> Named:
        item = super().__new__(cls, text)
        item.name = name
        item.expression = expression
        item.reference = reference
        return item


class ColumnRef(Sql):
    """A column by its name (:func:`col`): an operand, and a projection item named as itself."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(quote_identifier(name))


class Case(Sql):
    """``CASE WHEN ... THEN ... END`` (:func:`when`): an expression, NULL where no branch
    holds, until :meth:`otherwise` gives its ``ELSE``."""

    __slots__ = ("arms",)

    def __init__(self, arms: str) -> None:
        self.arms = arms
        """The ``WHEN ... THEN ...`` branches, in order."""
        super().__init__(f"CASE {arms} END")

    def when(self, condition: Operand, value: Operand) -> Case:
        return Case(f"{self.arms} {_arm(condition, value)}")

    def otherwise(self, value: Operand) -> Sql:
        return Sql(f"CASE {self.arms} ELSE {_sql(value).text} END")


def _arm(condition: Operand, value: Operand) -> str:
    return f"WHEN {_sql(condition).text} THEN {_sql(value).text}"


def when(condition: Operand, value: Operand) -> Case:
    return Case(_arm(condition, value))


def col(name: str) -> ColumnRef:
    """The column ``name`` (quoted: a name, never a path)."""
    return ColumnRef(name)


def call(function: str, *arguments: Operand) -> Sql:
    """``function(arguments...)``: a Spark SQL function by its SQL name."""
    return Sql(f"{function}({', '.join(_sql(a).text for a in arguments)})")


def string_literal(text: str) -> str:
    """``text`` as a Spark SQL string literal: backslash and quote escaped, and ``$`` written
    ``\\u0024``, which the parser reads back as ``$`` only after its variable substitution
    (``${env:HOME}``, ``${spark.app.name}`` are replaced in the whole text, string literals
    included, on a session with ``spark.sql.variable.substitute`` on: Spark's default)."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("$", "\\u0024")
    return "'" + escaped + "'"


def lit(value: str | bytes | int | float | bool | Decimal | None) -> Sql:
    """A literal of the type ``F.lit(value)`` has (module docstring); ``bytes`` a ``BINARY``
    (``X'hex'``: one array a Java UDF is handed on every row, not a string converted per row)."""
    if value is None:
        return Sql("NULL")
    if isinstance(value, bytes):
        return Sql(f"X'{value.hex()}'")
    if isinstance(value, bool):
        return Sql("TRUE" if value else "FALSE")
    if isinstance(value, int):
        if _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return Sql(f"({value})" if value < 0 else str(value))
        if _LONG_RANGE[0] <= value <= _LONG_RANGE[1]:
            return Sql(f"({value}L)" if value < 0 else f"{value}L")
        raise ValueError(f"integer literal {value} is wider than a BIGINT")
    if isinstance(value, float):
        if math.isnan(value):
            return Sql("CAST('NaN' AS DOUBLE)")
        if math.isinf(value):
            return Sql(f"CAST('{'-' if value < 0 else ''}Infinity' AS DOUBLE)")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return Sql("CAST('-0.0' AS DOUBLE)")
        text = repr(value)
        return Sql(f"({text}D)" if value < 0 else f"{text}D")
    if isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            raise ValueError(f"decimal literal {value} is not an integer")
        digits = str(int(value))
        return Sql(f"({digits}BD)" if value < 0 else f"{digits}BD")
    if isinstance(value, str):
        return Sql(string_literal(value))
    raise TypeError(f"no Spark SQL literal for {type(value).__name__} {value!r}")


def _sql(value: Operand) -> Sql:
    return value if isinstance(value, Sql) else lit(value)


Item = str | Sql
"""A projection item: ``"*"``, an expression named by :meth:`Sql.alias`, or a bare column."""


def _item_text(item: Item) -> str:
    return item.text if isinstance(item, Sql) else item


def _structured(item: Item) -> relation_blocks.Item:
    """A projection item with its parts (:class:`relation_blocks.Item`)."""
    if isinstance(item, Named):
        return relation_blocks.Item(item.expression, item.name, item.reference)
    if isinstance(item, ColumnRef):
        return relation_blocks.Item(item.text, item.name, item.name)
    if isinstance(item, str) and item == "*":
        return relation_blocks.STAR
    raise ValueError(f"a projection item of a Relation needs a name: {item!r}")


@overload
def project(frame: DataFrame, items: Iterable[Item]) -> DataFrame: ...
@overload
def project(frame: Relation, items: Iterable[Item]) -> Relation: ...
@overload
def project(frame: DataFrame | Relation, items: Iterable[Item]) -> DataFrame | Relation: ...
def project(frame: DataFrame | Relation, items: Iterable[Item]) -> DataFrame | Relation:
    """``frame`` projected to ``items``: a DataFrame in one ``selectExpr`` (a call per item
    into the JVM, not per node), a :class:`Relation` as one more step of its text."""
    if isinstance(frame, Relation):
        return frame.project(items)
    return frame.selectExpr(*(_item_text(item) for item in items))


class Relation:
    """Projections, filters, a watermark and unions over DataFrames, kept as the text of one
    SQL query until :meth:`frame`.

    Why: each ``selectExpr`` makes a new DataFrame, which Spark analyses at once, the whole
    plan below it again; a source's parsing and a sink's formatting are chains of up to a
    dozen projections (each stage computed once per row: Spark keeps a projection apart where
    merging it would repeat a costly expression), and their ``selectExpr`` calls would take
    ~0.45 s of a planned query's ~0.9 s start under load, of which parsing the expressions ~0.1 s.
    As one ``SELECT`` over temporary views of the DataFrames, its steps merged into as few
    nested blocks as give the same query (:mod:`~streamctl.spark.relation_blocks`), Spark
    parses and analyses the chain once, into the same projections and filters; a window's
    input (its source's parsing, the end-of-input marker's union, the event time, the
    watermark and the window's assignment) is one such query. A watermark is Spark SQL's
    ``WATERMARK`` clause, the same ``EventTimeWatermark`` node as ``withWatermark``.

    :attr:`columns` are tracked here: every item names its column (``"*"``, a bare column,
    or :meth:`Sql.alias`). On Spark Connect, where DataFrame calls are client-side and
    analysis waits for the query, :meth:`frame` applies the steps one by one instead (a
    temporary view dropped before the server analyses the query would not be found)."""

    def __init__(self, frame: DataFrame) -> None:
        self._base = frame
        self._steps: tuple[Step[Relation], ...] = ()
        self.columns: list[str] = list(frame.columns)
        self._base_columns = tuple(self.columns)

    @property
    def session(self) -> SparkSession:
        return self._base.sparkSession

    def _then(self, step: Step[Relation], columns: list[str]) -> Relation:
        following = copy.copy(self)
        following._steps = (*self._steps, dataclasses.replace(step, columns=tuple(columns)))
        following.columns = columns
        return following

    def project(self, items: Iterable[Item]) -> Relation:
        structured = [_structured(item) for item in items]
        columns = [
            name
            for item in structured
            for name in (self.columns if item.name is None else [item.name])
        ]
        return self._then(Step("project", items=tuple(structured)), columns)

    def where(self, condition: Sql) -> Relation:
        return self._then(Step("where", (condition.text,)), self.columns)

    def drop(self, name: str) -> Relation:
        """Without the column ``name``."""
        return self.project([col(c) for c in self.columns if c != name])

    def watermark(self, name: str, delay_ms: int) -> Relation:
        """With a watermark ``delay_ms`` behind the latest value of the timestamp ``name``."""
        return self._then(Step("watermark", (name, str(int(delay_ms)))), self.columns)

    def aggregate(self, keys: Iterable[tuple[Sql, str]], values: Iterable[Named]) -> Relation:
        """One row per group of the ``keys`` (expressions and their names), with the
        aggregates ``values``: ``groupBy(keys).agg(values)``."""
        keys, values = list(keys), list(values)
        step: Step[Relation] = Step(
            "aggregate",
            items=tuple(_structured(value) for value in values),
            keys=tuple((key.text, name) for key, name in keys),
        )
        return self._then(step, [*(name for _key, name in keys), *(v.name for v in values)])

    def union_all(self, other: Relation) -> Relation:
        """This relation's rows and ``other``'s, whose columns must be the same, in order."""
        if other.columns != self.columns:
            raise ValueError(f"a union needs the same columns: {self.columns} vs {other.columns}")
        return self._then(Step("union", other=other), self.columns)

    def frame(self) -> DataFrame:
        """The DataFrame: one query over temporary views of the bases, which are dropped
        again (the query's plan holds the bases' own plans). Explain it through
        :func:`explainable`."""
        if not self._steps:
            return self._base

        if is_connect(self.session):
            return self._applied()
        views: list[tuple[str, DataFrame]] = []
        text = self._text(views, itertools.count())
        try:  # every view is dropped again, also when making one of them failed
            for view, base in views:
                base.createOrReplaceTempView(view)
            return self.session.sql(text)
        finally:
            for view, _base in views:
                self.session.catalog.dropTempView(view)

    def _text(self, views: list[tuple[str, DataFrame]], aliases: Iterator[int]) -> str:
        """This relation as one ``SELECT`` (:mod:`~streamctl.spark.relation_blocks`), adding
        the views of its bases to ``views``."""
        view = f"streamctl_relation_{uuid.uuid4().hex}"
        views.append((view, self._base))
        return relation_blocks.query_text(
            view,
            self._base_columns,
            self._steps,
            aliases,
            lambda other: other._text(views, aliases),
        )

    def _applied(self) -> DataFrame:
        """The steps applied one by one with DataFrame calls (Spark Connect)."""
        frame = self._base
        for step in self._steps:
            if step.kind == "project":
                frame = frame.selectExpr(*(item.text for item in step.items))
            elif step.kind == "where":
                frame = frame.where(step.texts[0])
            elif step.kind == "aggregate":
                from pyspark.sql import functions as F

                keys = [F.expr(f"{text} AS {quote_identifier(n)}") for text, n in step.keys]
                values = [F.expr(item.text) for item in step.items]
                frame = frame.groupBy(*keys).agg(*values)
            elif step.kind == "watermark":
                name, delay_ms = step.texts
                frame = frame.withWatermark(quote_identifier(name), f"{delay_ms} milliseconds")
            else:
                assert step.other is not None
                frame = frame.union(step.other._applied())
        return frame


@overload
def where(frame: DataFrame, condition: Sql) -> DataFrame: ...
@overload
def where(frame: Relation, condition: Sql) -> Relation: ...
@overload
def where(frame: DataFrame | Relation, condition: Sql) -> DataFrame | Relation: ...
def where(frame: DataFrame | Relation, condition: Sql) -> DataFrame | Relation:
    """``frame``'s rows where ``condition`` holds."""
    if isinstance(frame, Relation):
        return frame.where(condition)
    return frame.where(condition.text)


def explainable(frame: DataFrame) -> DataFrame:
    """``frame`` as a DataFrame whose ``explain`` plans it as the query it starts.

    A DataFrame made by :meth:`Relation.frame` keeps the parsed text as its own plan, whose
    reference to the (dropped) temporary view does not say that it streams; Spark's explain
    picks streaming or batch planning by that plan, so it plans a streaming source as a batch
    query and refuses ("Queries with streaming sources must be executed with
    writeStream.start()"). A projection over it starts from the analysed plan, as
    ``writeStream`` does."""
    return frame.select("*")
