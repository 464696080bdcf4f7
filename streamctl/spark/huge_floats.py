"""The digits of integer-valued doubles at or above ``2**63``, in Python, for
:mod:`streamctl.spark.float_text` (a module of its own: Spark reads this function's pandas type
hints, so pandas is imported here, and only where a sink formats floats).

Spark has no exact arithmetic that wide without higher-order functions, and those cost every
row (~0.5 s per 2M rows) even in a branch that is never taken; this vectorised (Arrow)
function gets NULL for every value below ``2**63``, which costs next to nothing.
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]


def huge_integer_digits(values: pd.Series) -> pd.Series:
    """``str(int(v))`` of each non-null value (integer-valued doubles: exact), NULL elsewhere."""
    present = values.notna()
    digits = pd.Series([None] * len(values), index=values.index, dtype=object)
    digits[present] = [str(int(value)) for value in values[present]]
    return digits
