"""The reference engine (streamctl/reference) on DuckDB: expectations derived by hand from the
NES documentation (nes-docs/null_handling.md, query_api.md), and a property test against a
plain-Python evaluation of windowed aggregations. Light: DuckDB only, no Spark."""

from __future__ import annotations

import ast
import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamctl.reference as reference_package
from streamctl.nes_types import integer_range
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.reference import NesQueryFailure, ReferenceUnsupported, run_reference, to_sql
from streamctl.reference.nes_semantics import RULES

pytestmark = pytest.mark.quick


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    nullable: bool = True


STREAM = [Col("ts", "UINT64", False), Col("id", "INT32"), Col("value", "INT32")]
OTHER = [Col("ts", "UINT64", False), Col("id2", "INT32"), Col("value2", "INT32")]


def _bind(text: str, **sources: list[Col]) -> plan.QueryPlan:
    catalog = MemoryCatalog(sources or {"stream": STREAM, "other": OTHER})
    return bind_query(parse_query(text), catalog).plan


def _run(text: str, rows: dict[str, Any], **sources: list[Col]) -> list[Any]:
    return run_reference(_bind(text, **sources), rows)


def _with_window(node: plan.Operator, window: plan.Window) -> Any:
    """``node`` with every window replaced (the binder refuses gapped sliding windows today;
    the reference takes any plan)."""
    if isinstance(node, plan.Scan | plan.InlineScan):
        return node
    if isinstance(node, plan.Union):
        return dataclasses.replace(
            node, left=_with_window(node.left, window), right=_with_window(node.right, window)
        )
    if isinstance(node, plan.WindowJoin):
        return dataclasses.replace(
            node,
            left=_with_window(node.left, window),
            right=_with_window(node.right, window),
            window=window,
        )
    if isinstance(node, plan.WindowAggregate):
        return dataclasses.replace(node, input=_with_window(node.input, window), window=window)
    return dataclasses.replace(node, input=_with_window(node.input, window))


def _windowed(query_plan: plan.QueryPlan, size: int, advance: int) -> plan.QueryPlan:
    kind: plan.WindowKind = "tumbling" if size == advance else "sliding"
    return plan.QueryPlan(_with_window(query_plan.root, plan.Window(kind, size, advance)))


# ---- windowed aggregates with NULLs (null_handling.md, "Aggregation Functions") -------------


def test_sum_max_min_avg_median_are_null_over_a_window_holding_a_null() -> None:
    # null_handling.md: "If any input value is NULL, the aggregation result is NULL."
    # Window [0, 100) holds 0, 3, 1; window [100, 200) holds 2 and NULL.
    rows = {"stream": [(0, 1, 0), (20, 1, 3), (50, 1, 1), (100, 1, 2), (150, 1, None)]}
    result = _run(
        "SELECT start, end, SUM(value), MAX(value), MIN(value), AVG(value), MEDIAN(value) "
        "FROM stream WINDOW TUMBLING(ts, SIZE 100 MS) INTO File()",
        rows,
    )
    assert result == [
        (0, 100, 4, 3, 0, pytest.approx(4 / 3), 1.0),
        (100, 200, None, None, None, None, None),
    ]


def test_count_of_a_field_skips_nulls_and_count_of_a_not_null_field_counts_rows() -> None:
    # null_handling.md, COUNT: "COUNT(field) skips NULL values and always returns a NOT NULL
    # UINT64"; COUNT(ts) counts all rows because ts is NOT NULL.
    rows = {"stream": [(0, None, None), (10, None, 1), (20, 1, 2), (30, 1, 3)]}
    query_plan = _bind(
        "SELECT id, COUNT(value) AS valueCount, COUNT(ts) AS rowCount FROM stream "
        "GROUP BY id WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
    )
    assert [(f.type, f.nullable) for f in query_plan.output[1:]] == [("UINT64", False)] * 2
    assert sorted(run_reference(query_plan, rows), key=repr) == sorted(
        [(None, 1, 2), (1, 2, 2)], key=repr
    )


def test_null_group_keys_form_one_group() -> None:
    # null_handling.md, GROUP BY with NULL Keys: "all rows with a NULL key are aggregated
    # together". Expected rows derived from the rules for the documented input (the doc's table
    # gives id=1 two rows and id=3 COUNT(ts)=2, which its four source rows do not hold).
    rows = {"stream": [(0, None, None), (10, None, 1), (20, 1, 2), (40, 3, None)]}
    result = _run(
        "SELECT id, SUM(value), COUNT(value), COUNT(ts) FROM stream GROUP BY id "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert sorted(result, key=repr) == sorted(
        [(None, None, 1, 2), (1, 2, 1, 1), (3, None, 0, 1)], key=repr
    )


def test_count_star_counts_rows_whatever_their_nulls() -> None:
    rows = {"stream": [(5, None, None), (6, None, None), (1005, 2, None)]}
    result = _run(
        "SELECT start, end, COUNT(*) AS n FROM stream WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert result == [(0, 1000, 2), (1000, 2000, 1)]


# ---- windows (query_api.md "Window Types") ------------------------------------------------------


def test_tumbling_window_count_and_sum_per_key_in_any_row_order() -> None:
    # Half-open windows [0, 10), [10, 20): 9 is in the first, 10 in the second; the input is
    # bounded, so every row counts once whatever its order.
    rows = {"stream": [(10, 1, 5), (0, 1, 1), (9, 2, 7), (3, 1, 2), (25, 2, 4), (19, 1, 1)]}
    result = _run(
        "SELECT start, end, id, COUNT(*) AS n, SUM(value) AS total FROM stream GROUP BY id "
        "WINDOW TUMBLING(ts, SIZE 10 MS) INTO File()",
        rows,
    )
    assert result == [
        (0, 10, 1, 2, 3),
        (0, 10, 2, 1, 7),
        (10, 20, 1, 2, 6),
        (20, 30, 2, 1, 4),
    ]


def test_windows_without_rows_emit_nothing() -> None:
    rows = {"stream": [(5, 1, 1), (3_005, 1, 1)]}
    result = _run(
        "SELECT start, end, COUNT(*) AS n FROM stream WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert result == [(0, 1000, 1), (3000, 4000, 1)]


def test_sliding_windows_overlap_and_start_at_multiples_of_the_advance_from_zero() -> None:
    # SIZE 100, ADVANCE 50: windows [0,100), [50,150), [100,200), ...; none before 0, so 30 is
    # in [0,100) only and 120 in [50,150) and [100,200).
    rows = {"stream": [(30, 1, 1), (120, 1, 10), (160, 1, 100)]}
    result = _run(
        "SELECT start, end, SUM(value) AS total, COUNT(*) AS n FROM stream "
        "WINDOW SLIDING(ts, SIZE 100 MS, ADVANCE BY 50 MS) INTO File()",
        rows,
    )
    assert result == [(0, 100, 1, 1), (50, 150, 10, 1), (100, 200, 110, 2), (150, 250, 100, 1)]


def test_sliding_windows_with_gaps_leave_some_rows_in_no_window() -> None:
    # SIZE 10, ADVANCE 30: windows [0,10), [30,40), [60,70), ...; 15 and 70 are in none.
    query_plan = _windowed(
        _bind(
            "SELECT start, end, COUNT(*) AS n, SUM(value) AS total FROM stream "
            "WINDOW SLIDING(ts, SIZE 10 MS, ADVANCE BY 5 MS) INTO File()"
        ),
        size=10,
        advance=30,
    )
    rows = {"stream": [(5, 1, 1), (15, 1, 2), (35, 1, 4), (39, 1, 8), (65, 1, 16), (70, 1, 32)]}
    assert run_reference(query_plan, rows) == [(0, 10, 1, 1), (30, 40, 2, 12), (60, 70, 1, 16)]


# ---- stacked windows, windows without aggregates, expressions around aggregates -------------


def test_an_aggregation_over_another_windows_output_uses_its_start_as_event_time() -> None:
    # Inner windows of 10 ms per id: [0,10) id 1: 1; [10,20) id 1: 2; [20,30) id 1: 2;
    # [40,50) id 3: 5; [150,160) id 1: 7. Outer windows of 100 ms over the inner starts.
    rows = {"stream": [(0, 1, 1), (10, 1, 2), (20, 1, 2), (40, 3, 5), (150, 1, 7)]}
    result = _run(
        "SELECT start, end, SUM(total) AS t2, COUNT(*) AS n FROM (SELECT start, id, "
        "SUM(value) AS total FROM stream GROUP BY id WINDOW TUMBLING(ts, SIZE 10 MS)) "
        "WINDOW TUMBLING(start, SIZE 100 MS) INTO File()",
        rows,
    )
    assert result == [(0, 100, 10, 4), (100, 200, 7, 1)]


def test_a_window_without_aggregates_emits_one_row_per_non_empty_window_and_key() -> None:
    rows = {"stream": [(0, 1, 1), (10, 1, 2), (40, 3, 5), (150, 1, 7)]}
    result = _run(
        "SELECT start, end, id FROM stream GROUP BY id WINDOW TUMBLING(ts, SIZE 100 MS) "
        "INTO File()",
        rows,
    )
    assert result == [(0, 100, 1), (0, 100, 3), (100, 200, 1)]


def test_expressions_around_aggregates_are_computed_on_the_window_output() -> None:
    # [0,100): SUM 1+2+2+5 = 10, COUNT 4 -> 10 * 2 + 4; [100,200): 7 * 2 + 1.
    rows = {"stream": [(0, 1, 1), (10, 1, 2), (20, 1, 2), (40, 3, 5), (150, 1, 7)]}
    result = _run(
        "SELECT start, end, SUM(value) * INT32(2) + COUNT(*) AS x FROM stream "
        "WINDOW TUMBLING(ts, SIZE 100 MS) INTO File()",
        rows,
    )
    assert result == [(0, 100, 24), (100, 200, 15)]


# ---- joins (query_api.md "Join", null_handling.md "Join (INNER JOIN)") --------------------------


def test_window_join_never_matches_null_keys() -> None:
    rows = {
        "stream": [(0, 0, None), (200, 0, 5), (1000, 0, 7)],
        "other": [(100, 0, 0), (1300, 0, 7)],
    }
    result = _run(
        "SELECT * FROM stream INNER JOIN (SELECT * FROM other) ON value = value2 "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert result == [(1000, 2000, 1000, 0, 7, 1300, 0, 7)]


def test_window_join_passes_non_key_nulls_through() -> None:
    rows = {"stream": [(0, 0, None), (700, 1, 3)], "other": [(100, 0, 0), (900, 1, 6)]}
    result = _run(
        "SELECT * FROM stream INNER JOIN (SELECT * FROM other) ON id = id2 "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert result == [(0, 1000, 0, 0, None, 100, 0, 0), (0, 1000, 700, 1, 3, 900, 1, 6)]


def test_window_join_pairs_rows_of_the_same_window_only() -> None:
    # 999 and 1000 are in different tumbling windows of 1 s, so they never pair.
    rows = {"stream": [(999, 1, 1)], "other": [(1000, 1, 2), (500, 1, 3)]}
    result = _run(
        "SELECT * FROM stream INNER JOIN (SELECT * FROM other) ON id = id2 "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
        rows,
    )
    assert result == [(0, 1000, 999, 1, 1, 500, 1, 3)]


def test_sliding_window_join_produces_a_pair_once_per_common_window() -> None:
    # SIZE 100, ADVANCE 50: 60 is in [0,100) and [50,150); 90 too: the pair appears twice.
    rows = {"stream": [(60, 1, 1)], "other": [(90, 1, 2), (140, 1, 3)]}
    result = _run(
        "SELECT start, end, value, value2 FROM stream INNER JOIN (SELECT * FROM other) "
        "ON id = id2 WINDOW SLIDING(ts, SIZE 100 MS, ADVANCE BY 50 MS) INTO File()",
        rows,
    )
    assert result == [(0, 100, 1, 2), (50, 150, 1, 2), (50, 150, 1, 3)]


def test_a_join_of_three_streams_joins_the_first_join_output_with_the_third() -> None:
    # Built by hand over a bound two-way join (how NES resolves the shared `ts` of a third
    # join input is the binder's business). Windows of 100 ms on each side's own time.
    inner = _bind(
        "SELECT * FROM stream INNER JOIN (SELECT * FROM other) ON id = id2 "
        "WINDOW TUMBLING(ts, SIZE 100 MS) INTO File()"
    ).root
    third = plan.Scan(
        "third",
        ("ts", "id3", "value3"),
        (
            plan.Field("THIRD$TS", "UINT64", False),
            plan.Field("THIRD$ID3", "INT32", True),
            plan.Field("THIRD$VALUE3", "INT32", True),
        ),
    )
    condition = plan.CallExpr(
        "eq",
        (plan.ColumnExpr("STREAM$ID", "INT32", True), plan.ColumnExpr("THIRD$ID3", "INT32", True)),
        "BOOLEAN",
        True,
    )
    joined = plan.WindowJoin(
        inner,
        third,
        plan.Window("tumbling", 100, 100),
        "STREAM$TS",
        "THIRD$TS",
        condition,
        "ALL$START",
        "ALL$END",
    )
    query_plan = plan.QueryPlan(joined)
    query_plan.validate()
    rows = {
        "stream": [(0, 1, 1), (10, 1, 2), (20, 1, 2), (40, 3, 5), (150, 1, 7)],
        "other": [(5, 1, 10), (30, 3, 11), (120, 1, 12)],
        "third": [(7, 1, 100), (60, 3, 200)],
    }
    # [0,100): stream id 1 (0, 10, 20) x other (5); stream (40) x other (30); each with the
    # third row of its id. [100,200): 150 x 120 has no third row in its window.
    assert run_reference(query_plan, rows) == [
        (0, 100, 0, 100, 0, 1, 1, 5, 1, 10, 7, 1, 100),
        (0, 100, 0, 100, 10, 1, 2, 5, 1, 10, 7, 1, 100),
        (0, 100, 0, 100, 20, 1, 2, 5, 1, 10, 7, 1, 100),
        (0, 100, 0, 100, 40, 3, 5, 30, 3, 11, 60, 3, 200),
    ]


# ---- expressions (null_handling.md "Map", "Comparisons", "Logical Operators") ----------------


def test_filter_treats_a_null_predicate_as_false() -> None:
    rows = {"stream": [(1, 0, None), (2, 0, 1), (3, 0, None), (4, 0, 2)]}
    assert _run("SELECT ts FROM stream WHERE value == INT32(1) INTO File()", rows) == [(2,)]
    assert _run("SELECT ts FROM stream WHERE value < INT32(1) INTO File()", rows) == []
    assert _run("SELECT ts FROM stream WHERE ISNULL(value) INTO File()", rows) == [(1,), (3,)]
    assert _run("SELECT ts FROM stream WHERE NOT ISNULL(value) INTO File()", rows) == [
        (2,),
        (4,),
    ]


def test_three_valued_logic_follows_the_truth_tables() -> None:
    flags = [Col("id", "INT32", False), Col("flag", "BOOLEAN"), Col("flag2", "BOOLEAN")]
    rows = {"flags": [(5, None, True), (8, False, None), (9, None, False)]}
    result = _run(
        "SELECT id, flag AND flag2 AS a, flag OR flag2 AS o FROM flags INTO File()",
        rows,
        flags=flags,
    )
    assert result == [(5, None, True), (8, False, None), (9, False, None)]
    where_or = _run("SELECT id FROM flags WHERE flag OR flag2 INTO File()", rows, flags=flags)
    assert where_or == [(5,)]


def test_arithmetic_and_comparisons_propagate_null() -> None:
    rows = {"stream": [(0, 0, 4), (4, None, None), (5, 7, None)]}
    result = _run(
        "SELECT ts, id + INT32(1) AS a, id + value AS b, id == id AS c FROM stream INTO File()",
        rows,
    )
    assert result == [(0, 1, 4, True), (4, None, None, None), (5, 8, None, True)]


def test_integer_arithmetic_is_cpp() -> None:
    # INT32 wraps; division truncates toward zero; modulo takes the dividend's sign.
    rows = {"stream": [(0, 2_147_483_647, -7)]}
    result = _run(
        "SELECT id + INT32(1) AS w, value / INT32(2) AS q, value % INT32(2) AS r, "
        "-(id + INT32(1)) AS n FROM stream INTO File()",
        rows,
    )
    assert result == [(-2_147_483_648, -3, -1, -2_147_483_648)]
    wide = [Col("a", "UINT64"), Col("b", "INT8")]
    product = _run(
        "SELECT a * a AS p, a - UINT64(1) AS d, b + b AS s FROM wide INTO File()",
        {"wide": [(2**63 + 1, 100), (0, -128)]},
        wide=wide,
    )
    # UINT64 wraps modulo 2^64; INT8 operands are promoted to INT32 (C++) and do not wrap.
    assert product == [(0, 2**64 - 1, -256), (((2**63 + 1) ** 2) % 2**64, 2**63, 200)]


def test_conversions_are_cpp_static_casts() -> None:
    # Integers wrap to the target's width; floats truncate toward zero; FLOAT32 overflows to
    # an infinity; a float outside the integer target's range is undefined in C++: refused.
    numbers = [Col("y", "FLOAT64"), Col("i", "INT64"), Col("u", "UINT64"), Col("x", "FLOAT32")]
    rows = {"numbers": [(1.5, -(2**63), 2**64 - 1, 3e38), (-2.5, 5, 0, -2.5)]}
    result = _run(
        "SELECT INT32(y) AS a, UINT8(i) AS b, INT64(u) AS c, x * FLOAT32(10) AS d, "
        "i + u AS e FROM numbers INTO File()",
        rows,
        numbers=numbers,
    )
    assert result == [(-2, 5, 0, -25.0, 5), (1, 0, -1, math.inf, 2**63 - 1)]
    with pytest.raises(ReferenceUnsupported, match="converted to INT32"):
        _run(
            "SELECT INT32(y) AS a FROM numbers INTO File()",
            {"numbers": [(3e9, 0, 0, 0.0)]},
            numbers=numbers,
        )


def test_integer_division_by_zero_fails_the_query_and_by_null_is_null() -> None:
    # null_handling.md, Division and Modulo.
    query = "SELECT value / id AS q FROM stream INTO File()"
    assert _run(query, {"stream": [(0, None, 5), (1, 2, 5)]}) == [(2,), (None,)]
    with pytest.raises(NesQueryFailure, match="division by zero"):
        _run(query, {"stream": [(0, 0, 5)]})
    # every expression of an operator is evaluated on every row reaching it
    with pytest.raises(NesQueryFailure):
        _run(
            "SELECT q FROM (SELECT value / id AS q, id FROM stream) WHERE id != INT32(0) "
            "INTO File()",
            {"stream": [(0, 0, 5), (1, 1, 5)]},
        )


def test_float_comparisons_with_nan_are_ieee() -> None:
    floats = [Col("x", "FLOAT64")]
    rows = {"floats": [(math.nan,), (1.0,)]}
    result = _run(
        "SELECT x == x AS e, x != x AS n, x > FLOAT64(0) AS g FROM floats INTO File()",
        rows,
        floats=floats,
    )
    assert sorted(result) == sorted([(False, True, False), (True, False, True)])


def test_concat_propagates_null_and_union_keeps_duplicates() -> None:
    texts = [Col("t", "VARSIZED")]
    rows = {"texts": [("alpha",), (None,), ("alpha",)]}
    result = _run(
        'SELECT CONCAT(t, VARSIZED("_x")) AS r FROM texts UNION (SELECT t AS r FROM texts) '
        "INTO File()",
        rows,
        texts=texts,
    )
    assert sorted(result, key=repr) == sorted(
        [("alpha_x",), (None,), ("alpha_x",), ("alpha",), (None,), ("alpha",)], key=repr
    )


def test_castfromunixts_formats_milliseconds_as_iso_text() -> None:
    times = [Col("ms", "UINT64")]
    result = _run(
        "SELECT CASTFROMUNIXTS(ms) AS t FROM times INTO File()",
        {"times": [(1234,), (86_400_000,), (None,)]},
        times=times,
    )
    assert result == [("1970-01-01T00:00:01.234Z",), ("1970-01-02T00:00:00.000Z",), (None,)]


# ---- never a different answer ---------------------------------------------------------------


def test_what_the_docs_leave_open_is_refused_with_a_reason() -> None:
    window_query = (
        "SELECT start, end, COUNT(*) AS n FROM s WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
    )
    signed = [Col("ts", "INT64", False), Col("x", "FLOAT64")]
    with pytest.raises(ReferenceUnsupported, match="negative event time"):
        _run(window_query, {"s": [(-5, 1.0)]}, s=signed)
    with pytest.raises(ReferenceUnsupported, match="NaN"):
        _run(
            "SELECT MIN(x) AS m FROM s WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()",
            {"s": [(1, math.nan), (2, 1.0)]},
            s=signed,
        )
    with pytest.raises(ReferenceUnsupported, match="float division by zero"):
        _run("SELECT x / FLOAT64(0) AS q FROM s INTO File()", {"s": [(1, 1.0)]}, s=signed)
    with pytest.raises(ReferenceUnsupported, match="CASTTOUNIXTS"):
        _run(
            "SELECT CASTTOUNIXTS(t) AS ms FROM texts INTO File()",
            {"texts": [("1970-01-01T00:00:00Z",)]},
            texts=[Col("t", "VARSIZED")],
        )


def test_rows_that_do_not_fit_their_schema_are_refused() -> None:
    query = "SELECT * FROM stream INTO File()"
    with pytest.raises(ValueError, match="NOT NULL"):
        _run(query, {"stream": [(None, 1, 1)]})
    with pytest.raises(ValueError, match="INT32"):
        _run(query, {"stream": [(0, 2**31, 1)]})
    with pytest.raises(ValueError, match="no rows given"):
        _run(query, {})


def test_every_rule_names_its_source_and_the_sql_is_readable() -> None:
    assert all(rule.source and rule.passage for rule in RULES)
    text = to_sql(_bind("SELECT * FROM stream WHERE value > INT32(1) INTO File()")).text()
    assert text.startswith("CREATE TEMP TABLE op0 AS SELECT") and text.endswith(";")


def test_the_reference_shares_no_execution_code_with_the_product() -> None:
    """It reads the plan IR and the NES vocabularies, never the Spark translation."""
    package = Path(reference_package.__file__).parent
    allowed = ("streamctl.reference", "streamctl.planner.plan", "streamctl.nes_types")
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                if name.startswith(("streamctl", "pyspark", "py4j")):
                    assert name.startswith(allowed) or name == "streamctl.planner", (path, name)


# ---- property: the reference against plain Python -------------------------------------------


def _wrap(value: int, type_name: str) -> int:
    low, high = integer_range(type_name)
    return (value - low) % (high - low + 1) + low


def _python_windows(ts: int, size: int, advance: int) -> list[int]:
    return [k * advance for k in range(ts // advance + 1) if k * advance <= ts < k * advance + size]


def _null_or(has_null: bool, present: list[int], function: Callable[[list[int]], int]) -> Any:
    """null_handling.md: SUM/MIN/MAX over a window holding a NULL are NULL."""
    return None if has_null else function(present)


def _python_aggregate(
    rows: list[tuple[int, int | None, int | None]], size: int, advance: int
) -> list[tuple[Any, ...]]:
    groups: dict[tuple[int, int | None], list[int | None]] = defaultdict(list)
    for ts, key, value in rows:
        for start in _python_windows(ts, size, advance):
            groups[(start, key)].append(value)
    result = []
    for (start, key), values in groups.items():
        present = [v for v in values if v is not None]
        has_null = len(present) < len(values)
        result.append(
            (
                start,
                start + size,
                key,
                _null_or(has_null, present, lambda p: _wrap(sum(p), "INT16")),
                len(present),
                _null_or(has_null, present, min),
                _null_or(has_null, present, max),
                len(values),
            )
        )
    return result


KEYED = [Col("ts", "UINT64", False), Col("k", "INT8"), Col("v", "INT16")]

_rows = st.lists(
    st.tuples(
        st.integers(0, 3_000),
        st.one_of(st.none(), st.integers(-2, 2)),
        st.one_of(
            st.none(), st.integers(-(2**15), 2**15 - 1), st.sampled_from([-(2**15), 2**15 - 1])
        ),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=_rows,
    size=st.integers(1, 700),
    advance=st.one_of(st.none(), st.integers(1, 900)),
)
def test_windowed_aggregates_match_plain_python(
    rows: list[tuple[int, int | None, int | None]], size: int, advance: int | None
) -> None:
    """SUM (INT16, wrapping), COUNT(v), MIN, MAX, COUNT(*) per window and key, for tumbling
    windows (advance None) and sliding ones with overlaps or gaps."""
    step = size if advance is None else advance
    query_plan = _windowed(
        _bind(
            "SELECT start, end, k, SUM(v) AS total, COUNT(v) AS present, MIN(v) AS low, "
            "MAX(v) AS high, COUNT(*) AS n FROM keyed GROUP BY k "
            "WINDOW TUMBLING(ts, SIZE 1 MS) INTO File()",
            keyed=KEYED,
        ),
        size=size,
        advance=step,
    )
    expected = _python_aggregate(rows, size, step)
    result = run_reference(query_plan, {"keyed": rows})
    assert sorted(result, key=repr) == sorted(expected, key=repr)


_side = st.lists(
    st.tuples(st.integers(0, 1_000), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 9)),
    max_size=15,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=_side, right=_side, size=st.integers(1, 400), advance=st.integers(1, 500))
def test_window_joins_match_plain_python(
    left: list[tuple[int, int | None, int]],
    right: list[tuple[int, int | None, int]],
    size: int,
    advance: int,
) -> None:
    """Every pair of rows with equal non-NULL keys, once per window holding both times."""
    query_plan = _windowed(
        _bind(
            "SELECT * FROM stream INNER JOIN (SELECT * FROM other) ON id = id2 "
            "WINDOW TUMBLING(ts, SIZE 1 MS) INTO File()"
        ),
        size=size,
        advance=advance,
    )
    expected = [
        (start, start + size, lt, lk, lv, rt, rk, rv)
        for lt, lk, lv in left
        for rt, rk, rv in right
        if lk is not None and lk == rk
        for start in _python_windows(lt, size, advance)
        if start in _python_windows(rt, size, advance)
    ]
    result = run_reference(query_plan, {"stream": left, "other": right})
    assert sorted(result, key=repr) == sorted(expected, key=repr)
