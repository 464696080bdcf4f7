"""The pass activity on its own, on both catalogs: changes inside one pass, answered in order.

A pass writes new entity rows differently on PostgreSQL (COPY) than on SQLite (the ORM unit
of work); these cases mix creations, drops and re-creations of one name inside a pass, and
rows that point at rows created in the same pass, and must leave the same catalog on both.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from catalog_tools import dump, worker_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.outbox import new_id
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Envelope
from streamctl.protocol.pass_io import PassInput, PendingMessage, request_batches_json

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)
WIDER = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "FLOAT64"))


def run_pass(
    activities: CatalogWork,
    pass_no: int,
    requests: list[m.Request],
    events: tuple[m.Event, ...] = (),
) -> list[dict[str, Any]]:
    envelopes = [request.to_envelope(new_id()) for request in requests]
    pending = [PendingMessage(event.to_envelope(f"e-{new_id()}"), 1000.0) for event in events]
    result = activities.apply_pass(
        PassInput("w", pass_no, 1000.0, pending, [1000.0], 30.0, 60.0),
        request_batches_json([envelopes]),
    )
    answers: list[dict[str, Any]] = json.loads(result.responses[0])
    return answers


def codes(answers: list[dict[str, Any]]) -> list[str]:
    return ["ok" if a["ok"] else a["error_code"] for a in answers]


@pytest.mark.quick
def test_changes_inside_one_pass_leave_the_same_catalog_on_both_backends(catalog_url):
    activities = CatalogWork(catalog_url)
    first = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("kept", SCHEMA),
            m.CreateLogicalSource("replaced", SCHEMA),
            m.CreateLogicalSource("gone", SCHEMA),
            m.DropLogicalSource("gone"),  # created and dropped in one pass: never written
            m.CreateSink("out", SCHEMA, "Print"),
            m.CreatePhysicalSource("kept", "File", {"file_path": "a"}, worker="w1"),
        ],
        events=(m.RegisterWorker("w1"),),  # stage 1: exists before the physical source
    )
    assert codes(first) == ["ok"] * 6
    second = run_pass(
        activities,
        2,
        [
            m.DropLogicalSource("replaced"),
            m.CreateLogicalSource("replaced", WIDER),  # a new row in place of a deleted one
            m.CreatePhysicalSource("replaced", "File", {"file_path": "b"}),
            m.CreateLogicalSource("kept", SCHEMA),
            m.DropSink("out"),
            m.CreateSink("out", WIDER, "Void"),
            m.GetLogicalSource("replaced"),
        ],
    )
    assert codes(second) == ["ok", "ok", "ok", "ALREADY_EXISTS", "ok", "ok", "ok"]
    assert [c["name"] for c in second[-1]["result"]["schema"]] == ["id", "v"]

    catalog = dump(catalog_url)
    assert [name for name, _ in catalog["logical"]] == ["kept", "replaced"]
    assert [(p[1], p[4]) for p in catalog["physical"]] == [("kept", "w1"), ("replaced", None)]
    assert [(s[0], s[1]) for s in catalog["sinks"]] == [("out", "VOID")]
    assert "'v'" in dict(catalog["logical"])["replaced"]

    third = run_pass(activities, 3, [m.DropLogicalSource("replaced", cascade=True)])
    assert codes(third) == ["ok"]
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["kept"]


def _statements_of_a_statistics_pass(catalog_url: str, reports: int, pass_no: int) -> int:
    from sqlalchemy import event

    from streamctl.catalog.store import catalog_engine

    engine = catalog_engine(catalog_url)
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    events = tuple(
        report
        for query_id in range(1, reports + 1)
        for report in (
            m.Statistics(query_id, {"rows_per_second": 1.0}),
            m.QueryStatusChanged(query_id, "RUNNING", agent="w1", run=1),
        )
    )
    event.listen(engine, "before_cursor_execute", count)
    try:
        run_pass(CatalogWork(catalog_url), pass_no, [], events)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen)


@pytest.mark.quick
def test_the_agents_reports_read_their_queries_in_bulk(catalog_url):
    """A pass reads the queries that its statistics and status reports name in a few bulk
    reads, not one each: with 10,000 running queries a pass takes ~1,000 statistics, and
    reading each query alone was three quarters of its time (``bench scale``)."""
    activities = CatalogWork(catalog_url)
    setup = [
        m.CreateLogicalSource("ticks", SCHEMA),
        m.CreatePhysicalSource("ticks", "File", {"file_path": "a"}, worker="w1"),
        m.CreateSink("out", SCHEMA, "Void"),
        *(m.CreateQuery(f"SELECT id FROM ticks WHERE id > {n} INTO out") for n in range(200)),
    ]
    assert set(codes(run_pass(activities, 1, setup, (m.RegisterWorker("w1", 500),)))) == {"ok"}
    few = _statements_of_a_statistics_pass(catalog_url, 5, 2)
    many = _statements_of_a_statistics_pass(catalog_url, 200, 3)
    assert many <= few + 2, f"{many} statements for 200 queries' reports, {few} for 5"


CAPACITIES = {"w1": 1, "w2": 2, "w3": 3}
QUERIES = 8


def _active_per_agent(catalog_url: str) -> dict[str, int]:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from streamctl.catalog.models import Query
    from streamctl.catalog.store import create_catalog_engine
    from streamctl.lifecycle.query_states import ACTIVE_STATES

    engine = create_catalog_engine(catalog_url)
    try:
        with Session(engine) as session:
            rows = session.execute(select(Query.worker, Query.current_state)).all()
    finally:
        engine.dispose()
    counts: dict[str, int] = {}
    for worker, state in rows:
        if worker is not None and state in ACTIVE_STATES:
            counts[worker] = counts.get(worker, 0) + 1
    return counts


_agents = st.sampled_from(sorted(CAPACITIES))
_query_ids = st.integers(1, QUERIES)
_pass_messages = st.lists(
    st.one_of(
        st.builds(
            lambda q, s, a, r: ("event", m.QueryStatusChanged(q, s, agent=a, run=r)),
            _query_ids,
            st.sampled_from(["RUNNING", "STOPPED", "CRASHED", "FINISHED"]),
            _agents,
            st.integers(1, 3),
        ),
        st.builds(lambda a: ("event", m.UnregisterWorker(a)), _agents),
        st.builds(lambda a: ("event", m.RegisterWorker(a, CAPACITIES[a])), _agents),
        st.builds(lambda q: ("request", m.StartQuery(q)), _query_ids),
        st.builds(lambda q: ("request", m.StopQuery(q)), _query_ids),
        st.builds(lambda q: ("request", m.DropQuery(q)), _query_ids),
    ),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(passes=st.lists(_pass_messages, min_size=1, max_size=3))
def test_no_pass_places_more_queries_on_an_agent_than_it_can_take(tmp_path, passes):
    """Whatever the agents report and users ask within a pass (starts, stops, drops, crashes,
    agents leaving and coming back), placement never gives an agent more active queries than
    its capacity: the pass counts each agent's active queries once and keeps the counts as
    its queries move (``PassContext.active_by_agent``)."""
    sqlite_url = f"sqlite:///{tmp_path / new_id()}.db"  # a fresh catalog per example
    activities = CatalogWork(sqlite_url)
    setup = [
        m.CreateLogicalSource("ticks", SCHEMA),
        m.CreatePhysicalSource("ticks", "File", {"file_path": "a"}),
        m.CreateSink("out", SCHEMA, "Void"),
        *(m.CreateQuery(f"SELECT id FROM ticks WHERE id > {n} INTO out") for n in range(QUERIES)),
    ]
    agents = tuple(m.RegisterWorker(name, capacity) for name, capacity in CAPACITIES.items())
    assert set(codes(run_pass(activities, 1, setup, agents))) == {"ok"}
    for pass_no, messages in enumerate(passes, start=2):
        requests = [message for kind, message in messages if kind == "request"]
        events = tuple(message for kind, message in messages if kind == "event")
        run_pass(activities, pass_no, requests, events)  # type: ignore[arg-type]
        active = _active_per_agent(sqlite_url)
        assert all(active.get(name, 0) <= capacity for name, capacity in CAPACITIES.items()), (
            f"pass {pass_no}: {active}"
        )


@pytest.mark.quick
def test_a_start_carries_every_source_of_its_query_after_a_refused_drop(catalog_url):
    """A refused drop of one of a query's sources reads which queries read it; the query's
    start in the same pass must still carry all of its sources, not only that one (it did:
    the join below was sent to its agent with source ``a`` alone)."""
    columns = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("ts", "UINT64", False))
    activities = CatalogWork(catalog_url)
    setup = [
        m.CreateLogicalSource("a", columns),
        m.CreateLogicalSource("b", columns),
        m.CreatePhysicalSource("a", "File", {"file_path": "a"}),
        m.CreatePhysicalSource("b", "File", {"file_path": "b"}),
        m.CreateSink("out", SCHEMA, "Void"),
        m.CreateQuery(
            "SELECT a.id AS id FROM a INNER JOIN b ON a.id = b.id "
            "WINDOW TUMBLING(ts, SIZE 1 SEC) INTO out"
        ),
    ]
    assert set(codes(run_pass(activities, 1, setup))) == {"ok"}  # no agent yet: it waits
    drop = m.DropLogicalSource("a").to_envelope(new_id())
    result = activities.apply_pass(
        PassInput(
            "w",
            2,
            1000.0,
            [PendingMessage(m.RegisterWorker("w1").to_envelope("e-w1"), 1000.0)],
            [1000.0],
            30.0,
            60.0,
        ),
        request_batches_json([[drop]]),
    )
    assert codes(json.loads(result.responses[0])) == ["HAS_DEPENDENTS"]
    starts = [action.start for action in result.actions if action.start is not None]
    assert [sorted(start.sources) for start in starts] == [["a", "b"]]


def _heartbeats(catalog_url: str) -> dict[str, int]:
    return worker_values(catalog_url, "heartbeats")


def _split_part(
    activities: CatalogWork,
    pass_no: int,
    split_from: list[int],
    requests: list[Envelope],
    events: list[PendingMessage],
) -> Any:
    return activities.apply_pass(
        PassInput("w", pass_no, 1000.0, events, [1000.0], 30.0, 60.0, split_from=split_from),
        request_batches_json([requests]),
    )


@pytest.mark.quick
def test_a_part_of_a_pass_that_committed_after_all_applies_nothing_again(catalog_url):
    """A pass whose last attempt committed, though the workflow saw it fail (the process died
    after the commit), is split; its halves answer from what it stored and apply none of its
    events again (a heartbeat's count is not added twice)."""
    activities = CatalogWork(catalog_url)
    register = PendingMessage(m.RegisterWorker("a1").to_envelope("e-reg"), 1000.0)
    _split_part(activities, 1, [], [], [register])
    create = m.CreateLogicalSource("s", SCHEMA).to_envelope("r-create")
    read = m.GetLogicalSource("s").to_envelope("r-read")
    beat = PendingMessage(m.Heartbeat("a1", count=3).to_envelope("e-beat"), 1000.0)
    committed = _split_part(activities, 2, [], [create, read], [beat])
    before = (dump(catalog_url), _heartbeats(catalog_url))
    assert before[1] == {"a1": 3}

    # The workflow splits pass 2 into passes 3 (a part of it) and 4 (a part of that part).
    first = _split_part(activities, 3, [2], [create], [beat])
    second = _split_part(activities, 4, [2, 3], [read], [])
    assert first.replayed and second.replayed
    assert (dump(catalog_url), _heartbeats(catalog_url)) == before
    stored = json.loads(committed.responses[0])
    assert json.loads(first.responses[0]) == stored[:1]
    assert json.loads(second.responses[0]) == stored[1:]
    assert first.version == second.version == committed.version


@pytest.mark.quick
def test_a_part_of_a_pass_that_never_committed_is_applied(catalog_url):
    activities = CatalogWork(catalog_url)
    register = PendingMessage(m.RegisterWorker("a1").to_envelope("e-reg"), 1000.0)
    _split_part(activities, 1, [], [], [register])
    beat = PendingMessage(m.Heartbeat("a1", count=3).to_envelope("e-beat"), 1000.0)
    create = m.CreateLogicalSource("s", SCHEMA).to_envelope("r-create")
    part = _split_part(activities, 3, [2], [create], [beat])
    assert not part.replayed
    assert codes(json.loads(part.responses[0])) == ["ok"]
    assert _heartbeats(catalog_url) == {"a1": 3}
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["s"]


@pytest.mark.quick
def test_a_pass_run_again_with_events_its_commit_did_not_carry_hands_them_back(catalog_url):
    """A local pass's input is not recorded: a workflow task run again after the pass
    committed may give its number to more messages. Requests new to it are asked again, and
    events (the committed pass had none) come back as not applied, for the next pass; the
    answers the commit stored are answered again; nothing is applied twice."""
    activities = CatalogWork(catalog_url)
    first = m.CreateLogicalSource("kept", SCHEMA).to_envelope("r-first")
    committed = activities.apply_pass(
        PassInput("w", 1, 1000.0, [], [1000.0], 30.0, 60.0), request_batches_json([[first]])
    )
    assert not committed.replayed and committed.events_not_applied == []

    later = m.CreateLogicalSource("later", SCHEMA).to_envelope("r-later")
    events = [
        PendingMessage(m.RegisterWorker("w1").to_envelope("e-register"), 1000.5),
        PendingMessage(m.Heartbeat("w1").to_envelope("e-heartbeat"), 1000.6),
    ]
    again = activities.apply_pass(
        PassInput("w", 1, 1001.0, events, [1000.0, 1000.4], 30.0, 60.0),
        request_batches_json([[first], [later]]),
    )
    assert again.replayed
    assert again.events_not_applied == [0, 1]
    [stored], [asked] = (json.loads(answer) for answer in again.responses)
    assert stored == json.loads(committed.responses[0])[0]
    assert not asked["ok"] and asked["error_code"] == "UNAVAILABLE", asked
    assert worker_values(catalog_url, "heartbeats") == {}
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["kept"]

    # The next pass applies them, and a retry of that pass (its input recorded) hands back
    # nothing: it carried events, so they were applied.
    retried = [
        activities.apply_pass(
            PassInput("w", 2, 1002.0, events, [1000.4], 30.0, 60.0),
            request_batches_json([[later]]),
        )
        for _ in range(2)
    ]
    assert [r.events_not_applied for r in retried] == [[], []]
    assert retried[1].replayed
    assert worker_values(catalog_url, "heartbeats") == {"w1": 1}
    assert [name for name, _ in dump(catalog_url)["logical"]] == ["kept", "later"]
