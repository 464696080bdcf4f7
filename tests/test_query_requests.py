"""Query requests in the pass, on both catalogs and without agents: bad queries are refused at
create time with a message pointing at the problem; good ones wait in CREATED for an agent and
are placed (STARTING, with a start action) as soon as one registers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_pass_activity import codes, run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.outbox import new_id
from streamctl.domain import context
from streamctl.lifecycle.query_states import STOP_AGAIN_AFTER
from streamctl.limits import MORE_TO_START_DELAY
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import AgentAction, StopAssignment
from streamctl.protocol.pass_io import PassInput, PendingMessage, request_batches_json

pytestmark = pytest.mark.quick

ORDERS = (
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("amount", "INT64", False),
    m.ColumnSpec("ts", "UINT64", False),
)
BIG = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("amount", "INT64", False))
WRONG = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("amount", "VARSIZED", False))

SETUP: list[m.Request] = [
    m.CreateLogicalSource("orders", ORDERS),
    m.CreatePhysicalSource("orders", "FILE", {"file_path": "data/orders/"}),
    m.CreateLogicalSource("lonely", ORDERS),  # no physical source
    m.CreateSink("big", BIG, "FILE", {"file_path": "out/big"}),
    m.CreateSink("wrong", WRONG, "FILE", {"file_path": "out/wrong"}),
]

REFUSED = [
    ("SELEC id FROM orders INTO big", "SYNTAX_ERROR", "line 1, column 1"),
    ("SELECT id, amount\nFROM nowhere INTO big", "UNKNOWN_SOURCE", "line 2, column 6"),
    (
        "SELECT id, price FROM orders INTO big",
        "UNKNOWN_COLUMN",
        "column 12: unknown column 'PRICE'",
    ),
    ("SELECT id, amount FROM orders INTO wrong", "SINK_SCHEMA_MISMATCH", "wrong"),
    (
        "SELECT id, amount FROM orders INTO missing",
        "UNKNOWN_SINK",
        "column 36: unknown sink 'MISSING'",
    ),
    (
        "SELECT id, amount FROM File('/etc/passwd' AS `SOURCE`.FILE_PATH, "
        "SCHEMA(id UINT64 NOT NULL, amount INT64 NOT NULL) AS `SOURCE`.`SCHEMA`) INTO big",
        "INVALID_STATEMENT",
        "line 1, column 24: the inline FILE source's path '/etc/passwd' is outside the "
        "directories that file sources and sinks may use",
    ),
    ("SELECT id, amount FROM lonely INTO big", "INVALID_STATEMENT", "no physical source"),
    ("   ", "INVALID_REQUEST", "empty"),
]


@pytest.mark.parametrize(("statement", "code", "pointer"), REFUSED)
def test_bad_queries_are_refused_at_create_time(catalog_url, statement, code, pointer):
    activities = CatalogWork(catalog_url)
    assert codes(run_pass(activities, 1, SETUP)) == ["ok"] * len(SETUP)
    [answer] = run_pass(activities, 2, [m.CreateQuery(statement)])
    assert (answer["ok"], answer["error_code"]) == (False, code), answer
    assert pointer in answer["error_message"], answer["error_message"]
    [listed] = run_pass(activities, 3, [m.ListQueries()])
    assert listed["result"] == []  # nothing was created


def test_a_query_waits_for_an_agent_and_is_placed_when_one_registers(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP)
    [created] = run_pass(
        activities, 2, [m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 10 INTO big")]
    )
    query = created["result"]
    assert (query["current_state"], query["worker"], query["run"]) == ("CREATED", None, 0)
    assert "waiting for an alive agent" in query["error"]

    run_pass(activities, 3, [], events=(m.RegisterWorker("a1", capacity=1),))
    [got] = run_pass(activities, 4, [m.GetQuery(query["id"])])
    placed = got["result"]
    assert (placed["current_state"], placed["worker"], placed["run"]) == ("STARTING", "a1", 1)
    assert placed["sources"] == ["orders"]

    # The agent is full now: a second query waits.
    [second] = run_pass(activities, 5, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    assert second["result"]["current_state"] == "CREATED"
    # Reports move the first one; a stale report (earlier run) changes nothing.
    run_pass(
        activities,
        6,
        [],
        events=(
            m.QueryStatusChanged(query["id"], "RUNNING", agent="a1", run=1),
            m.QueryStatusChanged(query["id"], "CRASHED", "old", agent="a1", run=0),
        ),
    )
    [after] = run_pass(activities, 7, [m.GetQuery(query["id"])])
    assert (after["result"]["current_state"], after["result"]["error"]) == ("RUNNING", None)
    # Dropping the running query frees the agent: the waiting one is placed in the same pass.
    [dropped] = run_pass(activities, 8, [m.DropQuery(query["id"])])
    assert dropped["result"] == {"queries": [query["id"]]}
    [waiting] = run_pass(activities, 9, [m.GetQuery(second["result"]["id"])])
    assert (waiting["result"]["current_state"], waiting["result"]["worker"]) == ("STARTING", "a1")


def test_illegal_requests_on_a_query_are_refused_or_change_nothing(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP)
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    [stopped] = run_pass(activities, 3, [m.StopQuery(query_id)])
    assert stopped["result"]["current_state"] == "STOPPED"  # never ran: stopped at once
    [start] = run_pass(activities, 4, [m.StartQuery(query_id)])
    assert (start["ok"], start["error_code"]) == (False, "UNAVAILABLE")  # no agent
    [missing] = run_pass(activities, 5, [m.StopQuery(999)])
    assert missing["error_code"] == "NOT_FOUND"
    [dependents] = run_pass(activities, 6, [m.DropSink("big")])
    assert dependents["error_code"] == "HAS_DEPENDENTS"


def pass_result(
    activities: CatalogWork,
    pass_no: int,
    requests: list[m.Request],
    events: tuple[m.Event, ...] = (),
) -> tuple[list[dict[str, Any]], list[AgentAction]]:
    envelopes = [request.to_envelope(new_id()) for request in requests]
    pending = [PendingMessage(event.to_envelope(f"e-{new_id()}"), 1000.0) for event in events]
    result = activities.apply_pass(
        PassInput("w", pass_no, 1000.0, pending, [1000.0], 30.0, 60.0),
        request_batches_json([envelopes]),
    )
    return json.loads(result.responses[0]), result.actions


def test_agents_registering_again_or_reporting_strays_get_reconciled(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created], actions = pass_result(
        activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")]
    )
    query_id = created["result"]["id"]
    assert [(a.agent, a.start.query_id, a.start.run) for a in actions if a.start] == [
        ("a1", query_id, 1)
    ]
    assert actions[0].start is not None and actions[0].start.sources["orders"][0].type == "FILE"
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))

    # a1 registers again (it may have restarted): start its query there again, list what it runs
    _, actions = pass_result(activities, 4, [], events=(m.RegisterWorker("a1"),))
    assert [(a.agent, a.start.run if a.start else None, a.reconcile) for a in actions] == [
        ("a1", 2, False),
        ("a1", None, True),
    ]
    # another agent says it runs the query: that copy is stopped
    _, actions = pass_result(
        activities, 5, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a2", 1),)
    )
    assert [(a.agent, a.stop) for a in actions] == [("a2", StopAssignment(query_id, 1))]
    # a1 leaves: the query recovers, and waits because no other agent is there
    _, actions = pass_result(activities, 6, [], events=(m.UnregisterWorker("a1"),))
    assert actions == []
    [got] = run_pass(activities, 7, [m.GetQuery(query_id)])
    assert (got["result"]["current_state"], got["result"]["worker"]) == ("RECOVERING", None)
    # a replayed pass hands out the same actions again
    replayed = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0), request_batches_json([[]])
    )
    assert replayed.replayed and [a.start.run for a in replayed.actions if a.start] == [1]


def test_an_agent_declared_dead_that_heartbeats_again_is_back_and_reconciled(catalog_url):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created], _ = pass_result(
        activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")]
    )
    query_id = created["result"]["id"]

    def at(pass_no: int, now: float, event: m.Event, event_id: str) -> list[AgentAction]:
        result = activities.apply_pass(
            PassInput(
                "w",
                pass_no,
                now,
                [PendingMessage(event.to_envelope(event_id), now)],
                [now],
                30.0,
                60.0,
            ),
            request_batches_json([[]]),
        )
        return result.actions

    # 100 s without a heartbeat (a stalled agent): DEAD, its query recovers (no other agent).
    assert at(3, 1100.0, m.CheckLiveness(), "~liveness") == []
    [got] = run_pass(activities, 4, [m.GetWorker("a1")])
    assert got["result"]["state"] == "DEAD"
    # Its next heartbeat brings it back: reconciled, and the waiting query is placed on it.
    actions = at(5, 1101.0, m.Heartbeat("a1"), "hb-1")
    assert [(a.agent, a.reconcile, a.start.run if a.start else None) for a in actions] == [
        ("a1", True, None),
        ("a1", False, 2),
    ]
    [worker, query] = run_pass(activities, 6, [m.GetWorker("a1"), m.GetQuery(query_id)])
    assert worker["result"]["state"] == "ALIVE"
    assert (query["result"]["current_state"], query["result"]["worker"]) == ("STARTING", "a1")


@pytest.mark.parametrize(("report", "after"), [("CRASHED", "STOPPED"), ("FINISHED", "FINISHED")])
def test_a_run_that_ends_by_itself_while_its_stop_is_under_way_settles_the_query(
    catalog_url, report, after
):
    """Its Spark died, or its input ended, before the stop answered: nothing runs any more,
    so the query is STOPPED, or FINISHED (it used to stay STOPPING, holding its agent's
    slot)."""
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))
    [stopping] = run_pass(activities, 4, [m.StopQuery(query_id)])
    assert stopping["result"]["current_state"] == "STOPPING"
    ended = m.QueryStatusChanged(query_id, report, "[SPARK_LOST] gone", "a1", 1)
    run_pass(activities, 5, [], events=(ended,))
    [got] = run_pass(activities, 6, [m.GetQuery(query_id)])
    assert (got["result"]["current_state"], got["result"]["worker"]) == (after, None)
    assert got["result"]["retry_at"] is None


def test_an_agent_that_registers_again_is_told_again_to_stop_what_it_was_stopping(catalog_url):
    """A restarted agent reports nothing of a run it lost: the stop is sent to it again at once
    (not after STOP_AGAIN_AFTER), and its answer settles the query."""
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))
    run_pass(activities, 4, [m.StopQuery(query_id)])
    _, actions = pass_result(activities, 5, [], events=(m.RegisterWorker("a1"),))
    assert [(a.agent, a.stop, a.reconcile) for a in actions] == [
        ("a1", StopAssignment(query_id, 1), False),
        ("a1", None, True),
    ]
    run_pass(activities, 6, [], events=(m.QueryStatusChanged(query_id, "STOPPED", None, "a1", 1),))
    [got] = run_pass(activities, 7, [m.GetQuery(query_id)])
    assert got["result"]["current_state"] == "STOPPED"


def test_a_stopping_query_whose_agent_still_runs_it_is_stopped_again_at_a_bounded_rate(
    catalog_url,
):
    """The workflow's retries of a stop can give up while the agent still runs the query
    (every attempt refused, or never taken). Its periodic RUNNING report of that run then
    brings another stop, at most once per STOP_AGAIN_AFTER, until the agent confirms."""
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))
    [stopping], actions = pass_result(activities, 4, [m.StopQuery(query_id)])
    assert stopping["result"]["current_state"] == "STOPPING"
    assert [(a.agent, a.stop) for a in actions] == [("a1", StopAssignment(query_id, 1))]

    def report(pass_no: int, now: float, run: int = 1) -> list[AgentAction]:
        events = [m.Heartbeat("a1"), m.QueryStatusChanged(query_id, "RUNNING", None, "a1", run)]
        result = activities.apply_pass(
            PassInput(
                "w",
                pass_no,
                now,
                [PendingMessage(e.to_envelope(f"e-{new_id()}"), now) for e in events],
                [now],
                30.0,
                60.0,
            ),
            request_batches_json([[]]),
        )
        return result.actions

    stop_again = [("a1", StopAssignment(query_id, 1))]
    # The first stop's own retries are still under way: no second stop yet.
    assert report(5, 1000.0 + STOP_AGAIN_AFTER - 1) == []
    # They gave up and the run goes on: the stop is sent again, once per period.
    assert [(a.agent, a.stop) for a in report(6, 1000.0 + STOP_AGAIN_AFTER)] == stop_again
    assert report(7, 1000.0 + STOP_AGAIN_AFTER + 5) == []
    assert report(8, 1000.0 + 2 * STOP_AGAIN_AFTER - 1) == []
    assert [(a.agent, a.stop) for a in report(9, 1000.0 + 2 * STOP_AGAIN_AFTER)] == stop_again
    # A report of an older run is a stray: stopped as such, whatever the period.
    assert report(10, 1000.0 + 2 * STOP_AGAIN_AFTER + 1, run=0) == [
        AgentAction("a1", stop=StopAssignment(query_id, 0))
    ]
    [still] = run_pass(activities, 11, [m.GetQuery(query_id)])
    assert (still["result"]["current_state"], still["result"]["worker"]) == ("STOPPING", "a1")
    # The agent confirms: STOPPED, nothing pending, and later reports of the run are strays.
    run_pass(activities, 12, [], events=(m.QueryStatusChanged(query_id, "STOPPED", None, "a1", 1),))
    [stopped] = run_pass(activities, 13, [m.GetQuery(query_id)])
    assert (stopped["result"]["current_state"], stopped["result"]["retry_at"]) == ("STOPPED", None)


@pytest.mark.parametrize(
    ("error", "state"),
    [
        ("[CAST_INVALID_INPUT] The value 'x' cannot be cast to BIGINT. SQLSTATE: 22018", "FAILED"),
        ("[USER_RAISED_EXCEPTION] source 1: column 'ID' cannot take 'x' SQLSTATE: P0001", "FAILED"),
        ("Connection refused: 127.0.0.1:1", "RECOVERING"),
    ],
)
def test_a_query_failing_on_its_input_fails_at_once_other_crashes_restart(
    catalog_url, error, state
):
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1"),))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id = created["result"]["id"]
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))
    run_pass(activities, 4, [], events=(m.QueryStatusChanged(query_id, "CRASHED", error, "a1", 1),))
    [got] = run_pass(activities, 5, [m.GetQuery(query_id)])
    assert (got["result"]["current_state"], got["result"]["error"]) == (state, error)


@pytest.mark.parametrize("room", [0, 1, 3])
def test_a_pass_starts_no_more_queries_than_the_workflow_has_room_for(catalog_url, room):
    # Temporal fails every workflow task that would hold more than 2,000 pending activities:
    # the starts a pass decides are bounded by the workflow's room (PassInput.action_room).
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1", capacity=20),))
    creates = [
        m.CreateQuery(f"SELECT id, amount FROM orders WHERE amount > {n} INTO big")
        for n in range(5)
    ]
    envelopes = [request.to_envelope(new_id()) for request in creates]
    result = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0, action_room=room),
        request_batches_json([envelopes]),
    )
    assert all(answer["ok"] for answer in json.loads(result.responses[0]))
    assert len([a for a in result.actions if a.start]) == room
    assert result.starts_waiting  # the workflow puts off continue-as-new while so
    # the rest wait (CREATED) and start in the next pass with room
    later = activities.apply_pass(
        PassInput("w", 3, 1000.0, [], [], 30.0, 60.0, action_room=10), request_batches_json([])
    )
    assert len([a for a in later.actions if a.start]) == 5 - room
    assert not later.starts_waiting


def test_a_pass_starts_at_most_max_starts_per_pass_and_asks_for_the_next_pass_soon(
    catalog_url, monkeypatch
):
    # The workflow schedules a pass's starts in one workflow task (and again in a replay):
    # their number is bounded whatever the room, and the queries past it start in the next
    # pass, which the result asks for at once (its liveness deadline is the pass's now + a
    # moment), not when some other message comes.
    monkeypatch.setattr(context, "MAX_STARTS_PER_PASS", 2)
    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1", capacity=20),))
    creates = [
        m.CreateQuery(f"SELECT id, amount FROM orders WHERE amount > {n} INTO big")
        for n in range(5)
    ]
    result = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0, action_room=100),
        request_batches_json([[request.to_envelope(new_id()) for request in creates]]),
    )
    assert len([a for a in result.actions if a.start]) == 2
    assert result.next_liveness_deadline == 1000.0 + MORE_TO_START_DELAY
    assert result.starts_waiting
    started = 2
    for pass_no in (3, 4):
        later = activities.apply_pass(
            PassInput("w", pass_no, 1000.0, [], [], 30.0, 60.0, action_room=100),
            request_batches_json([]),
        )
        started += len([a for a in later.actions if a.start])
    assert started == 5
    assert not later.starts_waiting


def a_stopped_query(activities: CatalogWork, capacity: int) -> int:
    """Passes 1 to 5: agent a1 with ``capacity``, a query created, RUNNING there, then STOPPED."""
    run_pass(activities, 1, SETUP, events=(m.RegisterWorker("a1", capacity=capacity),))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id, amount FROM orders INTO big")])
    query_id: int = created["result"]["id"]
    run_pass(activities, 3, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 1),))
    run_pass(activities, 4, [m.StopQuery(query_id)])
    run_pass(activities, 5, [], events=(m.QueryStatusChanged(query_id, "STOPPED", None, "a1", 1),))
    return query_id


def test_a_start_without_room_waits_stopped_and_a_later_pass_starts_it(catalog_url):
    # A pass may have no room for starts (the workflow's actions under way, or a run draining
    # for continue-as-new): a user's StartQuery of a stopped query is accepted, not refused
    # UNAVAILABLE, and the next pass with room starts it.
    activities = CatalogWork(catalog_url)
    query_id = a_stopped_query(activities, capacity=20)  # passes 1 to 5

    start = m.StartQuery(query_id).to_envelope(new_id())
    no_room = activities.apply_pass(
        PassInput("w", 6, 1000.0, [], [1000.0], 30.0, 60.0, action_room=0),
        request_batches_json([[start]]),
    )
    [answer] = json.loads(no_room.responses[0])
    assert answer["ok"], answer
    assert answer["result"]["current_state"] == "STOPPED"
    assert answer["result"]["desired_state"] == "RUNNING"
    assert not [a for a in no_room.actions if a.start]
    assert no_room.starts_waiting  # the workflow asks for the next pass at once

    later = activities.apply_pass(
        PassInput("w", 7, 1000.0, [], [], 30.0, 60.0, action_room=10), request_batches_json([])
    )
    [action] = [a for a in later.actions if a.start]
    assert action.start is not None and action.start.query_id == query_id
    [got] = run_pass(activities, 8, [m.GetQuery(query_id)])
    assert got["result"]["current_state"] == "STARTING"

    # A stop before that pass cancels the waiting start.
    run_pass(activities, 9, [], events=(m.QueryStatusChanged(query_id, "RUNNING", None, "a1", 2),))
    run_pass(activities, 10, [m.StopQuery(query_id)])
    run_pass(activities, 11, [], events=(m.QueryStatusChanged(query_id, "STOPPED", None, "a1", 2),))
    activities.apply_pass(
        PassInput("w", 12, 1000.0, [], [1000.0], 30.0, 60.0, action_room=0),
        request_batches_json([[m.StartQuery(query_id).to_envelope(new_id())]]),
    )
    run_pass(activities, 13, [m.StopQuery(query_id)])
    quiet = activities.apply_pass(
        PassInput("w", 14, 1000.0, [], [], 30.0, 60.0, action_room=10), request_batches_json([])
    )
    assert not [a for a in quiet.actions if a.start]


def test_a_start_without_room_and_without_capacity_is_refused(catalog_url):
    # Waiting for room is for a start that can be placed: with no agent able to take the query,
    # the answer is UNAVAILABLE whatever the room, as with room.
    activities = CatalogWork(catalog_url)
    first_id = a_stopped_query(activities, capacity=1)  # passes 1 to 5
    [second] = run_pass(
        activities, 6, [m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 1 INTO big")]
    )
    assert second["result"]["current_state"] == "STARTING"  # the agent's only slot

    result = activities.apply_pass(
        PassInput("w", 7, 1000.0, [], [1000.0], 30.0, 60.0, action_room=0),
        request_batches_json([[m.StartQuery(first_id).to_envelope(new_id())]]),
    )
    [answer] = json.loads(result.responses[0])
    assert answer["error_code"] == "UNAVAILABLE"
    assert "no alive agent has free capacity" in answer["error_message"]
