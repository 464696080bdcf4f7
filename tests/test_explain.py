"""EXPLAIN in the pass, on both catalogs: the bound plan and placement come at once, Spark's
plan is asked from an agent (an ``explain`` action) and answered later through
``SparkPlanExplained`` into ``GetExplanation``; nothing a user sees is created, inline sources
included. (Spark's real plan through a real agent: ``tests/test_stack.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_pass_activity import codes, run_pass
from test_query_requests import SETUP, pass_result

from streamctl.activities.pass_activity import CatalogWork
from streamctl.planner.plan import QueryPlan, Scan, walk
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick

INLINE = (
    "EXPLAIN SELECT id FROM File('a.csv' AS `SOURCE`.FILE_PATH, "
    "SCHEMA(id UINT64 NOT NULL) AS `SOURCE`.`SCHEMA`) INTO Checksum()"
)


def test_spark_plan_comes_from_the_agent_the_query_would_run_on(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [explained], actions = pass_result(
        activities, 2, [m.ExplainQuery("SELECT id, amount FROM orders WHERE amount > 3 INTO big")]
    )
    answer = explained["result"]
    assert (answer["placement"], answer["sink"], answer["sources"]) == ("a1", "big", ["orders"])
    assert "FILTER" in answer["plan"].upper()
    [action] = actions
    assert action.agent == "a1" and action.explain is not None
    assert action.explain.explanation_id == answer["explanation"]
    assert action.explain.query.sources["orders"][0].type == "FILE"
    assert action.explain.query.sink.name == "big"

    [waiting] = run_pass(activities, 3, [m.GetExplanation(answer["explanation"])])
    assert waiting["result"]["ready"] is False
    done = m.SparkPlanExplained(answer["explanation"], "a1", "== Physical Plan ==\n* Filter")
    late = m.SparkPlanExplained(answer["explanation"], "a1", None, "late duplicate")
    run_pass(activities, 4, [], events=(done,))
    run_pass(activities, 5, [], events=(late,))
    [ready, queries] = run_pass(
        activities, 6, [m.GetExplanation(answer["explanation"]), m.ListQueries()]
    )
    assert ready["result"] == {
        "id": answer["explanation"],
        "agent": "a1",
        "ready": True,
        "spark_plan": "== Physical Plan ==\n* Filter",
        "error": None,
    }
    assert queries["result"] == []


def test_without_an_alive_agent_there_is_no_spark_plan_to_ask_for(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP)
    [explained], actions = pass_result(
        activities, 2, [m.ExplainQuery("SELECT id, amount FROM orders INTO big")]
    )
    assert (explained["result"]["placement"], explained["result"]["explanation"]) == (None, None)
    assert actions == []
    [missing] = run_pass(activities, 3, [m.GetExplanation(99)])
    assert codes([missing]) == ["NOT_FOUND"]


def test_inline_sources_are_explained_as_they_would_run_without_being_created(
    catalog_url, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("STREAMCTL_FILES_DIR", str(tmp_path))
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, [], events=(m.RegisterWorker("a1"),))
    [explained], [action] = pass_result(activities, 2, [m.ExecuteStatement(INLINE)])
    answer = explained["result"]["statements"][0]["result"]
    assert answer["sources"] == ["query0.source1"] and answer["sink"] == "query0.sink"
    assert action.explain is not None
    query = action.explain.query
    assert query.sources["query0.source1"][0].config["file_path"] == str(tmp_path / "a.csv")
    assert query.sink.type == "CHECKSUM"
    scans = walk(QueryPlan.from_json_text(query.plan).root)
    assert [op.source for op in scans if isinstance(op, Scan)] == ["query0.source1"]
    [sources, sinks] = run_pass(activities, 3, [m.ListLogicalSources(), m.ListSinks()])
    assert (sources["result"], sinks["result"]) == ([], [])
