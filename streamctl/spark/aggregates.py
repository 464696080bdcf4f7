"""NebulaStream's aggregate functions as Spark SQL over one window's and group's rows.

NebulaStream's NULL rules for aggregates differ from SQL's (``nes-docs/null_handling.md``):
``SUM``, ``AVG``, ``MIN``, ``MAX`` and ``MEDIAN`` are NULL as soon as one input row is NULL
(SQL skips NULLs); ``COUNT(x)`` skips NULLs and ``COUNT(*)`` counts rows. ``AVG`` keeps its sum
as NebulaStream does (integers wrapping in INT64 or UINT64, floats in a double).
"""

from __future__ import annotations

from streamctl.nes_types import INTEGER_TYPES, UNSIGNED_TYPES
from streamctl.planner import plan
from streamctl.spark import sql_text as S
from streamctl.spark.expression_columns import TWO_TO_64, expression, to_long_bits
from streamctl.spark.sql_text import Sql

__all__ = ["nes_aggregate"]


def nes_aggregate(aggregate: plan.Aggregate) -> Sql:
    """One aggregate over a group's rows, with NebulaStream's NULL rules (module docstring):
    ``COUNT(x)`` skips NULLs (Spark's too); every other aggregate is NULL as soon as one of its
    inputs is NULL, where Spark's would skip them."""
    if aggregate.argument is None:
        return S.call("count", 1)
    argument = expression(aggregate.argument)
    function = aggregate.function
    if function == "count":
        return S.call("count", argument)
    value: Sql
    if function in ("min", "max", "sum"):
        value = S.call(function, argument)
    elif function == "avg":
        value = _average(argument, aggregate.argument.type)
    else:
        value = S.call("median", argument.cast("DOUBLE"))
    # Checked whatever the argument's declared nullability: a NOT NULL input has no NULLs, and
    # the check costs one more count per group.
    no_null_input = S.call("count", 1) == S.call("count", argument)
    return S.when(no_null_input, value)


def _average(argument: Sql, type_name: str) -> Sql:
    """AVG as NebulaStream computes it: a sum and a count, the sum of integers kept in INT64
    (signed input) or UINT64 (unsigned), wrapping like C++, of floats in a double; the result is
    the sum as a double divided by the count."""
    if type_name in UNSIGNED_TYPES:
        total = S.call("pmod", S.call("sum", argument.cast("DECIMAL(20,0)")), TWO_TO_64)
    elif type_name in INTEGER_TYPES:
        total = S.call("sum", to_long_bits(argument, type_name))
    else:
        total = S.call("sum", argument.cast("DOUBLE"))
    return total.cast("DOUBLE") / S.call("count", argument).cast("DOUBLE")
