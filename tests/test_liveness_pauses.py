"""Liveness across pauses in passes, and timers instead of busy loops (issue 16, item 4).

A real dev server and coordinator worker; the catalog outage is injected by an activity
interceptor that fails ``apply_pass`` for a while, as a lost database connection would.

* Heartbeats that arrive while passes cannot run merge into one pending event; the pass that
  runs after the pause judges liveness on the newest of them, so an agent whose heartbeats
  kept arriving is never declared DEAD (on f29f918 the merged heartbeat kept the oldest
  arrival, so any pause longer than ``dead_after`` killed every healthy agent).
* A RECOVERING query that no agent can take waits for something that could place it (a pass
  schedules waiting queries at its end) instead of re-arming the liveness timer in the past,
  which on f29f918 ran passes back to back while the coordinator was otherwise idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import RunningCoordinator, wait_until
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.client import CoordinatorClient
from streamctl.domain.workers import STALL_TOLERANCE
from streamctl.protocol import messages as m
from streamctl.protocol import refusals
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.pass_io import (
    PassInput,
    PendingMessage,
    request_batches_json,
)
from streamctl.worker.coordinator_worker import build_worker, ensure_coordinator
from streamctl.workflows.coordinator import CoordinatorWorkflow


class CatalogOutage(Interceptor):
    """Fails every ``apply_pass`` attempt while :attr:`down` is set (a catalog outage), makes
    each pass take :attr:`slow` seconds longer (a loaded catalog), and keeps the ``late_by`` of
    every liveness check a pass carried."""

    def __init__(self) -> None:
        self.down = False
        self.slow = 0.0
        self.late_by: list[float] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outage = self

        class _Failing(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                if activity.info().activity_type == "apply_pass":
                    pass_input: PassInput = input.args[0]
                    outage.late_by.extend(
                        float(event.envelope.body.get("late_by", 0.0))
                        for event in pass_input.events
                        if event.envelope.kind == m.CheckLiveness.kind
                    )
                    if outage.down:
                        # What the pass raises when its database cannot be reached.
                        raise ApplicationError(
                            "the catalog is unreachable (injected outage)",
                            type=refusals.CATALOG_UNAVAILABLE,
                        )
                    await asyncio.sleep(outage.slow)
                return await super().execute_activity(input)

        return _Failing(next)


@contextlib.asynccontextmanager
async def client_with_outage(
    temporal_client: Client, address: str, catalog_url: str, config: CoordinatorConfig
) -> AsyncIterator[tuple[CoordinatorClient, CatalogOutage]]:
    """A coordinator whose passes :class:`CatalogOutage` controls, and a client of it."""
    suffix = uuid.uuid4().hex[:10]
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-{suffix}"
    outage = CatalogOutage()
    executor = ThreadPoolExecutor(max_workers=8)
    worker = build_worker(temporal_client, catalog_url, executor, task_queue, [outage])
    try:
        async with worker:
            handle = await ensure_coordinator(
                temporal_client,
                workflow_id=workflow_id,
                config=config,
                task_queue=task_queue,
                catalog_url=catalog_url,
            )
            coordinator = RunningCoordinator(workflow_id, task_queue, catalog_url, handle, address)
            client = await coordinator.client().connect()
            try:
                yield client, outage
            finally:
                await asyncio.to_thread(client.close)
                with contextlib.suppress(Exception):
                    await handle.terminate()
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


@contextlib.asynccontextmanager
async def heartbeating(client: CoordinatorClient, name: str) -> AsyncIterator[None]:
    """An agent ``name`` that registers, then heartbeats every 0.2 s until the block ends."""
    stop = asyncio.Event()

    async def beat() -> None:
        while not stop.is_set():
            await client.send(m.Heartbeat(name, load=0))
            await asyncio.sleep(0.2)

    await client.send(m.RegisterWorker(name, capacity=1))
    beater = asyncio.create_task(beat())
    try:
        yield
    finally:
        stop.set()
        await beater


async def test_a_pause_in_passes_longer_than_dead_after_kills_no_agent_that_kept_beating(
    temporal, temporal_client, sqlite_url
):
    """Fails on f29f918 (the agent goes ALIVE->DEAD after the outage), passes now."""
    config = CoordinatorConfig(suspect_after=1.5, dead_after=3.0)
    async with client_with_outage(temporal_client, temporal.address, sqlite_url, config) as (
        client,
        outage,
    ):
        async with heartbeating(client, "steady"):
            await wait_until(
                lambda: _worker_state(client, "steady", "ALIVE"), timeout=30, interval=0.2
            )
            # Passes fail for 4 s; the pass retries with backoff (0.2 s doubling), so
            # passes pause for about 6 s, twice dead_after, while heartbeats go on arriving.
            outage.down = True
            await asyncio.sleep(4.0)
            outage.down = False
            paused_at = time.monotonic()
            await wait_until(
                lambda: _worker_state(client, "steady", "ALIVE"), timeout=60, interval=0.2
            )
            await asyncio.sleep(1.0)  # a few more passes after the pause
        changes = await client.ask(m.ListChanges(entity="worker", key="steady"))
        transitions = [c["action"] for c in changes if "->" in c["action"]]
        assert not [t for t in transitions if t.endswith("DEAD")], (transitions, paused_at)
        assert (await client.ask(m.GetWorker("steady")))["state"] == "ALIVE"


async def test_a_busy_coordinator_declares_a_silent_agent_dead_on_time(
    temporal, temporal_client, sqlite_url
):
    """Passes that take 3 s make every liveness timer fire seconds late, while an agent's
    heartbeats go on arriving: the coordinator hears all along, so none of that counts as a
    stall, and an agent that fell silent goes DEAD. Before, each late check counted as a
    stall, and credited the silent agent with it and at least half a suspect interval: under
    bench scale's load such agents were DEAD after 74 s, not dead_after's 30."""
    config = CoordinatorConfig(suspect_after=1.5, dead_after=3.0)
    async with client_with_outage(temporal_client, temporal.address, sqlite_url, config) as (
        client,
        outage,
    ):
        await client.send(m.RegisterWorker("silent", capacity=1))
        async with heartbeating(client, "steady"):
            await wait_until(
                lambda: _worker_state(client, "silent", "ALIVE"), timeout=30, interval=0.2
            )
            outage.late_by.clear()
            outage.slow = 3.0
            await wait_until(
                lambda: _worker_state(client, "silent", "DEAD"), timeout=60, interval=0.5
            )
            outage.slow = 0.0
        # Checks came late (a pass ran first), yet none found the coordinator deaf.
        assert outage.late_by, "no liveness check while passes were slow"
        assert max(outage.late_by) <= STALL_TOLERANCE, outage.late_by
        changes = await client.ask(m.ListChanges(entity="worker", key="steady"))
        assert not [c for c in changes if c["action"].endswith("DEAD")], changes


async def _worker_state(client: CoordinatorClient, name: str, state: str) -> bool:
    response = await client.ask_response(m.GetWorker(name))
    return bool(response.ok and response.result["state"] == state)


async def _passes(coordinator: RunningCoordinator) -> int:
    status = await coordinator.handle.query(CoordinatorWorkflow.status)
    return int(status.passes_run)


ORDERS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("amount", "INT64", False))


async def test_an_unplaceable_recovering_query_waits_without_running_passes(
    start_coordinator, sqlite_url
):
    """Fails on f29f918 (hundreds of passes a minute while idle), passes now; the query is
    still placed as soon as an agent with room registers."""
    coordinator = await start_coordinator(
        sqlite_url, CoordinatorConfig(suspect_after=600.0, dead_after=1200.0)
    )
    client = await coordinator.client().connect()
    try:
        await client.send(m.RegisterWorker("gone", capacity=1))
        await wait_until(lambda: _worker_state(client, "gone", "ALIVE"), timeout=30)
        await client.ask(m.CreateLogicalSource("orders", ORDERS))
        await client.ask(m.CreatePhysicalSource("orders", "FILE", {"file_path": "in/orders"}))
        await client.ask(m.CreateSink("out", ORDERS, "FILE", {"file_path": "out/orders"}))
        query = await client.ask(m.CreateQuery("SELECT id, amount FROM orders INTO out"))
        assert (query["current_state"], query["worker"]) == ("STARTING", "gone")
        # Its agent leaves: the query recovers, and no agent is left to take it.
        await client.send(m.UnregisterWorker("gone"))

        async def recovering() -> bool:
            got = await client.ask(m.GetQuery(query["id"]))
            return bool(got["current_state"] == "RECOVERING")

        await wait_until(recovering, timeout=30)
        await asyncio.sleep(0.5)  # let the last answers' passes finish
        before = await _passes(coordinator)
        await asyncio.sleep(3.0)
        idle_passes = await _passes(coordinator) - before
        # Nothing arrives in these 3 s; a timer-driven wait runs at most a pass or two.
        assert idle_passes <= 2, f"{idle_passes} passes in 3 s while idle"

        await client.send(m.RegisterWorker("fresh", capacity=1))

        async def placed() -> bool:
            got = await client.ask(m.GetQuery(query["id"]))
            return bool(got["current_state"] == "STARTING" and got["worker"] == "fresh")

        await wait_until(placed, timeout=30)
    finally:
        await asyncio.to_thread(client.close)


@pytest.mark.quick
def test_a_heartbeat_counts_from_its_newest_arrival_bounded_by_the_pass(sqlite_url):
    """``arrived_last`` (the workflow's stamp on merged heartbeats) moves the heartbeat time
    forward, never past the pass's clock nor behind the event's own arrival, so a client that
    sets it gains nothing over sending a heartbeat."""
    activities = CatalogWork(sqlite_url)

    def last_heartbeat(pass_no: int, now: float, event: m.Event, received_at: float) -> float:
        activities.apply_pass(
            PassInput(
                "w",
                pass_no,
                now,
                [PendingMessage(event.to_envelope(f"e{pass_no}"), received_at)],
                [now],
                30.0,
                60.0,
            ),
            request_batches_json([[]]),
        )
        result = activities.apply_pass(
            PassInput("w", pass_no + 1, now, [], [now], 30.0, 60.0),
            request_batches_json([[m.GetWorker("a1").to_envelope(f"get{pass_no}")]]),
        )
        return float(json.loads(result.responses[0])[0]["result"]["last_heartbeat_at"])

    assert last_heartbeat(1, 1000.0, m.RegisterWorker("a1"), 1000.0) == 1000.0
    merged = m.Heartbeat("a1", count=5, arrived_last=1049.0)
    assert last_heartbeat(3, 1050.0, merged, 1010.0) == 1049.0
    forged_ahead = m.Heartbeat("a1", arrived_last=1e12)
    assert last_heartbeat(5, 1060.0, forged_ahead, 1055.0) == 1060.0
    forged_behind = m.Heartbeat("a1", arrived_last=0.0)
    assert last_heartbeat(7, 1070.0, forged_behind, 1065.0) == 1065.0


@pytest.mark.quick
def test_a_stalled_coordinator_does_not_count_its_stall_against_agents(sqlite_url):
    """A liveness timer seen late (the Temporal server or every coordinator worker was down)
    credits the stall: an agent whose heartbeats could not reach the coordinator meanwhile is
    not declared DEAD when it resumes; an agent that really stopped still is, once its silence
    outside the stall passes ``dead_after``. On f29f918 both were DEAD at once."""
    activities = CatalogWork(sqlite_url)
    passes = iter(range(1, 100))

    def run(now: float, *events: m.Event) -> dict[str, str]:
        pass_no = next(passes)
        pending = [  # arrived before the listing, which then shows what they did
            PendingMessage(event.to_envelope(f"~e{pass_no}-{i}"), now - 0.5)
            for i, event in enumerate(events)
        ]
        result = activities.apply_pass(
            PassInput("w", pass_no, now, pending, [now], 10.0, 30.0),
            request_batches_json([[m.ListWorkers().to_envelope(f"list{pass_no}")]]),
        )
        workers = json.loads(result.responses[0])[0]["result"]
        return {w["name"]: w["state"] for w in workers}

    run(1000.0, m.RegisterWorker("beating"), m.RegisterWorker("silent"))
    run(1008.0, m.Heartbeat("beating"))
    # "silent" says nothing after 1000. The coordinator stalls from about 1015 to 1100: its
    # liveness timer, due at 1018, is seen 82 s late, before any heartbeat sent meanwhile.
    states = run(1100.0, m.CheckLiveness(late_by=82.0))
    assert states == {"beating": "ALIVE", "silent": "ALIVE"}
    states = run(1103.0, m.Heartbeat("beating"))  # the delayed heartbeat arrives
    assert states["beating"] == "ALIVE"
    states = run(1110.0, m.Heartbeat("beating"), m.CheckLiveness())
    assert states == {"beating": "ALIVE", "silent": "SUSPECT"}
    states = run(1130.0, m.Heartbeat("beating"), m.CheckLiveness())
    assert states == {"beating": "ALIVE", "silent": "DEAD"}
