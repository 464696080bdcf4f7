"""``streamctl bench requests``: batched requests against one update per request, same run.

Both measurements use the same private stack (Temporal dev server, one coordinator worker
process, a scratch PostgreSQL catalog) and the same request mix; only the client's packing
differs:

* ``batched``: the client library as shipped, coalescing concurrent ``ask``s into updates.
* ``naive``: one update per request (``max_requests_per_update=1``), eight in flight, which
  is what a client without coalescing can do under the server's in-flight update limit.

Each measurement gets its own coordinator workflow (its own config) on the shared catalog.
The mix per caller cycles through create logical source, get it, create sink, get it, drop
the logical source, so the catalog grows by one sink per cycle.

Each measurement also reports where its time went, from its workflow's history
(:func:`pass_timeline`): the passes it took (``local_passes`` of them small ones that ran as
local activities, counted but not timed), their requests on average, the median time of a
pass activity (scheduled to completed: the catalog's work) and the median time from one pass's
completion to the next one's scheduling (the workflow task that answers a pass and starts the
next). Passes run one after another, so ``requests_per_pass / (pass_ms + between_passes_ms)``
bounds the rate.

The batched measurement also reports the CPU each part of the stack used per request while
its callers ran (``cpu_us_per_request``: the client, the coordinator worker with its pass
processes, Temporal's dev server, the catalog's PostgreSQL backends, and their ``total``) and
``cores_busy``: on a machine whose cores that total keeps busy, it bounds the rate as much as
the serial pass does (cores / total CPU per request).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from sqlalchemy.engine import make_url
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from streamctl.bench.process_cpu import command_name, cpu_by_pid
from streamctl.bench.stack import bench_supervisor
from streamctl.catalog.scratch import scratch_database
from streamctl.catalog.urls import libpq_url, normalize_url
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.coordinator_worker import ensure_coordinator

SCHEMA = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("value", "FLOAT64"))
CYCLE = 5


def mixed_request(tag: str, caller: int, step: int) -> m.Request:
    """The ``step``-th request of caller ``caller``: a create/get/drop cycle on its own names."""
    name = f"{tag}_{caller}_{step // CYCLE}"
    phase = step % CYCLE
    if phase == 0:
        return m.CreateLogicalSource(name, SCHEMA)
    if phase == 1:
        return m.GetLogicalSource(name)
    if phase == 2:
        return m.CreateSink(f"{name}_out", SCHEMA, "VOID")
    if phase == 3:
        return m.GetSink(f"{name}_out")
    return m.DropLogicalSource(name)


@dataclass
class Measurement:
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    updates_per_s: float
    workflow_messages_per_s: float
    errors: int
    batch_size: int
    timeout_s: float
    passes: int = 0
    local_passes: int = 0
    requests_per_pass: float = 0.0
    pass_ms_p50: float = 0.0
    between_passes_ms_p50: float = 0.0
    cpu_us_per_request: dict[str, float] = field(default_factory=dict)
    """CPU microseconds per request of each part of the stack while the callers ran
    (:class:`StackProcesses`), and their ``total``."""
    cores_busy: float = 0.0
    """The parts' CPU seconds per second of the run: how many of the machine's cores they kept
    busy."""


CpuReadings = dict[str, dict[int, float]]
"""CPU seconds by part of the stack, by process (:class:`StackProcesses`)."""


@dataclass(frozen=True)
class StackProcesses:
    """The processes of a measurement's stack, by part: the client (this process), the
    coordinator worker (with its pass processes), Temporal's dev server, and the PostgreSQL
    backends serving the catalog (:mod:`streamctl.bench.process_cpu`); the last only for a
    catalog on this machine, whose backends' pids are this machine's."""

    worker_pids: tuple[int, ...]
    temporal_pid: int
    catalog_url: str

    def cpu_readings(self) -> CpuReadings:
        readings = {
            "client": {os.getpid(): time.process_time()},
            "coordinator": cpu_by_pid(self.worker_pids),
            "temporal": cpu_by_pid([self.temporal_pid]),
        }
        if _is_local(self.catalog_url):
            readings["postgres"] = cpu_by_pid(self._backend_pids())
        return readings

    def _backend_pids(self) -> list[int]:
        with psycopg.connect(libpq_url(self.catalog_url), autocommit=True) as connection:
            rows = connection.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return [int(pid) for (pid,) in rows if command_name(int(pid)) == "postgres"]


def _is_local(url: str) -> bool:
    host = make_url(normalize_url(url)).host
    return host in (None, "", "localhost", "127.0.0.1", "::1") or host.startswith("/")


def cpu_used(before: CpuReadings, after: CpuReadings) -> dict[str, float]:
    """Each part's CPU seconds between two readings: over the processes of the later one, what
    each used since the earlier (all of it for one that started in between). A process that
    ended in between is not counted, nor what it used."""
    return {
        part: sum(max(0.0, seconds - before[part].get(pid, 0.0)) for pid, seconds in by_pid.items())
        for part, by_pid in after.items()
        if part in before
    }


def cpu_per_request(used: dict[str, float], requests: int) -> dict[str, float]:
    """:func:`cpu_used` in microseconds per request, with the parts' ``total``."""
    figures = {**used, "total": sum(used.values())}
    return {part: round(seconds / max(requests, 1) * 1e6, 1) for part, seconds in figures.items()}


@dataclass(frozen=True)
class PassTimeline:
    passes: int
    local_passes: int
    pass_ms_p50: float
    between_passes_ms_p50: float


async def pass_timeline(temporal: Client, handle: WorkflowHandle[Any, Any]) -> PassTimeline:
    """The pass activities of the workflow, from the history of each of its runs: how many,
    the median from scheduled to completed, and the median from a completion to the next
    pass's scheduling."""
    scheduled: dict[tuple[str, int], float] = {}
    durations: list[float] = []
    gaps: list[float] = []
    last_completed: float | None = None
    local_passes = 0
    first_run = handle.first_execution_run_id or handle.result_run_id
    async for run_id, event in _events_of_every_run(temporal, handle.id, first_run):
        at = event.event_time.ToDatetime().timestamp()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name != "apply_pass":
                continue
            scheduled[(run_id, event.event_id)] = at
            if last_completed is not None:
                gaps.append(at - last_completed)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            began = scheduled.get((run_id, attributes.scheduled_event_id))
            if began is not None:
                durations.append(at - began)
                last_completed = at
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and is_local_pass(event):
            local_passes += 1
    return PassTimeline(
        passes=len(durations) + local_passes,
        local_passes=local_passes,
        pass_ms_p50=round(statistics.median(durations) * 1000, 1) if durations else 0.0,
        between_passes_ms_p50=round(statistics.median(gaps) * 1000, 1) if gaps else 0.0,
    )


def is_local_pass(event: HistoryEvent) -> bool:
    """Whether a marker records a pass that ran as a local activity (the SDK core's
    ``core_local_activity`` marker, whose ``data`` names the activity). Its times in that data
    come from different clocks (a completion can precede its scheduling by milliseconds), so
    such a pass is counted, not timed."""
    attributes = event.marker_recorded_event_attributes
    if attributes.marker_name != "core_local_activity" or "data" not in attributes.details:
        return False
    try:
        data = json.loads(attributes.details["data"].payloads[0].data)
        return bool(data["activity_type"] == "apply_pass")
    except (ValueError, KeyError, IndexError, TypeError):
        return False  # a marker of another shape


async def _events_of_every_run(
    temporal: Client, workflow_id: str, run_id: str | None
) -> AsyncIterator[tuple[str, HistoryEvent]]:
    """The history events of the run ``run_id`` and of the runs it continued as."""
    while run_id is not None:
        current, run_id = run_id, None
        handle = temporal.get_workflow_handle(workflow_id, run_id=current)
        async for event in handle.fetch_history_events():
            yield current, event
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                attributes = event.workflow_execution_continued_as_new_event_attributes
                run_id = attributes.new_execution_run_id


async def measure(
    temporal: Client,
    address: str,
    config: CoordinatorConfig,
    total: int,
    concurrency: int,
    *,
    naive: bool,
    processes: StackProcesses | None = None,
) -> Measurement:
    tag = f"b{uuid.uuid4().hex[:8]}"
    workflow_id = f"bench-{tag}"
    handle = await ensure_coordinator(temporal, workflow_id=workflow_id, config=config)
    options: dict[str, Any] = {"workflow_id": workflow_id}
    if naive:
        options.update(max_requests_per_update=1, max_inflight_updates=8)
    client = await CoordinatorClient(address, **options).connect()
    latencies: list[float] = []
    errors = 0
    # Whole create/get/drop cycles per caller, and no more callers than the total holds, so
    # that every measurement sends the same mix and about ``total`` requests.
    concurrency = max(1, min(concurrency, total // CYCLE))
    per_caller = max(1, total // concurrency // CYCLE) * CYCLE

    async def caller(index: int) -> None:
        nonlocal errors
        for step in range(per_caller):
            started = time.perf_counter()
            response = await client.ask_response(mixed_request(tag, index, step))
            latencies.append(time.perf_counter() - started)
            errors += 0 if response.ok else 1

    try:
        cpu_before = processes.cpu_readings() if processes else {}
        started = time.perf_counter()
        await asyncio.gather(*(caller(i) for i in range(concurrency)))
        seconds = time.perf_counter() - started
        cpu_after = processes.cpu_readings() if processes else {}
        timeline = await pass_timeline(temporal, handle)
    finally:
        await asyncio.to_thread(client.close)
        await handle.terminate("benchmark measurement done")
    latencies.sort()
    sent = client.stats
    used = cpu_used(cpu_before, cpu_after)
    return Measurement(
        requests=len(latencies),
        seconds=round(seconds, 3),
        rps=round(len(latencies) / seconds, 1),
        p50_ms=round(statistics.median(latencies) * 1000, 2),
        p99_ms=round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
        updates_per_s=round(sent.updates_sent / seconds, 2),
        workflow_messages_per_s=round((sent.updates_sent + sent.signals_sent) / seconds, 2),
        errors=errors,
        batch_size=config.batch_size,
        timeout_s=config.timeout,
        passes=timeline.passes,
        local_passes=timeline.local_passes,
        requests_per_pass=round(len(latencies) / timeline.passes, 1) if timeline.passes else 0.0,
        pass_ms_p50=timeline.pass_ms_p50,
        between_passes_ms_p50=timeline.between_passes_ms_p50,
        cpu_us_per_request=cpu_per_request(used, len(latencies)) if processes else {},
        cores_busy=round(sum(used.values()) / seconds, 2),
    )


SWEEP = [(size, timeout) for size in (1000, 2000, 4000) for timeout in (0.01, 0.05, 0.2)]


async def _run(
    server_url: str,
    requests: int,
    naive_requests: int,
    sweep: bool,
    base: CoordinatorConfig,
    concurrency: int,
) -> dict[str, Any]:
    with scratch_database(server_url, prefix="streamctl_bench") as catalog_url:
        async with bench_supervisor(catalog_url) as supervisor:
            address, temporal = supervisor.address, supervisor.client
            assert temporal is not None and supervisor.temporal is not None
            processes = StackProcesses(
                tuple(worker.pid for worker in supervisor.workers),
                supervisor.temporal.pid,
                catalog_url,
            )
            # Warm the worker (engine, migrations, imports) so neither side pays for it.
            await measure(temporal, address, base, 500, 50, naive=False)
            batched = await measure(
                temporal, address, base, requests, concurrency, naive=False, processes=processes
            )
            naive = await measure(temporal, address, base, naive_requests, 8, naive=True)
            points = []
            if sweep:
                for batch_size, timeout in SWEEP:
                    point = await measure(
                        temporal,
                        address,
                        CoordinatorConfig(batch_size=batch_size, timeout=timeout),
                        min(requests, 5 * 2 * batch_size),
                        2 * batch_size,
                        naive=False,
                    )
                    points.append(asdict(point))
    return {
        "catalog": "postgresql",
        "batched_rps": batched.rps,
        "naive_rps": naive.rps,
        "speedup": round(batched.rps / naive.rps, 1),
        "p50_ms": batched.p50_ms,
        "p99_ms": batched.p99_ms,
        "updates_per_s": batched.updates_per_s,
        "workflow_messages_per_s": batched.workflow_messages_per_s,
        "cpu_us_per_request": batched.cpu_us_per_request,
        "cores_busy": batched.cores_busy,
        "naive_p50_ms": naive.p50_ms,
        "naive_updates_per_s": naive.updates_per_s,
        "errors": batched.errors + naive.errors,
        "batched": asdict(batched),
        "naive": asdict(naive),
        "sweep": points,
    }


def run_requests_bench(
    server_url: str,
    requests: int,
    naive_requests: int,
    sweep: bool,
    base: CoordinatorConfig | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """``concurrency`` callers (default two passes' worth, ``2 * batch_size``: one pass is
    applied while the callers of the next one wait) send ``requests`` in the batched run."""
    config = base or CoordinatorConfig()
    callers = concurrency or 2 * config.batch_size
    return asyncio.run(_run(server_url, requests, naive_requests, sweep, config, callers))
