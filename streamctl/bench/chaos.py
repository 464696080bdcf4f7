"""``streamctl bench chaos``: steady load while every process of the stack is killed -9; then
the books are checked.

What runs
---------
A private stack: a PostgreSQL cluster of its own (``initdb``/``pg_ctl`` in a temporary
directory on a free port, trust authentication, run as the ``postgres`` user when the
benchmark runs as root; the machine's own PostgreSQL server is never touched), and the
:class:`~streamctl.worker.supervisor.Supervisor` that ``streamctl up`` uses, with 2
coordinator worker processes and 2 Spark agents (``local[1]``, capacity 4) whose ``watch()``
restarts a dead Temporal dev server, coordinator worker or agent. For ``seconds`` (default
300) the benchmark keeps up, at once:

* **requests**: ``request_rate`` ``CreateLogicalSource`` requests per second (open loop: a
  new one is sent on time whatever is still waiting), each with a unique name and a
  client-generated request id, through one :class:`~streamctl.client.client.CoordinatorClient`
  whose ``request_timeout`` (180 s) outlasts the outages, since the client retries with the
  same id;
* **heartbeats** of 50 simulated agents (registered with capacity 0, so no query is placed
  on them) every 2 s through one client's event path (``try_send``; the outbox keeps and
  retries them through outages);
* **4 queries** on the 2 real agents: ``SELECT id, v FROM src_N INTO sink_N`` over File
  sources (CSV directories) that the benchmark feeds with a new file of sequential ids every
  second, into File sinks (CSV);
* **kills**: at seeded random times (``seed``) within the first three quarters of the run,
  at least 8 s apart, ``kill -9`` of: a coordinator worker process, an agent process, an
  agent's Spark driver JVM (the ``java`` child of the agent process), the Temporal dev server,
  and the PostgreSQL postmaster. Per 5 minutes: 4 coordinator workers, 2 dev servers, 2
  PostgreSQL, 2 agents, 2 Spark JVMs (at least one of each). The supervisor restarts workers,
  agents and the dev server; the benchmark restarts PostgreSQL with ``pg_ctl`` after 2-6 s of
  downtime; the agent itself must notice its dead JVM and build a new one
  (:mod:`streamctl.agent.spark_watchdog`).

Then it stops sending and feeding, waits for the requests still under way (each ends by its
deadline), waits (at most ``sink_timeout``) until every sink holds every id fed and every
query is ``RUNNING``, and reads the catalog directly (SQL on the private cluster).

Figures
-------
* ``requests_acked``: requests answered ok. ``requests_failed``: not answered by their
  deadline or failed in the client (allowed; reported, with how many were applied anyway).
  ``requests_refused``: answered with an error, by code.
* ``lost``: acked requests whose source is not in the catalog.
* ``doubled``: requests with exact evidence of a second application: answered
  ``ALREADY_EXISTS`` (every name is sent once, so only a retry applied again can find it), or
  whose source has more than one ``create`` in the ``changelog``.
  ``changelog_applied_twice``: groups of (message id, entity, key, action) in the whole
  changelog that occur more than once (no message may change an entity twice).
  ``refused_but_applied``: requests answered with an error whose source exists all the same.
* ``healthy_agents_declared_dead``: ``->DEAD`` transitions in the changelog of the 50
  simulated agents and of the real agents, except a real agent's between a kill of its process
  and its next registration (that agent was dead). ``dead_transitions`` lists every one.
* ``queries_running_at_end``: queries ``RUNNING`` (``ListQueries``) after the wait.
* ``sink_rows_lost``/``sink_rows_doubled``: the committed rows of each File sink (only files
  its ``_spark_metadata`` log lists) against the rows fed, as multisets: fed rows missing, and
  rows present more often than fed. ``sink_rows_unexpected``: rows never fed.
* ``kills``: per target, each kill's time (seconds into the load), the pid, which process, and
  how long until a new one ran (``restarted_after_s``; PostgreSQL: until it answered again).
  ``kills_missed``: scheduled kills that found no process to kill. A killed agent's record
  also says how long its driver JVM outlived it (``jvm_exited_after_s``; a JVM that goes on
  would be a second writer of its queries' checkpoints once they restart elsewhere).
* ``processes_left_after_stop``: processes of the run still alive after the supervisor
  stopped the stack (orphans of killed processes), by name; the run then kills them.
* ``durations``: setup, load, request drain, sink wait, verification, total (seconds).
* ``ok``: ``lost``, ``doubled``, ``changelog_applied_twice``, ``refused_but_applied``,
  ``healthy_agents_declared_dead``, the three sink figures and ``kills_missed`` are 0 and every
  query is ``RUNNING`` at the end. The command exits 1 when not ok.

What is guaranteed: every figure is measured, never assumed; a figure the benchmark could not
measure makes the run fail (``error``) rather than report 0. The run's directory (Supervisor
state dir with every process's log, the PostgreSQL log, the fed files and sinks) is removed
when the run is ok and kept, with its path in ``state_dir``, when it is not (or with
``keep_state``). Every process the run started is killed at the end, found by the run's state
directory in its environment (orphans of killed processes included).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from streamctl import config as settings
from streamctl.bench.chaos_faults import (
    command_name,
    kill_all,
    kill_run_processes,
    processes_of_run,
)
from streamctl.bench.chaos_figures import (
    catalog_figures,
    dead_figures,
    failed_workflow_tasks,
    sink_figures,
    sink_rows,
)
from streamctl.bench.chaos_state import (
    COLUMNS,
    ROWS_PER_FILE,
    ChaosRun,
    ChaosSettings,
    SentRequest,
    kill_schedule,
    sim_names,
)
from streamctl.bench.private_postgres import PrivatePostgres
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import ClientError, OutboxFull, RequestTimeout
from streamctl.client.outbox import new_id
from streamctl.local_ports import free_port
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.supervisor import Supervisor

KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}


# --- the private PostgreSQL cluster ------------------------------------------------------------


# --- processes ---------------------------------------------------------------------------------


# --- the run -----------------------------------------------------------------------------------


async def _watch(run: ChaosRun) -> None:
    """The supervisor's watch; if it fails (a restart that did not come up), that is recorded
    and watching goes on, so the rest of the run is still measured."""
    while not run.stopping:
        try:
            await run.supervisor.watch()
            return
        except asyncio.CancelledError:
            raise
        except Exception as error:
            run.supervisor_failures.append(f"{run.now_s():.1f}s: {type(error).__name__}: {error}")
            await asyncio.sleep(1)


async def _send_requests(run: ChaosRun, client: CoordinatorClient, tag: str) -> None:
    interval = 1.0 / run.settings.request_rate
    under_way: set[asyncio.Task[None]] = set()

    async def one(request: SentRequest) -> None:
        started = time.monotonic()
        try:
            response = await client.ask_response(
                m.CreateLogicalSource(request.name, COLUMNS), request_id=request.request_id
            )
            request.outcome = "ok" if response.ok else str(response.error_code)
        except RequestTimeout:
            request.outcome = "failed: RequestTimeout"
        except ClientError as error:
            request.outcome = f"failed: {type(error).__name__}"
        request.latency_s = time.monotonic() - started

    sequence = 0
    next_at = time.monotonic()
    while not run.stopping:
        sequence += 1
        request = SentRequest(f"chaos_{sequence:06d}", f"chaos-{tag}-{sequence}", run.now_s())
        run.requests.append(request)
        task = asyncio.create_task(one(request))
        under_way.add(task)
        task.add_done_callback(under_way.discard)
        next_at += interval
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    if under_way:
        await asyncio.gather(*under_way)


async def _send_heartbeats(run: ChaosRun, client: CoordinatorClient, names: list[str]) -> None:
    last = time.monotonic()
    while True:
        for name in names:
            try:
                client.try_send(m.Heartbeat(name, load=0, capacity=0))
                run.heartbeats_sent += 1
            except OutboxFull:
                run.heartbeats_outbox_full += 1
        await asyncio.sleep(run.settings.heartbeat_interval)
        now = time.monotonic()
        run.heartbeat_max_gap_s = max(run.heartbeat_max_gap_s, now - last)
        last = now


def _write_rows(directory: Path, file_no: int, first_id: int, count: int) -> None:
    """One CSV file of ids ``first_id ..``, made visible in one rename (Spark skips the
    dot-prefixed name it is written under)."""
    text = "".join(f"{i},{2 * i}\n" for i in range(first_id, first_id + count))
    temporary = directory / f".part-{file_no:06d}.csv.tmp"
    temporary.write_text(text)
    os.replace(temporary, directory / f"part-{file_no:06d}.csv")


async def _feed(run: ChaosRun, sources: dict[int, Path]) -> None:
    file_no = 0
    next_at = time.monotonic()
    while not run.stopping:
        file_no += 1
        for index, directory in sources.items():
            _write_rows(directory, file_no, run.fed[index] + 1, ROWS_PER_FILE)
            run.fed[index] += ROWS_PER_FILE
        next_at += run.settings.feed_interval
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def _ask_until(client: CoordinatorClient, request: m.Request, timeout: float = 120) -> Any:
    """A setup request, asked again (a new id) while the stack is still coming up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await client.ask(request)
        except ClientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)


async def _wait_for(what: str, check: Any, timeout: float, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g}s")
        await asyncio.sleep(interval)


async def _chaos(run: ChaosRun) -> dict[str, Any]:
    s = run.settings
    supervisor = run.supervisor
    data = run.root / "data"
    began = time.monotonic()
    await supervisor.start()
    watcher = asyncio.create_task(_watch(run))
    keys = settings.parse_payload_keys(supervisor.payload_key)
    client = await CoordinatorClient(
        supervisor.address, request_timeout=s.request_timeout, payload_keys=keys
    ).connect()
    beats = await CoordinatorClient(
        supervisor.address, payload_keys=keys, sender=f"chaos-heartbeats-{new_id()}"
    ).connect()
    heartbeats: asyncio.Task[None] | None = None
    try:
        # --- setup: agents, queries, simulated agents -----------------------------------------
        async def agents_alive() -> bool:
            rows = await _ask_until(client, m.ListWorkers())
            alive = {r["name"] for r in rows if r["state"] == "ALIVE"}
            return set(supervisor.agent_names) <= alive

        await _wait_for("the agents did not register", agents_alive, 300)
        sources = {}
        for index in range(1, s.queries + 1):
            source_dir, sink_dir = data / f"src_{index}", data / f"sink_{index}"
            source_dir.mkdir(parents=True)
            sources[index] = source_dir
            run.fed[index] = 0
            await _ask_until(client, m.CreateLogicalSource(f"src_{index}", COLUMNS))
            await _ask_until(
                client,
                m.CreatePhysicalSource(f"src_{index}", "FILE", {"file_path": str(source_dir)}),
            )
            await _ask_until(
                client, m.CreateSink(f"sink_{index}", COLUMNS, "FILE", {"file_path": str(sink_dir)})
            )
            await _ask_until(
                client, m.CreateQuery(f"SELECT id, v FROM src_{index} INTO sink_{index}")
            )

        async def queries_running() -> bool:
            listed = await _ask_until(client, m.ListQueries())
            return all(q["current_state"] == "RUNNING" for q in listed)

        await _wait_for("not every query reached RUNNING", queries_running, 300)
        names = sim_names(s.simulated_agents)
        await beats.send_many(m.RegisterWorker(name, capacity=0) for name in names)
        setup_s = time.monotonic() - began

        # --- load and kills ---------------------------------------------------------------------
        schedule = kill_schedule(s)
        run.t0, run.wall0 = time.monotonic(), time.time()
        heartbeats = asyncio.create_task(_send_heartbeats(run, beats, names))
        senders = asyncio.create_task(_send_requests(run, client, new_id().replace("-", "")))
        feeder = asyncio.create_task(_feed(run, sources))
        killer = asyncio.create_task(kill_all(run, schedule))
        await asyncio.sleep(s.seconds)
        load_s = run.now_s()
        run.stopping = True
        await killer
        await feeder
        drain_began = time.monotonic()
        await senders
        # PostgreSQL up again (a restart that failed raises here); restarts measured.
        await asyncio.gather(*(t for t in run.background if t.get_name().startswith("pg")))
        await asyncio.wait(run.background, timeout=120)
        drain_s = time.monotonic() - drain_began

        # --- the end: every sink complete, every query RUNNING ---------------------------------
        sinks_began = time.monotonic()

        async def sinks_complete() -> bool:
            for index, count in run.fed.items():
                got = await asyncio.to_thread(sink_rows, data, index)
                if any((i, 2 * i) not in got for i in range(1, count + 1)):
                    return False
            listed = await _ask_until(client, m.ListQueries())
            return all(q["current_state"] == "RUNNING" for q in listed)

        with contextlib.suppress(RuntimeError):
            await _wait_for("sinks incomplete", sinks_complete, s.sink_timeout, interval=2)
        sink_wait_s = time.monotonic() - sinks_began

        verify_began = time.monotonic()
        listed = await _ask_until(client, m.ListQueries())
        sink = await asyncio.to_thread(sink_figures, data, run.fed)
        try:
            await asyncio.to_thread(beats.flush_events, 120)
            unflushed = False
        except TimeoutError:
            unflushed = True
        catalog = await asyncio.to_thread(catalog_figures, run)
        failed_tasks = await failed_workflow_tasks(run)
        verify_s = time.monotonic() - verify_began
    finally:
        run.stopping = True
        if heartbeats is not None:
            heartbeats.cancel()
        for task in run.background:
            task.cancel()
        watcher.cancel()
        await asyncio.gather(watcher, *run.background, return_exceptions=True)
        await asyncio.to_thread(beats.close, 10)
        await asyncio.to_thread(client.close, 10)

    # --- figures ------------------------------------------------------------------------------
    acked = [r for r in run.requests if r.outcome == "ok"]
    failed = [r for r in run.requests if r.outcome.startswith("failed")]
    refused = [r for r in run.requests if r.outcome != "ok" and not r.outcome.startswith("failed")]
    present: set[str] = catalog["sources"]
    doubled = {r.name for r in refused if r.outcome == "ALREADY_EXISTS"} | {
        name for name, n in catalog["creates"].items() if n > 1
    }
    refused_applied = [r for r in refused if r.outcome != "ALREADY_EXISTS" and r.name in present]
    latencies = sorted(r.latency_s for r in acked if r.latency_s is not None)
    dead = dead_figures(run.kills, run.wall0, catalog["workers"])
    kills: dict[str, list[dict[str, Any]]] = {}
    for kill in run.kills:
        kills.setdefault(kill.target, []).append(kill.report())
    states = Counter(q["current_state"] for q in listed)
    figures: dict[str, Any] = {
        "seconds": s.seconds,
        "seed": s.seed,
        "requests_sent": len(run.requests),
        "requests_acked": len(acked),
        "requests_failed": len(failed),
        "requests_failed_but_applied": sum(r.name in present for r in failed),
        "requests_refused": dict(Counter(r.outcome for r in refused)),
        "sources_in_catalog": len(present),
        "lost": sum(r.name not in present for r in acked),
        "doubled": len(doubled),
        "changelog_applied_twice": catalog["applied_twice"],
        "refused_but_applied": len(refused_applied),
        "request_latency_s": {
            "p50": round(statistics.median(latencies), 3) if latencies else None,
            "p99": round(latencies[int(0.99 * (len(latencies) - 1))], 3) if latencies else None,
            "max": round(latencies[-1], 3) if latencies else None,
        },
        "simulated_agents": s.simulated_agents,
        "heartbeats_sent": run.heartbeats_sent,
        "heartbeats_outbox_full": run.heartbeats_outbox_full,
        "heartbeat_max_gap_s": round(run.heartbeat_max_gap_s, 2),
        "heartbeats_unflushed_at_end": unflushed,
        **dead,
        "worker_transitions": catalog["worker_actions"],
        "queries": s.queries,
        "queries_running_at_end": states.get("RUNNING", 0),
        "query_states_at_end": dict(states),
        "query_transitions": catalog["query_actions"],
        **sink,
        "kills": kills,
        "kills_total": sum(k.pid is not None for k in run.kills),
        "kills_missed": sum(k.pid is None for k in run.kills),
        "supervisor_failures": run.supervisor_failures,
        "failed_workflow_tasks": failed_tasks,
        "durations": {
            "setup_s": round(setup_s, 1),
            "load_s": round(load_s, 1),
            "request_drain_s": round(drain_s, 1),
            "sink_wait_s": round(sink_wait_s, 1),
            "verify_s": round(verify_s, 1),
        },
    }
    figures["ok"] = (
        all(
            figures[name] == 0
            for name in (
                "lost",
                "doubled",
                "changelog_applied_twice",
                "refused_but_applied",
                "healthy_agents_declared_dead",
                "sink_rows_lost",
                "sink_rows_doubled",
                "sink_rows_unexpected",
                "kills_missed",
            )
        )
        and figures["queries_running_at_end"] == s.queries
    )
    return figures


def run_chaos_bench(chaos: ChaosSettings | None = None) -> dict[str, Any]:
    """Run the benchmark (module docstring) and return its figures."""
    s = chaos or ChaosSettings()
    if s.queries and not s.agents:
        raise ValueError("queries need agents")
    s.kill_counts()  # refuse unknown targets before starting anything
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="streamctl-chaos-"))
    state_dir = root / "stack"
    postgres = PrivatePostgres()
    result: dict[str, Any]
    try:
        postgres.start()
        supervisor = Supervisor(
            state_dir,
            postgres.url,
            free_port(),
            free_port(),
            CoordinatorConfig(),
            s.coordinators,
            s.agents,
            s.master,
            s.capacity,
            (root / "data",),
        )
        run = ChaosRun(s, root, supervisor, postgres)
        try:
            result = asyncio.run(_chaos(run))
        finally:
            supervisor.stop()
            # What outlived its stop: orphans of killed processes (process pools, JVMs).
            leftovers = [command_name(pid) for pid in processes_of_run(state_dir)]
        result["processes_left_after_stop"] = dict(Counter(leftovers))
    except Exception as error:
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    finally:
        if state_dir.exists():
            kill_run_processes(state_dir)
        postgres.stop()
        with contextlib.suppress(OSError):
            shutil.copy(postgres.log, root / "postgresql.log")
        postgres.remove()
    result.setdefault("durations", {})["total_s"] = round(time.monotonic() - began, 1)
    if result["ok"] and not s.keep_state:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result["state_dir"] = str(root)
    return result
