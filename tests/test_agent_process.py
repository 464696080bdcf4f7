"""``streamctl agent`` as a real process against the real dev server and a coordinator: it
registers, heartbeats with its load, runs Spark actions called from a workflow on its task
queue, and unregisters when it is stopped."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from test_spark_actions import ORDERS, assignment

from streamctl.planner.options import normalize_source_options
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    QueryAssignment,
    QueryReport,
    SourceAssignment,
    StopAssignment,
    agent_task_queue,
    query_name,
)
from streamctl.spark.sink_writers import read_file_sink
from streamctl.spark.specs import SinkSpec
from streamctl.worker.supervisor import agent_command

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GENERATOR = normalize_source_options(
    "GENERATOR",
    {
        "generator_schema": "SEQUENCE UINT64 0 19 1, SEQUENCE INT64 0 95 5, SEQUENCE UINT64 0 19 1",
        "stop_when": "NONE",  # unbounded: rows come from a Python UDF over Spark's rate source
        "rate_config": "emit_rate 100",
    },
)
BIG = [
    {"name": "id", "type": "UINT64", "nullable": False},
    {"name": "amount", "type": "INT64", "nullable": False},
]


@workflow.defn(name="AgentProbe")
class AgentProbe:
    """Calls one Spark action on an agent's task queue, as the coordinator does."""

    @workflow.run
    async def run(self, agent: str, action: str, argument: Any) -> Any:
        value = argument
        if action == "start_query":
            value = workflow_assignment(argument)
        elif action == "stop_query":
            value = StopAssignment(**argument)
        result_type: Any = list[QueryReport] if action == "list_queries" else QueryReport
        return await workflow.execute_activity(
            action,
            value,
            task_queue=agent_task_queue(agent),
            start_to_close_timeout=timedelta(seconds=120),
            result_type=result_type,
        )


@contextlib.asynccontextmanager
async def agent_probe(client: Client, agent: str) -> AsyncIterator[Callable[[str, Any], Any]]:
    """``call(action, argument)``: run one Spark action on ``agent`` through :class:`AgentProbe`
    (a worker of its own on a fresh task queue while the context lasts)."""
    probe_queue = f"probe-{uuid.uuid4().hex[:6]}"
    async with Worker(
        client,
        task_queue=probe_queue,
        workflows=[AgentProbe],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):

        async def call(action: str, argument: Any) -> Any:
            return await client.execute_workflow(
                AgentProbe.run,
                args=[agent, action, argument],
                id=f"probe-{uuid.uuid4().hex}",
                task_queue=probe_queue,
            )

        yield call


def workflow_assignment(data: dict[str, Any]) -> QueryAssignment:
    """The probe's input arrives as plain JSON; rebuild the nested dataclasses."""
    from streamctl.protocol.agent_contract import SinkAssignment, SourceAssignment

    return QueryAssignment(
        query_id=data["query_id"],
        run=data["run"],
        plan=data["plan"],
        sources={
            name: [SourceAssignment(**s) for s in specs] for name, specs in data["sources"].items()
        },
        sink=SinkAssignment(**data["sink"]),
    )


def spawn_agent(
    address: str,
    workflow_id: str,
    name: str,
    root: Path,
    master: str = "local[2]",
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    log = open(root / f"agent-{name}.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        agent_command(address, name, root / "checkpoints", master, 3, workflow_id),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,  # not the repository: Spark's Python workers must find streamctl installed
        env={**os.environ, "STREAMCTL_STATE_DIR": str(root / "state"), **(env or {})},
    )


async def test_agent_registers_heartbeats_runs_actions_and_unregisters(
    start_coordinator, temporal_client: Client, sqlite_url, tmp_path
):
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    name = f"a{uuid.uuid4().hex[:6]}"
    agent = spawn_agent(coordinator.address, coordinator.workflow_id, name, tmp_path)
    try:

        async def worker_row() -> dict[str, Any] | None:
            response = await client.ask_response(m.GetWorker(name))
            return response.result if response.ok else None

        await wait_until(worker_row, timeout=120)
        row = await worker_row()
        assert row is not None
        assert (row["state"], row["capacity"], row["task_queue"]) == (
            "ALIVE",
            3,
            agent_task_queue(name),
        )
        await wait_until(lambda: _heartbeats(worker_row), timeout=30)

        source_dir, sink_dir = tmp_path / "orders", tmp_path / "big"
        source_dir.mkdir()
        job = assignment(21, 1, source_dir, sink_dir)
        async with agent_probe(temporal_client, name) as call:
            started = await call("start_query", job)
            assert (started["status"], started["agent"]) == ("RUNNING", name)
            again = await call("start_query", job)  # idempotent by query id
            assert again["status"] == "RUNNING"
            listed = await call("list_queries", name)
            assert [(r["query_id"], r["status"]) for r in listed] == [(21, "RUNNING")]

            (source_dir / "1.csv").write_text("1,5,1000\n2,50,1001\n")
            sink = SinkSpec("big", "FILE", {"file_path": str(sink_dir)}, BIG)
            await wait_until(lambda: read_file_sink(None, sink, query_name(21)), timeout=90)
            assert read_file_sink(None, sink, query_name(21)) == [(2, 50)]
            await wait_until(lambda: _load_is(worker_row, 1), timeout=30)

            stopped = await call("stop_query", StopAssignment(21, 1))
            assert stopped["status"] == "STOPPED"
            assert await call("list_queries", name) == []

            # A generator source evaluates a Python UDF in Spark's Python workers.
            generated_dir = tmp_path / "generated"
            generated = dataclasses.replace(
                assignment(22, 1, source_dir, generated_dir),
                sources={"orders": [SourceAssignment(2, "GENERATOR", GENERATOR, ORDERS)]},
            )
            assert (await call("start_query", generated))["status"] == "RUNNING"
            sink = SinkSpec("big", "FILE", {"file_path": str(generated_dir)}, BIG)

            def generated_rows() -> list[tuple[Any, ...]]:
                return sorted(read_file_sink(None, sink, query_name(22)))

            expected = {(i, 5 * i) for i in range(3, 19)}
            await wait_until(lambda: expected <= set(generated_rows()), timeout=90)
            assert all(amount == 5 * i and amount > 10 for i, amount in generated_rows())

        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0
        await wait_until(
            lambda: _state_is(worker_row, "UNREGISTERED"), timeout=30
        )  # said goodbye on the way out

        # The same agent started again registers again (its new process's events count).
        agent = spawn_agent(coordinator.address, coordinator.workflow_id, name, tmp_path)
        await wait_until(lambda: _state_is(worker_row, "ALIVE"), timeout=120)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=60) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        client.close()


async def _heartbeats(worker_row: Any) -> bool:
    row = await worker_row()
    return bool(row and row["heartbeats"] > 0)


async def _load_is(worker_row: Any, load: int) -> bool:
    row = await worker_row()
    return bool(row and row["load"] == load)


async def _state_is(worker_row: Any, state: str) -> bool:
    row = await worker_row()
    return bool(row and row["state"] == state)
