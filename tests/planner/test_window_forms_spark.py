"""Window and grouping forms on local Spark, with expected rows derived by hand from the NES
documentation (``nes-docs`` in the conformance folder, ``STREAMCTL_CONFORMANCE``), not from
any engine's output.

Rules used (see the docstrings of :mod:`streamctl.planner.binder` and
:mod:`streamctl.spark.translate`):

* a window covers ``[start, end)`` with ``end = start + size`` (null_handling.md writes the
  windows of ``TUMBLING(ts, size 100 ms)`` as ``[0, 100)`` and ``[100, 200)``, and puts the row
  at ts=100 into the second); units are milliseconds (query_api.md: "The timestamp field needs
  to be of type UINT64, with a millisecond resolution");
* tumbling windows are disjoint and consecutive (query_api.md "Tumbling Windows"); sliding
  windows start every ``ADVANCE BY`` from time 0 and last ``SIZE`` (query_api.md "Sliding
  Windows", ``SLIDING(ts, SIZE s, ADVANCE BY a)``): a row at ``t`` is in every window with
  ``start = k * advance <= t < start + size``, ``k >= 0`` -- none when ``advance > size`` puts
  ``t`` in a gap, several when ``advance < size``;
* a window is emitted when the watermark passes its end (watermarking doc, "Thus, a watermark
  can be used to trigger a window"); a window that no row falls into produces no row;
* ``GROUP BY`` names the grouping fields, in either order with the window clause
  (``windowedAggregationClause`` of NES's grammar), as ``a, b`` or as the row constructor
  ``(a, b)`` (query_api.md: ``GROUP BY (highway, direction, positionDiv5280)``); NULL keys
  form their own group (null_handling.md "GROUP BY with NULL Keys").
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.spark_runs import Col, bound_plan, run_to_end
from streamctl.error_codes import NOT_SUPPORTED
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import build

_RUNS = [0]


def _run(
    spark: Any,
    text: str,
    sources: dict[str, tuple[list[Col], list[str]]],
    tmp_path: Path,
    *,
    bounded: bool = True,
) -> list[tuple[Any, ...]]:
    """Run ``text`` over CSV streams (one file each) to the end; the rows, sorted. Unbounded,
    windows are emitted only as the watermark (the latest event time) passes their end."""
    _RUNS[0] += 1
    base = tmp_path / f"run{_RUNS[0]}"
    query_plan = bound_plan(text, sources)

    def read_source(name: str) -> Any:
        columns, rows = sources[name]
        directory = base / "sources" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "part.csv").write_text("".join(row + "\n" for row in rows))
        return spark.readStream.schema(spark_schema(columns)).csv(str(directory))

    translated = build(query_plan, spark, read_source, bounded=bounded)
    name = f"window_forms_{_RUNS[0]}"
    rows = run_to_end(spark, translated, name, base / "checkpoint")
    return sorted(rows, key=repr)


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


# ---- window assignment -------------------------------------------------------------------------

# Values are distinct powers of two, so a window's SUM names exactly the rows it holds.
EVENTS = (
    [Col("v", "INT64", False), Col("ts", "UINT64", False)],
    [
        "1,0",
        "2,999",
        "4,1000",
        "8,2999",
        "16,3000",
        "32,3999",
        "64,4000",
        "128,10000",
        "256,11999",
        "512,12000",
    ],
)
_AGGREGATE = "SELECT start, end, SUM(v) AS total, COUNT(*) AS n FROM events "


@pytest.mark.spark
def test_sliding_windows_with_gaps_hold_only_the_rows_inside_them(
    spark: Any, tmp_path: Path
) -> None:
    # SIZE 1 s, ADVANCE BY 3 s: windows [0,1000), [3000,4000), [6000,7000), [9000,10000),
    # [12000,13000). 1000, 2999, 4000, 10000 and 11999 fall in gaps; [6000,7000) and
    # [9000,10000) hold no row and are not emitted.
    rows = _run(
        spark,
        _AGGREGATE + "WINDOW SLIDING(ts, SIZE 1 SEC, ADVANCE BY 3 SEC) INTO File()",
        {"events": EVENTS},
        tmp_path,
    )
    assert rows == _sorted([(0, 1000, 1 + 2, 2), (3000, 4000, 16 + 32, 2), (12000, 13000, 512, 1)])


@pytest.mark.spark
@pytest.mark.parametrize(
    ("window", "expected"),
    [
        # [k s, k s + 400 ms): 999, 2999, 3999, 11999 in gaps (Spark: gcd path, 2 copies a row)
        (
            "SIZE 400 MS, ADVANCE BY 1 SEC",
            [
                (0, 400, 1),
                (1000, 1400, 4),
                (3000, 3400, 16),
                (4000, 4400, 64),
                (10000, 10400, 128),
                (12000, 12400, 512),
            ],
        ),
        # [k s, k s + 999 ms): a row at 999 lies on the end (Spark: fallback, gcd 1 ms)
        (
            "SIZE 999 MS, ADVANCE BY 1000 MS",
            [
                (0, 999, 1),
                (1000, 1999, 4),
                (3000, 3999, 16),
                (4000, 4999, 64),
                (10000, 10999, 128),
                (12000, 12999, 512),
            ],
        ),
    ],
)
def test_gapped_windows_whose_advance_is_no_multiple_of_the_size(
    spark: Any, tmp_path: Path, window: str, expected: list[tuple[int, int, int]]
) -> None:
    rows = _run(
        spark,
        _AGGREGATE + f"WINDOW SLIDING(ts, {window}) INTO File()",
        {"events": EVENTS},
        tmp_path,
    )
    assert rows == _sorted([(*row, 1) for row in expected])


@pytest.mark.spark
@pytest.mark.parametrize(
    ("window", "rows", "expected"),
    [
        ("SIZE 1 SEC, ADVANCE BY 3 SEC", ["1,0", "2,1500"], [(0, 1000, 1, 1)]),
        ("SIZE 400 MS, ADVANCE BY 1 SEC", ["1,0", "2,700"], [(0, 400, 1, 1)]),
    ],
)
def test_a_gapped_window_is_emitted_when_the_watermark_passes_its_end(
    spark: Any, tmp_path: Path, window: str, rows: list[str], expected: list[tuple[int, ...]]
) -> None:
    # Unbounded: no end-of-input flush. The row in the gap (1500, 700) advances the watermark
    # past the first window's end (1000, 400), which triggers it (watermarking doc); the gap row
    # itself belongs to no window.
    result = _run(
        spark,
        _AGGREGATE + f"WINDOW SLIDING(ts, {window}) INTO File()",
        {"events": (EVENTS[0], rows)},
        tmp_path,
        bounded=False,
    )
    assert result == expected


@pytest.mark.spark
@pytest.mark.parametrize(
    "window", ["TUMBLING(ts, SIZE 1 SEC)", "SLIDING(ts, SIZE 1000 MS, ADVANCE BY 1 SEC)"]
)
def test_advance_equal_to_size_is_tumbling(spark: Any, tmp_path: Path, window: str) -> None:
    # Every row in exactly one window [k s, (k+1) s); a row at a window's end opens the next.
    rows = _run(spark, _AGGREGATE + f"WINDOW {window} INTO File()", {"events": EVENTS}, tmp_path)
    assert rows == _sorted(
        [
            (0, 1000, 1 + 2, 2),
            (1000, 2000, 4, 1),
            (2000, 3000, 8, 1),
            (3000, 4000, 16 + 32, 2),
            (4000, 5000, 64, 1),
            (10000, 11000, 128, 1),
            (11000, 12000, 256, 1),
            (12000, 13000, 512, 1),
        ]
    )


@pytest.mark.spark
def test_overlapping_sliding_windows_whose_size_is_no_multiple_of_the_advance(
    spark: Any, tmp_path: Path
) -> None:
    # SIZE 3 s, ADVANCE BY 2 s: windows [2k s, 2k s + 3 s) for k >= 0.
    #   [0,3000): 0, 999, 1000, 2999        [2000,5000): 2999, 3000, 3999, 4000
    #   [4000,7000): 4000                    [6000,9000): empty, not emitted
    #   [8000,11000): 10000                  [10000,13000): 10000, 11999, 12000
    #   [12000,15000): 12000
    rows = _run(
        spark,
        _AGGREGATE + "WINDOW SLIDING(ts, SIZE 3 SEC, ADVANCE BY 2 SEC) INTO File()",
        {"events": EVENTS},
        tmp_path,
    )
    assert rows == _sorted(
        [
            (0, 3000, 1 + 2 + 4 + 8, 4),
            (2000, 5000, 8 + 16 + 32 + 64, 4),
            (4000, 7000, 64, 1),
            (8000, 11000, 128, 1),
            (10000, 13000, 128 + 256 + 512, 3),
            (12000, 15000, 512, 1),
        ]
    )


def _nes_windows(rows: list[tuple[int, int]], size: int, advance: int) -> list[tuple[int, ...]]:
    """The documented rule, by brute force: (start, end, SUM(v), COUNT(*)) per non-empty window."""
    windows: dict[int, list[int]] = defaultdict(list)
    for value, ts in rows:
        for start in range(0, ts + 1, advance):
            if start <= ts < start + size:
                windows[start].append(value)
    return [(s, s + size, sum(vs), len(vs)) for s, vs in windows.items()]


@pytest.mark.quick
def test_the_brute_force_rule_agrees_with_the_hand_derived_windows() -> None:
    rows = [(int(v), int(ts)) for v, ts in (line.split(",") for line in EVENTS[1])]
    assert _sorted(_nes_windows(rows, 1000, 3000)) == _sorted(
        [(0, 1000, 3, 2), (3000, 4000, 48, 2), (12000, 13000, 512, 1)]
    )
    assert _sorted(_nes_windows(rows, 3000, 2000)) == _sorted(
        [
            (0, 3000, 15, 4),
            (2000, 5000, 120, 4),
            (4000, 7000, 64, 1),
            (8000, 11000, 128, 1),
            (10000, 13000, 896, 3),
            (12000, 15000, 512, 1),
        ]
    )


@pytest.mark.spark
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    size=st.integers(1, 6).map(lambda n: n * 250),
    advance=st.integers(1, 8).map(lambda n: n * 250),
    stamps=st.lists(st.integers(0, 6000), min_size=1, max_size=12),
)
def test_window_assignment_matches_the_documented_rule(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, size: int, advance: int, stamps: list[int]
) -> None:
    # Windows on a 250 ms grid, so many rows sit exactly on a window's start or end.
    rows = [(index + 1, ts) for index, ts in enumerate(stamps)]  # out of order, duplicates
    events = (EVENTS[0], [f"{value},{ts}" for value, ts in rows])
    window = (
        f"TUMBLING(ts, SIZE {size} MS)"
        if size == advance
        else f"SLIDING(ts, SIZE {size} MS, ADVANCE BY {advance} MS)"
    )
    result = _run(
        spark,
        _AGGREGATE + f"WINDOW {window} INTO File()",
        {"events": events},
        tmp_path_factory.mktemp("prop"),
    )
    assert result == _sorted(_nes_windows(rows, size, advance))


@pytest.mark.spark
def test_rows_without_event_time_fall_into_no_window(spark: Any, tmp_path: Path) -> None:
    events = (
        [Col("v", "INT64", False), Col("ts", "UINT64")],
        ["1,100", "2,", "4,900", "8,", "16,1100"],
    )
    for window in ("TUMBLING(ts, SIZE 1 SEC)", "SLIDING(ts, SIZE 500 MS, ADVANCE BY 1 SEC)"):
        rows = _run(
            spark, _AGGREGATE + f"WINDOW {window} INTO File()", {"events": events}, tmp_path
        )
        if window.startswith("TUMBLING"):
            assert rows == _sorted([(0, 1000, 1 + 4, 2), (1000, 2000, 16, 1)])
        else:  # [0,500) and [1000,1500); 900 is in the gap
            assert rows == _sorted([(0, 500, 1, 1), (1000, 1500, 16, 1)])


@pytest.mark.spark
def test_join_in_gapped_sliding_windows_pairs_rows_of_the_same_window(
    spark: Any, tmp_path: Path
) -> None:
    # SIZE 500 ms, ADVANCE BY 1 s: windows [0,500), [1000,1500), ...; 700, 800 and 1600 are
    # in gaps, so only (1, 10) in [0,500) and (4, 40) in [1000,1500) pair up.
    left = (
        [Col("id", "INT64"), Col("lv", "INT64"), Col("ts", "INT64")],
        ["1,1,100", "1,2,700", "1,4,1200"],
    )
    right = (
        [Col("rid", "INT64"), Col("rv", "INT64"), Col("ts", "INT64")],
        ["1,10,200", "1,20,800", "1,40,1100", "1,80,1600"],
    )
    rows = _run(
        spark,
        "SELECT start, end, lv, rv FROM (SELECT * FROM l) INNER JOIN (SELECT * FROM r) "
        "ON id = rid WINDOW SLIDING(ts, SIZE 500 MS, ADVANCE BY 1 SEC) INTO File()",
        {"l": left, "r": right},
        tmp_path,
    )
    assert rows == _sorted([(0, 500, 1, 10), (1000, 1500, 4, 40)])


# ---- GROUP BY --------------------------------------------------------------------------------

KEYED = (
    [
        Col("k1", "INT32"),
        Col("k2", "VARSIZED"),
        Col("k3", "INT8"),
        Col("v", "INT64", False),
        Col("ts", "UINT64", False),
    ],
    # Empty CSV fields are NULL (null_handling.md, "CSV: Only empty fields are interpreted as
    # NULL for nullable columns").
    [
        "1,x,0,1,100",
        "1,x,1,2,200",
        "1,y,0,4,300",
        "2,x,0,8,400",
        ",x,0,16,500",
        ",,0,32,600",
        "1,x,0,64,1500",
        ",,,128,1600",
    ],
)
_TUMBLING = "WINDOW TUMBLING(ts, SIZE 1 SEC)"

# Hand-derived: window [0,1000) holds the first six rows, [1000,2000) the last two.
GROUPED: dict[int, list[tuple[Any, ...]]] = {
    0: [(0, 1000, 63, 6), (1000, 2000, 192, 2)],
    1: [
        (0, 1000, 1, 1 + 2 + 4, 3),
        (0, 1000, 2, 8, 1),
        (0, 1000, None, 16 + 32, 2),
        (1000, 2000, 1, 64, 1),
        (1000, 2000, None, 128, 1),
    ],
    2: [
        (0, 1000, 1, "x", 1 + 2, 2),
        (0, 1000, 1, "y", 4, 1),
        (0, 1000, 2, "x", 8, 1),
        (0, 1000, None, "x", 16, 1),
        (0, 1000, None, None, 32, 1),
        (1000, 2000, 1, "x", 64, 1),
        (1000, 2000, None, None, 128, 1),
    ],
    3: [
        (0, 1000, 1, "x", 0, 1, 1),
        (0, 1000, 1, "x", 1, 2, 1),
        (0, 1000, 1, "y", 0, 4, 1),
        (0, 1000, 2, "x", 0, 8, 1),
        (0, 1000, None, "x", 0, 16, 1),
        (0, 1000, None, None, 0, 32, 1),
        (1000, 2000, 1, "x", 0, 64, 1),
        (1000, 2000, None, None, None, 128, 1),
    ],
}
_KEYS = ["k1", "k2", "k3"]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("count", "clause"),
    [
        (0, f"{_TUMBLING}"),
        (1, f"GROUP BY k1 {_TUMBLING}"),
        (2, f"{_TUMBLING} GROUP BY (k1, k2)"),
        (3, f"GROUP BY (k1, k2), k3 {_TUMBLING}"),
    ],
)
def test_group_by_zero_to_three_keys_with_null_keys(
    spark: Any, tmp_path: Path, count: int, clause: str
) -> None:
    keys = "".join(f"{k}, " for k in _KEYS[:count])
    rows = _run(
        spark,
        f"SELECT start, end, {keys}SUM(v) AS total, COUNT(*) AS n FROM keyed {clause} INTO File()",
        {"keyed": KEYED},
        tmp_path,
    )
    assert rows == _sorted(GROUPED[count])


@pytest.mark.spark
def test_gapped_sliding_window_with_two_keys(spark: Any, tmp_path: Path) -> None:
    # SIZE 500 ms, ADVANCE BY 1 s: [0,500) holds ts 100..400, [1000,1500) nothing (1500 is its
    # end); 500, 600 and 1600 lie in gaps.
    rows = _run(
        spark,
        "SELECT start, end, k2, k1, SUM(v) AS total FROM keyed "
        "WINDOW SLIDING(ts, SIZE 500 MS, ADVANCE BY 1 SEC) GROUP BY k1, k2 INTO File()",
        {"keyed": KEYED},
        tmp_path,
    )
    assert rows == _sorted([(0, 500, "x", 1, 1 + 2), (0, 500, "y", 1, 4), (0, 500, "x", 2, 8)])


# ---- GROUP BY forms bind alike (pure) ----------------------------------------------------------

_CATALOG = MemoryCatalog({"keyed": KEYED[0]})
_SELECT = "SELECT start, end, k1, k2, k3, SUM(v) AS total FROM keyed "


def _plan(text: str) -> Any:
    return bind_query(parse_query(text), _CATALOG).plan.to_json()


@pytest.mark.quick
@pytest.mark.parametrize(
    "clause",
    [
        f"GROUP BY (k1, k2, k3) {_TUMBLING}",
        f"GROUP BY (k1, k2), k3 {_TUMBLING}",
        f"GROUP BY k1, (k2, k3) {_TUMBLING}",
        f"GROUP BY ((k1, k2), (k3)) {_TUMBLING}",
        f"GROUP BY (k1), (k2), (k3) {_TUMBLING}",
        f"GROUP BY keyed.k1, k2, `K3` {_TUMBLING}",
        f"GROUP BY k1, k2, k3, k1 {_TUMBLING}",
        f"{_TUMBLING} GROUP BY k1, k2, k3",
        f"{_TUMBLING} GROUP BY (k1, k2, k3)",
        "group by K1, k2, (K3) window tumbling(ts, size 1 sec)",
    ],
)
def test_every_group_by_form_names_the_same_keys(clause: str) -> None:
    assert _plan(_SELECT + clause + " INTO File()") == _plan(
        _SELECT + f"GROUP BY k1, k2, k3 {_TUMBLING} INTO File()"
    )


@pytest.mark.quick
@pytest.mark.parametrize(
    "clause", ["GROUP BY k1 + 1", "GROUP BY (k1, k2 * 2)", "GROUP BY CONCAT(k2, k2)", "GROUP BY 1"]
)
def test_keys_that_are_expressions_are_refused(clause: str) -> None:
    with pytest.raises(PlannerError) as error:
        _plan(f"SELECT start, COUNT(*) AS n FROM keyed {clause} {_TUMBLING} INTO File()")
    assert error.value.code == NOT_SUPPORTED
    assert "GROUP BY takes columns" in str(error.value)


@pytest.mark.quick
def test_an_alias_from_the_select_list_is_no_key() -> None:
    # Keys are fields of the window's input; an alias only exists after the window.
    with pytest.raises(PlannerError):
        _plan(f"SELECT k1 AS key, COUNT(*) AS n FROM keyed GROUP BY key {_TUMBLING} INTO File()")
    # ... but an alias made in a subquery is a field of the input:
    _plan(
        "SELECT start, key, COUNT(*) AS n FROM (SELECT k1 * 2 AS key, ts FROM keyed) "
        f"GROUP BY key {_TUMBLING} INTO File()"
    )


@pytest.mark.quick
@pytest.mark.parametrize("clause", ["GROUP BY ()", "GROUP BY (k1,)", "GROUP BY"])
def test_malformed_group_by_is_a_syntax_error(clause: str) -> None:
    with pytest.raises(PlannerError):
        parse_query(f"SELECT COUNT(*) AS n FROM keyed {clause} {_TUMBLING} INTO File()")


@pytest.mark.quick
@pytest.mark.parametrize(
    "modifier", ["WITH ROLLUP", "with cube", "GROUPING SETS ((k1), k2)", "GROUPING SETS (k1, k2)"]
)
def test_grouping_analytics_are_refused_by_name(modifier: str) -> None:
    # NebulaStream's grammar takes them, its planner ignores them: refused, never ignored.
    with pytest.raises(PlannerError) as error:
        parse_query(f"SELECT COUNT(*) AS n FROM keyed GROUP BY k1, k2 {modifier} {_TUMBLING}")
    assert error.value.code == NOT_SUPPORTED
    assert modifier.split()[0].upper() in str(error.value)


@pytest.mark.quick
def test_the_new_keywords_stay_column_names() -> None:
    catalog = MemoryCatalog(
        {"words": [Col(n, "INT32") for n in ("with", "rollup", "cube", "grouping", "sets")]}
        | {"keyed": KEYED[0]}
    )
    query = (
        "SELECT with, rollup, cube, grouping, sets, COUNT(*) AS n FROM "
        "(SELECT with, rollup, cube, grouping, sets, UINT64(0) AS ts FROM words) "
        f"GROUP BY with, (rollup, cube), grouping, sets {_TUMBLING} INTO File()"
    )
    bound = bind_query(parse_query(query), catalog)
    assert [c.name for c in bound.output_schema][:5] == [
        "WORDS$WITH",
        "WORDS$ROLLUP",
        "WORDS$CUBE",
        "WORDS$GROUPING",
        "WORDS$SETS",
    ]
