"""NebulaStream's semantics where they differ from (DuckDB's) standard SQL: the one home of them
in the reference engine.

Every function here turns one NES rule into a DuckDB SQL fragment; each cites the passage of
the NES documentation (``/work/shared/conformance/nes-docs``) or of the product's typing rules
(:mod:`streamctl.planner.types`, :mod:`streamctl.planner.plan`) it comes from, and
:data:`RULES` lists them all. :mod:`.sql` assembles plans from these fragments and uses plain
SQL only where NES and SQL agree (three-valued ``AND``/``OR``/``NOT``, ``WHERE`` dropping
NULL predicates, ``GROUP BY`` putting NULL keys in one group, ``UNION ALL``, ``||``).

Where the documentation leaves NES's answer open, the fragment raises
:class:`~.errors.ReferenceUnsupported` at run time (through :func:`unsupported`) instead of
guessing; where it documents that the query fails, :class:`~.errors.NesQueryFailure`
(through :func:`failure`).

Fragments take their operands as SQL text that is evaluated once per use; callers pass column
references or constants (:mod:`.sql` computes every subexpression into its own column first),
so repeating an operand costs nothing and cannot evaluate anything twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, STRING_TYPES, integer_range
from streamctl.planner import plan
from streamctl.reference.reference_errors import ReferenceUnsupported

UNSUPPORTED_MARKER: Final = "nes-reference-unsupported: "
FAILURE_MARKER: Final = "nes-query-failure: "


@dataclass(frozen=True)
class Rule:
    """One NES semantic rule the reference applies: where it is written and what it says."""

    name: str
    source: str
    passage: str


RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "types are C++ machine types",
        "query_api.md, Data Types",
        "These types match primitive C++ data types. The numeric suffix denotes the bit width. "
        "For output types of arithmetical operations, we stick to the C++ standard",
    ),
    Rule(
        "integer arithmetic wraps, division truncates, modulo takes the dividend's sign",
        "streamctl/planner/plan.py FUNCTIONS; spark/translate.py module docstring",
        "arithmetic on one numeric type (arguments and result share it; C/C++ semantics: "
        "integers wrap, division truncates, modulo takes the dividend's sign)",
    ),
    Rule(
        "NULL propagates through arithmetic, comparisons and CONCAT",
        "null_handling.md, Map (Expressions) / Comparisons",
        "Arithmetic and string expressions propagate NULL: if any operand is NULL, the result "
        "is NULL. ... All comparisons involving NULL yield NULL -- including equality of a "
        "value with itself.",
    ),
    Rule(
        "integer division or modulo by a non-null zero fails the query",
        "null_handling.md, Division and Modulo",
        "If either operand is NULL, the result is NULL. Dividing by a non-null zero throws an "
        "ArithmeticalError.",
    ),
    Rule(
        "float comparisons are IEEE's (C++): NaN compares false, except !=",
        "query_api.md, Data Types",
        "These types match primitive C++ data types.",
    ),
    Rule(
        "conversions are C++ static_cast: integers wrap, floats truncate toward zero",
        "streamctl/planner/plan.py FUNCTIONS",
        "conversion to the call's type (C/C++ static_cast semantics between numeric types)",
    ),
    Rule(
        "SUM, AVG, MIN, MAX, MEDIAN over a window holding a NULL input are NULL",
        "null_handling.md, Aggregation Functions",
        "If any input value is NULL, the aggregation result is NULL.",
    ),
    Rule(
        "COUNT(field) skips NULLs and is a NOT NULL UINT64",
        "null_handling.md, COUNT",
        "COUNT(field) skips NULL values and always returns a NOT NULL UINT64.",
    ),
    Rule(
        "aggregate types: COUNT UINT64, SUM/MIN/MAX the argument's type, AVG/MEDIAN FLOAT64",
        "streamctl/planner/types.py module docstring",
        "aggregates: COUNT is UINT64; SUM, MIN, MAX keep the argument's type; AVG and MEDIAN "
        "are FLOAT64",
    ),
    Rule(
        "NULL group keys form their own group",
        "null_handling.md, GROUP BY with NULL Keys",
        "NULL keys form their own group -- all rows with a NULL key are aggregated together.",
    ),
    Rule(
        "windows are half-open [start, end) in event-time milliseconds, start/end UINT64",
        "null_handling.md, Aggregation Functions; query_api.md, Window Types",
        "Window [0, 100) contains only non-null values (0, 3, 1) ... The timestamp field needs "
        "to be of type UINT64, with a millisecond resolution.",
    ),
    Rule(
        "windows start at multiples of the advance from 0; a sliding window's rows are those "
        "in [k*advance, k*advance+size), so with advance > size some rows are in no window",
        "query_api.md, Window Types; streamctl/planner/plan.py Window",
        "Sliding windows chunk the stream into overlapping subsets, for example: "
        "[1s 2s][2s 3s][3s 4s] ... Windows start at multiples of slide_ms from 0 (NebulaStream "
        "creates no windows before time 0)",
    ),
    Rule(
        "a window without rows emits nothing; one row per non-empty window and key",
        "watermarking_progress_window_triggering.md; streamctl/planner/plan.py WindowAggregate",
        "a window that currently aggregates values with timestamps ranging from 10 to 20 ... "
        "the result can be sent downstream. / one row per non-empty window and key",
    ),
    Rule(
        "every row counts once, whatever its arrival order (bounded input: every window is "
        "complete when emitted; NES defines no handling of late rows, so the reference takes "
        "the product's contract of issue 18, 'every row must count exactly once')",
        "watermarking_progress_window_triggering.md, Watermark Timestamp",
        "In NebulaStream, out-of-order processing of disordered inputs, i.e. graceful handling "
        "of unexpectedly late data at the source, isn't supported. ... Watermarks are "
        "timestamps that guarantee that all data with a timestamp smaller than the watermark "
        "has arrived. Thus, a watermark can be used to trigger a window",
    ),
    Rule(
        "a window join pairs rows of one window satisfying the predicate; NULL keys never match",
        "query_api.md, Join; null_handling.md, Join (INNER JOIN)",
        "Joins combine tuples from two input streams based on a condition within a window. ... "
        "any tuple with a NULL value in a join key field is never inserted into the hash table, "
        "so it can never match.",
    ),
    Rule(
        "ISNULL is the only NULL test and is NOT NULL",
        "null_handling.md, ISNULL Function",
        "ISNULL(expr) returns a non-nullable BOOLEAN indicating whether the expression is NULL.",
    ),
    Rule(
        "a filter drops rows whose predicate is NULL",
        "null_handling.md, Filter (WHERE)",
        "A filter predicate that evaluates to NULL is treated as FALSE -- the row is excluded.",
    ),
    Rule(
        "UNION keeps duplicates",
        "query_api.md, Union",
        "Union does not deduplicate values as in classical relational algebra.",
    ),
)
"""The rules applied here, for documentation and review."""


# ---- types -----------------------------------------------------------------------------------

_DUCKDB_TYPES: Final[dict[str, str]] = {
    "INT8": "TINYINT",
    "INT16": "SMALLINT",
    "INT32": "INTEGER",
    "INT64": "BIGINT",
    "UINT8": "UTINYINT",
    "UINT16": "USMALLINT",
    "UINT32": "UINTEGER",
    "UINT64": "UBIGINT",
    "FLOAT32": "FLOAT",
    "FLOAT64": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "CHAR": "VARCHAR",
    "VARSIZED": "VARCHAR",
}

_FLOAT32_MAX: Final = "3.4028234663852886e38"
# Doubles at or above this round to infinity in single precision (FLT_MAX + half an ulp).
_FLOAT32_OVERFLOW: Final = "3.4028235677973366e38"
_MAX_EVENT_TIME: Final = 2**63


def duckdb_type(nes_type: str) -> str:
    """The DuckDB type holding a NES type exactly (rule: types are C++ machine types)."""
    try:
        return _DUCKDB_TYPES[nes_type]
    except KeyError:
        raise ReferenceUnsupported(f"NES type {nes_type!r} has no DuckDB counterpart") from None


def sql_string(text: str) -> str:
    """A SQL string constant."""
    if "\x00" in text:
        raise ReferenceUnsupported("text containing NUL characters")
    return "'" + text.replace("'", "''") + "'"


def _huge(value: int) -> str:
    return f"CAST('{value}' AS HUGEINT)"


def unsupported(reason: str) -> str:
    """A SQL expression that stops the run with :class:`ReferenceUnsupported` (``reason``)."""
    return f"error({sql_string(UNSUPPORTED_MARKER + reason)})"


def failure(reason: str) -> str:
    """A SQL expression that stops the run with :class:`NesQueryFailure` (``reason``)."""
    return f"error({sql_string(FAILURE_MARKER + reason)})"


def literal(value: str | None, nes_type: str) -> str:
    """A typed constant (the plan's canonical text: decimal integers, Python float ``repr``,
    ``TRUE``/``FALSE``, the string itself)."""
    target = duckdb_type(nes_type)
    if value is None:
        return f"CAST(NULL AS {target})"
    if nes_type in INTEGER_TYPES:
        return f"CAST('{int(value)}' AS {target})"
    if nes_type in FLOAT_TYPES:
        number = float(value)
        return f"CAST('{number!r}' AS {target})"
    if nes_type == "BOOLEAN":
        return "TRUE" if value == "TRUE" else "FALSE"
    return f"CAST({sql_string(value)} AS {target})"


# ---- integers: C++ wrap-around ------------------------------------------------------------


def wrap_integer(value: str, nes_type: str) -> str:
    """Reduce an exact integer (any width) to ``nes_type`` modulo 2^bits, as C++ does.

    Rule: integer arithmetic wraps (plan.py FUNCTIONS: "C/C++ semantics: integers wrap")."""
    low, high = integer_range(nes_type)
    modulus = _huge(high - low + 1)
    shifted = f"(CAST({value} AS HUGEINT) - {_huge(low)})"
    reduced = f"((({shifted} % {modulus}) + {modulus}) % {modulus})"
    return f"CAST({_huge(low)} + {reduced} AS {duckdb_type(nes_type)})"


def _bits(value: str, nes_type: str) -> str:
    """An integer as a HUGEINT; UINT64 values >= 2^63 as their signed 64-bit pattern, which
    keeps every product of two operands within 128 bits (the low 64 bits are unchanged)."""
    if nes_type == "UINT64":
        return (
            f"(CASE WHEN {value} >= CAST('{2**63}' AS UBIGINT) "
            f"THEN CAST({value} AS HUGEINT) - {_huge(2**64)} ELSE CAST({value} AS HUGEINT) END)"
        )
    return f"CAST({value} AS HUGEINT)"


# ---- floats: IEEE (C++) ---------------------------------------------------------------------


def to_float32(value: str) -> str:
    """A double rounded to single precision as C++ does (overflow gives an infinity; DuckDB's
    own cast refuses values beyond FLT_MAX)."""
    return (
        f"(CASE WHEN isnan({value}) OR isinf({value}) THEN CAST({value} AS FLOAT) "
        f"WHEN abs({value}) >= {_FLOAT32_OVERFLOW} "
        f"THEN CAST(sign({value}) * CAST('inf' AS DOUBLE) AS FLOAT) "
        f"WHEN abs({value}) > {_FLOAT32_MAX} THEN CAST(sign({value}) * {_FLOAT32_MAX} AS FLOAT) "
        f"ELSE CAST({value} AS FLOAT) END)"
    )


def _float_result(value: str, nes_type: str) -> str:
    if nes_type == "FLOAT32":
        return to_float32(value)
    return f"CAST({value} AS DOUBLE)"


def _double(value: str) -> str:
    return f"CAST({value} AS DOUBLE)"


# ---- scalar functions -------------------------------------------------------------------------


def call(
    function: str, args: list[str], arg_types: list[str], result: str, in_logic: bool = False
) -> str:
    """The SQL of plan function ``function`` (see :data:`streamctl.planner.plan.FUNCTIONS`)
    over operands ``args`` of NES types ``arg_types``, giving NES type ``result``;
    ``in_logic``: the call is (within) an operand of ``AND``/``OR``."""
    if function in ("add", "sub", "mul"):
        return _arithmetic(function, args, result)
    if function == "div":
        return _divide(args, result, in_logic)
    if function == "mod":
        return _modulo(args, result, in_logic)
    if function == "neg":
        if result in FLOAT_TYPES:
            return _float_result(f"-{_double(args[0])}", result)
        return wrap_integer(f"(0 - {_bits(args[0], arg_types[0])})", result)
    if function == "abs":
        if result in FLOAT_TYPES:
            return _float_result(f"abs({_double(args[0])})", result)
        if result.startswith("U"):
            return args[0]
        return wrap_integer(f"abs({_bits(args[0], arg_types[0])})", result)
    if function in ("ceil", "floor", "round"):
        if result not in FLOAT_TYPES:
            return args[0]  # integers are integral already
        # std::round rounds halves away from zero, as DuckDB's round does.
        return _float_result(f"{function}({_double(args[0])})", result)
    if function in ("sqrt", "exp"):
        return f"{function}({_double(args[0])})"
    if function == "pow":
        return f"pow({_double(args[0])}, {_double(args[1])})"
    if function in _COMPARISONS:
        return _compare(function, args, arg_types[0])
    if function == "eq_null_safe":
        a, b = args
        if arg_types[0] in FLOAT_TYPES:
            return (
                f"(CASE WHEN isnan({a}) OR isnan({b}) "
                f"THEN {unsupported('<=> with a NaN operand: NES does not document it')} "
                f"ELSE {a} IS NOT DISTINCT FROM {b} END)"
            )
        return f"({a} IS NOT DISTINCT FROM {b})"
    if function == "and":
        return f"({args[0]} AND {args[1]})"  # SQL's three-valued logic (null_handling.md)
    if function == "or":
        return f"({args[0]} OR {args[1]})"
    if function == "not":
        return f"(NOT {args[0]})"
    if function == "is_null":
        return f"({args[0]} IS NULL)"
    if function == "concat":
        return f"({args[0]} || {args[1]})"  # || propagates NULL (DuckDB's concat() skips it)
    if function == "cast":
        return convert(args[0], arg_types[0], result)
    if function == "unix_ms_to_iso_text":
        return _unix_ms_to_iso_text(args[0])
    if function == "iso_text_to_unix_ms":
        raise ReferenceUnsupported(
            "CASTTOUNIXTS: the NES documentation does not define which texts it accepts"
        )
    raise ReferenceUnsupported(f"function {function!r}")


def _arithmetic(function: str, args: list[str], result: str) -> str:
    operator = {"add": "+", "sub": "-", "mul": "*"}[function]
    a, b = args
    if result in FLOAT_TYPES:
        # FLOAT32 operations in double, rounded once to single: the exact IEEE float result.
        return _float_result(f"({_double(a)} {operator} {_double(b)})", result)
    return wrap_integer(f"({_bits(a, result)} {operator} {_bits(b, result)})", result)


_ZERO_IN_LOGIC: Final = (
    "integer {} by zero where the NES docs do not say whether it is evaluated: in an operand "
    "of AND/OR when the other one decides the result, or in an aggregate's argument (a row in "
    "no window, an aggregate no output uses); the product's Spark does not evaluate those"
)


def _by_zero(what: str, in_logic: bool) -> str:
    """An integer division/modulo by a non-null zero: the query fails (null_handling.md), but
    within an operand of AND/OR whether NES evaluates it at all is left open."""
    if in_logic:
        return unsupported(_ZERO_IN_LOGIC.format(what))
    return failure(f"integer {what} by zero (null_handling.md: ArithmeticalError)")


def _divide(args: list[str], result: str, in_logic: bool = False) -> str:
    a, b = args
    if result in FLOAT_TYPES:
        return (
            f"(CASE WHEN {b} = 0 THEN "
            f"{unsupported('float division by zero: NES documents an ArithmeticalError for a zero divisor, C++ gives an infinity')} "  # noqa: E501
            f"ELSE {_float_result(f'({_double(a)} / {_double(b)})', result)} END)"
        )
    # HUGEINT division truncates toward zero; INT_MIN / -1 (undefined in C++) wraps.
    return (
        f"(CASE WHEN {b} = 0 THEN {_by_zero('division', in_logic)} "
        f"ELSE {wrap_integer(f'(CAST({a} AS HUGEINT) // CAST({b} AS HUGEINT))', result)} END)"
    )


def _modulo(args: list[str], result: str, in_logic: bool = False) -> str:
    a, b = args
    if result in FLOAT_TYPES:
        # DuckDB's % on doubles is C's fmod: the result takes the dividend's sign.
        return (
            f"(CASE WHEN {b} = 0 THEN "
            f"{unsupported('float modulo by zero: NES documents an ArithmeticalError for a zero divisor, C++ gives NaN')} "  # noqa: E501
            f"ELSE {_float_result(f'({_double(a)} % {_double(b)})', result)} END)"
        )
    return (
        f"(CASE WHEN {b} = 0 THEN {_by_zero('modulo', in_logic)} "
        f"ELSE {wrap_integer(f'(CAST({a} AS HUGEINT) % CAST({b} AS HUGEINT))', result)} END)"
    )


_COMPARISONS: Final[dict[str, str]] = {
    "eq": "=",
    "ne": "<>",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
}


def _compare(function: str, args: list[str], operand_type: str) -> str:
    """Comparisons: NULL if an operand is NULL (SQL agrees); floats by IEEE, where NaN is
    unequal to everything (DuckDB orders NaN above all numbers and equal to itself)."""
    a, b = args
    operator = _COMPARISONS[function]
    if operand_type in FLOAT_TYPES:
        with_nan = "TRUE" if function == "ne" else "FALSE"
        return (
            f"(CASE WHEN {a} IS NULL OR {b} IS NULL THEN CAST(NULL AS BOOLEAN) "
            f"WHEN isnan({a}) OR isnan({b}) THEN {with_nan} ELSE {a} {operator} {b} END)"
        )
    return f"({a} {operator} {b})"


def convert(value: str, source: str, target: str) -> str:
    """C++ ``static_cast`` between NES types (rule: conversions are C++ static_cast)."""
    if source == target:
        return value
    if source in INTEGER_TYPES and target in INTEGER_TYPES:
        return wrap_integer(value, target)
    if source in INTEGER_TYPES and target in FLOAT_TYPES:
        # one rounding from the integer, like C++ (DuckDB casts integers to floats directly)
        return f"CAST({value} AS {duckdb_type(target)})"
    if source in FLOAT_TYPES and target in FLOAT_TYPES:
        return _float_result(_double(value), target)
    if source in FLOAT_TYPES and target in INTEGER_TYPES:
        low, high = integer_range(target)
        truncated = f"trunc({_double(value)})"
        return (
            f"(CASE WHEN isnan({value}) OR {truncated} < {float(low)!r} "
            f"OR {truncated} >= {float(high + 1)!r} "
            f"THEN {unsupported(f'a float outside {target} converted to {target} (undefined in C++)')} "  # noqa: E501
            f"ELSE CAST({truncated} AS {duckdb_type(target)}) END)"
        )
    if source in STRING_TYPES and target in STRING_TYPES:
        if target == "VARSIZED":
            return value
        return (
            f"(CASE WHEN length({value}) <> 1 "
            f"THEN {unsupported('text of other than one character converted to CHAR')} "
            f"ELSE {value} END)"
        )
    raise ReferenceUnsupported(f"conversion from {source} to {target}")


def _unix_ms_to_iso_text(value: str) -> str:
    """CASTFROMUNIXTS: UINT64 milliseconds -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (plan.py FUNCTIONS:
    "UINT64 ms -> '1970-01-01T00:00:00.000Z'"); years past 9999 are not documented."""
    limit = 253_402_300_800_000  # 10000-01-01T00:00:00Z
    return (
        f"(CASE WHEN {value} >= CAST('{limit}' AS UBIGINT) "
        f"THEN {unsupported('CASTFROMUNIXTS of a time after the year 9999')} "
        f"ELSE strftime(epoch_ms(CAST({value} AS BIGINT)), '%Y-%m-%dT%H:%M:%S.%g') || 'Z' END)"
    )


# ---- aggregates ------------------------------------------------------------------------------


def aggregate(function: str, argument: str | None, argument_type: str | None, result: str) -> str:
    """The SQL aggregate of one plan aggregate over a window's rows of one key.

    Rules: COUNT skips NULLs and is UINT64; SUM/AVG/MIN/MAX/MEDIAN are NULL when any input is
    NULL (null_handling.md); SUM keeps its argument's type and wraps like C++ (integer sums
    are computed exactly, then wrapped: modular addition does not depend on the order).
    """
    if function == "count":
        counted = "count(*)" if argument is None else f"count({argument})"
        return f"CAST({counted} AS UBIGINT)"
    if argument is None or argument_type is None:
        raise ReferenceUnsupported(f"{function.upper()} without an argument")
    any_null = f"bool_or({argument} IS NULL)"
    is_float = argument_type in FLOAT_TYPES
    if function == "sum":
        if is_float:
            total = _float_result(f"sum({_double(argument)})", result)
        else:
            total = wrap_integer(f"sum(CAST({argument} AS HUGEINT))", result)
        return f"(CASE WHEN {any_null} THEN CAST(NULL AS {duckdb_type(result)}) ELSE {total} END)"
    if function in ("min", "max"):
        if is_float:
            # NES keeps the first of incomparable values: with a NaN the result depends on
            # the arrival order, which a set-based reference does not know.
            return (
                f"(CASE WHEN {any_null} THEN CAST(NULL AS {duckdb_type(result)}) "
                f"WHEN bool_or(isnan({argument})) "
                f"THEN {unsupported(f'{function.upper()} over a window holding NaN')} "
                f"ELSE {function}({argument}) END)"
            )
        return (
            f"(CASE WHEN {any_null} THEN CAST(NULL AS {duckdb_type(result)}) "
            f"ELSE {function}({argument}) END)"
        )
    if function == "avg":
        if is_float:
            mean = f"(sum({_double(argument)}) / CAST(count(*) AS DOUBLE))"
            return f"(CASE WHEN {any_null} THEN CAST(NULL AS DOUBLE) ELSE {mean} END)"
        # The width of NES's running sum is not documented; the mean is unambiguous when the
        # exact sum fits the argument's type (a wrapping accumulator then ends on it too).
        low, high = integer_range(argument_type)
        exact = f"sum(CAST({argument} AS HUGEINT))"
        return (
            f"(CASE WHEN {any_null} THEN CAST(NULL AS DOUBLE) "
            f"WHEN {exact} < {_huge(low)} OR {exact} > {_huge(high)} "
            f"THEN {unsupported(f'AVG whose sum overflows {argument_type}')} "
            f"ELSE CAST({exact} AS DOUBLE) / CAST(count(*) AS DOUBLE) END)"
        )
    if function == "median":
        # MEDIAN is FLOAT64 (types.py): the mean of the two middle values for an even count.
        nan_check = ""
        if is_float:
            nan_check = (
                f"WHEN bool_or(isnan({argument})) "
                f"THEN {unsupported('MEDIAN over a window holding NaN')} "
            )
        return (
            f"(CASE WHEN {any_null} THEN CAST(NULL AS DOUBLE) {nan_check}"
            f"ELSE quantile_cont({_double(argument)}, 0.5) END)"
        )
    raise ReferenceUnsupported(f"aggregate function {function!r}")


# ---- windows ---------------------------------------------------------------------------------


def event_time(value: str, nes_type: str) -> str:
    """The event time of a row as a BIGINT of milliseconds.

    NES event times are UINT64 milliseconds (query_api.md: "The timestamp field needs to be of
    type UINT64, with a millisecond resolution"); a NULL or negative event time has no
    documented window, nor do times from 2^63 ms on (which the reference does not index)."""
    if nes_type not in INTEGER_TYPES:
        raise ReferenceUnsupported(f"event time of type {nes_type}")
    return (
        f"(CASE WHEN {value} IS NULL THEN {unsupported('a NULL event time')} "
        f"WHEN {value} < 0 THEN {unsupported('a negative event time')} "
        f"WHEN CAST({value} AS HUGEINT) >= {_huge(_MAX_EVENT_TIME)} "
        f"THEN {unsupported('an event time from 2^63 ms on')} "
        f"ELSE CAST({value} AS BIGINT) END)"
    )


def window_indexes(time: str, window: plan.Window) -> str:
    """The list of window numbers ``k`` whose window ``[k*advance, k*advance + size)`` holds
    event time ``time`` (a BIGINT >= 0): one for a tumbling window, every such ``k >= 0`` for a
    sliding one, none when the time falls into a gap (advance > size)."""
    size, advance = window.size_ms, window.slide_ms
    if window.kind == "tumbling" or size == advance:
        return f"[{time} // {size}]"
    # k*advance <= t < k*advance + size  <=>  (t - size) / advance < k <= t / advance
    first = f"(CASE WHEN {time} < {size} THEN 0 ELSE ({time} - {size}) // {advance} + 1 END)"
    return f"generate_series({first}, {time} // {advance})"


def window_start(index: str, window: plan.Window) -> str:
    """Window ``index``'s start (UINT64 ms): windows start at multiples of the advance from 0."""
    return f"CAST(CAST({index} AS HUGEINT) * {window.slide_ms} AS UBIGINT)"


def window_end(index: str, window: plan.Window) -> str:
    """Window ``index``'s end (UINT64 ms, exclusive): its start plus the size."""
    end = f"(CAST({index} AS HUGEINT) * {window.slide_ms} + {window.size_ms})"
    return (
        f"(CASE WHEN {end} > {_huge(2**64 - 1)} "
        f"THEN {unsupported('a window ending after the largest UINT64')} "
        f"ELSE CAST({end} AS UBIGINT) END)"
    )


def group_key(value: str, nes_type: str) -> str:
    """A GROUP BY key. NULL keys form one group (SQL agrees). Float keys that are NaN or -0.0
    group by rules the NES documentation does not give (bit pattern or ``==``)."""
    if nes_type in FLOAT_TYPES:
        return (
            f"(CASE WHEN isnan({value}) OR ({value} = 0 AND signbit({value})) "
            f"THEN {unsupported('a NaN or -0.0 float GROUP BY key')} ELSE {value} END)"
        )
    return value
