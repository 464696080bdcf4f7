"""Simulated Spark agents for scale benchmarks: the agent protocol without Spark.

A :class:`SimulatedAgent` is a real Temporal worker on the agent's own task queue
(``agent.<name>``) that answers the coordinator's agent activities as ``streamctl agent`` does
(:mod:`streamctl.agent.activities`): ``start_query`` reports the query RUNNING, ``stop_query``
reports it STOPPED (also for a query it does not run), ``list_queries`` reports what it runs,
``validate_plan`` accepts and ``explain_query`` answers a fixed plan. Through a shared
:class:`~streamctl.client.client.CoordinatorClient` it registers, heartbeats every
``heartbeat_interval`` seconds with its load, and sends each running query's statistics every
``statistics_interval`` seconds, as an agent pushes them. :meth:`SimulatedFleet.kill` stops an
agent the way ``kill -9`` does: its worker stops polling and it sends nothing more, without
unregistering; the coordinator learns of it only from the missing heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import OutboxFull
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    EXPLAIN_QUERY,
    LIST_QUERIES,
    START_QUERY,
    STOP_QUERY,
    VALIDATE_PLAN,
    AgentStatus,
    ExplainAssignment,
    ExplainReport,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    agent_task_queue,
)

EXECUTOR_THREADS = 8
"""Threads answering every agent's activities: each answers at once, without Spark."""
SIMULATED_PLAN = "== Physical Plan ==\n*(1) Project\n+- StreamingRelation (simulated agent)"


class SimulatedAgent:
    """One agent's activities and what it runs (query id -> run)."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.running: dict[int, int] = {}
        self.lock = threading.Lock()

    @activity.defn(name=START_QUERY.name)
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        with self.lock:
            self.running[assignment.query_id] = assignment.run
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.RUNNING, self.name)

    @activity.defn(name=STOP_QUERY.name)
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        with self.lock:
            self.running.pop(assignment.query_id, None)
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)

    @activity.defn(name=LIST_QUERIES.name)
    def list_queries(self, _agent: str) -> list[QueryReport]:
        with self.lock:
            running = list(self.running.items())
        return [QueryReport(q, run, AgentStatus.RUNNING, self.name) for q, run in running]

    @activity.defn(name=VALIDATE_PLAN.name)
    def validate_plan(self, _assignment: QueryAssignment) -> None:
        return None

    @activity.defn(name=EXPLAIN_QUERY.name)
    def explain_query(self, request: ExplainAssignment) -> ExplainReport:
        return ExplainReport(request.explanation_id, self.name, SIMULATED_PLAN)

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.start_query,
            self.stop_query,
            self.list_queries,
            self.validate_plan,
            self.explain_query,
        ]

    def load(self) -> int:
        with self.lock:
            return len(self.running)

    def query_ids(self) -> list[int]:
        with self.lock:
            return list(self.running)


class SimulatedFleet:
    """``count`` simulated agents on one Temporal client and one coordinator client."""

    def __init__(
        self,
        temporal: Client,
        coordinator: CoordinatorClient,
        names: list[str],
        capacity: int,
        heartbeat_interval: float = 2.0,
        statistics_interval: float = 10.0,
    ) -> None:
        self.temporal = temporal
        self.coordinator = coordinator
        self.agents = {name: SimulatedAgent(name, capacity) for name in names}
        self.heartbeat_interval = heartbeat_interval
        self.statistics_interval = statistics_interval
        self.executor = ThreadPoolExecutor(max_workers=EXECUTOR_THREADS)
        self.workers: dict[str, Worker] = {}
        self.worker_runs: dict[str, asyncio.Task[None]] = {}
        self.pushers: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> None:
        for name, agent in self.agents.items():
            worker = Worker(
                self.temporal,
                task_queue=agent_task_queue(name),
                activities=agent.activities(),
                activity_executor=self.executor,
                max_concurrent_activities=min(agent.capacity + 2, EXECUTOR_THREADS),
                max_concurrent_activity_task_polls=1,
            )
            self.workers[name] = worker
            self.worker_runs[name] = asyncio.create_task(worker.run())
        await self.coordinator.send_many(
            m.RegisterWorker(name, agent.capacity, agent_task_queue(name))
            for name, agent in self.agents.items()
        )
        for name in self.agents:
            self.pushers[name] = asyncio.create_task(self._push(name))

    def _send(self, event: m.Event) -> None:
        with contextlib.suppress(OutboxFull):  # a full outbox: the next one goes
            self.coordinator.try_send(event)

    async def _push(self, name: str) -> None:
        """Heartbeats and statistics, as an agent pushes them."""
        agent = self.agents[name]
        loop = asyncio.get_running_loop()
        next_statistics = loop.time() + self.statistics_interval
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            self._send(m.Heartbeat(name, load=agent.load(), capacity=agent.capacity))
            if loop.time() >= next_statistics:
                next_statistics += self.statistics_interval
                for query_id in agent.query_ids():
                    self._send(m.Statistics(query_id, {"rows_per_second": 100.0}))

    async def kill(self, name: str) -> list[int]:
        """Stop the agent as ``kill -9`` would (no unregistering); the queries it ran."""
        self.pushers.pop(name).cancel()
        worker = self.workers.pop(name)
        run = self.worker_runs.pop(name)
        await worker.shutdown()
        with contextlib.suppress(Exception):
            await run
        return self.agents[name].query_ids()

    async def stop(self) -> None:
        for task in self.pushers.values():
            task.cancel()
        await asyncio.gather(
            *(worker.shutdown() for worker in self.workers.values()), return_exceptions=True
        )
        await asyncio.gather(*self.worker_runs.values(), return_exceptions=True)
        self.executor.shutdown(wait=False, cancel_futures=True)
