"""Reoptimization: the decisions on their own, then ``Reoptimize`` and ``ListChanges`` through
the pass on both catalogs (a move stops the query on its agent and starts it on another only
once the stop is reported; every decision lands in the changelog with its reason)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_pass_activity import codes, run_pass
from test_query_requests import SETUP

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.outbox import new_id
from streamctl.planner.placement import AgentSlots
from streamctl.planner.reoptimization import (
    Move,
    QueryFacts,
    ReoptimizationPolicy,
    Restart,
    decide,
    lag_of,
    track_lag,
)
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentAction
from streamctl.protocol.pass_io import PassInput, PendingMessage, request_batches_json

pytestmark = pytest.mark.quick


def slots(name: str, active: int, capacity: int = 4, state: str = "ALIVE") -> AgentSlots:
    return AgentSlots(name, state, capacity, False, active)


def progress(input_rate: float, processed_rate: float) -> dict[str, float]:
    return {"input_rows_per_s": input_rate, "processed_rows_per_s": processed_rate}


def test_a_lag_streak_counts_lagging_intervals_ignores_idle_ones_and_resets_on_keeping_up():
    stats: dict[str, float] | None = None
    for processed in (40.0, 40.0):
        stats = track_lag(stats, progress(100.0, processed))
    stats = track_lag(stats, progress(0.0, 0.0))  # idle: says nothing
    stats = track_lag(stats, progress(100.0, 40.0))
    assert lag_of(stats) == (3, pytest.approx(0.4))
    assert lag_of(track_lag(stats, progress(100.0, 95.0))) == (0, 1.0)
    assert lag_of(None) == (0, 1.0)


def test_decisions_restart_move_and_rebalance_within_capacity():
    agents = [slots("a1", 3), slots("a2", 0, capacity=1), slots("s1", 1, state="SUSPECT")]
    queries = [
        QueryFacts(1, "RUNNING", "a1", lag_intervals=3, lag_ratio=0.4),
        QueryFacts(2, "RUNNING", "a1"),
        QueryFacts(3, "RUNNING", "a1"),
        QueryFacts(4, "FAILED", None, error="lost the connection", retryable=True),
        QueryFacts(5, "FAILED", None, error="bad cast", retryable=False),
        QueryFacts(6, "RUNNING", "s1"),
    ]
    decisions = decide(agents, queries)
    # Query 4 takes a1's last slot; a2's single slot goes to the query on the SUSPECT agent;
    # nothing is left for the lagging query 1 or for rebalancing.
    assert decisions == [
        Restart(
            4,
            "a1",
            "restarted query 4 on a1: it had failed with a retryable error (lost the connection)",
        ),
        Move(
            6, "s1", "a2", "moved query 6 from s1 to a2: s1 is SUSPECT (it missed its heartbeats)"
        ),
    ]

    roomy = [slots("a1", 3), slots("a2", 0)]
    lagging = [QueryFacts(1, "RUNNING", "a1", lag_intervals=3, lag_ratio=0.4), *queries[1:3]]
    assert decide(roomy, lagging) == [
        Move(
            1,
            "a1",
            "a2",
            "moved query 1 from a1 to a2: a1 processed 40% of its input rate for 3 intervals",
        ),
    ]
    # A new agent joins an unbalanced deployment: one query moves (3-0 -> 2-1); a query local
    # to its pinned source stays.
    pinned = [
        QueryFacts(1, "RUNNING", "a1", pinned_to=("a1",)),
        QueryFacts(2, "RUNNING", "a1"),
        QueryFacts(3, "RUNNING", "a1"),
    ]
    assert decide(roomy, pinned) == [
        Move(
            3,
            "a1",
            "a2",
            "moved query 3 from a1 to a2: rebalancing, a1 ran 3 queries and a2 0 of 4",
        ),
    ]
    assert decide(roomy, pinned[:1]) == []
    # Three lagging intervals are not enough under a stricter policy: only rebalancing moves.
    strict = ReoptimizationPolicy(lag_intervals=4)
    assert [d.reason.split(": ")[1] for d in decide(roomy, lagging, strict)] == [
        "rebalancing, a1 ran 3 queries and a2 0 of 4"
    ]


def run_pass_with_actions(
    activities: CatalogWork,
    pass_no: int,
    requests: list[m.Request],
    events: tuple[m.Event, ...] = (),
    max_restarts: int = 5,
) -> tuple[list[dict[str, Any]], list[AgentAction]]:
    envelopes = [request.to_envelope(new_id()) for request in requests]
    pending = [PendingMessage(event.to_envelope(f"e-{new_id()}"), 1000.0) for event in events]
    result = activities.apply_pass(
        PassInput("w", pass_no, 1000.0, pending, [1000.0], 30.0, 60.0, max_restarts),
        request_batches_json([envelopes]),
    )
    return json.loads(result.responses[0]), result.actions


def test_reoptimize_moves_a_lagging_query_only_after_its_agent_stopped_it(catalog_url):
    activities = CatalogWork(catalog_url)
    assert codes(run_pass(activities, 1, SETUP)) == ["ok"] * len(SETUP)
    run_pass(activities, 2, [], events=(m.RegisterWorker("a1", capacity=2),))
    [created] = run_pass(activities, 3, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 4, [], events=(m.RegisterWorker("a2", capacity=2),))
    running = m.QueryStatusChanged(query_id, "RUNNING", agent="a1", run=1)
    run_pass(activities, 5, [], events=(running,))
    for pass_no in (6, 7, 8):  # three lagging intervals, one per pass
        run_pass(activities, pass_no, [], events=(m.Statistics(query_id, progress(500, 200)),))

    [answer], actions = run_pass_with_actions(activities, 9, [m.Reoptimize()])
    reason = f"moved query {query_id} from a1 to a2: a1 processed 40% of its input rate for 3 "
    assert answer["result"] == {
        "decisions": [
            {"query": query_id, "move": {"from": "a1", "to": "a2"}, "reason": reason + "intervals"}
        ]
    }
    assert [(a.agent, a.stop is not None, a.start is not None) for a in actions] == [
        ("a1", True, False)
    ]
    [moving] = run_pass(activities, 10, [m.GetQuery(query_id)])
    assert (moving["result"]["current_state"], moving["result"]["worker"]) == ("STOPPING", "a1")

    # The stop is reported: the query starts on a2 (run 2) in the same pass.
    stopped = m.QueryStatusChanged(query_id, "STOPPED", agent="a1", run=1)
    _, actions = run_pass_with_actions(activities, 11, [], events=(stopped,))
    assert [(a.agent, a.start.run if a.start else None) for a in actions] == [("a2", 2)]
    [moved] = run_pass(activities, 12, [m.GetQuery(query_id)])
    assert (moved["result"]["current_state"], moved["result"]["worker"]) == ("STARTING", "a2")
    assert moved["result"]["statistics"] is None  # the streak stays with the agent it left

    [history] = run_pass(activities, 13, [m.ListChanges(entity="query", key=str(query_id))])
    steps = [(c["action"], c["reason"]) for c in history["result"]]
    assert [action for action, _ in steps][-4:] == [
        "move",
        "RUNNING->STOPPING",
        "STOPPING->STOPPED",
        "STOPPED->STARTING",
    ]
    assert steps[-4][1] == reason + "intervals"
    assert steps[-1][1] == "moved off a1: placed on a2"
    # A second Reoptimize right away changes nothing: the query is not running yet.
    [again] = run_pass(activities, 14, [m.Reoptimize()])
    assert again["result"] == {"decisions": []}


def test_reoptimize_restarts_a_retryable_failed_query_and_history_checks_its_limit(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP)
    run_pass(activities, 2, [], events=(m.RegisterWorker("a1", capacity=2),))
    [created] = run_pass(activities, 3, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    # It crashes under a policy of no restarts: FAILED at once, with a retryable error.
    crash = m.QueryStatusChanged(query_id, "CRASHED", "connection reset", agent="a1", run=1)
    run_pass_with_actions(activities, 4, [], events=(crash,), max_restarts=0)
    [failed] = run_pass(activities, 20, [m.GetQuery(query_id)])
    assert failed["result"]["current_state"] == "FAILED"

    [answer], actions = run_pass_with_actions(activities, 21, [m.Reoptimize()])
    [decision] = answer["result"]["decisions"]
    assert decision["restart"] == "a1"
    assert "retryable error (connection reset)" in decision["reason"]
    assert [(a.agent, a.start is not None) for a in actions] == [("a1", True)]
    [restarted] = run_pass(activities, 22, [m.GetQuery(query_id)])
    assert (restarted["result"]["current_state"], restarted["result"]["restarts"]) == (
        "STARTING",
        0,
    )

    [bad] = run_pass(activities, 23, [m.ListChanges(limit=0)])
    assert (bad["ok"], bad["error_code"]) == (False, "INVALID_REQUEST")
    [last_two] = run_pass(activities, 24, [m.ListChanges(limit=2)])
    assert len(last_two["result"]) == 2
    assert last_two["result"][-1]["action"] == "FAILED->STARTING"


def test_a_move_goes_back_to_its_agent_or_waits_when_its_target_left(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP)
    run_pass(activities, 2, [], events=(m.RegisterWorker("a1", capacity=2),))
    [created] = run_pass(activities, 3, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 4, [], events=(m.RegisterWorker("a2", capacity=2),))

    def lag_and_reoptimize(first_pass: int, agent: str, run: int) -> None:
        running = m.QueryStatusChanged(query_id, "RUNNING", agent=agent, run=run)
        run_pass(activities, first_pass, [], events=(running,))
        for offset in (1, 2, 3):
            stats = m.Statistics(query_id, progress(500, 200))
            run_pass(activities, first_pass + offset, [], events=(stats,))
        [answer] = run_pass(activities, first_pass + 4, [m.Reoptimize()])
        assert answer["result"]["decisions"][0]["move"]["from"] == agent

    # The target leaves before the stop is reported: rather than not run, the query goes back
    # to the agent it left, the only one with room.
    lag_and_reoptimize(5, "a1", 1)
    run_pass(activities, 10, [], events=(m.UnregisterWorker("a2"),))
    stopped = m.QueryStatusChanged(query_id, "STOPPED", agent="a1", run=1)
    _, actions = run_pass_with_actions(activities, 11, [], events=(stopped,))
    assert [(a.agent, a.start.run if a.start else None) for a in actions] == [("a1", 2)]

    # With no agent at all it waits STOPPED, still wanted RUNNING, and starts on the next one.
    run_pass(activities, 12, [], events=(m.RegisterWorker("a2", capacity=2),))
    lag_and_reoptimize(13, "a1", 2)
    _, actions = run_pass_with_actions(
        activities, 18, [], events=(m.UnregisterWorker("a2"), m.UnregisterWorker("a1"))
    )
    assert actions == []
    [waiting] = run_pass(activities, 19, [m.GetQuery(query_id)])
    assert (waiting["result"]["current_state"], waiting["result"]["desired_state"]) == (
        "STOPPED",
        "RUNNING",
    )
    _, actions = run_pass_with_actions(activities, 20, [], events=(m.RegisterWorker("a3", 2),))
    assert [(a.agent, a.start.run if a.start else None) for a in actions] == [("a3", 3)]
