"""An agent action still under way when the coordinator continues as new (after waiting
``action_drain_timeout`` for it) is not lost: the next run runs it again, and the query it was
for moves on. While a run drains it still answers requests; a workflow task schedules at most
``MAX_ACTIONS_PER_TASK`` actions.

The agent here is a stand-in worker on the agent's task queue (the coordinator's side of the
protocol is under test; the Spark side has its own tests): its first ``start_query`` blocks
until the coordinator's run has changed, so the answer of that attempt can never arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import wait_until
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from streamctl import limits
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    AgentStatus,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    agent_task_queue,
)
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.workflows.agent_calls import ACTION_PICKUP_TIMEOUT

pytestmark = pytest.mark.slow

COLUMNS = (m.ColumnSpec("id", "UINT64", False),)


class StandInAgent:
    def __init__(self, name: str) -> None:
        self.name = name
        self.starts: list[int] = []
        self.release_first_start = threading.Event()

    @activity.defn(name="start_query")
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        self.starts.append(assignment.run)
        if len(self.starts) == 1:
            self.release_first_start.wait(timeout=60)
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.RUNNING, self.name)

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)

    @activity.defn(name="list_queries")
    def list_queries(self, _agent: str) -> list[QueryReport]:
        return []


@contextlib.asynccontextmanager
async def stand_in_worker(
    temporal_client: Client, agent: StandInAgent, capacity: int = 2
) -> AsyncIterator[None]:
    """``agent`` answering its task queue with ``capacity`` + 2 activities at once."""
    executor = ThreadPoolExecutor(max_workers=capacity + 2)
    worker = Worker(
        temporal_client,
        task_queue=agent_task_queue(agent.name),
        activities=[agent.start_query, agent.stop_query, agent.list_queries],
        activity_executor=executor,
    )
    try:
        async with worker:
            yield
    finally:
        agent.release_first_start.set()
        await asyncio.to_thread(executor.shutdown)


async def declare_agent_and_query_parts(
    client: CoordinatorClient, agent: StandInAgent, capacity: int = 2
) -> None:
    """The agent registered, and a query source and sink to use."""
    await client.send(m.RegisterWorker(agent.name, capacity=capacity))
    await client.ask(m.CreateLogicalSource("numbers", COLUMNS))
    await client.ask(m.CreatePhysicalSource("numbers", "FILE", {"file_path": "in/"}))
    await client.ask(m.CreateSink("out", COLUMNS, "VOID"))


@dataclass
class HeldStart:
    agent: StandInAgent
    client: CoordinatorClient
    first_run: str | None
    query_id: int


@contextlib.asynccontextmanager
async def a_held_start(temporal_client: Client, coordinator: Any) -> AsyncIterator[HeldStart]:
    """A query whose start is under way on a stand-in agent that holds it until
    ``agent.release_first_start``: decided before the run drains (a draining run decides
    none: the setup takes about four passes)."""
    agent = StandInAgent(f"a_{uuid.uuid4().hex[:6]}")
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent):
            await declare_agent_and_query_parts(client, agent)
            first_run = (await coordinator.handle.describe()).run_id
            created = await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out"))
            await wait_until(lambda: len(agent.starts) == 1)
            yield HeldStart(agent, client, first_run, created["id"])
    finally:
        await asyncio.to_thread(client.close)


async def test_an_action_cut_short_by_continue_as_new_runs_again_in_the_next_run(
    temporal_client, start_coordinator, sqlite_url
):
    # The run ends while the start is still under way.
    coordinator = await start_coordinator(
        sqlite_url, CoordinatorConfig(passes_per_run=8, action_drain_timeout=1.0)
    )
    async with a_held_start(temporal_client, coordinator) as held:
        # More passes: the run reaches passes_per_run and continues as new while the start
        # is still under way.
        async def run_changed() -> bool:
            await held.client.ask(m.ListQueries())
            return (await coordinator.handle.describe()).run_id != held.first_run

        await wait_until(run_changed, timeout=60)
        held.agent.release_first_start.set()

        async def running() -> bool:
            query = await held.client.ask(m.GetQuery(held.query_id))
            return bool(query["current_state"] == "RUNNING")

        await wait_until(running, timeout=60)
        assert held.agent.starts == [1, 1]  # the same start (run 1), asked again by the new run


class AgentWhoseStopsFail(StandInAgent):
    """Its first ``failing`` stops raise (the agent is there, but its stop did not work)."""

    def __init__(self, name: str, failing: int) -> None:
        super().__init__(name)
        self.release_first_start.set()
        self.failing = failing
        self.stops = 0

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        self.stops += 1
        if self.stops <= self.failing:
            raise RuntimeError("the stop did not work (injected)")
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)


async def test_a_failed_stop_is_not_reported_stopped(
    temporal_client, start_coordinator, sqlite_url
):
    """Issue 16: on f29f918 a stop whose action failed was recorded STOPPED at once, though
    the agent might still run the query. Now the query stays STOPPING and the stop is run
    again; it is STOPPED once the agent says so."""
    coordinator = await start_coordinator(sqlite_url)
    agent = AgentWhoseStopsFail(f"a_{uuid.uuid4().hex[:6]}", failing=3)  # one action's attempts
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent):
            query_id, state = await running_query(client, agent)
            await client.ask(m.StopQuery(query_id))
            await wait_until(lambda: agent.stops >= 3, timeout=60)
            await asyncio.sleep(1.0)  # the failed action's outcome would have been applied
            assert await state() == "STOPPING"
            await wait_until(lambda: state_is(state, "STOPPED"), timeout=60)
            assert agent.stops == 4
    finally:
        await asyncio.to_thread(client.close)


async def test_a_stop_no_agent_picks_up_is_not_reported_stopped(
    temporal_client, start_coordinator, sqlite_url
):
    """A stop that no agent picked up within its pickup timeout was recorded STOPPED "without
    the agent's word", though an alive agent with every action slot busy polls for nothing
    and its run goes on (the query could then start elsewhere: two runs, one checkpoint).
    Now it stays STOPPING, and the stop is run again; here the agent's worker is gone while
    liveness still counts it alive (heartbeats are not watched for ten minutes)."""
    config = CoordinatorConfig(suspect_after=600.0, dead_after=1200.0)
    coordinator = await start_coordinator(sqlite_url, config)
    agent = StandInAgent(f"a_{uuid.uuid4().hex[:6]}")
    agent.release_first_start.set()
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent):
            query_id, state = await running_query(client, agent)
        # the worker is gone: nothing polls the agent's task queue
        await client.ask(m.StopQuery(query_id))
        await asyncio.sleep(ACTION_PICKUP_TIMEOUT.total_seconds() + 5)
        assert await state() == "STOPPING"
    finally:
        await asyncio.to_thread(client.close)


async def running_query(
    client: CoordinatorClient, agent: StandInAgent
) -> tuple[int, Callable[[], Awaitable[str]]]:
    """A query RUNNING on ``agent``, and a call reading its state."""
    await declare_agent_and_query_parts(client, agent)
    created = await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out"))

    async def state() -> str:
        return str((await client.ask(m.GetQuery(created["id"])))["current_state"])

    await wait_until(lambda: state_is(state, "RUNNING"), timeout=60)
    return int(created["id"]), state


async def state_is(state: object, wanted: str) -> bool:
    return bool(await state() == wanted)  # type: ignore[operator]


class AgentWithHeldStops(StandInAgent):
    """Its stops wait until ``release_stops`` is set; it counts how many run at once."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release_first_start.set()
        self.release_stops = threading.Event()
        self.stopped: set[int] = set()
        self.stops_at_once = 0
        self.most_stops_at_once = 0
        self._lock = threading.Lock()

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        with self._lock:
            self.stops_at_once += 1
            self.most_stops_at_once = max(self.most_stops_at_once, self.stops_at_once)
        try:
            self.release_stops.wait(timeout=60)
        finally:
            with self._lock:
                self.stops_at_once -= 1
                self.stopped.add(assignment.query_id)
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)


async def create_running_queries(client: CoordinatorClient, count: int) -> list[int]:
    ids = [
        (await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out")))["id"]
        for _ in range(count)
    ]

    async def all_running() -> bool:
        listed = await client.ask(m.ListQueries())
        return sum(query["current_state"] == "RUNNING" for query in listed) == count

    await wait_until(all_running, timeout=60)
    return ids


@contextlib.asynccontextmanager
async def mass_drop(
    temporal_client: Client, coordinator: Any, count: int
) -> AsyncIterator[tuple[AgentWithHeldStops, CoordinatorClient, list[int]]]:
    """``count`` queries RUNNING on an agent whose stops are held, all dropped at once."""
    agent = AgentWithHeldStops(f"a_{uuid.uuid4().hex[:6]}")
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent, capacity=count):
            await declare_agent_and_query_parts(client, agent, capacity=count)
            ids = await create_running_queries(client, count)
            for query_id in ids:
                await client.ask(m.DropQuery(query_id))
            yield agent, client, ids
    finally:
        await asyncio.to_thread(client.close)


async def test_actions_past_the_bound_wait_their_turn(
    temporal_client, start_coordinator, sqlite_url
):
    """The stops of a mass drop are not all pending activities at once (Temporal fails every
    workflow task past 2,000): ``max_actions_under_way`` run, the rest wait and follow."""
    coordinator = await start_coordinator(sqlite_url, CoordinatorConfig(max_actions_under_way=2))
    async with mass_drop(temporal_client, coordinator, 6) as (agent, _client, ids):
        await wait_until(lambda: agent.stops_at_once == 2, timeout=60)
        description = await coordinator.handle.describe()
        assert len(description.raw_description.pending_activities) <= 2
        agent.release_stops.set()
        await wait_until(lambda: agent.stopped == set(ids), timeout=60)
        assert agent.most_stops_at_once == 2


async def test_waiting_actions_are_carried_to_the_next_run(
    temporal_client, start_coordinator, sqlite_url
):
    """Actions still waiting for room when the run continues as new run in the next run."""
    coordinator = await start_coordinator(
        sqlite_url,
        CoordinatorConfig(max_actions_under_way=1, passes_per_run=4, action_drain_timeout=0.5),
    )
    first_run = (await coordinator.handle.describe()).run_id
    async with mass_drop(temporal_client, coordinator, 3) as (agent, client, ids):
        await wait_until(lambda: agent.stops_at_once == 1, timeout=60)

        async def run_changed() -> bool:
            await client.ask(m.ListQueries())
            return (await coordinator.handle.describe()).run_id != first_run

        await wait_until(run_changed, timeout=60)
        agent.release_stops.set()
        await wait_until(lambda: agent.stopped == set(ids), timeout=60)


async def test_a_draining_run_answers_requests_until_its_actions_end(
    temporal_client, start_coordinator, sqlite_url
):
    """A run due to continue as new waits for its actions under way, and goes on answering
    requests meanwhile (older runs refused them all for the whole drain, up to 30 s); it
    continues as new once the action ended, which then does not run again."""
    coordinator = await start_coordinator(
        sqlite_url, CoordinatorConfig(passes_per_run=8, action_drain_timeout=300.0)
    )
    async with a_held_start(temporal_client, coordinator) as held:
        client = held.client

        async def draining() -> bool:
            await client.ask(m.ListQueries())
            return bool((await coordinator.handle.query("status"))["draining"])

        await wait_until(draining, timeout=60)
        # A StartQuery waits for the next run (a draining run starts nothing: it would be
        # answered UNAVAILABLE); its own client retries it, so its batch holds nothing else.
        other_client = await coordinator.client().connect()
        start = asyncio.create_task(other_client.ask(m.StartQuery(held.query_id)))
        try:
            for _ in range(3):  # answered by the draining run itself
                query = await client.ask(m.GetQuery(held.query_id))
                assert query["current_state"] != "RUNNING"  # the start is still held
                assert (await coordinator.handle.describe()).run_id == held.first_run
            assert (await coordinator.handle.query("status"))["draining"]
            assert not start.done()

            held.agent.release_first_start.set()
            assert (await start)["id"] == held.query_id  # answered by the next run
        finally:
            await asyncio.to_thread(other_client.close)

        async def running_in_a_later_run() -> bool:
            query = await client.ask(m.GetQuery(held.query_id))
            run_id = (await coordinator.handle.describe()).run_id
            return bool(query["current_state"] == "RUNNING" and run_id != held.first_run)

        await wait_until(running_in_a_later_run, timeout=60)
        assert held.agent.starts == [1]  # the start ended in its run: nothing to carry


AGENT_ACTIVITIES = {"start_query", "stop_query", "list_queries", "explain_query"}


async def test_a_workflow_task_schedules_a_bounded_number_of_actions(
    temporal_client, start_coordinator, sqlite_url, monkeypatch
):
    """A pass that decides more stops than ``MAX_ACTIONS_PER_TASK`` has them scheduled over
    several workflow tasks (a thousand in one task outran the SDK's deadlock detection), all
    of them."""
    monkeypatch.setattr(limits, "MAX_ACTIONS_PER_TASK", 2)  # read when a run imports the code
    coordinator = await start_coordinator(sqlite_url)
    agent = AgentWithHeldStops(f"a_{uuid.uuid4().hex[:6]}")
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent, capacity=7):
            await declare_agent_and_query_parts(client, agent, capacity=7)
            ids = await create_running_queries(client, 7)
            dropped = await client.ask_many([m.DropQuery(query_id) for query_id in ids])
            assert all(response.ok for response in dropped)
            await wait_until(lambda: agent.stops_at_once == 7, timeout=60)
            agent.release_stops.set()
            await wait_until(lambda: agent.stopped == set(ids), timeout=60)
        history = await temporal_client.get_workflow_handle(coordinator.workflow_id).fetch_history()
    finally:
        await asyncio.to_thread(client.close)
    scheduled_by_task: dict[int, list[str]] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name in AGENT_ACTIVITIES:
                task = attributes.workflow_task_completed_event_id
                scheduled_by_task.setdefault(task, []).append(attributes.activity_type.name)
    stops = [names for names in scheduled_by_task.values() if "stop_query" in names]
    assert sum(len(names) for names in stops) == 7
    assert max(len(names) for names in scheduled_by_task.values()) == 2
