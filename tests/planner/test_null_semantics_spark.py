"""NULL in windowed aggregates on local Spark, checked against NebulaStream's documented rules.

Every expected row here is derived from ``nes-docs/null_handling.md`` ("Aggregation Functions",
"GROUP BY with NULL Keys", "Filter (WHERE)", "Map (Expressions)"), never copied from an engine's
output:

* SUM, AVG, MIN, MAX, MEDIAN: if any input value of the window (and group) is NULL, the result
  is NULL; otherwise the usual value;
* COUNT(x) skips NULL values and is a NOT NULL UINT64; COUNT(*) counts every row;
* NULL keys form one group of their own;
* a predicate (WHERE, HAVING) that is NULL drops the row; arithmetic with a NULL operand is NULL;
* only non-empty windows are emitted (a window is made by its rows).

The harness (``run_batch``, ``run_stream``, ``Col``) is shared with
``test_aggregate_forms_spark.py``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.spark_runs import Col, bound_plan, plain, run_to_end
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import build

pytestmark = pytest.mark.spark


Rows = list[tuple[Any, ...]]
Sources = dict[str, tuple[list[Col], Rows]]


def _spark_row(row: Sequence[Any], columns: Sequence[Col]) -> tuple[Any, ...]:
    return tuple(
        Decimal(v) if c.type == "UINT64" and v is not None else v
        for v, c in zip(row, columns, strict=True)
    )


def run_batch(spark: Any, text: str, sources: Sources, tmp_path: Path) -> Rows:
    """The query's rows over in-memory batch frames (windows are computed on the whole input),
    sorted with NULLs first."""
    query_plan = bound_plan(text, sources)

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        return spark.createDataFrame([_spark_row(r, columns) for r in rows], spark_schema(columns))

    translated = build(query_plan, spark, read_source, bounded=False)
    rows = [tuple(plain(v) for v in row) for row in translated.dataframe.collect()]
    return sorted(rows, key=_sort_key)


def run_stream(spark: Any, text: str, sources: Sources, tmp_path: Path) -> Rows:
    """The query's rows as a bounded stream of CSV files (an empty field is NULL, as NebulaStream
    reads CSV), run to the end with ``availableNow``; sorted with NULLs first."""
    query_plan = bound_plan(text, sources)

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        directory = tmp_path / "sources" / name
        directory.mkdir(parents=True, exist_ok=True)
        lines = (",".join("" if v is None else str(v) for v in row) for row in rows)
        (directory / "part.csv").write_text("".join(line + "\n" for line in lines))
        return spark.readStream.schema(spark_schema(columns)).csv(str(directory))

    translated = build(query_plan, spark, read_source, bounded=True)
    name = f"h8_{abs(hash((text, str(tmp_path)))) % 10**9}"
    rows = run_to_end(spark, translated, name, tmp_path / "checkpoint")
    return sorted(rows, key=_sort_key)


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    return tuple((v is not None, v if v is not None else 0) for v in row)


def close(actual: Rows, expected: Rows) -> bool:
    """Rows equal, floats up to rounding."""
    if len(actual) != len(expected):
        return False
    for got, want in zip(actual, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            if isinstance(b, float) and a is not None:
                if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12):
                    return False
            elif a != b:
                return False
    return True


# ---- the documented examples -------------------------------------------------------------


def test_any_null_input_makes_sum_avg_min_max_median_null(spark: Any, tmp_path: Path) -> None:
    # null_handling.md, "SUM, AVG, MIN, MAX, MEDIAN": [0, 100) holds 0, 3, 1; [100, 200) holds
    # 2 and NULL, so every one of them is NULL there. COUNT(value) skips the NULL, COUNT(*) not.
    source = [Col("ts", "UINT64", False), Col("value", "INT32")]
    rows: Rows = [(0, 0), (20, 3), (50, 1), (100, 2), (150, None)]
    result = run_stream(
        spark,
        "SELECT start, end, SUM(value) AS s, MAX(value) AS mx, MIN(value) AS mn, "
        "AVG(value) AS av, MEDIAN(value) AS md, COUNT(value) AS c, COUNT(*) AS n "
        "FROM stream WINDOW TUMBLING(ts, SIZE 100 MS) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert close(
        result,
        [
            (0, 100, 4, 3, 0, 4 / 3, 1.0, 3, 3),
            (100, 200, None, None, None, None, None, 1, 2),
        ],
    )


def test_count_skips_nulls_and_null_keys_form_their_own_group(spark: Any, tmp_path: Path) -> None:
    # null_handling.md, "COUNT" and "GROUP BY with NULL Keys".
    source = [Col("ts", "UINT64", False), Col("id", "INT32"), Col("value", "INT32")]
    rows: Rows = [(0, None, None), (10, None, 1), (20, 1, 2), (30, 1, 3), (40, 3, None)]
    result = run_batch(
        spark,
        "SELECT id, SUM(value) AS s, COUNT(value) AS c, COUNT(ts) AS n FROM stream "
        "GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert result == [(None, None, 1, 2), (1, 5, 2, 2), (3, None, 0, 1)]


def test_all_null_window(spark: Any, tmp_path: Path) -> None:
    source = [Col("ts", "UINT64", False), Col("value", "FLOAT64"), Col("t", "VARSIZED")]
    rows: Rows = [(5, None, None), (7, None, None), (1005, 1.5, "b"), (1006, 0.5, "a")]
    result = run_batch(
        spark,
        "SELECT start, SUM(value) AS s, AVG(value) AS a, MIN(t) AS lo, MAX(t) AS hi, "
        "MEDIAN(value) AS md, COUNT(value) AS c, COUNT(*) AS n FROM stream "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert result == [
        (0, None, None, None, None, None, 0, 2),
        (1000, 2.0, 1.0, "a", "b", 1.0, 2, 2),
    ]


def test_text_min_max_are_null_when_any_text_is_null(spark: Any, tmp_path: Path) -> None:
    source = [Col("ts", "UINT64", False), Col("t", "VARSIZED")]
    rows: Rows = [(1, "x"), (2, None), (3, "a"), (1001, "m"), (1002, "c")]
    result = run_stream(
        spark,
        "SELECT start, MIN(t) AS lo, MAX(t) AS hi, COUNT(t) AS c FROM stream "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert result == [(0, None, None, 2), (1000, "c", "m", 2)]


def test_filtering_nulls_first_aggregates_the_rest(spark: Any, tmp_path: Path) -> None:
    # null_handling.md: "To aggregate only over non-null values, pre-filter with NOT ISNULL()".
    source = [Col("ts", "UINT64", False), Col("value", "INT64")]
    rows: Rows = [(0, 0), (20, 3), (50, 1), (100, 2), (150, None), (260, None)]
    result = run_batch(
        spark,
        "SELECT start, SUM(value) AS s, MIN(value) AS m FROM stream WHERE NOT ISNULL(value) "
        "WINDOW TUMBLING(ts, SIZE 100 MS) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    # [200, 300) holds only a NULL: filtered away, the window is empty and not emitted.
    assert result == [(0, 4, 0), (100, 2, 2)]


def test_null_inside_and_around_aggregates_propagates(spark: Any, tmp_path: Path) -> None:
    # "Map": an arithmetic expression with a NULL operand is NULL, so SUM(a + b) sees a NULL
    # input in [0, 1000); SUM(a) + 1 is NULL where SUM(a) is; COUNT(a + b) skips the NULL sum.
    source = [Col("ts", "UINT64", False), Col("a", "INT32"), Col("b", "INT32")]
    rows: Rows = [(1, 1, 10), (2, 2, None), (1001, None, 5), (1002, 4, 6), (2001, 7, 1)]
    result = run_batch(
        spark,
        "SELECT start, SUM(a + b) AS ab, SUM(a) + INT32(1) AS a1, COUNT(a + b) AS c "
        "FROM stream WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert result == [(0, None, 4, 1), (1000, None, None, 1), (2000, 8, 8, 1)]


def test_having_on_a_null_aggregate_drops_the_row(spark: Any, tmp_path: Path) -> None:
    # "Filter (WHERE)": a predicate that evaluates to NULL is FALSE; HAVING is a filter.
    source = [Col("ts", "UINT64", False), Col("value", "INT32")]
    rows: Rows = [(1, 5), (2, None), (1001, 5), (2001, -1)]
    kept = run_batch(
        spark,
        "SELECT start, SUM(value) AS s FROM stream WINDOW TUMBLING(ts, SIZE 1 SEC) "
        "HAVING s > INT32(0) INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    assert kept == [(1000, 5)]
    nulls = run_batch(
        spark,
        "SELECT start, SUM(value) AS s FROM stream WINDOW TUMBLING(ts, SIZE 1 SEC) "
        "HAVING ISNULL(s) INTO File()",
        {"stream": (source, rows)},
        tmp_path / "2",
    )
    assert nulls == [(0, None)]


def test_output_nullability_follows_the_summary_table() -> None:
    # null_handling.md, "Summary": COUNT is always NOT NULL; SUM/AVG/MIN/MAX/MEDIAN are nullable
    # exactly when their input is; GROUP BY keys keep theirs; window bounds are NOT NULL.
    lookup = MemoryCatalog(
        {
            "s": [
                Col("ts", "UINT64", False),
                Col("k", "INT32"),
                Col("a", "INT32"),
                Col("b", "INT32", False),
            ]
        }
    )
    bound = bind_query(
        parse_query(
            "SELECT start, k, COUNT(a) AS ca, COUNT(*) AS n, SUM(a) AS sa, SUM(b) AS sb, "
            "AVG(b) AS ab, MEDIAN(a) AS ma, MIN(b * INT32(2)) AS mb, SUM(b) + COUNT(a) AS mix "
            "FROM s GROUP BY k WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
        ),
        lookup,
    )
    nullable = {c.name.split("$")[-1]: c.nullable for c in bound.output_schema}
    assert nullable == {
        "START": False,
        "K": True,
        "CA": False,
        "N": False,
        "SA": True,
        "SB": False,
        "AB": False,
        "MA": True,
        "MB": False,
        "MIX": False,
    }


# ---- a property: every window and group, against the rules written out ---------------------


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def _expected(rows: Rows, size: int, slide: int) -> Rows:
    groups: dict[tuple[int, Any], list[Any]] = defaultdict(list)
    for ts, key, value in rows:
        first = max(0, (ts - size) // slide + 1)
        for index in range(first, ts // slide + 1):
            start = index * slide
            if start <= ts < start + size:
                groups[(start, key)].append(value)
    result: Rows = []
    for (start, key), values in groups.items():
        present = [v for v in values if v is not None]
        any_null = len(present) < len(values)
        result.append(
            (
                start,
                start + size,
                key,
                None if any_null else sum(present),
                None if any_null else min(present),
                None if any_null else max(present),
                None if any_null else sum(present) / len(present),
                None if any_null else _median(present),
                len(present),
                len(values),
            )
        )
    return sorted(result, key=_sort_key)


_ROWS = st.lists(
    st.tuples(
        st.integers(0, 450),
        st.sampled_from([None, 1, 2]),
        st.one_of(st.none(), st.integers(-50, 50)),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=_ROWS, window=st.sampled_from([(100, 100), (200, 100), (150, 50)]))
def test_windowed_aggregates_follow_the_null_rules(
    spark: Any, tmp_path: Path, rows: Rows, window: tuple[int, int]
) -> None:
    size, slide = window
    clause = (
        f"TUMBLING(ts, SIZE {size} MS)"
        if size == slide
        else f"SLIDING(ts, SIZE {size} MS, ADVANCE BY {slide} MS)"
    )
    source = [Col("ts", "UINT64", False), Col("k", "INT32"), Col("v", "INT32")]
    result = run_batch(
        spark,
        "SELECT start, end, k, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, AVG(v) AS a, "
        "MEDIAN(v) AS md, COUNT(v) AS c, COUNT(*) AS n FROM stream GROUP BY k "
        f"WINDOW {clause} INTO File()",
        {"stream": (source, rows)},
        tmp_path,
    )
    expected = _expected(rows, size, slide)
    assert close(result, expected), (result, expected)
