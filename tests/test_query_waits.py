"""The ``wait_query`` update (:mod:`streamctl.workflows.query_waits`) and the client's pushed
wait (:func:`streamctl.client.query_wait.wait_pushed`).

* Property (isolated logic): a waiter takes only what passes that began after it report; it
  is settled exactly when the latest such report has a state it waits for, or says the query
  does not exist.
* Through a real coordinator with no agent (queries stay CREATED): a wait for a state the
  query is in returns it; for a query that does not exist raises ``NotFound``; for a state it
  never reaches ends at its deadline with the last state seen, also when more waits are open
  than the coordinator holds (the rest poll) and when the run continues as new meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_query_wait import SCRIPT

from streamctl.client.coordinator_errors import NotFound
from streamctl.client.query_wait import QueryWaitTimeout
from streamctl.limits import MAX_QUERY_WAITERS
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.workflows.query_waits import QueryWaiter

STATES = ["CREATED", "STARTING", "RUNNING", "STOPPED", "FAILED"]

reports = st.lists(
    st.tuples(st.integers(0, 20), st.one_of(st.none(), st.sampled_from(STATES))), max_size=20
)


@pytest.mark.quick
@given(
    since=st.integers(0, 20),
    wanted=st.frozensets(st.sampled_from(STATES), min_size=1),
    reported=reports,
)
def test_a_waiter_counts_only_passes_that_began_after_it(
    since: int, wanted: frozenset[str], reported: list[tuple[int, str | None]]
) -> None:
    waiter = QueryWaiter(7, wanted, since_pass=since)
    latest: tuple[str | None] | None = None  # (state or None for "no such query",)
    for pass_no, state in reported:
        rows = {} if state is None else {7: {"id": 7, "current_state": state}}
        rows[8] = {"id": 8, "current_state": "RUNNING"}  # another query's row never counts
        waiter.report(pass_no, rows)
        if pass_no > since:
            latest = (state,)
    if latest is None:
        assert not waiter.reported and not waiter.settled and waiter.answer.row is None
        return
    (state,) = latest
    assert waiter.reported
    assert waiter.answer.found == (state is not None)
    assert waiter.settled == (state is None or state in wanted)


async def _created_query(client: Any) -> int:
    answer = await client.ask(m.ExecuteStatement(SCRIPT))
    return int(answer["statements"][-1]["result"]["id"])


async def test_waits_on_a_coordinator_without_agents(
    start_coordinator: Any, sqlite_url: str
) -> None:
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    try:
        query_id = await _created_query(client)
        row = await client.wait_for_query(query_id, frozenset({"CREATED"}), timeout=30)
        assert row["id"] == query_id and row["current_state"] == "CREATED"
        assert "statement" not in row  # the waiter has it; it may be large

        with pytest.raises(NotFound):
            await client.wait_for_query(query_id + 1000, timeout=30)

        # More waits than the coordinator holds open: each ends at its deadline with the state
        # it last saw, pushed or polled.
        waits = [
            client.wait_for_query(query_id, frozenset({"RUNNING"}), timeout=2.0)
            for _ in range(MAX_QUERY_WAITERS + 3)
        ]
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
        for outcome in outcomes:
            assert isinstance(outcome, QueryWaitTimeout), outcome
            assert outcome.last_state == "CREATED"
        # the waits were pushed (the coordinator held them) as far as it holds them
        accepted = [
            event
            async for event in coordinator.handle.fetch_history_events()
            if event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            == "wait_query"
        ]
        assert len(accepted) >= 2 + MAX_QUERY_WAITERS
    finally:
        await asyncio.to_thread(client.close)


async def test_a_wait_outlives_continue_as_new(start_coordinator: Any, sqlite_url: str) -> None:
    coordinator = await start_coordinator(sqlite_url, CoordinatorConfig(passes_per_run=3))
    client = await coordinator.client().connect()
    try:
        query_id = await _created_query(client)
        runs_before = (await coordinator.handle.describe()).run_id
        wait = asyncio.ensure_future(
            client.wait_for_query(query_id, frozenset({"RUNNING"}), timeout=6.0)
        )
        for _ in range(8):  # passes enough for continue-as-new, while the wait is open
            await client.ask(m.ListQueries())
        with pytest.raises(QueryWaitTimeout) as late:
            await wait
        assert late.value.last_state == "CREATED"
        assert (await coordinator.handle.describe()).run_id != runs_before
        row = await client.wait_for_query(query_id, frozenset({"CREATED"}), timeout=30)
        assert row["current_state"] == "CREATED"
    finally:
        await asyncio.to_thread(client.close)


async def test_hostile_waits_and_an_oversized_batch_fail_no_workflow_task(
    start_coordinator: Any, sqlite_url: str, temporal_client: Any
) -> None:
    """A raw caller's ``wait_query`` with a timeout of 1e-10 s (a zero-length timer, which the
    Temporal server refuses, failing the workflow task) is refused by the validator; and a
    batch larger than ``max_pending``, which was refused ``Busy`` however empty the buffer,
    is taken when nothing else is pending."""
    from temporalio.client import WorkflowUpdateFailedError
    from test_signal_burst import _failed_workflow_tasks

    coordinator = await start_coordinator(sqlite_url, CoordinatorConfig(max_pending=3))
    client = await coordinator.client().connect()
    try:
        for timeout in (1e-10, 0.0, -1.0):
            with pytest.raises(WorkflowUpdateFailedError):
                await coordinator.handle.execute_update(
                    "wait_query", args=[1, ["RUNNING"], timeout]
                )
        answers = await asyncio.wait_for(
            client.ask_many([m.ListSinks() for _ in range(10)]), timeout=60
        )
        assert all(answer.ok for answer in answers), answers
        assert await _failed_workflow_tasks(temporal_client, coordinator.workflow_id) == []
    finally:
        await asyncio.to_thread(client.close)
