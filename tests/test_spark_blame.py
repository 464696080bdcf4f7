"""Which query a death of an agent's Spark is blamed on, and what the agent reports (isolated
logic: a stand-in Spark, no JVM; the real thing is tests/test_agent_spark_liveness.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streamctl.agent.runs import SparkQueries, _Started
from streamctl.lifecycle.query_states import contained, fails_on_its_input, lost_with_its_spark
from streamctl.lifecycle.spark_states import RunFacts, Strikes, suspect
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import QueryAssignment, SinkAssignment, StopAssignment

pytestmark = pytest.mark.quick


class StandInSpark:
    """A Spark handle whose death the test decides."""

    def __init__(self) -> None:
        self.session: Any = SimpleNamespace(
            streams=SimpleNamespace(addListener=lambda _listener: None)
        )
        self.generation = 1
        self.up = True

    def still_up(self, generation: int) -> bool:
        return self.up and generation == self.generation

    def wait_until_up(self, timeout: float, on_wait: Any = None) -> bool:
        return self.up

    def kill(self, generation: int, reason: str) -> bool:
        self.up = False
        return True


def agent(tmp_path: Path) -> tuple[SparkQueries, StandInSpark, list[m.Event]]:
    events: list[m.Event] = []
    spark = StandInSpark()
    queries = SparkQueries(
        spark.session, "a1", tmp_path / "cp", tmp_path / "work", events.append, spark=spark
    )
    return queries, spark, events


def run(run_id: str, started_at: float, **facts: Any) -> _Started:
    query: Any = SimpleNamespace(isActive=True)
    return _Started(query=query, run=3, run_id=run_id, started_at=started_at, **facts)


def test_the_longest_unfinished_work_is_blamed_then_a_fresh_run_then_nobody():
    runs = [
        RunFacts(1, started_at=0.0, busy_since=50.0, progressed=True),
        RunFacts(2, started_at=10.0, busy_since=20.0, progressed=False),
        RunFacts(3, started_at=90.0, busy_since=None, progressed=False),
    ]
    assert suspect(runs, now=100.0, window=60.0) == 2  # its batch has run for 80 s
    idle = [RunFacts(r.query_id, r.started_at, None, r.progressed) for r in runs]
    assert suspect(idle, now=100.0, window=60.0) == 3  # never completed a batch, fresh
    blamed_before = [*idle[:2], RunFacts(2, 10.0, None, False, strikes=1)]
    assert suspect(blamed_before, now=30.0, window=60.0) == 2
    assert suspect(idle, now=200.0, window=60.0) is None  # nothing points at anyone


def test_strikes_are_counted_per_query_and_forgotten():
    strikes = Strikes(memory=100.0)
    assert [strikes.add(7, 0.0), strikes.add(8, 1.0), strikes.add(7, 50.0)] == [1, 1, 2]
    assert strikes.count(7, 120.0) == 1 and strikes.add(7, 140.0) == 2


def test_a_lost_spark_reports_every_run_and_contains_the_culprit(tmp_path):
    queries, spark, events = agent(tmp_path)
    now = 1_000_000.0  # monotonic seconds, far from the stand-in runs' starts
    queries._record_start(1, run("r1", started_at=now - 500, progressed_at=now - 1))
    queries._record_start(2, run("r2", started_at=now - 400, busy_since=now - 400))
    spark.up = False
    queries.spark_lost(1, "the SparkContext stopped", by_itself=True)
    reports = {e.query_id: e for e in events if isinstance(e, m.QueryStatusChanged)}
    assert {q: (e.status, e.run, e.agent) for q, e in reports.items()} == {
        1: ("CRASHED", 3, "a1"),
        2: ("CRASHED", 3, "a1"),
    }
    assert lost_with_its_spark(reports[1].error or "")  # restarts at once, for free
    assert "strike 1 of 2" in (reports[2].error or "")  # an ordinary crash, counted
    assert not lost_with_its_spark(reports[2].error or "")
    assert queries.active_count() == 0 and queries._recorded() == ()

    # Back up; the culprit takes Spark down again and is contained.
    spark.generation, spark.up = 2, True
    queries._record_start(2, run("r2b", started_at=now, busy_since=now, generation=2))
    spark.up = False
    queries.spark_lost(2, "the SparkContext stopped", by_itself=True)
    last = [e for e in events if isinstance(e, m.QueryStatusChanged)][-1]
    assert last.query_id == 2 and contained(last.error or ""), last


def test_a_jvm_killed_from_outside_blames_nobody(tmp_path):
    queries, spark, events = agent(tmp_path)
    queries._record_start(1, run("r1", started_at=0.0, busy_since=0.0))
    spark.up = False
    queries.spark_lost(1, "the driver JVM (pid 9) was killed by signal 9", by_itself=False)
    [report] = [e for e in events if isinstance(e, m.QueryStatusChanged)]
    assert lost_with_its_spark(report.error or "")


def test_a_death_while_a_plan_is_explained_blames_no_running_query(tmp_path):
    """An EXPLAIN whose plan took Spark down got a busy running query blamed for it; two such
    explains contained that query (FAILED) though it had done nothing."""
    queries, spark, events = agent(tmp_path)
    queries._record_start(1, run("r1", started_at=0.0, busy_since=0.0))
    with queries._planning_work():
        spark.up = False
        queries.spark_lost(1, "the SparkContext stopped", by_itself=True)
    [report] = [e for e in events if isinstance(e, m.QueryStatusChanged)]
    assert lost_with_its_spark(report.error or ""), report  # restarts, no strike
    assert queries._planning == 0


def test_a_start_under_way_is_answered_with_its_blame_and_nothing_of_a_lost_spark_is_recorded(
    tmp_path,
):
    queries, spark, events = agent(tmp_path)
    queries._starting = (5, 0.0)
    spark.up = False
    queries.spark_lost(1, "the SparkContext stopped", by_itself=True)
    assert events == []  # its start answers for it
    assert "strike 1 of 2" in queries._verdicts[5]
    assert not queries._record_start(6, run("r6", started_at=0.0))  # Spark is down
    assert queries._recorded() == ()


def test_the_coordinator_reads_the_tags_only_where_the_agent_puts_them():
    lost = "[SPARK_LOST] the Spark of agent a1 went down"
    assert lost_with_its_spark(lost)
    assert lost_with_its_spark(f"start on a1 failed: {lost}")
    assert not lost_with_its_spark(f"[CAST_INVALID_INPUT] The value '{lost}' ...")
    assert contained("[CONTAINED] query 2 took the Spark of agent a1 down 2 times")
    assert not fails_on_its_input(lost)


def test_a_run_that_does_not_stop_is_ended_with_its_jvm(tmp_path):
    from streamctl.protocol.agent_contract import StopAssignment

    queries, spark, _events = agent(tmp_path)

    def stop() -> None:
        raise TimeoutError("Stream Execution thread failed to stop within 60000 ms")

    stuck: Any = SimpleNamespace(isActive=True, stop=stop)
    queries._record_start(4, _Started(query=stuck, run=2, run_id="r4"))
    report = queries.stop(StopAssignment(4, 2))
    assert (report.status, spark.up) == ("STOPPED", False)  # its Spark was killed for it


def test_a_start_that_comes_after_its_stop_does_not_run(tmp_path):
    """A stop of run N that reaches the agent before the start of run N (the start waited for
    Spark, or was retried after AgentBusy) answered STOPPED, and the start then ran the query:
    a run the coordinator had stopped, possibly beside a new run elsewhere on one checkpoint.
    Now the agent remembers the stop; a later run starts as usual."""
    queries, _spark, _events = agent(tmp_path)
    started: list[Any] = []

    def start_on_spark(assignment: Any) -> Any:
        run_query: Any = SimpleNamespace(isActive=True, runId=f"r{len(started)}", stop=lambda: None)
        started.append(run_query)
        return run_query

    queries._start_on_spark = start_on_spark  # type: ignore[method-assign]
    sink = SinkAssignment("s", "VOID", {}, [])
    assert queries.stop(StopAssignment(7, 1)).status == "STOPPED"
    late = queries.start(QueryAssignment(7, 1, "{}", {}, sink))
    assert late.status == "STOPPED" and started == [] and queries.active_count() == 0
    again = queries.start(QueryAssignment(7, 2, "{}", {}, sink))  # a new start: a new run
    assert again.status == "RUNNING" and len(started) == 1
