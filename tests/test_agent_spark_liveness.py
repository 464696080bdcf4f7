"""An agent is alive only while its Spark is (issue 16, items 4 and 5), with real Spark, a real
``streamctl agent`` process and the real dev server.

* ``kill -9`` of the agent's driver JVM (not of the agent): the agent notices within seconds,
  reports its queries lost, builds a new session on a new JVM, and the queries run again from
  their checkpoints with exact File sinks; a query created afterwards runs too.
* A query that exhausts the agent's driver heap (``--driver-memory 512m``, one 300 MB line):
  the same recovery for the other query, and the offending query ends ``FAILED`` after the
  bounded number of Spark deaths blamed on it, without costing the other query a restart.
* A start whose action gave up (timed out) before the agent got to it leaves no stray run.

On f29f918 the agent heartbeats ALIVE over a dead Spark: its queries stay RUNNING on run 1 and
their sinks stop growing (and the second test's ``--driver-memory`` does not exist); a start
that outlives its action runs on, a stray nobody stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from test_agent_process import agent_probe, workflow_assignment
from test_spark_actions import assignment

from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import QueryReport, agent_task_queue, query_name
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.spark.sink_writers import read_file_sink
from streamctl.spark.specs import SinkSpec
from streamctl.worker.supervisor import agent_command

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORDERS = (
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("amount", "INT64", False),
    m.ColumnSpec("ts", "UINT64", False),
)
ROWS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("amount", "INT64", False))
# max_restarts stays at its default (5): the heap test's query must be contained by the
# deaths of Spark blamed on it (2), not by running out of ordinary restarts.
CONFIG = CoordinatorConfig(
    suspect_after=6.0, dead_after=20.0, restart_delay=0.5, restart_max_delay=2.0
)
RECOVERY_S = 60.0


class Stack:
    """A coordinator, one agent, the ``orders`` file source and two file sinks over it."""

    def __init__(
        self, client: CoordinatorClient, root: Path, name: str, agent: subprocess.Popen[bytes]
    ) -> None:
        self.client = client
        self.root = root
        self.name = name
        self.agent = agent
        self.source_dir = root / "orders"
        self.sinks = {
            sink: SinkSpec(
                sink,
                "FILE",
                {"file_path": str(root / sink)},
                [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in ROWS],
            )
            for sink in ("big", "small", "later")
        }

    async def query(self, query_id: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.ask(m.GetQuery(query_id))
        return result

    async def wait_for(self, query_id: int, check: Any, timeout: float) -> dict[str, Any]:
        async def reached() -> bool:
            return bool(check(await self.query(query_id)))

        await wait_until(reached, timeout=timeout, interval=0.3)
        return await self.query(query_id)

    def write(self, name: str, rows: list[tuple[int, int, int]]) -> None:
        staged = self.root / f".{name}"
        staged.write_text("".join(f"{i},{a},{t}\n" for i, a, t in rows))
        staged.rename(self.source_dir / name)  # appears whole

    def rows(self, sink: str, query_id: int) -> list[tuple[Any, ...]]:
        return sorted(read_file_sink(None, self.sinks[sink], query_name(query_id)))

    def jvms(self) -> list[int]:
        """The pids of the agent's child processes running java."""
        return [
            pid
            for pid, ppid, command in _processes()
            if ppid == self.agent.pid and command == "java"
        ]

    def jvm(self) -> int:
        """The pid of the agent's driver JVM."""
        jvms = self.jvms()
        assert len(jvms) == 1, jvms
        return jvms[0]

    async def jvm_other_than(self, old: int, timeout: float = RECOVERY_S) -> int:
        """The agent's driver JVM once it is not ``old`` (a rebuild may be under way: for a
        moment there is none)."""
        deadline = time.monotonic() + timeout
        while True:
            jvms = self.jvms()
            if len(jvms) == 1 and jvms[0] != old:
                return jvms[0]
            exited = self.agent.poll()
            assert exited is None, f"the agent exited ({exited}):\n{self.log_tail()}"
            assert time.monotonic() < deadline, (
                f"no new driver JVM within {timeout}s: {jvms}\n{self.log_tail()}"
            )
            await asyncio.sleep(0.2)

    def log_tail(self, lines: int = 40) -> str:
        """The agent's last log lines of its own (not Spark's or Py4J's): what it did last."""
        text = (self.root / f"agent-{self.name}.log").read_text(errors="replace")
        own = [line for line in text.splitlines() if " streamctl." in line]
        return "\n".join(own[-lines:])


def _processes() -> list[tuple[int, int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = stat[stat.index("(") + 1 : stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            found.append((int(entry), ppid, command))
    return found


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


@contextlib.asynccontextmanager
async def one_agent(
    start_coordinator: Any, catalog_url: str, root: Path, driver_memory: str | None = None
) -> AsyncIterator[Stack]:
    coordinator = await start_coordinator(catalog_url, CONFIG)
    client = await coordinator.client().connect()
    name = f"a{uuid.uuid4().hex[:6]}"
    command = agent_command(
        coordinator.address, name, root / "checkpoints", "local[2]", 4, coordinator.workflow_id
    )
    if driver_memory is not None:
        command += ["--driver-memory", driver_memory]
    with open(root / f"agent-{name}.log", "ab") as log:
        agent = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,  # not the repository: Spark's Python workers must find streamctl installed
            env={**os.environ, "STREAMCTL_STATE_DIR": str(root / "state")},
        )
    stack = Stack(client, root, name, agent)
    try:

        async def alive() -> bool:
            response = await client.ask_response(m.GetWorker(name))
            return response.ok and response.result["state"] == "ALIVE"

        await wait_until(alive, timeout=180, interval=0.5)
        stack.source_dir.mkdir()
        await client.ask(m.CreateLogicalSource("orders", ORDERS))
        await client.ask(
            m.CreatePhysicalSource(
                "orders", "FILE", {"file_path": str(stack.source_dir), "format": "CSV"}
            )
        )
        for sink in stack.sinks.values():
            await client.ask(m.CreateSink(sink.name, ROWS, "FILE", dict(sink.config)))
        yield stack
    finally:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=60)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        client.close()


def running_again(run: int) -> Any:
    return lambda row: row["current_state"] == "RUNNING" and row["run"] > run


async def test_kill_9_of_the_spark_jvm_brings_every_query_back_exactly(
    start_coordinator, sqlite_url, tmp_path
):
    """Fails on f29f918 (the queries stay RUNNING on run 1 over a dead JVM); passes now."""
    async with one_agent(start_coordinator, sqlite_url, tmp_path) as stack:
        client = stack.client
        big = await client.ask(
            m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 10 INTO big")
        )
        small = await client.ask(
            m.CreateQuery("SELECT id, amount FROM orders WHERE amount <= 10 INTO small")
        )
        for query in (big, small):
            await stack.wait_for(query["id"], running_again(0), timeout=120)
        stack.write("1.csv", [(1, 11, 1000), (2, 5, 1001), (3, 30, 1002)])
        await wait_until(
            lambda: stack.rows("big", big["id"]) and stack.rows("small", small["id"]),
            timeout=120,
            interval=0.5,
        )

        jvm = stack.jvm()
        os.kill(jvm, signal.SIGKILL)
        killed = time.monotonic()
        stack.write("2.csv", [(4, 40, 2000), (5, 1, 2001)])  # arrives while nothing runs them
        for query in (big, small):
            row = await stack.wait_for(query["id"], running_again(1), timeout=RECOVERY_S)
            assert (row["worker"], row["restarts"]) == (stack.name, 0), row  # not its fault
        assert time.monotonic() - killed < RECOVERY_S
        assert stack.agent.poll() is None  # the same agent, with a new JVM:
        await stack.jvm_other_than(jvm)

        stack.write("3.csv", [(6, 60, 3000), (7, 7, 3001)])
        want_big, want_small = [(1, 11), (3, 30), (4, 40), (6, 60)], [(2, 5), (5, 1), (7, 7)]
        await wait_until(
            lambda: (
                len(stack.rows("big", big["id"])) >= len(want_big)
                and len(stack.rows("small", small["id"])) >= len(want_small)
            ),
            timeout=RECOVERY_S,
            interval=0.5,
        )
        await asyncio.sleep(3)  # a duplicate would come with the next micro-batches
        assert stack.rows("big", big["id"]) == want_big
        assert stack.rows("small", small["id"]) == want_small

        later = await client.ask(m.CreateQuery("SELECT id, amount FROM orders INTO later"))
        await stack.wait_for(later["id"], running_again(0), timeout=RECOVERY_S)
        await wait_until(lambda: len(stack.rows("later", later["id"])) == 7, timeout=RECOVERY_S)


async def test_a_query_that_exhausts_the_driver_heap_is_contained(
    start_coordinator, sqlite_url, tmp_path
):
    """Fails on f29f918 (no --driver-memory; and with the heap set otherwise, the agent stays
    ALIVE over a stopped SparkContext, the other query RUNNING with a sink that no longer
    grows); passes now."""
    async with one_agent(start_coordinator, sqlite_url, tmp_path, driver_memory="512m") as stack:
        client = stack.client
        assert "-Xmx512m" in _cmdline(stack.jvm())
        healthy = await client.ask(
            m.CreateQuery("SELECT id, amount FROM orders WHERE amount > 10 INTO big")
        )
        await stack.wait_for(healthy["id"], running_again(0), timeout=120)
        stack.write("1.csv", [(1, 11, 1000), (2, 5, 1001)])
        await wait_until(lambda: stack.rows("big", healthy["id"]), timeout=120, interval=0.5)

        # One 300 MB line: reading it needs more than the whole 512 MB heap.
        wide_dir = tmp_path / "wide"
        wide_dir.mkdir()
        with open(wide_dir / "line.csv", "w") as wide:
            chunk = "x" * (1 << 20)
            for _ in range(300):
                wide.write(chunk)
            wide.write("\n")
        await client.ask(m.CreateLogicalSource("wide", (m.ColumnSpec("v", "VARSIZED", False),)))
        await client.ask(m.CreatePhysicalSource("wide", "FILE", {"file_path": str(wide_dir)}))
        await client.ask(m.CreateSink("nowhere", (m.ColumnSpec("v", "VARSIZED", False),), "VOID"))
        first_jvm = stack.jvm()
        greedy = await client.ask(m.CreateQuery("SELECT v FROM wide INTO nowhere"))

        failed = await stack.wait_for(
            greedy["id"], lambda row: row["current_state"] == "FAILED", timeout=180
        )
        assert "[CONTAINED]" in failed["error"] and "took the Spark" in failed["error"], failed
        assert failed["restarts"] < CONFIG.max_restarts  # contained, not out of restarts
        # Two rebuilds on a loaded machine (CI) can take longer than one: the bound is generous,
        # and an agent that gave up fails at once, with its log.
        await stack.jvm_other_than(first_jvm, timeout=2 * RECOVERY_S)

        row = await stack.wait_for(healthy["id"], running_again(1), timeout=RECOVERY_S)
        assert (row["worker"], row["restarts"]) == (stack.name, 0), row  # not its fault
        stack.write("2.csv", [(3, 30, 2000), (4, 1, 2001)])
        await wait_until(lambda: len(stack.rows("big", healthy["id"])) >= 2, timeout=RECOVERY_S)
        await asyncio.sleep(3)
        assert stack.rows("big", healthy["id"]) == [(1, 11), (3, 30)]

        later = await client.ask(m.CreateQuery("SELECT id, amount FROM orders INTO later"))
        await stack.wait_for(later["id"], running_again(0), timeout=RECOVERY_S)
        await wait_until(lambda: len(stack.rows("later", later["id"])) == 4, timeout=RECOVERY_S)


@workflow.defn(name="ImpatientStart")
class ImpatientStart:
    """Starts a query on an agent as the coordinator does, but gives up after one second."""

    @workflow.run
    async def run(self, agent: str, job: Any) -> str:
        try:
            await workflow.execute_activity(
                "start_query",
                workflow_assignment(job),
                task_queue=agent_task_queue(agent),
                start_to_close_timeout=timedelta(seconds=1),
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=QueryReport,
            )
        except ActivityError as error:
            return f"gave up: {error.cause}"
        return "started in time"


async def test_a_start_that_outlives_its_action_leaves_no_stray_run(
    start_coordinator, sqlite_url, tmp_path, temporal_client: Client
):
    """Fails on f29f918 (the start completes after the action timed out and the run goes on,
    writing its sink, with no one to stop it); passes now."""
    async with one_agent(start_coordinator, sqlite_url, tmp_path) as stack:
        source_dir, sink_dir = tmp_path / "late-in", tmp_path / "late-out"
        source_dir.mkdir()
        job = assignment(41, 1, source_dir, sink_dir)
        queue = f"impatient-{uuid.uuid4().hex[:6]}"
        async with Worker(
            temporal_client,
            task_queue=queue,
            workflows=[ImpatientStart],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            outcome = await temporal_client.execute_workflow(
                ImpatientStart.run,
                args=[stack.name, job],
                id=f"impatient-{uuid.uuid4().hex}",
                task_queue=queue,
            )
        # The first start on a fresh JVM takes seconds: the action gives up first.
        assert outcome.startswith("gave up"), outcome
        (source_dir / "1.csv").write_text("1,50,1000\n2,60,1001\n")
        await asyncio.sleep(8)  # long enough for a stray to start and write its sink
        async with agent_probe(temporal_client, stack.name) as call:
            assert await call("list_queries", stack.name) == []
        sink = SinkSpec("big", "FILE", {"file_path": str(sink_dir)}, job.sink.schema)
        assert read_file_sink(None, sink, query_name(41)) == []
