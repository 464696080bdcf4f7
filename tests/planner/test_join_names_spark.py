"""NebulaStream's name resolution over joins and window outputs, and joins of three streams.

NebulaStream qualifies a source's fields with its name (``STREAM$ID``; query_api.md, the sink
schema of the complete query example: ``lrb$start``, ``lrb$highway``) and resolves a field
name in an operator's input schema by ``Schema::getFieldByName`` (see planner/scopes.py
``_matches``): a fully qualified name (or an unqualified field, such as an ``AS`` alias) that
matches exactly wins; otherwise the fields whose name after the qualifier matches, the *first*
in schema order when several do. A join's output is START, END, the left input's fields, the
right's (its START/END qualified by both inputs' qualifiers, ``AB$START``), so an unqualified
name two joined sources share is the left (first-joined) source's; nothing is ambiguous. The
timestamp of a join is named alike on both sides (query_api.md: "the timestamp field must have
the same name for both input streams") and resolved on each side.

Binding is checked on the plan; one query of each kind runs on Spark and on the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.spark_runs import Col, bound_plan, csv_stream_reader, run_to_end
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.reference import run_reference
from streamctl.spark.translate import build

STREAM = [Col("ts", "UINT64", False), Col("id", "INT32"), Col("x", "INT64")]
CATALOG = MemoryCatalog({"a": list(STREAM), "b": list(STREAM), "c": list(STREAM)})
ROWS: dict[str, list[tuple[int, int, int]]] = {
    "a": [(100, 1, 1), (900, 2, 2), (1500, 1, 4)],
    "b": [(200, 1, 10), (700, 2, 20), (1700, 3, 40)],
    "c": [(300, 1, 100), (1100, 1, 200)],
}


def _output(text: str) -> list[tuple[str, str]]:
    """The query's output columns (NES names) and the source field each one reads."""
    bound = bind_query(parse_query(text), CATALOG, allow_missing_sink=True)
    root = bound.plan.root
    assert isinstance(root, plan.Project)
    return [(out.name, _origin(root.input, out.expr)) for out in root.columns]


def _origin(operator: plan.Operator, expression: plan.Expr) -> str:
    """The internal field a pass-through column comes from, followed down to the join/scan."""
    assert isinstance(expression, plan.ColumnExpr)
    name = expression.name
    while isinstance(operator, plan.Project | plan.Filter):
        if isinstance(operator, plan.Project):
            source = next(c.expr for c in operator.columns if c.name == name)
            if not isinstance(source, plan.ColumnExpr):
                return name
            name = source.name
        operator = operator.input
    return name


@pytest.mark.quick
def test_an_unqualified_name_two_joined_sources_share_is_the_left_ones() -> None:
    text = (
        "SELECT ts, x, b.ts AS bts FROM a INNER JOIN b ON id = b.id WINDOW TUMBLING(ts, SIZE 1 SEC)"
    )
    assert _output(text) == [("A$TS", "A$TS"), ("A$X", "A$X"), ("BTS", "B$TS")]


@pytest.mark.quick
def test_a_qualified_name_picks_its_source() -> None:
    text = "SELECT b.id, a.id FROM a INNER JOIN b ON a.x = b.x WINDOW TUMBLING(ts, SIZE 1 SEC)"
    assert [name for name, _ in _output(text)] == ["B$ID", "A$ID"]
    # The join condition resolves names the same way: id = id is a.id = a.id.
    bound = bind_query(
        parse_query("SELECT * FROM a INNER JOIN b ON id = id WINDOW TUMBLING(ts, SIZE 1 SEC)"),
        CATALOG,
        allow_missing_sink=True,
    )
    join = next(op for op in plan.walk(bound.plan.root) if isinstance(op, plan.WindowJoin))
    assert join.condition is not None
    assert plan.describe_expr(join.condition) == "eq(A$ID, A$ID)"


@pytest.mark.quick
def test_an_exact_name_wins_over_a_qualified_field_of_that_name() -> None:
    # The right input's alias TS is unqualified: "ts" names it exactly, before A$TS.
    text = (
        "SELECT ts, a.ts AS ats FROM a INNER JOIN (SELECT ts AS ts, id AS bid FROM b) "
        "ON id = bid WINDOW TUMBLING(ts, SIZE 1 SEC)"
    )
    assert _output(text) == [("TS", "TS"), ("ATS", "A$TS")]


@pytest.mark.quick
def test_three_joined_streams_name_the_outer_window_and_the_first_source() -> None:
    text = (
        "SELECT start, end, ts, id FROM a INNER JOIN b ON a.id = b.id "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INNER JOIN c ON c.id = b.id "
        "WINDOW TUMBLING(ts, SIZE 2 SEC)"
    )
    names = [name for name, _ in _output(text)]
    assert names == ["ABC$START", "ABC$END", "A$TS", "A$ID"]
    bound = bind_query(parse_query(text), CATALOG, allow_missing_sink=True)
    outer = next(op for op in plan.walk(bound.plan.root) if isinstance(op, plan.WindowJoin))
    # The outer join windows the first join's rows by a's timestamp, c's rows by c's.
    assert (outer.left_time_column, outer.right_time_column) == ("A$TS", "C$TS")


def test_resolution_over_joins_runs_alike_on_spark_and_the_reference(
    spark: Any, tmp_path: Path
) -> None:
    # Pairs by 1 s window and a.id = b.id: [0,1000) (a100, b200) id 1, (a900, b700) id 2;
    # a1500/b1700 differ in id. The second join windows them by a's ts (both in [0,2000)) and
    # c by its own (300, 1100: [0,2000)), on c.id = b.id: id 1 pairs with both c rows.
    # "ts" is a's, "x" is a's, "id" a's.
    text = (
        "SELECT start, ts, x, id, c.ts AS cts FROM a INNER JOIN b ON a.id = b.id "
        "WINDOW TUMBLING(ts, SIZE 1 SEC) INNER JOIN c ON c.id = b.id "
        "WINDOW TUMBLING(ts, SIZE 2 SEC) INTO File()"
    )
    expected = [(0, 100, 1, 1, 300), (0, 100, 1, 1, 1100)]
    reference, on_spark = _on_reference_and_spark(spark, tmp_path, text, ROWS, "join_names")
    assert reference == expected
    assert on_spark == expected


def test_a_row_at_time_zero_passes_a_chain_of_joins(spark: Any, tmp_path: Path) -> None:
    """Found by the differential test: Spark counts an event at or before the watermark as
    late, and the second join of a chain dropped a row at ts = 0 while the watermark was still
    0. Window [0, 50) holds every row; a.id = b.id = c.id, so both rows of a pair with b and c
    (query_api.md: a window join pairs the rows of both inputs in the same window)."""
    rows = {"a": [(0, 1, 1), (43, 1, 2)], "b": [(9, 1, 3)], "c": [(24, 1, 4)]}
    text = (
        "SELECT start, ts, b.ts AS bts, c.ts AS cts FROM a INNER JOIN b ON a.id = b.id "
        "WINDOW TUMBLING(ts, SIZE 50 MS) INNER JOIN c ON a.id = c.id "
        "WINDOW TUMBLING(ts, SIZE 50 MS) INTO File()"
    )
    expected = [(0, 0, 9, 24), (0, 43, 9, 24)]
    reference, on_spark = _on_reference_and_spark(spark, tmp_path, text, rows, "join_at_zero")
    assert reference == expected
    assert on_spark == expected


def _on_reference_and_spark(
    spark: Any, tmp_path: Path, text: str, rows: dict[str, list[Any]], name: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``text`` over ``rows`` (every source of schema STREAM): the reference's rows and Spark's
    (bounded CSV streams run to the end), each sorted."""
    sources: dict[str, tuple[list[Col], Any]] = {n: (STREAM, r) for n, r in rows.items()}
    query_plan = bound_plan(text, sources)
    reference = sorted(run_reference(query_plan, rows))
    read_source = csv_stream_reader(spark, tmp_path / "sources", sources)
    translated = build(query_plan, spark, read_source, bounded=True)
    return reference, sorted(run_to_end(spark, translated, name, tmp_path / "checkpoint"))
