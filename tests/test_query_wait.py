"""Waiting for a query's state (``--wait-running``, :mod:`streamctl.client.query_wait`).

* Property, on a scripted client and a fake clock (isolated logic): whatever states a query
  goes through, the wait returns the first answer whose state it waits for, asks nothing after
  it, never sleeps past its deadline, and raises :class:`QueryWaitTimeout` with the last state
  seen only when the deadline passed first; a deadline that has passed already still gets one
  look at the query, and a NaN one is refused before anything is asked. A pushed wait past a
  STOPPED that is a start on its way comes back within ``STOPPED_RECHECK_S`` (a later stop
  leaves the same state).
* Through a real coordinator with no agent (a query stays CREATED): ``sql --wait-running`` and
  ``query start --wait-running`` return after their timeout with exit code 1 and say why; a
  query that cannot be placed never makes them wait longer. That a query started on a Spark
  agent is answered RUNNING is in ``tests/test_stack.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from contextlib import redirect_stdout
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from streamctl.activities.pass_activity import CatalogWork
from streamctl.cli.frontend import run_query_action, run_sql, settle_queries
from streamctl.client import query_wait
from streamctl.client.coordinator_errors import InvalidRequest, TooLarge
from streamctl.client.outbox import new_id
from streamctl.client.query_wait import QueryWaitTimeout, wait_for_state, wait_pushed
from streamctl.exit_codes import EXIT_REFUSED
from streamctl.protocol import messages as m
from streamctl.protocol.pass_io import PassInput, request_batches_json
from streamctl.workflows.query_waits import QueryWait

STATES = [
    "CREATED",
    "STARTING",
    "RUNNING",
    "STOPPING",
    "STOPPED",
    "FINISHED",
    "RECOVERING",
    "FAILED",
]


SCRIPT = (
    "CREATE LOGICAL SOURCE s(id UINT64 NOT NULL);"
    "CREATE PHYSICAL SOURCE FOR s TYPE Generator SET("
    "'SEQUENCE UINT64 0 1000 1' AS `SOURCE`.GENERATOR_SCHEMA,"
    "'ALL' AS `SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES);"
    "CREATE SINK out(id UINT64 NOT NULL) TYPE Void;"
    "SELECT id FROM s INTO out"
)
"""A query with a source and a sink, which no agent runs here (it stays CREATED)."""


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.deadline = float("inf")
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0 and self.now + seconds <= self.deadline + 1e-9  # never past it
        self.sleeps.append(seconds)
        self.now += seconds


class ScriptedQuery:
    """A client whose ``GetQuery`` answers go through ``states`` (current and desired state; the
    last one repeats); each answer costs ``ask_cost`` seconds of the fake clock."""

    def __init__(self, states: list[tuple[str, str]], clock: FakeClock, ask_cost: float) -> None:
        self.states, self.clock, self.ask_cost = states, clock, ask_cost
        self.asked = 0

    async def ask(self, request: Any, timeout: float | None = None) -> dict[str, Any]:
        assert isinstance(request, m.GetQuery) and request.id == 7
        # Every look is bounded: by the wait's deadline, or briefly once it has passed.
        assert timeout is not None
        assert timeout <= max(self.clock.deadline - self.clock.now, query_wait.LAST_LOOK_S)
        self.clock.now += self.ask_cost
        state, desired = self.states[min(self.asked, len(self.states) - 1)]
        self.asked += 1
        return {"id": 7, "current_state": state, "desired_state": desired}


def ends_the_wait(state: tuple[str, str], wanted: frozenset[str]) -> bool:
    """The rule, written from the states' meaning: a STOPPED query whose desired state is
    RUNNING is on its way to running (a start waiting for room, a move), so only a wait that
    does not want RUNNING ends there."""
    current, desired = state
    on_its_way = current == "STOPPED" and desired == "RUNNING"
    return current in wanted and not (on_its_way and "RUNNING" in wanted)


QUERY_STATES = st.tuples(st.sampled_from(STATES), st.sampled_from(["RUNNING", "STOPPED"]))


@pytest.mark.quick
@settings(max_examples=300, deadline=None)
@given(
    states=st.lists(QUERY_STATES, min_size=1, max_size=40),
    wanted=st.frozensets(st.sampled_from(STATES), min_size=1),
    timeout=st.floats(min_value=0.0, max_value=5.0),
    ask_cost=st.floats(min_value=0.0, max_value=0.5),
)
def test_a_wait_returns_the_first_wanted_state_or_times_out_by_its_deadline(
    states: list[tuple[str, str]], wanted: frozenset[str], timeout: float, ask_cost: float
) -> None:
    clock = FakeClock()
    client = ScriptedQuery(states, clock, ask_cost)
    deadline = clock.deadline = clock.now + timeout
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_wait.time, "monotonic", clock.monotonic)
        patch.setattr(query_wait.asyncio, "sleep", clock.sleep)
        try:
            answer = asyncio.run(wait_for_state(client, 7, wanted, deadline))  # type: ignore[arg-type]
        except QueryWaitTimeout as late:
            seen = states[: client.asked]
            assert not any(ends_the_wait(state, wanted) for state in seen)
            assert late.last_state == states[min(client.asked, len(states)) - 1][0]
            assert clock.now >= deadline  # it gave up only once the deadline had passed
        else:
            padded = [*states, states[-1]]
            first = next(i for i, state in enumerate(padded) if ends_the_wait(state, wanted))
            assert (answer["current_state"], answer["desired_state"]) == padded[first]
            assert client.asked == first + 1  # the first wanted answer, nothing asked after
        assert all(s <= query_wait.MAX_POLL_S for s in clock.sleeps)


class ScriptedWaits:
    """A client whose ``wait_query`` updates are answered with ``rows`` in turn (the last one
    repeats), recording the states each update asked for."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows
        self.asked: list[frozenset[str]] = []
        self.timeouts: list[float] = []

    async def wait_query_update(
        self, query_id: int, states: frozenset[str], timeout: float
    ) -> QueryWait:
        current, desired = self.rows[min(len(self.asked), len(self.rows) - 1)]
        self.asked.append(states)
        self.timeouts.append(timeout)
        return QueryWait({"id": query_id, "current_state": current, "desired_state": desired})


@pytest.mark.quick
@settings(max_examples=200, deadline=None)
@given(rows=st.lists(QUERY_STATES, min_size=1, max_size=20))
def test_a_pushed_wait_for_running_goes_on_past_a_start_that_waits_stopped(
    rows: list[tuple[str, str]],
) -> None:
    # --wait-running after a StartQuery that came to a pass without room for starts: the query
    # is STOPPED with desired RUNNING until a later pass starts it. That is not the STOPPED a
    # wait for settled states ends at; the next update waits past STOPPED instead of being
    # answered at once.
    wanted = query_wait.SETTLED_STATES
    rows = [*rows, ("RUNNING", "RUNNING")]  # it gets there in the end
    client = ScriptedWaits(rows)
    answer = asyncio.run(wait_pushed(client, 7, wanted, time.monotonic() + 60))  # type: ignore[arg-type]
    first = next(i for i, row in enumerate(rows) if ends_the_wait(row, wanted))
    assert (answer["current_state"], answer["desired_state"]) == rows[first]
    assert len(client.asked) == first + 1
    for row, next_states, timeout in zip(rows, client.asked[1:], client.timeouts[1:], strict=False):
        assert next_states == (wanted - {"STOPPED"} if row[0] == "STOPPED" else wanted)
        # The coordinator cannot tell a later StopQuery's STOPPED from this one by the state
        # alone, so an update waiting past it comes back soon to let the client look.
        if row[0] == "STOPPED":
            assert timeout <= query_wait.STOPPED_RECHECK_S


class Unreachable:
    """A client that must not be asked anything."""

    async def wait_query_update(self, *_: Any) -> QueryWait:
        raise AssertionError("asked")

    async def ask(self, *_: Any) -> Any:
        raise AssertionError("asked")


@pytest.mark.quick
def test_a_wait_without_a_deadline_is_refused_before_asking() -> None:
    for wait in (wait_pushed, wait_for_state):
        with pytest.raises(ValueError, match="NaN"):
            asyncio.run(wait(Unreachable(), 7, query_wait.SETTLED_STATES, float("nan")))  # type: ignore[arg-type]


class AtTheDeadline(ScriptedQuery):
    """``GetQuery`` answers; ``wait_query`` must not be asked once the deadline has passed."""

    async def wait_query_update(self, *_: Any) -> QueryWait:
        raise AssertionError("a wait_query update after the deadline")


@pytest.mark.quick
@settings(max_examples=100, deadline=None)
@given(state=QUERY_STATES, wanted=st.frozensets(st.sampled_from(STATES), min_size=1))
def test_a_wait_whose_deadline_passed_looks_once_before_giving_up(
    state: tuple[str, str], wanted: frozenset[str]
) -> None:
    # A timeout of 0, or what is left of a budget shared by the queries of one statement:
    # a query already where the wait wants it is answered, not reported late.
    clock = FakeClock()
    client = AtTheDeadline([state], clock, 0.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_wait.time, "monotonic", clock.monotonic)
        try:
            answer = asyncio.run(wait_pushed(client, 7, wanted, clock.now))  # type: ignore[arg-type]
        except QueryWaitTimeout as late:
            assert not ends_the_wait(state, wanted)
            assert late.last_state == state[0]
        else:
            assert ends_the_wait(state, wanted)
            assert (answer["current_state"], answer["desired_state"]) == state
    assert client.asked == 1


async def test_waiting_for_a_query_no_agent_can_run_ends_at_its_timeout(
    start_coordinator: Any, sqlite_url: str
) -> None:
    coordinator = await start_coordinator(sqlite_url)
    address, workflow_id = coordinator.address, coordinator.workflow_id
    printed = io.StringIO()
    with redirect_stdout(printed):
        code = await asyncio.to_thread(
            run_sql, address, workflow_id, SCRIPT, True, Console(file=io.StringIO()), 0.5
        )
    answer = json.loads(printed.getvalue())
    assert "statements" in answer, answer
    query = answer["statements"][-1]["result"]
    assert code == EXIT_REFUSED and answer["ok"] is False
    assert query["current_state"] == "CREATED"
    assert query["error"] == "not RUNNING within 0.5 s"

    people = io.StringIO()
    code = await asyncio.to_thread(
        run_query_action,
        address, workflow_id, "start", query["id"], False, Console(file=people, width=200), 0.3,
    )  # fmt: skip
    assert code == EXIT_REFUSED
    assert f"query {query['id']} CREATED (not RUNNING within 0.3 s)" in people.getvalue()


@pytest.mark.quick
@pytest.mark.parametrize("command", [["query", "start", "1"], ["sql", "SELECT 1"]])
def test_wait_running_nan_is_refused_by_the_cli_before_connecting(command: list[str]) -> None:
    from typer.testing import CliRunner

    from streamctl.cli import app

    result = CliRunner().invoke(app, [*command, "--wait-running", "nan"])
    assert result.exit_code == 2, result.output  # click's usage error, nothing was sent
    assert "--wait-running" in result.output


@pytest.mark.quick
@pytest.mark.parametrize("query_id", [2**63, -(2**63) - 1, 2**200])
def test_a_pass_reports_no_row_for_an_id_no_query_can_have(catalog_url: str, query_id: int) -> None:
    # What a pass reports to wait_query waiters: an id beyond 64 bits failed the lookup, the
    # pass, and every pass after it (the coordinator answered nothing more)
    activities = CatalogWork(catalog_url)
    setup = [m.ExecuteStatement(SCRIPT).to_envelope(new_id())]
    inputs = PassInput("w", 1, 1000.0, [], [1000.0], 30.0, 60.0, watched_queries=[query_id, 1])
    result = activities.apply_pass(inputs, request_batches_json([setup]))
    assert [row["id"] for row in result.watched_queries] == [1]


async def test_a_wait_for_an_id_beyond_64_bits_is_refused_and_the_coordinator_goes_on(
    start_coordinator: Any, sqlite_url: str
) -> None:
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    try:
        # the wait_query update is refused; the poll that follows is answered INVALID_REQUEST
        with pytest.raises(InvalidRequest):
            await client.wait_for_query(2**63, timeout=5)
        answer = await client.ask(m.ExecuteStatement(SCRIPT))
        assert answer["statements"][-1]["result"]["current_state"] == "CREATED"
    finally:
        await asyncio.to_thread(client.close)


@pytest.mark.quick
def test_a_wait_the_coordinator_refuses_is_reported_not_raised() -> None:
    """``--wait-running`` on a query whose ``GetQuery`` answer is over the answer limit
    (a statement of a quarter megabyte and its plan): the CLI printed a traceback
    (``TooLarge`` out of ``settle_queries``); now the query says why and the exit is
    ``EXIT_REFUSED``."""

    class Refusing:
        def wait_for_query_blocking(self, query_id: int, timeout: float) -> dict[str, Any]:
            raise TooLarge(f"the answer to GetQuery of query {query_id} is too large")

    queries = [{"id": 11, "current_state": "STARTING"}]
    assert settle_queries(Refusing(), queries, 5.0) == EXIT_REFUSED  # type: ignore[arg-type]
    assert "too large" in queries[0]["error"], queries
