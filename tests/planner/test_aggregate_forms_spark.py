"""Aggregations with expressions inside and around the aggregate functions, projections over a
window's output, and WINDOW clauses without aggregate functions, on local Spark.

Expected rows are derived by hand from the rules: an aggregate's argument is any expression
evaluated per row (``query_api.md``, "Functions": functions compose); an expression around
aggregates is computed per output row from the aggregates' values with NebulaStream's C++ typing
(``INT32 / UINT64`` is ``UINT64`` division); START/END are UINT64 milliseconds; a WINDOW without
aggregate functions groups the rows by window and GROUP BY keys and outputs one row per
non-empty window and key (NebulaStream's SQL front end builds a window aggregation without
aggregation functions for it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.spark_runs import Col
from planner.test_null_semantics_spark import Rows, close, run_batch, run_stream
from streamctl.error_codes import INVALID_STATEMENT, TYPE_MISMATCH
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.reference import run_reference

SOURCE = [Col("ts", "UINT64", False), Col("id", "INT32"), Col("a", "INT32"), Col("b", "INT32")]
ROWS: Rows = [
    (100, 1, 1, 10),
    (200, 1, 2, 20),
    (300, 2, 6, 30),
    (1500, 2, 5, 1),
]


def _sources(rows: Rows = ROWS) -> dict[str, tuple[list[Col], Rows]]:
    return {"s": (SOURCE, rows)}


@pytest.mark.spark
def test_expressions_inside_and_around_aggregates(spark: Any, tmp_path: Path) -> None:
    result = run_batch(
        spark,
        "SELECT start, SUM(a * INT32(2)) AS twice, SUM(a) + INT32(1) AS plus, "
        "SUM(a) / COUNT(a) AS mean, MAX(a) - MIN(a) AS spread, AVG(a + b) AS avg_ab, "
        "COUNT(a) + UINT64(1) AS c1, SUM(a) * SUM(b) AS product "
        "FROM s WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        _sources(),
        tmp_path,
    )
    # [0, 1000): a = 1, 2, 6 and b = 10, 20, 30; [1000, 2000): a = 5, b = 1.
    assert close(
        result,
        [
            (0, 18, 10, 3, 5, (11 + 22 + 36) / 3, 4, 9 * 60),
            (1000, 10, 6, 5, 0, 6.0, 2, 5),
        ],
    )


@pytest.mark.spark
def test_one_aggregate_written_several_times(spark: Any, tmp_path: Path) -> None:
    result = run_batch(
        spark,
        "SELECT SUM(a) AS x, SUM(a) AS y, SUM(a) + SUM(a) AS z, SUM(a) FROM s "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        _sources(),
        tmp_path,
    )
    assert result == [(5, 5, 10, 5), (9, 9, 18, 9)]


@pytest.mark.spark
def test_unnamed_expressions_around_aggregates(spark: Any, tmp_path: Path) -> None:
    result = run_batch(
        spark,
        "SELECT SUM(a) + INT32(1), MEDIAN(a) * FLOAT64(2) FROM s "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        _sources(),
        tmp_path,
    )
    assert result == [(6, 10.0), (10, 4.0)]


@pytest.mark.spark
def test_projections_over_window_output(spark: Any, tmp_path: Path) -> None:
    result = run_batch(
        spark,
        "SELECT end - start AS length, id, start + UINT64(1) AS after_start, "
        "COUNT(*) AS n FROM s GROUP BY id WINDOW SLIDING(ts, SIZE 1 SEC, ADVANCE BY 500 MS) "
        "INTO File()",
        _sources(),
        tmp_path,
    )
    # id 1 (ts 100, 200) is in the windows starting at 0; id 2 (ts 300, 1500) in those starting
    # at 0 (ts 300), 1000 and 1500 (ts 1500).
    assert result == [(1000, 1, 1, 2), (1000, 2, 1, 1), (1000, 2, 1001, 1), (1000, 2, 1501, 1)]
    star = run_batch(
        spark,
        "SELECT * FROM s GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        _sources(),
        tmp_path / "star",
    )
    assert star == [(0, 1000, 1), (0, 1000, 2), (1000, 2000, 2)]


@pytest.mark.spark
def test_a_query_over_a_window_output(spark: Any, tmp_path: Path) -> None:
    result = run_stream(
        spark,
        "SELECT total * INT32(10) AS t10, start FROM (SELECT start, SUM(a) AS total FROM s "
        "WINDOW TUMBLING(ts, SIZE 1 SEC)) WHERE total > INT32(5) INTO File()",
        _sources(),
        tmp_path,
    )
    assert result == [(90, 0)]


@pytest.mark.spark
def test_window_without_aggregates_gives_one_row_per_window_and_key(
    spark: Any, tmp_path: Path
) -> None:
    rows = [*ROWS, (1600, None, 3, 3), (1700, None, 4, 4), (5100, 1, 0, 0)]
    result = run_stream(
        spark,
        "SELECT start, end, id FROM s GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        _sources(rows),
        tmp_path,
    )
    assert result == [
        (0, 1000, 1),
        (0, 1000, 2),
        (1000, 2000, None),
        (1000, 2000, 2),
        (5000, 6000, 1),
    ]


@pytest.mark.spark
def test_window_without_aggregates_or_keys_gives_the_non_empty_windows(
    spark: Any, tmp_path: Path
) -> None:
    result = run_batch(
        spark,
        "SELECT * FROM s WINDOW SLIDING(ts, SIZE 1 SEC, ADVANCE BY 500 MS) "
        "HAVING start > UINT64(0) INTO File()",
        _sources(),
        tmp_path,
    )
    assert result == [(1000, 2000), (1500, 2500)]


@pytest.mark.quick
def test_window_without_aggregates_offers_only_bounds_and_keys() -> None:
    lookup = MemoryCatalog({"s": SOURCE})
    with pytest.raises(PlannerError) as error:
        bind_query(
            parse_query(
                "SELECT id, a FROM s GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
            ),
            lookup,
        )
    assert error.value.code == INVALID_STATEMENT
    assert "'A'" in error.value.message and "GROUP BY key" in error.value.message


@pytest.mark.spark
def test_avg_of_integers_divides_a_64_bit_sum(spark: Any, tmp_path: Path) -> None:
    # NebulaStream's AVG keeps a sum and a count: integer sums in INT64 (signed input) or UINT64
    # (unsigned), with C++'s wrap-around (query_api.md, "Data Types": C++ arithmetic), then
    # sum / count in double. So precision is the exact sum's, and an overflowing sum wraps.
    big = 2**53 + 1
    columns = [Col("ts", "UINT64", False), Col("i", "INT64"), Col("u", "UINT64")]
    rows: Rows = [
        (1, big, 2**63),
        (2, big, 2**63),
        (3, big, 5),
        (1001, 2**62, 1),
        (1002, 2**62, 2),
    ]
    result = run_batch(
        spark,
        "SELECT start, AVG(i) AS ai, AVG(u) AS au FROM s WINDOW TUMBLING(ts, SIZE 1 SEC) "
        "INTO File()",
        {"s": (columns, rows)},
        tmp_path,
    )

    def wrap(value: int, bits: int, signed: bool) -> int:
        value %= 2**bits
        return value - 2**bits if signed and value >= 2**63 else value

    assert result == [
        (0, float(wrap(3 * big, 64, True)) / 3, float(wrap(2**64 + 5, 64, False)) / 3),
        (1000, float(wrap(2**63, 64, True)) / 2, 3 / 2),
    ]
    assert result[1][1] == -(2.0**62)


@pytest.mark.spark
def test_unnamed_aggregates_over_expressions_get_distinct_names(spark: Any, tmp_path: Path) -> None:
    # NebulaStream projects each aggregate's expression argument into a field _AGG_INPUT_<n>
    # (n counts them in the select list) and names the unnamed aggregate <field>_<FUNCTION>.
    text = (
        "SELECT SUM(a * INT32(2)), MAX(a), MAX(a + b), COUNT(*) FROM s "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
    )
    bound = bind_query(parse_query(text), MemoryCatalog({"s": SOURCE}))
    assert [c.name for c in bound.output_schema] == [
        "_AGG_INPUT_0_SUM",
        "S$A_MAX",
        "_AGG_INPUT_1_MAX",
        "S$COUNT",
    ]
    assert run_batch(spark, text, _sources(), tmp_path) == [(10, 5, 6, 1), (18, 6, 36, 3)]


HAVING_QUERY = (
    "SELECT id, MAX(a) AS top FROM s GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) "
    "HAVING MAX(a) > INT32(1) AND COUNT(*) >= UINT64(2) INTO File()"
)


@pytest.mark.spark
def test_having_uses_aggregates_shown_or_not(spark: Any, tmp_path: Path) -> None:
    """query_api.md: ``HAVING MAX(price) > FLOAT64(100.0) AND COUNT(*) >= UINT64(10)`` filters
    the aggregated rows; COUNT(*) is not in the select list and is not output."""
    # [0, 1000): id 1 has a = 1, 2 (max 2, two rows): kept; id 2 has one row: dropped.
    # [1000, 2000): id 2 has one row: dropped.
    expected = [(1, 2)]
    assert run_stream(spark, HAVING_QUERY, _sources(), tmp_path) == expected
    query_plan = bind_query(parse_query(HAVING_QUERY), MemoryCatalog({"s": SOURCE})).plan
    assert [f.name for f in query_plan.output] == ["S$ID", "S$TOP"]
    assert run_reference(query_plan, {"s": ROWS}) == expected


@pytest.mark.quick
def test_having_refuses_what_is_no_condition() -> None:
    for having, code in (("SUM(a)", TYPE_MISMATCH), ("MAX(SUM(a)) > 1", INVALID_STATEMENT)):
        with pytest.raises(PlannerError) as refused:
            bind_query(
                parse_query(
                    f"SELECT SUM(a) AS t FROM s WINDOW TUMBLING(ts, SIZE 1 SEC) HAVING {having} "
                    "INTO File()"
                ),
                MemoryCatalog({"s": SOURCE}),
            )
        assert refused.value.code == code
