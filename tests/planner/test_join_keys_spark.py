"""Property: a window join's equalities, which Spark runs as join keys in another form of the
value (:mod:`streamctl.spark.join_predicate`: a UINT64 as its 64-bit pattern, a float NULL
when NaN), pair the same rows on Spark as on the reference engine (DuckDB,
``streamctl.reference``), which compares the values themselves by NebulaStream's rules.

The inputs are drawn from each type's edges: UINT64 at and around 2**63 (where the pattern
turns negative) and 2**64 - 1, NaN, both zeros and both infinities, INT32's bounds, the empty
string, NULL. The sources are Parquet files, which hold every such value exactly."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.spark_runs import Col, bound_plan, run_to_end
from streamctl.reference import run_reference
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import build

STREAM = [
    Col("ts", "UINT64", False),
    Col("u", "UINT64"),
    Col("f", "FLOAT64"),
    Col("i", "INT32"),
    Col("s", "VARSIZED"),
]
_RUNS = [0]

_rows = st.lists(
    st.tuples(
        st.integers(0, 1999),
        st.sampled_from([None, 0, 1, 2**63 - 1, 2**63, 2**64 - 1]),
        st.sampled_from([None, 0.0, -0.0, 1.5, math.nan, math.inf, -math.inf]),
        st.sampled_from([None, -(2**31), -1, 0, 2**31 - 1]),
        st.sampled_from([None, "", "x", "X"]),
    ),
    min_size=1,
    max_size=10,
)
_conjunct = st.sampled_from(
    [
        "a.u = b.u",
        "b.u = a.u",
        "a.u = b.u + UINT64(1)",
        "a.f = b.f",
        "a.i = b.i",
        "a.s = b.s",
        "a.u = a.u",  # one side only: no key
        "a.i > b.i",  # no equality: no key
    ]
)


def _read_parquet(spark: Any, directory: Path, rows: list[tuple[Any, ...]]) -> Any:
    schema = spark_schema(STREAM)
    typed = [
        tuple(
            Decimal(v) if c.type == "UINT64" and v is not None else v
            for c, v in zip(STREAM, row, strict=True)
        )
        for row in rows
    ]
    spark.createDataFrame(typed, schema).coalesce(1).write.parquet(str(directory))
    return spark.readStream.schema(schema).parquet(str(directory))


def _texts(rows: list[tuple[Any, ...]]) -> list[str]:
    """Rows compared by their text: NaN equals NaN and -0.0 differs from 0.0 there."""
    return sorted(repr(tuple(float(v) if isinstance(v, float) else v for v in row)) for row in rows)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(a=_rows, b=_rows, conjuncts=st.lists(_conjunct, min_size=1, max_size=2))
@example(  # the edges every run: NaN, both zeros, UINT64 patterns alike in their low bits
    a=[
        (1, 2**63, math.nan, 0, "x"),
        (2, 2**64 - 1, -0.0, 1, "y"),
        (3, 0, math.inf, 2, ""),
    ],
    b=[
        (4, 0, math.nan, 0, "x"),
        (5, 2**63 - 1, 0.0, 1, "y"),
        (6, 2**63, math.inf, 2, None),
        (7, 2**64 - 1, 0.0, 1, ""),
    ],
    conjuncts=["a.f = b.f"],
).via("the edges")
@example(
    a=[(1, 2**63, 0.0, 0, "x"), (2, 2**64 - 1, 0.0, 0, "x"), (3, 0, 0.0, 0, "x")],
    b=[(4, 0, 0.0, 0, "x"), (5, 2**63 - 1, 0.0, 0, "x"), (6, 2**64 - 1, 0.0, 0, "x")],
    conjuncts=["b.u = a.u"],
).via("the edges")
@example(
    a=[(1, 2**63, 0.0, 0, "x"), (2, 2**64 - 1, 0.0, 0, "x"), (3, 0, 0.0, 0, "x")],
    b=[(4, 0, 0.0, 0, "x"), (5, 2**63 - 1, 0.0, 0, "x"), (6, 2**64 - 1, 0.0, 0, "x")],
    conjuncts=["a.u = b.u + UINT64(1)"],
).via("the edges")
def test_join_equalities_pair_the_rows_the_reference_pairs(
    spark: Any, tmp_path: Path, a: Any, b: Any, conjuncts: list[str]
) -> None:
    _RUNS[0] += 1
    base = tmp_path / f"run{_RUNS[0]}"
    text = (
        "SELECT start, end, a.u AS au, b.u AS bu, a.f AS af, b.f AS bf, a.s AS a_s, b.s AS b_s "
        f"FROM a INNER JOIN b ON {' AND '.join(conjuncts)} "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
    )
    rows = {"a": a, "b": b}
    query_plan = bound_plan(text, {name: (STREAM, r) for name, r in rows.items()})
    expected = run_reference(query_plan, rows)
    translated = build(
        query_plan, spark, lambda name: _read_parquet(spark, base / name, rows[name]), bounded=True
    )
    actual = run_to_end(spark, translated, f"join_keys_{_RUNS[0]}", base / "checkpoint")
    assert _texts(actual) == _texts(expected), text
