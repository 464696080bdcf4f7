"""Scalar expressions of a plan as Spark columns, with NebulaStream's semantics where Spark's
differ (imports pyspark; the planner itself never does).

* **Integer arithmetic is C++'s**: ``+ - *`` and negation wrap around in the result type
  (computed on 64-bit two's complement, then reduced to the type's width); ``/`` truncates
  toward zero and ``%`` takes the dividend's sign; UINT64 (carried as ``DECIMAL(20,0)``)
  wraps modulo 2^64; conversions between integer types wrap; a float converted to an integer
  truncates toward zero. An integer division or modulo by a non-null zero fails the query
  (``nes-docs/null_handling.md``, "Division and Modulo": it throws an ``ArithmeticalError``);
  by a NULL it is NULL.
* **Float arithmetic is IEEE**: FLOAT32 operations are computed in double and rounded to
  single precision, which gives the single-precision result exactly; division by zero gives
  an infinity or NaN instead of Spark's NULL.
* **NULL** (``nes-docs/null_handling.md``): the scalar rules coincide with Spark's SQL
  three-valued logic (see :mod:`streamctl.spark.translate` for aggregates).

Wrapping instead of errors needs ``spark.sql.ansi.enabled`` off while a DataFrame is analysed
(:data:`streamctl.spark.translate.SPARK_CONF`).

Expressions are Spark SQL text (:mod:`streamctl.spark.sql_text`): the translator hands each
column to the JVM in one call, where a tree of pyspark ``functions`` takes a call per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Final

from streamctl.error_codes import NOT_SUPPORTED
from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, UNSIGNED_TYPES, integer_range
from streamctl.planner import plan
from streamctl.planner.planning_errors import PlannerError
from streamctl.spark import sql_text as S
from streamctl.spark.spark_types import spark_type_ddl
from streamctl.spark.sql_text import Sql

TWO_TO_64: Final = Decimal(2**64)


def column(name: str) -> Sql:
    return S.col(name)


_MILLIS_PER_DAY: Final = 86_400_000


_ISO_TIMESTAMP: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$"


def expression(node: plan.Expr) -> Sql:
    """The Spark expression computing a plan expression (with NebulaStream's semantics)."""
    if isinstance(node, plan.ColumnExpr):
        return column(node.name)
    if isinstance(node, plan.LiteralExpr):
        return _literal(node)
    args = [expression(arg) for arg in node.args]
    types = [arg.type for arg in node.args]
    function = node.function
    handler = _CALLS.get(function)
    if handler is None:
        raise PlannerError(NOT_SUPPORTED, f"function {function!r} cannot be translated")
    return handler(args, types, node.type)


def _literal(node: plan.LiteralExpr) -> Sql:
    target = spark_type_ddl(node.type)
    if node.value is None:
        return S.lit(None).cast(target)
    if node.type in INTEGER_TYPES:
        value = int(node.value)
        if node.type == "UINT64":
            return S.lit(Decimal(value)).cast(target)
        return S.lit(value).cast(target)
    if node.type in FLOAT_TYPES:
        number = float(node.value)
        if math.isnan(number) or math.isinf(number):
            return S.lit(str(number)).cast("DOUBLE").cast(target)
        return S.lit(number).cast(target)
    if node.type == "BOOLEAN":
        return S.lit(node.value == "TRUE")
    return S.lit(node.value).cast(target)


# The UINT64 conversions name their operand once: an expression text that names an operand k
# times grows k**depth with nested operations (a CASE naming it three times makes four nested
# UINT64 additions 5.7 million characters for Spark's parser).


def to_long_bits(value: Sql, type_name: str) -> Sql:
    """An integer value as a Spark long holding its 64-bit two's complement pattern (a UINT64
    ``v``: ``v`` below 2**63, ``v - 2**64`` from there).

    A ``UINT64`` (a ``DECIMAL(20,0)``) is cast to ``BIGINT`` as it is: with ANSI mode off
    (:data:`~streamctl.spark.translate.SPARK_CONF`, which the narrowing casts of
    :func:`from_long_bits` rely on too) the cast keeps a decimal's low 64 bits, which is
    that pattern (``tests/planner/test_translate_spark.py`` checks it at the bounds). The
    value is named once, so nested arithmetic stays linear in size; the exact
    ``(v + 2**63) mod 2**64 - 2**63`` would be a tenth of a tumbling window's executor
    samples (decimal additions and remainders per row, Java Flight Recorder)."""
    return value.cast("BIGINT")


def from_long_bits(bits: Sql, type_name: str) -> Sql:
    """Reduce a 64-bit pattern to an integer type's width (C++ wrap-around), in its Spark type."""
    target = spark_type_ddl(type_name)
    if type_name == "UINT64":
        return S.call("pmod", bits.cast("DECIMAL(20,0)"), TWO_TO_64).cast(target)
    if type_name in UNSIGNED_TYPES:
        mask = integer_range(type_name)[1]
        return Sql(f"({bits.text} & {S.lit(mask).text})").cast(target)  # bitwise AND
    return bits.cast(target)  # narrowing casts truncate to the low bits with ANSI mode off


def wrap_value(value: Sql, type_name: str) -> Sql:
    """A value computed in a wider Spark type (sums) brought back to its NebulaStream type."""
    if type_name in INTEGER_TYPES:
        if type_name == "UINT64":
            wrapped = S.call("pmod", value.cast("DECIMAL(38,0)"), TWO_TO_64)
            return wrapped.cast(spark_type_ddl(type_name))
        return from_long_bits(value.cast("BIGINT"), type_name)
    return value.cast(spark_type_ddl(type_name))


def _is_float(type_name: str) -> bool:
    return type_name in FLOAT_TYPES


Handler = Callable[[list[Sql], list[str], str], Sql]


def _integer_arithmetic(operation: Callable[[Sql, Sql], Sql]) -> Handler:
    def apply(args: list[Sql], types: list[str], result: str) -> Sql:
        a, b = (to_long_bits(arg, t) for arg, t in zip(args, types, strict=True))
        return from_long_bits(operation(a, b), result)

    return apply


def _arithmetic(operation: Callable[[Sql, Sql], Sql]) -> Handler:
    integer = _integer_arithmetic(operation)

    def apply(args: list[Sql], types: list[str], result: str) -> Sql:
        if _is_float(result):
            a, b = (arg.cast("DOUBLE") for arg in args)
            return operation(a, b).cast(spark_type_ddl(result))
        return integer(args, types, result)

    return apply


def _divide(args: list[Sql], types: list[str], result: str) -> Sql:
    a, b = args
    if _is_float(result):
        a, b = a.cast("DOUBLE"), b.cast("DOUBLE")
        by_zero = S.when(a > 0, math.inf).when(a < 0, -math.inf).otherwise(math.nan)
        return S.when(b == 0, by_zero).otherwise(a / b).cast(spark_type_ddl(result))
    if result == "UINT64":
        exact_multiple = a.cast("DECIMAL(21,0)") - (a % b)
        return _unless_zero(b, (exact_multiple / b).cast(spark_type_ddl(result)), "division")
    quotient = S.call("div", to_long_bits(a, result), to_long_bits(b, result))
    return _unless_zero(b, from_long_bits(quotient, result), "division")


def _unless_zero(divisor: Sql, value: Sql, what: str) -> Sql:
    """``value``, or a query failure where the integer divisor is a non-null zero (NES throws
    an ArithmeticalError, null_handling.md); Spark evaluates ``raise_error`` only there."""
    failure = S.call("raise_error", f"ArithmeticalError: integer {what} by zero")
    return S.when(divisor == 0, failure).otherwise(value)


def _modulo(args: list[Sql], types: list[str], result: str) -> Sql:
    a, b = args
    if _is_float(result):
        a, b = a.cast("DOUBLE"), b.cast("DOUBLE")
        return S.when(b == 0, math.nan).otherwise(a % b).cast(spark_type_ddl(result))
    if result == "UINT64":
        return _unless_zero(b, (a % b).cast(spark_type_ddl(result)), "modulo")
    remainder = from_long_bits(to_long_bits(a, result) % to_long_bits(b, result), result)
    return _unless_zero(b, remainder, "modulo")


def _negate(args: list[Sql], types: list[str], result: str) -> Sql:
    if _is_float(result):
        return (-args[0]).cast(spark_type_ddl(result))
    return from_long_bits(S.lit(0).cast("BIGINT") - to_long_bits(args[0], types[0]), result)


def _absolute(args: list[Sql], types: list[str], result: str) -> Sql:
    if _is_float(result):
        return S.call("abs", args[0]).cast(spark_type_ddl(result))
    if result in UNSIGNED_TYPES:
        return args[0]
    return from_long_bits(S.call("abs", to_long_bits(args[0], types[0])), result)


def _integral(rounding: Callable[[Sql], Sql]) -> Handler:
    """CEIL/FLOOR/ROUND: identity on integers; on floats keep the type, and leave values that
    are already integral (NaN, infinities, |x| >= 2^52) alone, as Spark would overflow them."""

    def apply(args: list[Sql], types: list[str], result: str) -> Sql:
        value = args[0]
        if not _is_float(result):
            return value
        as_double = value.cast("DOUBLE")
        untouched = S.call("isnan", as_double) | (S.call("abs", as_double) >= 2.0**52)
        rounded = rounding(as_double).cast("DOUBLE")
        return S.when(untouched, as_double).otherwise(rounded).cast(spark_type_ddl(result))

    return apply


def _double_function(function: str) -> Handler:
    def apply(args: list[Sql], types: list[str], result: str) -> Sql:
        return S.call(function, *(arg.cast("DOUBLE") for arg in args))

    return apply


def _compare(
    operation: Callable[[Sql, Sql], Sql],
    nan_result: bool | None = None,
    nan_stand_ins: tuple[float, float] | None = None,
) -> Handler:
    """A comparison; on floats IEEE's (C++): a NaN operand gives ``nan_result`` (false, true
    for !=), where Spark orders NaN above every number and equal to itself.

    ``nan_stand_ins`` (strict comparisons only): the infinities that make the comparison false,
    standing in for a NaN left and right operand (``a < b`` as ``nanvl(a, +inf) <
    nanvl(b, -inf)``); NULL stays NULL. Each operand is then named once: a filter pushed below
    its projection inlines the operand's whole expression (a source's parse) at every mention.
    No value does that for ``<=``, ``>=``, ``=``: those test for NaN."""

    def apply(args: list[Sql], types: list[str], result: str) -> Sql:
        a, b = args
        if nan_result is None or not any(_is_float(t) for t in types):
            return operation(a, b)
        if nan_stand_ins is not None:
            a, b = (
                S.call("nanvl", arg, stand_in) if _is_float(type_) else arg
                for arg, type_, stand_in in zip(args, types, nan_stand_ins, strict=True)
            )
            return operation(a, b)
        nan = S.call("isnan", a.cast("DOUBLE")) | S.call("isnan", b.cast("DOUBLE"))
        present = a.isNotNull() & b.isNotNull()
        return S.when(present & nan, nan_result).otherwise(operation(a, b))

    return apply


def _convert(args: list[Sql], types: list[str], result: str) -> Sql:
    """C++ static_cast between NebulaStream types."""
    value, source = args[0], types[0]
    target = spark_type_ddl(result)
    if source in INTEGER_TYPES and result in INTEGER_TYPES:
        return from_long_bits(to_long_bits(value, source), result)
    if _is_float(source) and result in INTEGER_TYPES:
        as_double = value.cast("DOUBLE")
        if result == "UINT64":
            truncated = S.when(as_double >= 0, S.call("floor", as_double.cast("DECIMAL(38,6)")))
            return wrap_value(truncated, result)
        return from_long_bits(as_double.cast("BIGINT"), result)  # truncates toward zero
    if result == "CHAR":
        return S.call("substring", value, 1, 1)
    if source in INTEGER_TYPES and result == "FLOAT32":
        # Spark counts integer -> float as a widening cast and simplifies
        # cast(cast(i as float) as double), as FLOAT32 arithmetic computes, into
        # cast(i as double): the rounding to single precision would be lost. NaNvl (never
        # NaN here) is opaque to that rule.
        rounded = value.cast(target)
        return S.call("nanvl", rounded, rounded)
    return value.cast(target)


def _iso_text_to_unix_ms(args: list[Sql], types: list[str], result: str) -> Sql:
    """CASTTOUNIXTS: ISO-8601 text (offset optional, UTC if absent) -> UINT64 milliseconds; text
    that is no such timestamp, or one before 1970, fails the query like NebulaStream's."""
    text = args[0]
    well_formed = text.rlike(_ISO_TIMESTAMP)
    has_offset = text.rlike(r"(Z|[+-]\d{2}:\d{2})$")
    with_offset = S.when(has_offset, text).otherwise(S.call("concat", text, "Z"))
    # TIMESTAMP_LTZ: what T.TimestampType() is, whatever spark.sql.timestampType says
    millis = S.call("unix_millis", with_offset.cast("TIMESTAMP_LTZ"))
    valid = well_formed & millis.isNotNull() & (millis >= 0)
    failure = S.call(
        "raise_error", S.call("concat", "CASTTOUNIXTS: not a timestamp since 1970: ", text)
    )
    return (
        S.when(text.isNull(), None)
        .when(valid, millis)
        .otherwise(failure)
        .cast(spark_type_ddl(result))
    )


def _unix_ms_to_iso_text(args: list[Sql], types: list[str], result: str) -> Sql:
    """CASTFROMUNIXTS: UINT64 milliseconds -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, whatever the
    session's time zone)."""
    millis = args[0].cast("BIGINT")
    days = S.call("div", millis, _MILLIS_PER_DAY)
    of_day = millis % _MILLIS_PER_DAY
    date = S.call("date_add", S.lit("1970-01-01").cast("DATE"), days.cast("INT"))
    clock = S.call(
        "format_string",
        "%02d:%02d:%02d.%03dZ",
        S.call("div", of_day, 3_600_000),
        S.call("div", of_day, 60_000) % 60,
        S.call("div", of_day, 1_000) % 60,
        of_day % 1_000,
    )
    return S.call("concat", S.call("date_format", date, "yyyy-MM-dd"), "T", clock)


_CALLS: Final[dict[str, Handler]] = {
    "add": _arithmetic(lambda a, b: a + b),
    "sub": _arithmetic(lambda a, b: a - b),
    "mul": _arithmetic(lambda a, b: a * b),
    "div": _divide,
    "mod": _modulo,
    "neg": _negate,
    "abs": _absolute,
    "ceil": _integral(lambda value: S.call("ceil", value)),
    "floor": _integral(lambda value: S.call("floor", value)),
    "round": _integral(lambda value: S.call("round", value, 0)),
    "sqrt": _double_function("sqrt"),
    "exp": _double_function("exp"),
    "pow": _double_function("pow"),
    "eq": _compare(lambda a, b: a == b, False),
    "ne": _compare(lambda a, b: a != b, True),
    "lt": _compare(lambda a, b: a < b, False, (math.inf, -math.inf)),
    "le": _compare(lambda a, b: a <= b, False),
    "gt": _compare(lambda a, b: a > b, False, (-math.inf, math.inf)),
    "ge": _compare(lambda a, b: a >= b, False),
    "eq_null_safe": _compare(lambda a, b: Sql(f"({a.text} <=> {b.text})")),
    "and": _compare(lambda a, b: a & b),
    "or": _compare(lambda a, b: a | b),
    "not": lambda args, types, result: ~args[0],
    "is_null": lambda args, types, result: args[0].isNull(),
    "concat": lambda args, types, result: S.call("concat", *args),
    "iso_text_to_unix_ms": _iso_text_to_unix_ms,
    "unix_ms_to_iso_text": _unix_ms_to_iso_text,
    "cast": _convert,
}
