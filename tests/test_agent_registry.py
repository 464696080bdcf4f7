"""How an agent keeps track of its Spark runs (isolated logic; a stand-in session, no Spark):
every end is reported exactly once, also when Spark reports it before the start action has
recorded the run, and an ended query is forgotten. (The real thing: tests/test_spark_actions.py
and tests/test_agent_process.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streamctl.agent.runs import SparkQueries, _Started
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick


def agent(tmp_path: Path) -> tuple[SparkQueries, list[m.Event]]:
    events: list[m.Event] = []
    session: Any = SimpleNamespace(streams=SimpleNamespace(addListener=lambda _listener: None))
    queries = SparkQueries(session, "a1", tmp_path / "cp", tmp_path / "work", events.append)
    return queries, events


def run(run_id: str, stopping: bool = False) -> _Started:
    return _Started(query=SimpleNamespace(isActive=False), run=1, run_id=run_id, stopping=stopping)  # type: ignore[arg-type]


def test_a_run_that_ends_after_its_start_was_recorded_is_reported_and_forgotten(tmp_path):
    queries, events = agent(tmp_path)
    queries._record_start(7, run("r7"))
    queries._record_start(8, run("r8", stopping=True))
    assert queries.active_count() == 2
    queries.on_terminated("r7", None)
    queries.on_terminated("r8", None)
    queries.on_terminated("r8", None)  # Spark never repeats it, but a repeat changes nothing
    assert [(e.query_id, e.status) for e in events] == [(7, "FINISHED"), (8, "STOPPED")]  # type: ignore[attr-defined]
    assert queries._recorded() == () and queries.active_count() == 0


def test_a_run_that_ends_before_its_start_was_recorded_is_reported_when_it_is(tmp_path):
    queries, events = agent(tmp_path)
    queries.on_terminated("r9", "boom")
    assert events == []
    queries._record_start(9, run("r9"))
    assert [(e.query_id, e.status, e.error) for e in events] == [(9, "CRASHED", "boom")]  # type: ignore[attr-defined]
    assert queries._recorded() == () and queries.active_count() == 0
