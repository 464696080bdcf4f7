"""``streamctl bench scale``: one coordinator managing many agents and queries, by simulation.

On a private stack (Temporal dev server, one coordinator worker process, a scratch PostgreSQL
catalog) the benchmark runs ``agents`` simulated agents (:mod:`streamctl.bench.sim_agents`:
real Temporal workers on their own task queues, heartbeating every 2 s and pushing statistics,
without Spark) and, in order:

1. ``small``: the passes of the fleet's steady load (heartbeats, statistics) while the catalog
   holds only the fleet and a few objects, sampled for ``sample_seconds``.
2. ``queries`` queries (one Generator source, one Void sink, ``SELECT ... INTO``), created in
   batches; the time until every one is RUNNING.
3. Filler logical sources until the catalog holds ``large_rows`` rows (every table counted);
   ``large``: the passes of the same kind of load again. ``pass_p50_ratio`` is the large p50
   over the small one.
4. ``soak_seconds`` of steady load: the coordinator worker process's RSS every 10 s (first,
   last, max), the workflow's history events per minute and continue-as-new runs per hour.
5. ``kill_agents`` agents stopped as by ``kill -9``: the seconds until every query they ran
   is RUNNING on another agent (detection by missing heartbeats included:
   ``CoordinatorConfig.dead_after``).
6. ``SHOW QUERIES`` through ``streamctl sql`` (pages of 500): how many rows it printed.

A coordinator worker that ends is started again, as by ``streamctl up``
(``coordinator_worker_restarted`` says whether one was). Pass durations come from the
workflow's ``status`` query (the last pass's duration, sampled every 100 ms: each pass once).
Query states are read from the catalog itself (what every listing reports), not listed
through the coordinator: paging 10,000 queries through it every second would be a load of
its own on the passes being measured. Everything is printed as one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import create_engine, func, select
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from streamctl.bench.process_cpu import tree_rss_bytes
from streamctl.bench.sim_agents import SimulatedFleet
from streamctl.bench.stack import bench_supervisor
from streamctl.catalog.models import Base, ChangelogEntry, Query, SnapshotVersion, Worker
from streamctl.catalog.scratch import scratch_database
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID

CREATE_CHUNK = 1000
SOURCE = (
    "CREATE LOGICAL SOURCE ticks(id UINT64 NOT NULL, v UINT64 NOT NULL);"
    "CREATE PHYSICAL SOURCE FOR ticks TYPE Generator SET("
    "'SEQUENCE UINT64 0 1000000 1, SEQUENCE UINT64 0 1000000 3' AS `SOURCE`.GENERATOR_SCHEMA,"
    "'NONE' AS `SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES);"
    "CREATE SINK discard(id UINT64 NOT NULL, v UINT64 NOT NULL) TYPE Void;"
)
QUERY = "SELECT id, v FROM ticks WHERE v > {n} INTO discard"
FILLER_SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


class CatalogObserver:
    """Reads the catalog the benchmark's coordinator writes, beside it (its own connection)."""

    def __init__(self, catalog_url: str) -> None:
        self.engine = create_engine(catalog_url)

    def rows(self) -> int:
        """Rows in every table of the catalog."""
        with self.engine.connect() as connection:
            return sum(
                int(connection.execute(select(func.count()).select_from(table)).scalar_one())
                for table in Base.metadata.sorted_tables
            )

    def query_states(self) -> dict[int, tuple[str, str | None]]:
        """Each query's current state and worker."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(Query.id, Query.current_state, Query.worker))
            return {row.id: (row.current_state, row.worker) for row in rows}

    def transitions(self, entity: str, keys: Collection[str], action: str) -> dict[str, float]:
        """When (``committed_at`` of its pass) each of ``keys`` last made the changelog's
        ``action`` (``SUSPECT->DEAD``, ``STARTING->RUNNING``)."""
        columns = (ChangelogEntry.key, func.max(SnapshotVersion.committed_at))
        statement = (
            select(*columns)
            .join(SnapshotVersion, SnapshotVersion.version == ChangelogEntry.version)
            .where(ChangelogEntry.entity == entity, ChangelogEntry.action == action)
            .where(ChangelogEntry.key.in_(list(keys)))
            .group_by(ChangelogEntry.key)
        )
        with self.engine.connect() as connection:
            return {key: float(at) for key, at in connection.execute(statement)}

    def story(self, entity: str, key: str, since: float) -> list[tuple[float, str, str]]:
        """What the changelog says happened to one entity since ``since`` (epoch seconds):
        ``(committed_at, action, reason)`` in the order the passes applied them."""
        statement = (
            select(SnapshotVersion.committed_at, ChangelogEntry.action, ChangelogEntry.reason)
            .join(SnapshotVersion, SnapshotVersion.version == ChangelogEntry.version)
            .where(ChangelogEntry.entity == entity, ChangelogEntry.key == key)
            .where(SnapshotVersion.committed_at >= since)
            .order_by(ChangelogEntry.version, ChangelogEntry.seq)
        )
        with self.engine.connect() as connection:
            return [
                (float(at), action, reason) for at, action, reason in connection.execute(statement)
            ]

    def last_heartbeats(self, names: Collection[str]) -> dict[str, float]:
        statement = select(Worker.name, Worker.last_heartbeat_at).where(
            Worker.name.in_(list(names))
        )
        with self.engine.connect() as connection:
            return {name: float(at) for name, at in connection.execute(statement)}

    def close(self) -> None:
        self.engine.dispose()


def _figures(milliseconds: list[float]) -> dict[str, float]:
    if not milliseconds:
        return {"passes": 0, "p50_ms": 0.0, "p99_ms": 0.0}
    ordered = sorted(milliseconds)
    return {
        "passes": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 2),
    }


async def sample_passes(temporal: Client, seconds: float) -> dict[str, float]:
    """Each pass's duration while ``seconds`` pass (the ``status`` query, every 100 ms)."""
    handle = temporal.get_workflow_handle(COORDINATOR_WORKFLOW_ID)
    durations: list[float] = []
    seen = -1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = await handle.query("status")
        if status["passes_run"] != seen:
            if seen >= 0:
                durations.append(float(status["last_pass_ms"]))
            seen = status["passes_run"]
        await asyncio.sleep(0.1)
    return _figures(durations)


async def history_since(temporal: Client, run_id: str, length: int) -> tuple[int, int]:
    """History events the coordinator wrote since its run ``run_id`` was ``length`` events
    long, and how many runs followed that one (continue-as-new)."""
    handle = temporal.get_workflow_handle(COORDINATOR_WORKFLOW_ID)
    current = await handle.describe()
    if current.run_id == run_id:
        return current.history_length - length, 0
    first = await temporal.get_workflow_handle(COORDINATOR_WORKFLOW_ID, run_id=run_id).describe()
    events, runs = current.history_length + first.history_length - length, 1
    async for execution in temporal.list_workflows(f"WorkflowId = '{COORDINATOR_WORKFLOW_ID}'"):
        between = execution.run_id not in (run_id, current.run_id)
        if between and execution.start_time > first.start_time:
            events += execution.history_length
            runs += 1
    return events, runs


async def history_diagnosis(temporal: Client, runs: int = 3) -> dict[str, Any]:
    """What the coordinator's last ``runs`` runs wrote: event types counted, and the cause of
    every failed workflow task (printed when the benchmark fails, before its stack goes)."""
    diagnosis: dict[str, Any] = {}
    executions = [
        execution
        async for execution in temporal.list_workflows(f"WorkflowId = '{COORDINATOR_WORKFLOW_ID}'")
    ]
    executions.sort(key=lambda execution: execution.start_time, reverse=True)
    for execution in executions[:runs]:
        handle = temporal.get_workflow_handle(COORDINATOR_WORKFLOW_ID, run_id=execution.run_id)
        kinds: Counter[str] = Counter()
        failures: Counter[str] = Counter()
        async for event in handle.fetch_history_events():
            kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            kinds[kind] += 1
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                attributes = event.workflow_task_failed_event_attributes
                cause = WorkflowTaskFailedCause.Name(attributes.cause)
                failures[f"{cause}: {attributes.failure.message[:200]}"] += 1
        diagnosis[execution.run_id] = {
            "status": str(execution.status),
            "events": dict(kinds),
            "task_failures": dict(failures),
        }
    return diagnosis


async def _wait(predicate: Any, timeout: float, what: str, interval: float = 1.0) -> float:
    started = time.monotonic()
    while not await predicate():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        await asyncio.sleep(interval)
    return round(time.monotonic() - started, 1)


async def _run(
    server_url: str,
    agents: int,
    queries: int,
    capacity: int,
    large_rows: int,
    sample_seconds: float,
    soak_seconds: float,
    kill_agents: int,
) -> dict[str, Any]:
    result: dict[str, Any] = {"agents": agents, "queries": queries, "capacity": capacity}
    with scratch_database(server_url, prefix="streamctl_bench") as catalog_url:
        async with bench_supervisor(catalog_url) as supervisor:
            temporal = supervisor.client
            assert temporal is not None
            [first_worker] = supervisor.workers
            client = await CoordinatorClient(supervisor.address).connect()
            names = [f"sim{index:04d}" for index in range(agents)]
            fleet = SimulatedFleet(temporal, client, names, capacity)
            observer = CatalogObserver(catalog_url)
            # Restarts a coordinator worker that ends (the stuck-run watchdog's exit among
            # them), as ``streamctl up`` does; the figures say whether it did.
            watcher = asyncio.create_task(supervisor.watch())
            try:
                await fleet.start()

                async def all_alive() -> bool:
                    workers = await client.list_all(m.ListWorkers())
                    alive = sum(w["state"] == "ALIVE" for w in workers)
                    return bool(alive == agents)

                result["fleet_alive_s"] = await _wait(all_alive, 300, "every agent ALIVE")
                await client.ask(m.ExecuteStatement(SOURCE))
                result["small_rows"] = await asyncio.to_thread(observer.rows)
                result["small"] = await sample_passes(temporal, sample_seconds)

                started = time.monotonic()
                for first in range(0, queries, CREATE_CHUNK):
                    batch = [
                        m.ExecuteStatement(QUERY.format(n=n))
                        for n in range(first, min(queries, first + CREATE_CHUNK))
                    ]
                    answers = await client.ask_many(batch)
                    refused = [a for a in answers if not a.ok]
                    if refused:
                        raise RuntimeError(f"queries refused: {refused[0].error_message}")

                async def all_running() -> bool:
                    states = await asyncio.to_thread(observer.query_states)
                    running = sum(state == "RUNNING" for state, _worker in states.values())
                    return running == queries

                await _wait(all_running, 1800, f"{queries} queries RUNNING")
                result["queries_running_s"] = round(time.monotonic() - started, 1)

                rows = await asyncio.to_thread(observer.rows)
                tag = uuid.uuid4().hex[:6]
                index = 0
                while rows < large_rows:
                    missing = min(large_rows - rows, 20_000)
                    answers = await client.ask_many(
                        [
                            m.CreateLogicalSource(f"filler_{tag}_{index + n}", FILLER_SCHEMA)
                            for n in range(missing)
                        ]
                    )
                    index += missing
                    if not all(a.ok for a in answers):
                        raise RuntimeError("filler sources refused")
                    rows = await asyncio.to_thread(observer.rows)
                result["large_rows"] = rows
                result["large"] = await sample_passes(temporal, sample_seconds)
                small_p50 = result["small"]["p50_ms"] or 1.0
                result["pass_p50_ratio"] = round(result["large"]["p50_ms"] / small_p50, 2)

                result["soak"] = await _soak(
                    temporal, lambda: supervisor.workers[0].pid, soak_seconds
                )
                result["failover"] = await _failover(
                    temporal, client, observer, fleet, names[:kill_agents]
                )
                result["show_queries_rows"] = await asyncio.to_thread(
                    _show_queries_rows, supervisor.address
                )
            except Exception:
                diagnosis = await history_diagnosis(temporal)
                print(json.dumps({"partial": result, "history": diagnosis}), file=sys.stderr)
                raise
            finally:
                watcher.cancel()
                result["coordinator_worker_restarted"] = supervisor.workers[0] is not first_worker
                await fleet.stop()
                await asyncio.to_thread(client.close)
                observer.close()
    return result


async def _soak(temporal: Client, pid: Callable[[], int], seconds: float) -> dict[str, Any]:
    first_run = await temporal.get_workflow_handle(COORDINATOR_WORKFLOW_ID).describe()
    samples: list[int] = []
    deadline = time.monotonic() + seconds
    while True:
        samples.append(tree_rss_bytes(pid()))
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
    events, runs = await history_since(temporal, first_run.run_id, first_run.history_length)
    minutes = seconds / 60
    mib = 1024 * 1024
    return {
        "seconds": seconds,
        "rss_first_mib": round(samples[0] / mib, 1),
        "rss_last_mib": round(samples[-1] / mib, 1),
        "rss_max_mib": round(max(samples) / mib, 1),
        "history_events_per_minute": round(events / minutes, 1),
        "continue_as_new_per_hour": round(runs * 60 / minutes, 1),
    }


async def _failover(
    temporal: Client,
    client: CoordinatorClient,
    observer: CatalogObserver,
    fleet: SimulatedFleet,
    victims: list[str],
) -> dict[str, Any]:
    moved: set[int] = set()
    killed_at: dict[str, float] = {}
    agent_of: dict[int, str] = {}
    for name in victims:
        ran = await fleet.kill(name)
        killed_at[name] = time.time()
        moved.update(ran)
        agent_of.update((query_id, name) for query_id in ran)
    gone = set(victims)
    started = time.monotonic()

    async def all_dead() -> bool:
        workers = await client.list_all(m.ListWorkers())
        return all(w["state"] == "DEAD" for w in workers if w["name"] in gone)

    # Every poll's count of moved queries RUNNING elsewhere, by second since the kill: where
    # the failover's time goes (detection, then the restarts' pace).
    timeline: list[tuple[float, int]] = []

    async def all_elsewhere() -> bool:
        states = await asyncio.to_thread(observer.query_states)
        moved_states = [states[query_id] for query_id in moved if query_id in states]
        elsewhere = sum(s == "RUNNING" and w not in gone for s, w in moved_states)
        timeline.append((round(time.monotonic() - started, 1), elsewhere))
        return elsewhere == len(moved_states)

    dead_s = await _wait(all_dead, 600, "every killed agent DEAD")
    await _wait(all_elsewhere, 600, "every query of the killed agents RUNNING elsewhere", 0.5)
    elsewhere_s = round(time.monotonic() - started, 1)  # before the listing below
    listed = await client.list_all(m.ListQueries())
    keys = [str(query_id) for query_id in moved]
    running = await asyncio.to_thread(observer.transitions, "query", keys, "STARTING->RUNNING")
    breakdown = await asyncio.to_thread(_failover_breakdown, observer, killed_at, agent_of, running)
    first_kill = min(killed_at.values())
    slowest = await asyncio.to_thread(_slowest_stories, observer, first_kill, keys, running)
    return {
        "killed_agents": len(victims),
        "queries_moved": len(moved),
        "seconds_until_dead": dead_s,
        "seconds_until_running_elsewhere": elsewhere_s,
        "states_after": dict(Counter(q["current_state"] for q in listed)),
        "running_elsewhere_timeline": timeline,
        "breakdown": breakdown,
        "slowest": slowest,
        "runs_started": await _runs_started(temporal, first_kill),
    }


async def _runs_started(temporal: Client, since: float) -> list[tuple[float, int]]:
    """The coordinator runs begun since ``since`` (epoch seconds): when (seconds since then)
    and how long each history grew; a continue-as-new in the failover shows here."""
    runs = [
        (round(execution.start_time.timestamp() - since, 1), execution.history_length)
        async for execution in temporal.list_workflows(f"WorkflowId = '{COORDINATOR_WORKFLOW_ID}'")
        if execution.start_time.timestamp() >= since
    ]
    return sorted(runs)


SLOWEST_STORIES = 3


def _slowest_stories(
    observer: CatalogObserver, killed_at: float, keys: list[str], running: dict[str, float]
) -> list[dict[str, Any]]:
    """The changelog's story of the :data:`SLOWEST_STORIES` moved queries (``keys``) that ran
    elsewhere last (``running``: when each last became RUNNING; a query that never did is
    among them): seconds since the first kill, action, reason. Why the failover's tail was
    long."""
    last = sorted(keys, key=lambda key: running.get(key, float("inf")))[-SLOWEST_STORIES:]
    return [
        {
            "query": int(key),
            "story": [
                (round(at - killed_at, 1), action, reason[:160])
                for at, action, reason in observer.story("query", key, killed_at)
            ],
        }
        for key in last
    ]


def _failover_breakdown(
    observer: CatalogObserver,
    killed_at: dict[str, float],
    agent_of: dict[int, str],
    running: dict[str, float],
) -> dict[str, dict[str, float]]:
    """Where the failover's time went, from the catalog (seconds; p50 and max over the killed
    agents or their queries): the last heartbeat the coordinator took after the kill (a
    backlog of the fleet's events), DEAD after that heartbeat (``dead_after`` and the
    liveness check's lateness), the restart's start after DEAD (placement's pace), and RUNNING
    after the start (the agent's answer and the pass that applies it)."""
    names = list(killed_at)
    heartbeats = observer.last_heartbeats(names)
    dead = observer.transitions("worker", names, "SUSPECT->DEAD")
    agent_by_key = {str(query_id): agent for query_id, agent in agent_of.items()}
    queries = list(agent_by_key)
    starting = observer.transitions("query", queries, "RECOVERING->STARTING")

    def spread(values: list[float]) -> dict[str, float]:
        if not values:
            return {"p50": 0.0, "max": 0.0}
        return {"p50": round(statistics.median(values), 1), "max": round(max(values), 1)}

    return {
        "last_heartbeat_after_kill": spread(
            [heartbeats[n] - killed_at[n] for n in names if n in heartbeats]
        ),
        "dead_after_last_heartbeat": spread(
            [dead[n] - heartbeats[n] for n in names if n in dead and n in heartbeats]
        ),
        "start_after_dead": spread(
            [
                starting[q] - dead[agent_by_key[q]]
                for q in queries
                if q in starting and agent_by_key[q] in dead
            ]
        ),
        "running_after_start": spread(
            [running[q] - starting[q] for q in queries if q in running and q in starting]
        ),
    }


def _show_queries_rows(address: str) -> int:
    shown = subprocess.run(
        [
            *(sys.executable, "-m", "streamctl.cli"),
            *("sql", "SHOW QUERIES", "--json", "--address", address),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if shown.returncode != 0:
        raise RuntimeError(f"SHOW QUERIES failed: {shown.stderr[-500:]}")
    [answer] = json.loads(shown.stdout)["statements"]
    return len(answer["result"]["rows"])


def run_scale_bench(
    server_url: str,
    agents: int,
    queries: int,
    capacity: int,
    large_rows: int,
    sample_seconds: float,
    soak_seconds: float,
    kill_agents: int,
) -> dict[str, Any]:
    return asyncio.run(
        _run(
            server_url,
            agents,
            queries,
            capacity,
            large_rows,
            sample_seconds,
            soak_seconds,
            kill_agents,
        )
    )
