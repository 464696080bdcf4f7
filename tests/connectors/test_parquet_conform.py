"""Parquet input's checks (:func:`streamctl.spark.tuples.conform`) mean the same under the
planner's settings as under the session's own.

A Parquet source's columns arrive in their Spark carriers (``UINT8`` as a ``SMALLINT``,
``UINT64`` as a ``DECIMAL(20,0)``, ...), which hold values outside the NES type; ``conform``
fails the query on such a value and on a NULL in a NOT NULL column, and passes every other
value on. The agent analyses it with the query's operators, under
:data:`~streamctl.spark.translate.SPARK_CONF` (ANSI off), where a source read alone is analysed
under the session's settings (Spark 4: ANSI on); the property compares both over generated
columns and values, the carriers' extremes included.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

import pytest
from connector_helpers import ANSI_ON, failure_message, same_outcome, spark_examples
from hypothesis import given
from hypothesis import strategies as st

from streamctl.nes_types import integer_range
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.specs import SourceSpec
from streamctl.spark.translate import SPARK_CONF, spark_conf
from streamctl.spark.tuples import conform

pytestmark = pytest.mark.spark

_CARRIER_RANGES: Final = {
    # the Spark carrier's own range (streamctl.spark.spark_types): what a Parquet column read with
    # the source's schema can hold
    "INT8": (-(2**7), 2**7 - 1),
    "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1),
    "INT64": (-(2**63), 2**63 - 1),
    "UINT8": (-(2**15), 2**15 - 1),
    "UINT16": (-(2**31), 2**31 - 1),
    "UINT32": (-(2**63), 2**63 - 1),
    "UINT64": (-(10**20) + 1, 10**20 - 1),
}
TYPES: Final = (*_CARRIER_RANGES, "FLOAT32", "FLOAT64", "BOOLEAN", "VARSIZED")


def _values(nes_type: str, valid: bool) -> st.SearchStrategy[Any]:
    """Values of a column's carrier; ``valid``: only those of the NES type."""
    if nes_type in _CARRIER_RANGES:
        low, high = _CARRIER_RANGES[nes_type]
        nes_low, nes_high = integer_range(nes_type)
        if valid:
            low, high = nes_low, nes_high
        edges = {low, high, nes_low, nes_high, nes_low - 1, nes_high + 1, 0, -1, 127, 128}
        picks = st.sampled_from(sorted(v for v in edges if low <= v <= high))
        numbers = st.one_of(picks, st.integers(low, high))
        return numbers.map(Decimal) if nes_type == "UINT64" else numbers
    if nes_type == "FLOAT32":
        return st.floats(width=32)
    if nes_type == "FLOAT64":
        return st.floats()
    if nes_type == "BOOLEAN":
        return st.booleans()
    return st.text(max_size=8)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """A column of every type in any order, each nullable or not, and rows in their carriers:
    each row either valid (values of the NES types, NULLs only where allowed) or anything
    (NULLs in NOT NULL columns, values outside the type)."""
    types = draw(st.permutations(TYPES))
    schema = [
        {"name": f"c{index}", "type": type_, "nullable": draw(st.booleans())}
        for index, type_ in enumerate(types)
    ]

    @st.composite
    def rows(draw: st.DrawFn) -> tuple[Any, ...]:
        valid = draw(st.booleans())
        values = []
        for column in schema:
            null_allowed = column["nullable"] or not valid
            if null_allowed and draw(st.integers(0, 5)) == 0:
                values.append(None)
            else:
                values.append(draw(_values(column["type"], valid)))
        return tuple(values)

    return schema, draw(st.lists(rows(), min_size=1, max_size=6))


def _outcome(spark: Any, spec: SourceSpec, rows: list[tuple[Any, ...]]) -> list[Any] | str:
    frame = spark.createDataFrame(rows, spark_schema({**c, "nullable": True} for c in spec.schema))
    try:
        return [tuple(row) for row in conform(frame, spec).frame().collect()]
    except Exception as error:  # a value the column cannot take fails the query: its message
        return failure_message(error)


@spark_examples(10)
@given(table=tables())
def test_conform_means_the_same_under_the_planners_settings(spark: Any, table: Any) -> None:
    """Each row alone gives the same row, or the same failure, under both settings; all rows in
    one query give the same rows, or under both a failure of one of its failing rows (Spark
    reports whichever task fails first)."""
    schema, rows = table
    spec = SourceSpec(1, "FILE", {"file_path": "in", "format": "PARQUET"}, schema)
    batches = [rows, *([row] for row in rows)]
    with spark_conf(spark, ANSI_ON):
        default = [_outcome(spark, spec, batch) for batch in batches]
    with spark_conf(spark, SPARK_CONF):
        planned = [_outcome(spark, spec, batch) for batch in batches]
    for row, a, b in zip(rows, default[1:], planned[1:], strict=True):
        assert same_outcome(a, b), (schema, row, a, b)
    failures = {outcome for outcome in default[1:] if isinstance(outcome, str)}
    if isinstance(default[0], str) or isinstance(planned[0], str):
        assert {default[0], planned[0]} <= failures, (schema, rows, default[0], planned[0])
    else:
        assert same_outcome(default[0], planned[0]), (schema, rows, default[0], planned[0])
    for row, outcome in zip(rows, default[1:], strict=True):  # the checks themselves
        refused = [
            column["name"]
            for value, column in zip(row, schema, strict=True)
            if (value is None and not column["nullable"])
            or (
                value is not None
                and column["type"] in _CARRIER_RANGES
                and not _within(int(value), column["type"])
            )
        ]
        if refused:
            assert isinstance(outcome, str), (schema, row, refused, outcome)
        else:
            assert same_outcome(outcome, [row]), (schema, row, outcome)


def _within(value: int, nes_type: str) -> bool:
    low, high = integer_range(nes_type)
    return low <= value <= high
