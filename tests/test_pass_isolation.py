"""No message can fail a pass: bounds where messages are decoded, one savepoint per message when
a batch fails together, and quarantine of what still fails (DESIGN §3, issue 16 items 1-2).

Run against the pass activity directly, on SQLite and PostgreSQL, so every case is one catalog
transaction without Temporal around it. On f29f918 the first test's pass raised
``OverflowError`` (SQLite) or ``NumericValueOutOfRange`` (PostgreSQL) on every attempt, which
wedged the coordinator for good; the handler-fault tests raised out of the pass or left half a
change behind.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from catalog_tools import dump, worker_values
from sqlalchemy import select
from sqlalchemy.orm import Session
from test_pass_activity import codes, run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.catalog.models import LogicalSource, QuarantinedMessage, SnapshotVersion, Worker
from streamctl.catalog.rows import LogicalSourceRow
from streamctl.catalog.store import create_catalog_engine
from streamctl.domain import context, pass_output, passes
from streamctl.domain.context import PassContext
from streamctl.domain.pass_requests import Request
from streamctl.error_codes import asks_again
from streamctl.limits import INT32_MAX, INT64_MAX
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Envelope, Response
from streamctl.protocol.pass_io import PassInput, PendingMessage, request_batches_json

pytestmark = pytest.mark.quick

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


def quarantined(url: str) -> list[QuarantinedMessage]:
    engine = create_catalog_engine(url)
    try:
        with Session(engine) as session:
            rows = list(session.scalars(select(QuarantinedMessage)))
            session.expunge_all()
            return rows
    finally:
        engine.dispose()


def workers(url: str) -> dict[str, int]:
    return worker_values(url, "capacity")


def test_an_oversized_capacity_is_refused_and_the_rest_of_the_pass_commits(catalog_url):
    """Measurement 1 of issue 16, and the same value through the typed event."""
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [
            m.ExecuteStatement("CREATE WORKER w SET(99999999999999999999 AS CAPACITY)"),
            m.CreateLogicalSource("b", SCHEMA),
            m.ExecuteStatement(f"CREATE WORKER v SET({INT32_MAX + 1} AS CAPACITY)"),
            m.ExecuteStatement(f"CREATE WORKER u SET({INT32_MAX} AS CAPACITY)"),
        ],
        events=(m.RegisterWorker("big", capacity=2**40), m.RegisterWorker("small", capacity=3)),
    )
    assert codes(answers) == ["INVALID_STATEMENT", "ok", "INVALID_STATEMENT", "ok"]
    assert "capacity" in answers[0]["error_message"]
    assert workers(catalog_url) == {"small": 3, "U": INT32_MAX}  # unquoted names upper-case
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["b"]
    # The next pass is answered as usual.
    assert codes(run_pass(activities, 2, [m.GetLogicalSource("b")])) == ["ok"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "capacity": INT64_MAX + 1},
        {"name": "x", "capacity": -(2**64)},
        {"name": "x", "capacity": 2**31},
        {"name": "x", "capacity": "99999999999999999999"},
        {"name": "x", "capacity": 1e300},
        {"name": "x\x00y"},
        {"name": "x\ud800"},
        {"name": "x" * 10_000},
        {"name": "x", "task_queue": "q\x00"},
    ],
)
def test_out_of_bounds_event_fields_are_dropped_without_harm(catalog_url, body):
    activities = CatalogWork(catalog_url)
    bad = PendingMessage(Envelope("e-bad", "RegisterWorker", body), 1000.0)
    good = PendingMessage(m.RegisterWorker("good", capacity=2).to_envelope("e-good"), 1000.0)
    result = activities.apply_pass(
        PassInput("w", 1, 1000.0, [bad, good], [1000.0], 30.0, 60.0),
        request_batches_json([[m.CreateLogicalSource("s", SCHEMA).to_envelope("r1")]]),
    )
    assert codes(json.loads(result.responses[0])) == ["ok"]
    assert workers(catalog_url) == {"good": 2}


def test_a_handler_fault_costs_its_request_only_and_is_quarantined(catalog_url, monkeypatch):
    """A bug in a handler that changed the view half-way: its change is rolled back, its
    answer is INTERNAL with a reference that the quarantine keeps, and the others commit."""
    real = passes.REQUEST_HANDLERS[m.CreateLogicalSource.kind]

    def faulty(ctx: PassContext, request: Any) -> Any:
        if request.name == "poison":
            ctx.view.logical_sources.add(
                LogicalSourceRow(name="half", schema=[], created_version=1, updated_version=1)
            )
            raise RuntimeError("a bug")
        return real(ctx, request)

    monkeypatch.setitem(passes.REQUEST_HANDLERS, m.CreateLogicalSource.kind, faulty)
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("a", SCHEMA),
            m.CreateLogicalSource("poison", SCHEMA),
            m.CreateLogicalSource("b", SCHEMA),
        ],
    )
    assert codes(answers) == ["ok", "INTERNAL", "ok"]
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["a", "b"]
    [kept] = quarantined(catalog_url)
    assert kept.reference in answers[1]["error_message"]
    assert kept.kind == "CreateLogicalSource" and "poison" in kept.body
    # The answer is stored: a retry of the same id gets it again and applies nothing.
    monkeypatch.setitem(passes.REQUEST_HANDLERS, m.CreateLogicalSource.kind, real)
    again = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0),
        request_batches_json(
            [[Envelope(answers[1]["id"], "CreateLogicalSource", {"name": "poison", "schema": []})]]
        ),
    )
    assert json.loads(again.responses[0])[0]["error_code"] == "INTERNAL"


def test_an_event_handler_fault_drops_that_event_only(catalog_url, monkeypatch):
    real = passes.EVENT_HANDLERS[m.RegisterWorker.kind]

    def faulty(ctx: PassContext, event: Any, received_at: float) -> None:
        real(ctx, event, received_at)
        if event.name == "poison":
            raise KeyError("a bug after the change")

    monkeypatch.setitem(passes.EVENT_HANDLERS, m.RegisterWorker.kind, faulty)
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [m.CreateLogicalSource("a", SCHEMA)],
        events=(m.RegisterWorker("w1"), m.RegisterWorker("poison"), m.RegisterWorker("w2")),
    )
    assert codes(answers) == ["ok"]
    assert sorted(workers(catalog_url)) == ["w1", "w2"]
    assert [q.kind for q in quarantined(catalog_url)] == ["RegisterWorker"]


def test_request_ids_that_cannot_be_stored_are_refused(catalog_url):
    activities = CatalogWork(catalog_url)
    batch = [
        Envelope("x" * 300, "ListWorkers", {}),
        Envelope("nul\x00id", "ListWorkers", {}),
        Envelope("ok-id", "ListWorkers", {}),
    ]
    result = activities.apply_pass(
        PassInput("w", 1, 1000.0, [], [1000.0], 30.0, 60.0), request_batches_json([batch])
    )
    answers = json.loads(result.responses[0])
    assert codes(answers) == ["INVALID_REQUEST", "INVALID_REQUEST", "ok"]
    assert "255" in answers[0]["error_message"]


def test_a_pass_hands_back_at_most_its_result_budget(catalog_url, monkeypatch):
    """Answers stay under Temporal's payload limit by construction: reads that do not fit a
    pass's result are answered UNAVAILABLE (not stored, so the same id asks again)."""
    monkeypatch.setattr(pass_output, "MAX_PASS_RESULT_BYTES", 40_000)
    activities = CatalogWork(catalog_url)
    wide = tuple(m.ColumnSpec(f"c{i:03d}", "UINT64", False) for i in range(20))
    run_pass(activities, 1, [m.CreateLogicalSource(f"s{i}", wide) for i in range(10)])
    ids = [f"list-{i}" for i in range(10)]
    result = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0),
        request_batches_json([[m.ListLogicalSources().to_envelope(i) for i in ids]]),
    )
    answers = json.loads(result.responses[0])
    assert sum(len(r) for r in result.responses) < 2 * 40_000
    assert answers[0]["ok"]
    assert answers[-1]["error_code"] == "UNAVAILABLE"
    assert {a["error_code"] for a in answers} <= {None, "UNAVAILABLE"}
    # Asked again in a pass of its own, a read that did not fit is answered.
    again = activities.apply_pass(
        PassInput("w", 3, 1000.0, [], [1000.0], 30.0, 60.0),
        request_batches_json([[m.ListLogicalSources().to_envelope(ids[-1])]]),
    )
    assert json.loads(again.responses[0])[0]["ok"]


def test_writes_whose_answers_do_not_fit_are_applied_kept_and_answered_when_asked_again(
    catalog_url, monkeypatch
):
    """A write whose answer does not fit what is left of its pass's result is applied and its
    whole answer stored; the pass hands back UNAVAILABLE "... ask again", and the same id
    asked again gets the stored answer, itself within the budget of the pass that hands it
    back (once, not applied twice)."""
    monkeypatch.setattr(pass_output, "MAX_PASS_RESULT_BYTES", 40_000)
    activities = CatalogWork(catalog_url)
    wide = tuple(m.ColumnSpec(f"c{i:03d}_{'x' * 40}", "UINT64", False) for i in range(20))
    creates = [m.CreateLogicalSource(f"s{i}", wide).to_envelope(f"create-{i}") for i in range(80)]

    def apply(pass_no: int, envelopes: list[Envelope]) -> list[dict[str, Any]]:
        result = activities.apply_pass(
            PassInput("w", pass_no, 1000.0, [], [1000.0], 30.0, 60.0),
            request_batches_json([envelopes]),
        )
        # the results within the budget; each answer's own fields besides
        assert sum(len(r) for r in result.responses) < 40_000 + 200 * len(envelopes)
        answers: list[dict[str, Any]] = json.loads(result.responses[0])
        return answers

    first = apply(1, creates)
    asked_again = [a["id"] for a in first if a["error_code"] == "UNAVAILABLE"]
    assert first[0]["ok"] and asked_again, codes(first)
    assert {a["error_code"] for a in first} <= {None, "UNAVAILABLE"}
    assert all(a["error_message"].endswith("ask again") for a in first if not a["ok"])
    # Every create was applied, the unanswered ones too.
    with Session(create_catalog_engine(catalog_url)) as session:
        names = session.scalars(select(LogicalSource.name)).all()
    assert sorted(names) == sorted(f"s{i}" for i in range(80))
    # Asked again (all of them at once: the stored answers are budgeted too), each gets its
    # stored answer, the rest ask again once more, until every one is answered.
    pending = {e.id: e for e in creates if e.id in asked_again}
    answered: dict[str, dict[str, Any]] = {}
    for pass_no in range(2, 20):
        if not pending:
            break
        for answer in apply(pass_no, list(pending.values())):
            assert answer["error_code"] in (None, "UNAVAILABLE"), answer
            if answer["ok"]:
                answered[answer["id"]] = answer
                del pending[answer["id"]]
    assert not pending and sorted(answered) == sorted(asked_again)
    assert all(a["result"]["schema"][0]["name"] == wide[0].name for a in answered.values())


def test_requests_past_a_passs_work_time_are_not_applied_and_are_asked_again(
    catalog_url, monkeypatch
):
    """A pass applies requests for MAX_PASS_WORK_SECONDS (one at least); the later ones are
    answered UNAVAILABLE "... ask again", neither applied nor stored, and asked again they
    are applied. Events are applied whatever the time."""
    monkeypatch.setattr(passes, "MAX_PASS_WORK_SECONDS", 0.0)
    activities = CatalogWork(catalog_url)
    creates = [m.CreateLogicalSource(f"s{i}", SCHEMA).to_envelope(f"c-{i}") for i in range(4)]
    heartbeat = m.RegisterWorker("w1").to_envelope("e-register")
    result = activities.apply_pass(
        PassInput("w", 1, 1000.0, [PendingMessage(heartbeat, 1000.0)], [1000.0], 30.0, 60.0),
        request_batches_json([creates]),
    )
    first = json.loads(result.responses[0])
    assert codes(first) == ["ok"] + ["UNAVAILABLE"] * 3
    assert all(a["error_message"].endswith("ask again") for a in first[1:])
    # The metrics count them as asked again: the pass that applies them counts their outcome.
    assert result.tally is not None
    assert result.tally.outcomes == {"CreateLogicalSource": {"ok": 1, "asked_again": 3}}
    with Session(create_catalog_engine(catalog_url)) as session:
        assert session.scalars(select(LogicalSource.name)).all() == ["s0"]
        assert session.scalars(select(Worker.name)).all() == ["w1"]
    # Asked again, one per pass here: each is applied once, and the first is answered from
    # the store.
    for pass_no, envelope in enumerate(creates[1:], start=2):
        result = activities.apply_pass(
            PassInput("w", pass_no, 1000.0, [], [1000.0], 30.0, 60.0),
            request_batches_json([[creates[0], envelope]]),
        )
        assert codes(json.loads(result.responses[0])) == ["ok", "ok"]
    with Session(create_catalog_engine(catalog_url)) as session:
        assert sorted(session.scalars(select(LogicalSource.name)).all()) == [
            "s0",
            "s1",
            "s2",
            "s3",
        ]


def source_and_sink(catalog_url: str, agent: m.RegisterWorker) -> CatalogWork:
    """A catalog with a File source ``s`` and a Print sink ``out``, and ``agent``."""
    activities = CatalogWork(catalog_url)
    run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("s", SCHEMA),
            m.CreatePhysicalSource("s", "File", {"file_path": "in"}),
            m.CreateSink("out", SCHEMA, "Print"),
        ],
        events=(agent,),
    )
    return activities


def test_start_actions_beyond_a_pass_result_wait_for_the_next_pass(catalog_url, monkeypatch):
    """The start actions a pass hands back (each carries its plan) are bounded; queries past
    the bound stay CREATED and the pass asks for the next one at once, which starts them."""
    monkeypatch.setattr(context, "MAX_PASS_ACTION_BYTES", 1)  # one start per pass
    activities = source_and_sink(catalog_url, m.RegisterWorker("w1", capacity=8))
    queries = [m.CreateQuery("SELECT id FROM s INTO out") for _ in range(3)]
    envelopes = [q.to_envelope(f"q{i}") for i, q in enumerate(queries)]
    result = activities.apply_pass(
        PassInput("w", 2, 1000.0, [], [1000.0], 30.0, 60.0), request_batches_json([envelopes])
    )
    answers = json.loads(result.responses[0])
    assert [a["result"]["current_state"] for a in answers] == ["STARTING", "CREATED", "CREATED"]
    assert len(result.actions) == 1
    assert result.next_liveness_deadline is not None
    assert result.next_liveness_deadline <= 1000.0 + 0.1
    check = PendingMessage(m.CheckLiveness().to_envelope("~liveness-3"), 1000.1)
    result = activities.apply_pass(
        PassInput("w", 3, 1000.1, [check], [], 30.0, 60.0), request_batches_json([])
    )
    assert len(result.actions) == 1  # the next one starts


def test_a_kept_answer_rolled_back_with_its_write_is_not_stored_in_place_of_its_error(
    monkeypatch,
):
    """In a pass applied one savepoint at a time, a write whose answer was kept (no room in
    the pass's result) and whose savepoint then rolled back is answered with its error: the
    kept ok answer goes with the rollback. And no answer to ask again for is ever stored."""
    monkeypatch.setattr(pass_output, "MAX_PASS_RESULT_BYTES", 10)
    snapshot = SnapshotVersion(version=7, pass_no=1, workflow_id="w", committed_at=0.0)
    out = pass_output.PassOutput(None, snapshot)  # type: ignore[arg-type]  # nothing is sent
    message = m.CreateLogicalSource("s", SCHEMA)
    request = Request("c-1", message.to_envelope("c-1"), 0.0, 10)
    whole = Response(id="c-1", ok=True, result={"name": "s", "schema": ["x" * 100]}, version=7)
    handed_back = out.fitted(whole, message)
    assert asks_again(handed_back.error_code, handed_back.error_message)
    out.discard()  # the savepoint rolled back
    error = Response("c-1", False, None, "INVALID_REQUEST", "it did not fit a column", 7)
    out.answered(request, error)
    assert [row["ok"] for row in out._answers] == [False]
    with pytest.raises(ValueError, match="never stored"):
        out.answered(request, handed_back)


def test_only_the_agents_word_ends_a_stopping_run_not_a_start_that_failed(catalog_url):
    """A start that failed is reported CRASHED by the coordinator itself, but the start may
    still land: a query being stopped stays STOPPING until the stop answers."""
    activities = source_and_sink(catalog_url, m.RegisterWorker("a1"))
    [created] = run_pass(activities, 2, [m.CreateQuery("SELECT id FROM s INTO out")])
    query_id = created["result"]["id"]
    [stopping] = run_pass(activities, 3, [m.StopQuery(query_id)])  # still STARTING: STOPPING
    assert stopping["result"]["current_state"] == "STOPPING"
    failed = m.QueryStatusChanged(query_id, "CRASHED", "start on a1 failed: timed out", "a1", 1)
    run_pass(activities, 4, [], events=(failed,))
    [still] = run_pass(activities, 5, [m.GetQuery(query_id)])
    assert still["result"]["current_state"] == "STOPPING"
    run_pass(activities, 6, [], events=(m.QueryStatusChanged(query_id, "STOPPED", None, "a1", 1),))
    [stopped] = run_pass(activities, 7, [m.GetQuery(query_id)])
    assert stopped["result"]["current_state"] == "STOPPED"
