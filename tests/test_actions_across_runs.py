"""An agent action still under way when the coordinator continues as new (after waiting
``action_drain_timeout`` for it) is not lost: the next run runs it again, and the query it was
for moves on.

The agent here is a stand-in worker on the agent's task queue (the coordinator's side of the
protocol is under test; the Spark side has its own tests): its first ``start_query`` blocks
until the coordinator's run has changed, so the answer of that attempt can never arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import wait_until
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from streamctl.client.client import CoordinatorClient
from streamctl.workflows import messages as m
from streamctl.workflows.actions import (
    AgentStatus,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    agent_task_queue,
)
from streamctl.workflows.config import CoordinatorConfig

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
async def stand_in_worker(temporal_client: Client, agent: StandInAgent) -> AsyncIterator[None]:
    """``agent`` answering its task queue, and a registered query source and sink to use."""
    executor = ThreadPoolExecutor(max_workers=4)
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


async def declare_agent_and_query_parts(client: CoordinatorClient, agent: StandInAgent) -> None:
    await client.send(m.RegisterWorker(agent.name, capacity=2))
    await client.ask(m.CreateLogicalSource("numbers", COLUMNS))
    await client.ask(m.CreatePhysicalSource("numbers", "FILE", {"file_path": "in/"}))
    await client.ask(m.CreateSink("out", COLUMNS, "VOID"))


async def test_an_action_cut_short_by_continue_as_new_runs_again_in_the_next_run(
    temporal_client, start_coordinator, sqlite_url
):
    coordinator = await start_coordinator(
        sqlite_url, CoordinatorConfig(passes_per_run=3, action_drain_timeout=1.0)
    )
    agent = StandInAgent(f"a_{uuid.uuid4().hex[:6]}")
    client = await coordinator.client().connect()
    try:
        async with stand_in_worker(temporal_client, agent):
            await declare_agent_and_query_parts(client, agent)
            first_run = (await coordinator.handle.describe()).run_id
            created = await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out"))
            await wait_until(lambda: len(agent.starts) == 1)

            # More passes: the run reaches passes_per_run and continues as new while the
            # start is still under way.
            async def run_changed() -> bool:
                await client.ask(m.ListQueries())
                return (await coordinator.handle.describe()).run_id != first_run

            await wait_until(run_changed, timeout=60)
            agent.release_first_start.set()

            async def running() -> bool:
                query = await client.ask(m.GetQuery(created["id"]))
                return bool(query["current_state"] == "RUNNING")

            await wait_until(running, timeout=60)
            assert agent.starts == [1, 1]  # the same start (run 1), asked again by the new run
    finally:
        await asyncio.to_thread(client.close)


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
            await declare_agent_and_query_parts(client, agent)
            created = await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out"))

            async def state() -> str:
                return str((await client.ask(m.GetQuery(created["id"])))["current_state"])

            await wait_until(lambda: state_is(state, "RUNNING"), timeout=60)
            await client.ask(m.StopQuery(created["id"]))
            await wait_until(lambda: agent.stops >= 3, timeout=60)
            await asyncio.sleep(1.0)  # the failed action's outcome would have been applied
            assert await state() == "STOPPING"
            await wait_until(lambda: state_is(state, "STOPPED"), timeout=60)
            assert agent.stops == 4
    finally:
        await asyncio.to_thread(client.close)


async def state_is(state: object, wanted: str) -> bool:
    return bool(await state() == wanted)  # type: ignore[operator]
