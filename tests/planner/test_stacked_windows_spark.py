"""Stacked windowed queries (a window aggregation or join over the output of another one) and
joins of three streams, on local Spark and on the reference engine, with expected rows derived
by hand from the NES documentation (``nes-docs`` in the conformance folder,
``STREAMCTL_CONFORMANCE``), not from any engine.

Rules used:

* an operator consumes a stream and produces one, and a windowed aggregation's output has the
  UINT64 millisecond fields START and END (query_api.md "Operators", the sink schema of the
  complete query example: ``lrb$start``, ``lrb$end``); a window names any such field of its
  input as its timestamp (query_api.md "Window Types": ``WINDOW TUMBLING(<timestamp_field>,
  ...)``; "The timestamp field needs to be of type UINT64, with a millisecond resolution"), so
  an outer window over ``start`` assigns each inner window's row by its start, over ``end`` by
  its end;
* windows cover ``[start, start + size)``, sliding ones start every ``ADVANCE BY`` from 0; a
  window is emitted when the watermark passes its end, and on bounded input every window is
  (watermarking doc, "a watermark can be used to trigger a window");
* a join pairs the rows of both inputs within one window that satisfy the predicate (query_api.md
  "Join"); its output is START, END, the left fields, the right fields; the timestamp field is
  named alike on both inputs ("the timestamp field must have the same name for both input
  streams"), and over a join's output the left input's field comes first;
* an unqualified name several inputs share resolves to the first field of that name in the
  input's schema (NebulaStream's ``Schema::getFieldByName``; see planner/scopes.py ``_matches``):
  the left input's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.spark_runs import Col, bound_plan, csv_stream_reader, run_to_end
from streamctl.error_codes import NOT_SUPPORTED
from streamctl.planner.planning_errors import PlannerError
from streamctl.reference import run_reference
from streamctl.spark.translate import build

S = [Col("ts", "UINT64", False), Col("k", "INT32"), Col("v", "INT64")]
STREAM = [Col("ts", "UINT64", False), Col("id", "INT32"), Col("x", "INT64")]

ROWS: dict[str, list[tuple[int, int, int]]] = {
    "s": [(0, 1, 1), (500, 1, 2), (1200, 2, 4), (2500, 1, 8), (3100, 2, 16), (5000, 1, 32)],
    "a": [(100, 1, 1), (900, 2, 2), (1500, 1, 4), (2100, 1, 8)],
    "b": [(200, 1, 10), (700, 2, 20), (1700, 1, 40), (2900, 1, 80)],
    "c": [(300, 1, 100), (1100, 1, 200), (1800, 1, 400), (2200, 1, 800)],
}
SOURCES: dict[str, tuple[list[Col], Any]] = {
    "s": (S, ROWS["s"]),
    "a": (STREAM, ROWS["a"]),
    "b": (STREAM, ROWS["b"]),
    "c": (STREAM, ROWS["c"]),
}
_RUNS = [0]


def _spark(spark: Any, text: str, tmp_path: Path) -> list[tuple[Any, ...]]:
    """``text`` run on Spark over CSV streams of :data:`ROWS` to the end; its rows, sorted."""
    _RUNS[0] += 1
    base = tmp_path / f"run{_RUNS[0]}"
    query_plan = bound_plan(text, SOURCES)

    read_source = csv_stream_reader(spark, base / "sources", SOURCES)
    translated = build(query_plan, spark, read_source, bounded=True)
    rows = run_to_end(spark, translated, f"stacked_{_RUNS[0]}", base / "checkpoint")
    return sorted(rows, key=repr)


def _reference(text: str) -> list[tuple[Any, ...]]:
    query_plan = bound_plan(text, SOURCES)
    return sorted(run_reference(query_plan, ROWS), key=repr)


def _both(spark: Any, text: str, tmp_path: Path, expected: list[tuple[Any, ...]]) -> None:
    want = sorted(expected, key=repr)
    assert _reference(text) == want
    assert _spark(spark, text, tmp_path) == want


INNER = "SELECT start, end, COUNT(*) AS c FROM s WINDOW TUMBLING(ts, SIZE 1 SEC)"
"""Inner windows of s: [0,1000) 2 rows, [1000,2000) 1, [2000,3000) 1, [3000,4000) 1,
[5000,6000) 1 ([4000,5000) is empty and not emitted)."""


# ---- aggregation over aggregation ----------------------------------------------------------


def test_tumbling_over_tumbling_by_the_inner_start_and_by_its_end(
    spark: Any, tmp_path: Path
) -> None:
    # By start: [0,2000) holds starts 0, 1000 (2 + 1); [2000,4000) 2000, 3000; [4000,6000) 5000.
    _both(
        spark,
        f"SELECT start, end, SUM(c) AS total FROM ({INNER}) "
        "WINDOW TUMBLING(start, SIZE 2 SEC) INTO File()",
        tmp_path,
        [(0, 2000, 3), (2000, 4000, 2), (4000, 6000, 1)],
    )
    # By end (1000, 2000, 3000, 4000, 6000): an end on a boundary opens the next window.
    _both(
        spark,
        f"SELECT start, end, SUM(c) AS total FROM ({INNER}) "
        "WINDOW TUMBLING(end, SIZE 2 SEC) INTO File()",
        tmp_path,
        [(0, 2000, 2), (2000, 4000, 2), (4000, 6000, 1), (6000, 8000, 1)],
    )


def test_sliding_over_tumbling_with_group_by(spark: Any, tmp_path: Path) -> None:
    # Inner per k: k=1 [0,1000) c=2, [2000,3000) 1, [5000,6000) 1; k=2 [1000,2000) 1,
    # [3000,4000) 1. Outer windows [n*1000, n*1000 + 2000), n >= 0: a start t is in the
    # windows starting at t - 1000 (if >= 0) and t.
    expected = [
        (0, 2000, 1, 2, 1),
        (1000, 3000, 1, 1, 1),
        (2000, 4000, 1, 1, 1),
        (4000, 6000, 1, 1, 1),
        (5000, 7000, 1, 1, 1),
        (0, 2000, 2, 1, 1),
        (1000, 3000, 2, 1, 1),
        (2000, 4000, 2, 1, 1),
        (3000, 5000, 2, 1, 1),
    ]
    _both(
        spark,
        "SELECT start, end, k, SUM(c) AS total, COUNT(*) AS n FROM (SELECT start, end, k, "
        "COUNT(*) AS c FROM s GROUP BY k WINDOW TUMBLING(ts, SIZE 1 SEC)) GROUP BY k "
        "WINDOW SLIDING(start, SIZE 2 SEC, ADVANCE BY 1 SEC) INTO File()",
        tmp_path,
        expected,
    )


# ---- windows over joins, joins over windows, three streams -----------------------------------

JOIN_AB = "SELECT * FROM a INNER JOIN b ON a.id = b.id WINDOW TUMBLING(ts, SIZE 1 SEC)"
"""Pairs (a.ts, b.ts) by window: [0,1000) (100, 200) id 1, (900, 700) id 2; [1000,2000)
(1500, 1700); [2000,3000) (2100, 2900); a.x is 1, 2, 4, 8 in that order."""


def test_a_window_over_a_joins_output_by_its_start_and_by_a_joined_timestamp(
    spark: Any, tmp_path: Path
) -> None:
    # By the join's start (0, 0, 1000, 2000) in windows of 1500 ms: [0,1500) 3 pairs, x 1+2+4;
    # [1500,3000) 1 pair, x 8. An unqualified x is the left input's (a.x).
    _both(
        spark,
        f"SELECT start, end, COUNT(*) AS n, SUM(x) AS sx FROM ({JOIN_AB}) "
        "WINDOW TUMBLING(start, SIZE 1500 MS) INTO File()",
        tmp_path,
        [(0, 1500, 3, 7), (1500, 3000, 1, 8)],
    )
    # By ts, a's timestamp (the first ts of the join's output): 100, 900 | 1500, 2100.
    _both(
        spark,
        f"SELECT start, end, COUNT(*) AS n, SUM(x) AS sx FROM ({JOIN_AB}) "
        "WINDOW TUMBLING(ts, SIZE 1500 MS) INTO File()",
        tmp_path,
        [(0, 1500, 2, 3), (1500, 3000, 2, 12)],
    )


def test_a_window_join_of_two_window_outputs(spark: Any, tmp_path: Path) -> None:
    # Left: s per k in 1 s windows (k=1: starts 0 c=2, 2000 c=1, 5000 c=1; k=2: 1000, 3000).
    # Right: a per id in 500 ms windows (id 1: starts 0 sx=1, 1500 sx=4, 2000 sx=8; id 2: 500
    # sx=2). Joined on k = id in 2 s windows over each side's start: [0,2000) k1 x (id1 0, id1
    # 1500), k2 x id2 500; [2000,4000) k1 x id1 2000; 5000 and 3000 find no partner.
    _both(
        spark,
        "SELECT start, end, k, c, sx FROM (SELECT start, end, k, COUNT(*) AS c FROM s "
        "GROUP BY k WINDOW TUMBLING(ts, SIZE 1 SEC)) INNER JOIN (SELECT start, end, id, "
        "SUM(x) AS sx FROM a GROUP BY id WINDOW TUMBLING(ts, SIZE 500 MS)) ON k = id "
        "WINDOW TUMBLING(start, SIZE 2 SEC) INTO File()",
        tmp_path,
        [(0, 2000, 1, 2, 1), (0, 2000, 1, 2, 4), (0, 2000, 2, 1, 2), (2000, 4000, 1, 1, 8)],
    )


THREE_WAY = (
    "SELECT start, ts, b.ts AS bts, c.ts AS cts FROM a INNER JOIN b ON a.id = b.id "
    "WINDOW TUMBLING(ts, SIZE 1 SEC) INNER JOIN c ON c.x >= b.x * INT64(10) "
    "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO File()"
)


def test_three_streams_joined_in_a_chain(spark: Any, tmp_path: Path) -> None:
    # The second join windows the first one's rows by their first ts (a's: 100, 900 | 1500 |
    # 2100) and c's rows by theirs (300 | 1100, 1800 | 2200), and keeps c.x >= 10 * b.x:
    # [0,1000): c 100 >= 10 * 10 (b 200) only; [1000,2000): c 400 >= 10 * 40; [2000,3000):
    # 800 >= 10 * 80. START is the second join's window, ts is a's.
    _both(
        spark,
        THREE_WAY,
        tmp_path,
        [(0, 100, 200, 300), (1000, 1500, 1700, 1800), (2000, 2100, 2900, 2200)],
    )


# ---- what Spark cannot run: refused when the query is bound ------------------------------------


@pytest.mark.quick
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            f"SELECT start, end, COUNT(*) AS n FROM ({INNER}) WINDOW TUMBLING(c, SIZE 1 SEC) "
            "INTO File()",
            "aggregate of a window's output",
        ),
        (
            f"SELECT start, end, COUNT(*) AS n FROM ({INNER} UNION {INNER}) "
            "WINDOW TUMBLING(start, SIZE 2 SEC) INTO File()",
            "UNION of windowed queries",
        ),
        (
            f"SELECT start, end, COUNT(*) AS n FROM (SELECT start + UINT64(1) AS t FROM "
            f"({INNER})) WINDOW TUMBLING(t, SIZE 2 SEC) INTO File()",
            "computed from a window's output",
        ),
        (
            f"SELECT start, end, COUNT(*) AS n FROM ({JOIN_AB}) WINDOW TUMBLING(b.x, SIZE 1 SEC) "
            "INTO File()",
            "not the join's own event-time field",
        ),
        (
            f"SELECT * FROM ({INNER}) INNER JOIN ({JOIN_AB}) ON c > id "
            "WINDOW SLIDING(start, SIZE 500 MS, ADVANCE BY 1 SEC) INTO File()",
            "gaps between its windows",
        ),
    ],
)
def test_stacked_windows_without_a_faithful_spark_plan_are_refused(
    text: str, fragment: str
) -> None:
    with pytest.raises(PlannerError) as caught:
        bound_plan(text, SOURCES)
    assert caught.value.code == NOT_SUPPORTED
    assert fragment in caught.value.message
