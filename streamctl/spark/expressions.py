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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamctl.error_codes import NOT_SUPPORTED
from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, UNSIGNED_TYPES, integer_range
from streamctl.planner import plan
from streamctl.planner.errors import PlannerError
from streamctl.spark.types import spark_type

TWO_TO_64: Final = Decimal(2**64)


TWO_TO_63: Final = Decimal(2**63)


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    return F.col(quoted(name))


_MILLIS_PER_DAY: Final = 86_400_000


_ISO_TIMESTAMP: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$"


def expression(node: plan.Expr) -> Column:
    """The Spark column computing a plan expression (with NebulaStream's semantics)."""
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


def _literal(node: plan.LiteralExpr) -> Column:
    target = spark_type(node.type)
    if node.value is None:
        return F.lit(None).cast(target)
    if node.type in INTEGER_TYPES:
        value = int(node.value)
        if node.type == "UINT64":
            return F.lit(Decimal(value)).cast(target)
        return F.lit(value).cast(target)
    if node.type in FLOAT_TYPES:
        number = float(node.value)
        if math.isnan(number) or math.isinf(number):
            return F.lit(str(number)).cast(T.DoubleType()).cast(target)
        return F.lit(number).cast(target)
    if node.type == "BOOLEAN":
        return F.lit(node.value == "TRUE")
    return F.lit(node.value).cast(target)


def to_long_bits(value: Column, type_name: str) -> Column:
    """An integer value as a Spark long holding its 64-bit two's complement pattern."""
    if type_name == "UINT64":
        return (
            F.when(value >= F.lit(TWO_TO_63), value - F.lit(TWO_TO_64))
            .otherwise(value)
            .cast(T.LongType())
        )
    return value.cast(T.LongType())


def _from_long_bits(bits: Column, type_name: str) -> Column:
    """Reduce a 64-bit pattern to an integer type's width (C++ wrap-around), in its Spark type."""
    target = spark_type(type_name)
    if type_name == "UINT64":
        as_decimal = bits.cast(T.DecimalType(20, 0))
        return F.when(bits < 0, as_decimal + F.lit(TWO_TO_64)).otherwise(as_decimal).cast(target)
    if type_name in UNSIGNED_TYPES:
        mask = integer_range(type_name)[1]
        return bits.bitwiseAND(F.lit(mask)).cast(target)
    return bits.cast(target)  # narrowing casts truncate to the low bits with ANSI mode off


def wrap_value(value: Column, type_name: str) -> Column:
    """A value computed in a wider Spark type (sums) brought back to its NebulaStream type."""
    if type_name in INTEGER_TYPES:
        if type_name == "UINT64":
            modulus = F.lit(TWO_TO_64)
            return F.pmod(value.cast(T.DecimalType(38, 0)), modulus).cast(spark_type(type_name))
        return _from_long_bits(value.cast(T.LongType()), type_name)
    return value.cast(spark_type(type_name))


def _is_float(type_name: str) -> bool:
    return type_name in FLOAT_TYPES


def _integer_arithmetic(operation: Callable[[Column, Column], Column]) -> Callable[..., Column]:
    def apply(args: list[Column], types: list[str], result: str) -> Column:
        a, b = (to_long_bits(arg, t) for arg, t in zip(args, types, strict=True))
        return _from_long_bits(operation(a, b), result)

    return apply


def _arithmetic(operation: Callable[[Column, Column], Column]) -> Callable[..., Column]:
    integer = _integer_arithmetic(operation)

    def apply(args: list[Column], types: list[str], result: str) -> Column:
        if _is_float(result):
            a, b = (arg.cast(T.DoubleType()) for arg in args)
            return operation(a, b).cast(spark_type(result))
        return integer(args, types, result)

    return apply


def _divide(args: list[Column], types: list[str], result: str) -> Column:
    a, b = args
    if _is_float(result):
        a, b = a.cast(T.DoubleType()), b.cast(T.DoubleType())
        by_zero = (
            F.when(a > 0, F.lit(math.inf)).when(a < 0, F.lit(-math.inf)).otherwise(F.lit(math.nan))
        )
        return F.when(b == 0, by_zero).otherwise(a / b).cast(spark_type(result))
    if result == "UINT64":
        exact_multiple = a.cast(T.DecimalType(21, 0)) - (a % b)
        return _unless_zero(b, (exact_multiple / b).cast(spark_type(result)), "division")
    quotient = F.call_function("div", to_long_bits(a, result), to_long_bits(b, result))
    return _unless_zero(b, _from_long_bits(quotient, result), "division")


def _unless_zero(divisor: Column, value: Column, what: str) -> Column:
    """``value``, or a query failure where the integer divisor is a non-null zero (NES throws
    an ArithmeticalError, null_handling.md); Spark evaluates ``raise_error`` only there."""
    failure = F.raise_error(F.lit(f"ArithmeticalError: integer {what} by zero"))
    return F.when(divisor == 0, failure).otherwise(value)


def _modulo(args: list[Column], types: list[str], result: str) -> Column:
    a, b = args
    if _is_float(result):
        a, b = a.cast(T.DoubleType()), b.cast(T.DoubleType())
        return F.when(b == 0, F.lit(math.nan)).otherwise(a % b).cast(spark_type(result))
    if result == "UINT64":
        return _unless_zero(b, (a % b).cast(spark_type(result)), "modulo")
    remainder = _from_long_bits(to_long_bits(a, result) % to_long_bits(b, result), result)
    return _unless_zero(b, remainder, "modulo")


def _negate(args: list[Column], types: list[str], result: str) -> Column:
    if _is_float(result):
        return (-args[0]).cast(spark_type(result))
    return _from_long_bits(F.lit(0).cast(T.LongType()) - to_long_bits(args[0], types[0]), result)


def _absolute(args: list[Column], types: list[str], result: str) -> Column:
    if _is_float(result):
        return F.abs(args[0]).cast(spark_type(result))
    if result in UNSIGNED_TYPES:
        return args[0]
    return _from_long_bits(F.abs(to_long_bits(args[0], types[0])), result)


def _integral(rounding: Callable[[Column], Column]) -> Callable[..., Column]:
    """CEIL/FLOOR/ROUND: identity on integers; on floats keep the type, and leave values that
    are already integral (NaN, infinities, |x| >= 2^52) alone, as Spark would overflow them."""

    def apply(args: list[Column], types: list[str], result: str) -> Column:
        value = args[0]
        if not _is_float(result):
            return value
        as_double = value.cast(T.DoubleType())
        untouched = F.isnan(as_double) | (F.abs(as_double) >= F.lit(2.0**52))
        rounded = rounding(as_double).cast(T.DoubleType())
        return F.when(untouched, as_double).otherwise(rounded).cast(spark_type(result))

    return apply


def _double_function(function: Callable[..., Column]) -> Callable[..., Column]:
    def apply(args: list[Column], types: list[str], result: str) -> Column:
        return function(*(arg.cast(T.DoubleType()) for arg in args))

    return apply


def _compare(
    operation: Callable[[Column, Column], Column], nan_result: bool | None = None
) -> Callable[..., Column]:
    """A comparison; on floats IEEE's (C++): a NaN operand gives ``nan_result`` (false, true
    for !=), where Spark orders NaN above every number and equal to itself."""

    def apply(args: list[Column], types: list[str], result: str) -> Column:
        a, b = args
        compared = operation(a, b)
        if nan_result is None or not any(_is_float(t) for t in types):
            return compared
        nan = F.isnan(a.cast(T.DoubleType())) | F.isnan(b.cast(T.DoubleType()))
        present = a.isNotNull() & b.isNotNull()
        return F.when(present & nan, F.lit(nan_result)).otherwise(compared)

    return apply


def _convert(args: list[Column], types: list[str], result: str) -> Column:
    """C++ static_cast between NebulaStream types."""
    value, source = args[0], types[0]
    target = spark_type(result)
    if source in INTEGER_TYPES and result in INTEGER_TYPES:
        return _from_long_bits(to_long_bits(value, source), result)
    if _is_float(source) and result in INTEGER_TYPES:
        as_double = value.cast(T.DoubleType())
        if result == "UINT64":
            truncated = F.when(as_double >= 0, F.floor(as_double.cast(T.DecimalType(38, 6))))
            return wrap_value(truncated, result)
        return _from_long_bits(as_double.cast(T.LongType()), result)  # truncates toward zero
    if result == "CHAR":
        return F.substring(value, 1, 1)
    if source in INTEGER_TYPES and result == "FLOAT32":
        # Spark counts integer -> float as a widening cast and simplifies
        # cast(cast(i as float) as double), as FLOAT32 arithmetic computes, into
        # cast(i as double): the rounding to single precision would be lost. NaNvl (never
        # NaN here) is opaque to that rule.
        rounded = value.cast(target)
        return F.nanvl(rounded, rounded)
    return value.cast(target)


def _iso_text_to_unix_ms(args: list[Column], types: list[str], result: str) -> Column:
    """CASTTOUNIXTS: ISO-8601 text (offset optional, UTC if absent) -> UINT64 milliseconds; text
    that is no such timestamp, or one before 1970, fails the query like NebulaStream's."""
    text = args[0]
    well_formed = text.rlike(_ISO_TIMESTAMP)
    has_offset = text.rlike(r"(Z|[+-]\d{2}:\d{2})$")
    with_offset = F.when(has_offset, text).otherwise(F.concat(text, F.lit("Z")))
    millis = F.unix_millis(with_offset.cast(T.TimestampType()))
    valid = well_formed & millis.isNotNull() & (millis >= 0)
    failure = F.raise_error(F.concat(F.lit("CASTTOUNIXTS: not a timestamp since 1970: "), text))
    return (
        F.when(text.isNull(), F.lit(None))
        .when(valid, millis)
        .otherwise(failure)
        .cast(spark_type(result))
    )


def _unix_ms_to_iso_text(args: list[Column], types: list[str], result: str) -> Column:
    """CASTFROMUNIXTS: UINT64 milliseconds -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, whatever the
    session's time zone)."""
    millis = args[0].cast(T.LongType())
    days = F.call_function("div", millis, F.lit(_MILLIS_PER_DAY))
    of_day = millis % F.lit(_MILLIS_PER_DAY)
    date = F.date_add(F.lit("1970-01-01").cast(T.DateType()), days.cast(T.IntegerType()))
    clock = F.format_string(
        "%02d:%02d:%02d.%03dZ",
        F.call_function("div", of_day, F.lit(3_600_000)),
        F.call_function("div", of_day, F.lit(60_000)) % 60,
        F.call_function("div", of_day, F.lit(1_000)) % 60,
        of_day % 1_000,
    )
    return F.concat(F.date_format(date, "yyyy-MM-dd"), F.lit("T"), clock)


_CALLS: Final[dict[str, Callable[[list[Column], list[str], str], Column]]] = {
    "add": _arithmetic(lambda a, b: a + b),
    "sub": _arithmetic(lambda a, b: a - b),
    "mul": _arithmetic(lambda a, b: a * b),
    "div": _divide,
    "mod": _modulo,
    "neg": _negate,
    "abs": _absolute,
    "ceil": _integral(F.ceil),
    "floor": _integral(F.floor),
    "round": _integral(lambda value: F.round(value, 0)),
    "sqrt": _double_function(F.sqrt),
    "exp": _double_function(F.exp),
    "pow": _double_function(F.pow),
    "eq": _compare(lambda a, b: a == b, False),
    "ne": _compare(lambda a, b: a != b, True),
    "lt": _compare(lambda a, b: a < b, False),
    "le": _compare(lambda a, b: a <= b, False),
    "gt": _compare(lambda a, b: a > b, False),
    "ge": _compare(lambda a, b: a >= b, False),
    "eq_null_safe": _compare(lambda a, b: a.eqNullSafe(b)),
    "and": _compare(lambda a, b: a & b),
    "or": _compare(lambda a, b: a | b),
    "not": lambda args, types, result: ~args[0],
    "is_null": lambda args, types, result: args[0].isNull(),
    "concat": lambda args, types, result: F.concat(*args),
    "iso_text_to_unix_ms": _iso_text_to_unix_ms,
    "unix_ms_to_iso_text": _unix_ms_to_iso_text,
    "cast": _convert,
}
