"""Property: stacked windows and three-way window joins give the same rows on Spark as on the
reference engine (DuckDB, streamctl/reference), for random small bounded inputs (duplicates,
out-of-order timestamps, NULL keys and values, empty windows) and random window shapes.

Spark runs cost seconds each, so few examples run here; the differential harness runs many.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.spark_runs import Col, bound_plan, run_to_end
from streamctl.reference import run_reference
from streamctl.spark.spark_types import spark_schema
from streamctl.spark.translate import build

STREAM = [Col("ts", "UINT64", False), Col("k", "INT32"), Col("v", "INT64")]
_RUNS = [0]

_rows = st.lists(
    st.tuples(
        st.integers(0, 3999),
        st.one_of(st.none(), st.integers(1, 2)),
        st.one_of(st.none(), st.integers(-5, 5)),
    ),
    min_size=0,
    max_size=8,
)
_window = st.sampled_from(
    [
        "TUMBLING({t}, SIZE 1 SEC)",
        "TUMBLING({t}, SIZE 1500 MS)",
        "SLIDING({t}, SIZE 2 SEC, ADVANCE BY 500 MS)",
        "SLIDING({t}, SIZE 500 MS, ADVANCE BY 1 SEC)",
    ]
)


def _same_on_both(
    spark: Any, text: str, rows: dict[str, list[tuple[Any, ...]]], tmp_path: Path
) -> None:
    _RUNS[0] += 1
    base = tmp_path / f"run{_RUNS[0]}"
    sources: dict[str, tuple[list[Col], Any]] = {name: (STREAM, r) for name, r in rows.items()}
    query_plan = bound_plan(text, sources)
    expected = sorted(run_reference(query_plan, rows), key=repr)

    def read_source(name: str) -> Any:
        directory = base / "sources" / name
        directory.mkdir(parents=True, exist_ok=True)
        lines = "".join(
            ",".join("" if value is None else str(value) for value in row) + "\n"
            for row in rows[name]
        )
        (directory / "part.csv").write_text(lines)
        return spark.readStream.schema(spark_schema(STREAM)).csv(str(directory))

    translated = build(query_plan, spark, read_source, bounded=True)
    actual = sorted(
        run_to_end(spark, translated, f"stacked_prop_{_RUNS[0]}", base / "ck"), key=repr
    )
    assert actual == expected, text


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=_rows,
    inner=_window,
    outer=_window,
    time=st.sampled_from(["start", "end"]),
    grouped=st.booleans(),
)
def test_a_window_over_a_windows_output_agrees_with_the_reference(
    spark: Any, tmp_path: Path, rows: Any, inner: str, outer: str, time: str, grouped: bool
) -> None:
    group = "GROUP BY k " if grouped else ""
    key = "k, " if grouped else ""
    text = (
        f"SELECT start, end, {key}SUM(total) AS s, COUNT(*) AS n, MAX(c) AS m FROM "
        f"(SELECT start, end, {key}SUM(v) AS total, COUNT(*) AS c FROM s {group}"
        f"WINDOW {inner.format(t='ts')}) {group}WINDOW {outer.format(t=time)} INTO File()"
    )
    _same_on_both(spark, text, {"s": rows}, tmp_path)


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=_rows,
    b=_rows,
    c=_rows,
    window=_window,
    second=_window.filter(lambda w: "ADVANCE BY 1 SEC" not in w),  # gapped: refused
)
def test_three_streams_joined_in_a_chain_agree_with_the_reference(
    spark: Any, tmp_path: Path, a: Any, b: Any, c: Any, window: str, second: str
) -> None:
    text = (
        "SELECT start, end, ts, b.ts AS bts, c.ts AS cts, v, c.v AS cv FROM a INNER JOIN b "
        f"ON a.k = b.k WINDOW {window.format(t='ts')} INNER JOIN c ON c.v >= b.v "
        f"WINDOW {second.format(t='ts')} INTO File()"
    )
    _same_on_both(spark, text, {"a": a, "b": b, "c": c}, tmp_path)
