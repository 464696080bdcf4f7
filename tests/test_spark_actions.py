"""The Spark actions an agent hosts, on real Spark: start (idempotent), list, stop, resume from
the checkpoint without loss or duplicates, refuse a plan that cannot run, report termination."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from streamctl.agent.runs import SparkQueries
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
from streamctl.planner.parser import parse_query
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    ExplainAssignment,
    QueryAssignment,
    SinkAssignment,
    SourceAssignment,
    StopAssignment,
    query_name,
)
from streamctl.spark.sink_writers import read_file_sink
from streamctl.spark.specs import SinkSpec

pytestmark = pytest.mark.spark

ORDERS = [
    {"name": "id", "type": "UINT64", "nullable": False},
    {"name": "amount", "type": "INT64", "nullable": False},
    {"name": "ts", "type": "UINT64", "nullable": False},
]
BIG = [
    {"name": "id", "type": "UINT64", "nullable": False},
    {"name": "amount", "type": "INT64", "nullable": False},
]
TIMEOUT_S = 90


def assignment(query_id: int, run: int, source_dir: Path, sink_dir: Path) -> QueryAssignment:
    catalog = MemoryCatalog(
        {"orders": [m.ColumnSpec(**c) for c in ORDERS]},
        [SinkInfo("big", [m.ColumnSpec(**c) for c in BIG], "FILE", {})],
    )
    bound = bind_query(
        parse_query("SELECT id, amount FROM orders WHERE amount > 10 INTO big"), catalog
    )
    return QueryAssignment(
        query_id=query_id,
        run=run,
        plan=bound.plan.to_json_text(),
        sources={"orders": [SourceAssignment(1, "FILE", {"file_path": f"{source_dir}/"}, ORDERS)]},
        sink=SinkAssignment("big", "FILE", {"file_path": str(sink_dir)}, BIG),
    )


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_start_is_idempotent_and_a_restart_resumes_from_the_checkpoint(spark, tmp_path):
    source_dir, sink_dir = tmp_path / "orders", tmp_path / "big"
    source_dir.mkdir()
    events: list[m.Event] = []
    queries = SparkQueries(spark, "a1", tmp_path / "checkpoints", tmp_path / "work", events.append)
    sink_spec = SinkSpec("big", "FILE", {"file_path": str(sink_dir)}, BIG)

    def sink_rows() -> list[tuple[Any, ...]]:
        return sorted(read_file_sink(None, sink_spec, query_name(7)))

    first = assignment(7, 1, source_dir, sink_dir)
    assert queries.start(first).status == "RUNNING"
    assert queries.start(first).status == "RUNNING"  # already running: not started again
    assert [q.name for q in spark.streams.active].count(query_name(7)) == 1
    assert [(r.query_id, r.status, r.agent) for r in queries.list()] == [(7, "RUNNING", "a1")]

    (source_dir / "1.csv").write_text("1,5,1000\n2,50,1001\n3,70,1002\n")
    wait_for(lambda: len(sink_rows()) == 2, "the first file's rows")
    assert sink_rows() == [(2, 50), (3, 70)]

    assert queries.stop(StopAssignment(7, 1)).status == "STOPPED"
    assert queries.active_count() == 0
    wait_for(lambda: any(isinstance(e, m.QueryStatusChanged) for e in events), "a report")
    stopped = [e for e in events if isinstance(e, m.QueryStatusChanged)]
    assert [(e.query_id, e.status, e.agent, e.run) for e in stopped] == [(7, "STOPPED", "a1", 1)]

    # Written while nothing runs; the next start (another run, as after a move to another
    # agent with the same checkpoint root) must read it once and not re-read the first file.
    (source_dir / "2.csv").write_text("4,11,2000\n5,1,2001\n")
    assert queries.start(assignment(7, 2, source_dir, sink_dir)).status == "RUNNING"
    wait_for(lambda: len(sink_rows()) >= 3, "the second file's rows")
    time.sleep(2)  # a duplicate would show up in the next micro-batches
    assert sink_rows() == [(2, 50), (3, 70), (4, 11)]
    assert any(isinstance(e, m.Statistics) and e.query_id == 7 for e in events)
    queries.stop(StopAssignment(7, 2))
    assert queries.stop(StopAssignment(7, 2)).status == "STOPPED"  # nothing runs: still fine


def test_a_plan_that_cannot_run_is_refused_without_retries(spark, tmp_path):
    queries = SparkQueries(spark, "a1", tmp_path / "checkpoints", tmp_path / "work", print)
    bad = assignment(8, 1, tmp_path / "orders", tmp_path / "big")
    no_sources = QueryAssignment(bad.query_id, bad.run, bad.plan, {}, bad.sink)
    with pytest.raises(ApplicationError, match="'orders' has no physical source") as caught:
        queries.validate(no_sources)
    assert caught.value.non_retryable
    with pytest.raises(ApplicationError, match="query 8 cannot run on agent a1"):
        queries.start(QueryAssignment(8, 1, '{"not": "a plan"}', bad.sources, bad.sink))
    assert queries.list() == []


def test_a_bounded_query_reports_finished_once_its_input_is_processed(spark, tmp_path):
    events: list[m.Event] = []
    queries = SparkQueries(spark, "a1", tmp_path / "checkpoints", tmp_path / "work", events.append)
    data = tmp_path / "orders.csv"  # a file, not a directory: bounded input
    data.write_text("1,5,1000\n2,50,1001\n")
    job = assignment(9, 1, tmp_path, tmp_path / "big")
    bounded = QueryAssignment(
        job.query_id,
        job.run,
        job.plan,
        {"orders": [SourceAssignment(1, "FILE", {"file_path": str(data)}, ORDERS)]},
        job.sink,
    )
    queries.start(bounded)
    wait_for(lambda: any(isinstance(e, m.QueryStatusChanged) for e in events), "a report")
    [report] = [e for e in events if isinstance(e, m.QueryStatusChanged)]
    assert (report.query_id, report.status, report.error, report.run) == (9, "FINISHED", None, 1)
    sink = SinkSpec("big", "FILE", {"file_path": str(tmp_path / "big")}, BIG)
    assert read_file_sink(None, sink, query_name(9)) == [(2, 50)]
    assert queries.list() == []


@pytest.mark.parametrize("physical_sources", [1, 2])
def test_explain_plans_a_streaming_query_as_it_would_start(spark, tmp_path, physical_sources):
    """Spark's plan of a streaming query, with one physical source (its parsing analysed
    with the query's operators, a Relation) and with two (each read alone, then unioned); the
    session's own settings are as they were after it."""
    queries = SparkQueries(spark, "a1", tmp_path / "checkpoints", tmp_path / "work", print)
    job = assignment(0, 1, tmp_path / "orders", tmp_path / "big")
    (tmp_path / "orders").mkdir()
    source = job.sources["orders"][0]
    sources = [SourceAssignment(n + 1, source.type, source.config, ORDERS) for n in range(2)]
    query = QueryAssignment(
        job.query_id, job.run, job.plan, {"orders": sources[:physical_sources]}, job.sink
    )
    ansi_before = spark.conf.get("spark.sql.ansi.enabled")
    report = queries.explain(ExplainAssignment(5, query))
    assert report.error is None, report.error
    assert report.spark_plan is not None and "== Physical Plan ==" in report.spark_plan
    assert "Filter" in report.spark_plan, report.spark_plan
    assert spark.conf.get("spark.sql.ansi.enabled") == ansi_before
    assert [q.name for q in spark.streams.active if q.name == query_name(0)] == []
