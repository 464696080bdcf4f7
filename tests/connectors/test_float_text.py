"""The native float text of sinks (:func:`streamctl.spark.float_text.with_float_texts`, by the
jar's Java UDF and by the Spark expressions of sessions without it) equals
NES's formatter, C's ``printf("%.6f")`` with trailing zeros dropped down to one
(:func:`streamctl.nes_text.format_float`, Python's correctly rounded formatting), for every
double and float: random bit patterns, values next to the six-decimal rounding ties, exact
dyadic ties (``0.0078125``), huge integers whose shortest decimal form differs from their
exact digits (``1e23``), subnormals, signed zeros, NaN and infinities. And its plan stays
small: every step is computed once per row, whatever the number of float columns.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.nes_text import format_float
from streamctl.spark import float_text
from streamctl.spark import sql_text as S
from streamctl.spark.float_text import with_float_texts


@pytest.fixture(params=["jar", "expressions"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which float text the sink plans: without the jar's function, Spark expressions."""
    if request.param == "expressions":
        monkeypatch.setattr(float_text, "float_text_function", lambda _: None)
    return str(request.param)


EDGES = [
    0.0, -0.0, 1.0, -1.0, 0.5, 153.0, 0.0078125, -0.0078125, 2.5e-7, 5e-7, -5e-7, 1e-9, -1e-9,
    0.1234565, 2.675, 0.9999995, 1.0000005, -0.9999995, 123456.7890125, 2.0**33 + 0.5,
    1e15 + 0.125, 2.0**53, 2.0**53 + 2, 2.0**63 - 1024, 2.0**63, 2.0**64, 1e23, -1e23, 5e-324,
    1.7976931348623157e308, -1.7976931348623157e308, math.nan, math.inf, -math.inf,
]  # fmt: skip


def _bits_to_double(bits: int) -> float:
    double: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return double


near_ties = st.builds(
    lambda k, nudge: (k + 0.5) / 1e6 * nudge,
    st.integers(-(10**12), 10**12),
    st.sampled_from([1.0, 1 + 2**-52, 1 - 2**-53]),
)
doubles = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(0, 2**64 - 1).map(_bits_to_double),
    near_ties,
    st.builds(math.ldexp, st.integers(0, 2**53), st.integers(-1074, 971)),
)


def _texts(spark: Any, values: list[float], spark_type: str) -> list[str | None]:
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i int, v {spark_type}")
    texts, names = with_float_texts(S.Relation(frame), ["v"], "t#")
    rows = texts.frame().select("i", names[0]).collect()
    return [row[1] for row in sorted(rows, key=lambda row: row.i)]


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(doubles, min_size=1, max_size=300))
def test_native_float_text_equals_the_nes_formatter_for_doubles(
    spark: Any, way: str, values: list[float]
) -> None:
    values = EDGES + values
    assert _texts(spark, values, "double") == [format_float(v) for v in values]


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.floats(width=32), min_size=1, max_size=300))
def test_native_float_text_equals_the_nes_formatter_for_floats(
    spark: Any, way: str, values: list[float]
) -> None:
    values = [struct.unpack("<f", struct.pack("<f", v))[0] for v in EDGES[:-6]] + values
    assert _texts(spark, values, "float") == [format_float(v) for v in values]


def test_null_stays_null(spark: Any, way: str) -> None:
    assert _texts(spark, [None], "double") == [None]  # type: ignore[list-item]


def test_many_float_columns_keep_a_small_plan(spark: Any, way: str) -> None:
    count = 40
    frame = spark.createDataFrame(
        [tuple(float(i) + 0.25 * c for c in range(count)) for i in range(3)],
        ", ".join(f"c{c} double" for c in range(count)),
    )
    relation, names = with_float_texts(S.Relation(frame), frame.columns, "t#")
    texts = relation.frame()
    # the optimized plan has a bounded size per column (no subexpression copied around)
    plan = texts.select(*names)._jdf.queryExecution().optimizedPlan().toString()
    assert len(plan) < 12_000 * count, len(plan)
    rows = texts.select(*names).collect()
    assert [list(row) for row in rows] == [
        [format_float(float(i) + 0.25 * c) for c in range(count)] for i in range(3)
    ]
