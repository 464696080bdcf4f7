"""The Prometheus endpoints, scraped over HTTP: a coordinator worker (process pool, real dev
server, SQLite catalog) and a real agent process (``spark``). Each scrape is parsed with
``prometheus_client``'s parser, so the joined exposition (ours, then the SDK's) must be valid."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import wait_until
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client, WorkflowFailureError

from streamctl.agent.agent_metrics import AgentMetrics
from streamctl.client.client import CoordinatorClient
from streamctl.error_codes import ErrorCode
from streamctl.local_ports import free_port
from streamctl.process_metrics import MetricsAddress, MetricsEndpoint
from streamctl.protocol import messages as m
from streamctl.worker.coordinator_worker import run_coordinator_worker

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


async def test_coordinator_worker_serves_pass_request_state_and_sdk_series(temporal, sqlite_url):
    suffix = uuid.uuid4().hex[:8]
    workflow_id, port, ready = f"metrics-{suffix}", free_port(), asyncio.Event()
    worker = asyncio.create_task(
        run_coordinator_worker(
            temporal.address,
            "default",
            sqlite_url,
            task_queue=f"metrics-{suffix}",
            workflow_id=workflow_id,
            ready=ready,
            metrics_address=MetricsAddress("127.0.0.1", port),
        )
    )
    client = CoordinatorClient(temporal.address, workflow_id=workflow_id)
    try:
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({worker, waiting}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        if worker.done():
            worker.result()  # raises why it ended
        assert ready.is_set()
        await client.connect()
        assert (await client.ask_response(m.CreateLogicalSource("orders", SCHEMA))).ok
        missing = await client.ask_response(m.GetSink("nowhere"))
        assert missing.error_code == ErrorCode.NOT_FOUND
        await client.send(m.RegisterWorker("m1", 3, "agent.m1", "host"))
        await wait_until(lambda: _answers(client, m.GetWorker("m1")))

        # From a thread: the endpoint's status query needs this event loop.
        samples = await asyncio.to_thread(scrape, port)
        assert value(samples, "streamctl_requests_total", kind="CreateLogicalSource", outcome="ok")
        assert value(samples, "streamctl_requests_total", kind="GetSink", outcome="NOT_FOUND")
        assert (value(samples, "streamctl_pass_duration_seconds_count") or 0) >= 2
        assert (value(samples, "streamctl_passes_total", result="applied") or 0) >= 2
        assert (value(samples, "streamctl_pass_requests_sum") or 0) >= 3
        assert (value(samples, "streamctl_pass_events_sum") or 0) >= 1
        assert value(samples, "streamctl_collector_up", source="catalog") == 1
        assert value(samples, "streamctl_collector_up", source="workflow") == 1
        assert value(samples, "streamctl_pending_messages", type="requests") == 0
        assert value(samples, "streamctl_pending_messages", type="events") is not None
        assert (value(samples, "streamctl_snapshot_version") or 0) >= 3
        assert value(samples, "streamctl_queries", state="RUNNING") == 0
        assert value(samples, "streamctl_coordinator_agents", state="ALIVE") == 1
        assert value(samples, "streamctl_coordinator_agent_capacity", agent="m1") == 3
        assert value(samples, "streamctl_coordinator_agent_load", agent="m1") == 0
        # The SDK's own series, from the same port.
        sdk = {"temporal_worker_task_slots_available", "temporal_activity_execution_latency_count"}
        assert sdk <= names(samples), sorted(n for n in names(samples) if "temporal" in n)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/elsewhere", timeout=10)
        assert refused.value.code == 404
    finally:
        await asyncio.to_thread(client.close)
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    with pytest.raises(OSError):  # the endpoint closed with the worker
        scrape(port)


async def _answers(client: CoordinatorClient, request: m.Request) -> bool:
    return (await client.ask_response(request)).ok


@pytest.mark.quick
def test_agent_query_rates_follow_its_listener_events_and_end_with_the_query():
    metrics = AgentMetrics("a1", 2)
    sent: list[m.Event] = []
    emit = metrics.observing(sent.append)
    metrics.track_load(lambda: 1)
    emit(m.Statistics(7, {"input_rows_per_s": 120.0, "processed_rows_per_s": 80.0}))
    endpoint = MetricsEndpoint(metrics.registry, "127.0.0.1", 0, None)
    try:
        samples = scrape(endpoint.port)
        labels = {"agent": "a1", "query": "7"}
        assert value(samples, "streamctl_query_input_rows_per_second", **labels) == 120.0
        assert value(samples, "streamctl_query_processed_rows_per_second", **labels) == 80.0
        assert value(samples, "streamctl_agent_running_queries", agent="a1") == 1
        assert value(samples, "streamctl_agent_capacity", agent="a1") == 2
        emit(m.QueryStatusChanged(7, "STOPPED", agent="a1", run=1))
        after = scrape(endpoint.port)
        assert value(after, "streamctl_query_input_rows_per_second", **labels) is None
        assert len(sent) == 2  # every event still goes to the coordinator
    finally:
        endpoint.close()


@pytest.mark.spark
@pytest.mark.slow
async def test_agent_process_serves_load_actions_rates_and_sdk_series(
    start_coordinator, temporal_client: Client, sqlite_url, tmp_path: Path
):
    from test_agent_process import GENERATOR, agent_probe, spawn_agent
    from test_spark_actions import ORDERS, assignment

    from streamctl.protocol.agent_contract import SourceAssignment

    coordinator = await start_coordinator(sqlite_url)
    name, port = f"m{uuid.uuid4().hex[:6]}", free_port()
    agent = spawn_agent(
        coordinator.address,
        coordinator.workflow_id,
        name,
        tmp_path,
        env={"STREAMCTL_METRICS_PORT": str(port)},
    )
    try:
        await wait_until(lambda: _scrapes(port), timeout=120)
        async with agent_probe(temporal_client, name) as call:
            generated = dataclasses.replace(
                assignment(31, 1, tmp_path / "none", tmp_path / "out"),
                sources={"orders": [SourceAssignment(2, "GENERATOR", GENERATOR, ORDERS)]},
            )
            assert (await call("start_query", generated))["status"] == "RUNNING"
            with pytest.raises(WorkflowFailureError):
                await call(
                    "start_query", dataclasses.replace(generated, query_id=32, plan="not a plan")
                )
            labels = {"agent": name, "query": "31"}
            await wait_until(
                lambda: (
                    value(scrape(port), "streamctl_query_input_rows_per_second", **labels)
                    is not None
                ),
                timeout=90,
            )
            samples = scrape(port)
            assert value(samples, "streamctl_agent_running_queries", agent=name) == 1
            assert value(samples, "streamctl_agent_capacity", agent=name) == 3
            assert value(
                samples, "streamctl_agent_actions_total", agent=name, action="start_query",
                outcome="ok",
            ) == 1  # fmt: skip
            assert value(
                samples, "streamctl_agent_actions_total", agent=name, action="start_query",
                outcome="QueryRejected",
            ) == 1  # fmt: skip
            assert value(
                samples, "streamctl_query_processed_rows_per_second", **labels
            ) is not None  # fmt: skip
            assert "temporal_worker_task_slots_available" in names(samples)

            await call("stop_query", {"query_id": 31, "run": 1})
            await wait_until(
                lambda: (
                    value(scrape(port), "streamctl_query_input_rows_per_second", **labels) is None
                ),
                timeout=30,
            )
    finally:
        if agent.poll() is None:
            agent.terminate()
            agent.wait(timeout=60)


def _scrapes(port: int) -> bool:
    try:
        return "temporal_worker_task_slots_available" in names(scrape(port))
    except OSError:
        return False
