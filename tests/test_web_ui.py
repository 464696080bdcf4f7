"""The coordinator in the Temporal Web UI (issue 5, item 1; acceptance point a).

* A coordinator on a namespace with its search attributes upserts the snapshot version, alive
  agents, running and failed queries, only when they change; it starts with its configuration
  as memo and a static summary, and sets Markdown current details after every pass.
* On a namespace without them (and not allowed to register them) it runs and answers with no
  failed workflow task; where registering is allowed, ``ensure_coordinator`` registers them.
* Headless Chromium opens the dev server's own Web UI on the coordinator's workflow page and
  finds the current details and the search attribute values there.

The agent is a stand-in worker on the agent's task queue that reports every start as running:
what is under test is what the coordinator shows, not Spark.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import coordinator_worker, wait_until
from google.protobuf.duration_pb2 import Duration
from headless_chromium import HeadlessChromium, chromium_missing
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from streamctl.bench.requests import is_local_pass
from streamctl.client.client import CoordinatorClient
from streamctl.local_ports import free_port, port_open
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import (
    AgentStatus,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    agent_task_queue,
)
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.worker.search_attributes import search_attributes_ready
from streamctl.worker.temporal_server import start_dev_server, wait_for_server
from streamctl.workflows.web_ui import (
    ALIVE_AGENTS,
    FAILED_QUERIES,
    MEMO_KEY,
    RUNNING_QUERIES,
    SNAPSHOT_VERSION,
    WebUiView,
)
from streamctl.workflows.wire import connect

COLUMNS = (m.ColumnSpec("id", "UINT64", False),)
STEADY = CoordinatorConfig(suspect_after=600.0, dead_after=1200.0)
"""The stand-in agent sends no heartbeats: it must stay alive while the browser looks."""


class StandInAgent:
    def __init__(self) -> None:
        self.name = f"a_{uuid.uuid4().hex[:6]}"

    @activity.defn(name="start_query")
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.RUNNING, self.name)

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        return QueryReport(assignment.query_id, assignment.run, AgentStatus.STOPPED, self.name)

    @activity.defn(name="list_queries")
    def list_queries(self, _agent: str) -> list[QueryReport]:
        return []


@contextlib.asynccontextmanager
async def stand_in_agent(client: Client) -> AsyncIterator[StandInAgent]:
    agent = StandInAgent()
    executor = ThreadPoolExecutor(max_workers=2)
    worker = Worker(
        client,
        task_queue=agent_task_queue(agent.name),
        activities=[agent.start_query, agent.stop_query, agent.list_queries],
        activity_executor=executor,
    )
    try:
        async with worker:
            yield agent
    finally:
        await asyncio.to_thread(executor.shutdown)


async def run_a_query(client: CoordinatorClient, agent: str) -> int:
    """Register ``agent``, create what a query needs and start it; its id once it runs."""
    await client.send(m.RegisterWorker(agent, capacity=2))
    await client.ask(m.CreateLogicalSource("numbers", COLUMNS))
    await client.ask(m.CreatePhysicalSource("numbers", "FILE", {"file_path": "in/"}))
    await client.ask(m.CreateSink("out", COLUMNS, "VOID"))
    created = await client.ask(m.CreateQuery("SELECT id FROM numbers INTO out"))

    async def running() -> bool:
        query = await client.ask(m.GetQuery(created["id"]))
        return bool(query["current_state"] == "RUNNING")

    await wait_until(running, timeout=60)
    return int(created["id"])


async def search_attributes(handle: WorkflowHandle[Any, Any]) -> TypedSearchAttributes:
    return (await handle.describe()).typed_search_attributes


async def history_events(handle: WorkflowHandle[Any, Any]) -> list[Any]:
    return [event async for event in handle.fetch_history_events()]


def count(events: list[Any], event_type: int) -> int:
    return sum(1 for event in events if event.event_type == event_type)


def upserted(event: Any) -> set[str]:
    """The search attributes an event upserts (none unless it is an upsert)."""
    if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        return set()
    attributes = event.upsert_workflow_search_attributes_event_attributes.search_attributes
    return set(attributes.indexed_fields)


async def current_details(handle: WorkflowHandle[Any, Any]) -> str:
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(metadata.current_details)


@pytest.mark.quick
def test_only_changed_search_attributes_are_upserted() -> None:
    view = WebUiView(TypedSearchAttributes([SearchAttributePair(SNAPSHOT_VERSION, 7)]))
    first = view.updates(7, {"ALIVE": 1}, {"RUNNING": 2})
    assert {update.key.name for update in first} == {
        ALIVE_AGENTS.name,
        RUNNING_QUERIES.name,
        FAILED_QUERIES.name,
    }  # the version carried over from the previous run is not upserted again
    assert view.updates(7, {"ALIVE": 1, "DEAD": 3}, {"RUNNING": 2, "STOPPED": 1}) == []
    again = view.updates(8, {"ALIVE": 1}, {"RUNNING": 1, "FAILED": 1})
    assert {update.key.name: update.value for update in again} == {
        SNAPSHOT_VERSION.name: 8,
        RUNNING_QUERIES.name: 1,
        FAILED_QUERIES.name: 1,
    }


async def test_the_dev_server_registers_the_search_attributes(temporal_client: Client) -> None:
    assert await search_attributes_ready(temporal_client, register=False)


async def test_coordinator_shows_search_attributes_memo_and_details(
    temporal_client: Client, start_coordinator: Callable[..., Any], sqlite_url: str
) -> None:
    coordinator = await start_coordinator(sqlite_url, dataclasses.replace(STEADY, batch_size=500))
    handle = coordinator.handle
    client = await coordinator.client().connect()
    try:
        async with stand_in_agent(temporal_client) as agent:
            query_id = await run_a_query(client, agent.name)
            status = await handle.query("status")
            version = int(status["version"])

            async def shown() -> bool:
                attributes = await search_attributes(handle)
                return attributes.get(RUNNING_QUERIES) == 1 and attributes.get(ALIVE_AGENTS) == 1

            await wait_until(shown)
            attributes = await search_attributes(handle)
            assert attributes.get(FAILED_QUERIES) == 0
            assert (attributes.get(SNAPSHOT_VERSION) or 0) >= version

            description = await handle.describe()
            memo = await description.memo_value(MEMO_KEY)
            assert memo["batch_size"] == 500
            assert memo["catalog"] == "sqlite"
            assert memo["search_attributes"] is True
            assert "catalog.db" not in str(memo)  # the kind, never the URL
            assert "streamctl coordinator" in (await description.static_summary() or "")
            assert "500" in (await description.static_details() or "")

            details = await current_details(handle)
            assert "**Pass " in details and "snapshot version **" in details
            assert "1 RUNNING" in details and "1 ALIVE" in details

            events = await history_events(handle)
            # Activities (passes among them) and the small passes run as local activities.
            passes = count(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) + sum(
                1
                for event in events
                if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and is_local_pass(event)
            )
            # The SDK upserts TemporalChangeVersion when a run first asks for a patch: not ours.
            upserts = sum(1 for event in events if upserted(event) - {"TemporalChangeVersion"})
            assert 0 < upserts <= passes  # at most one upsert a pass, never more
            assert count(events, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == 0
            summaries = [
                event.user_metadata.summary.data.decode()
                for event in events
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            ]
            assert f'"start query {query_id} on agent {agent.name} (run 1)"' in summaries
    finally:
        await asyncio.to_thread(client.close)


async def fresh_namespace(client: Client) -> Client:
    """A new namespace on the dev server, where no custom search attribute is registered."""
    name = f"web-ui-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    namespaced = await connect(client.service_client.config.target_host, name)

    async def known() -> bool:
        try:
            await namespaced.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=name)
            )
            return True
        except Exception:
            return False

    await wait_until(known)
    return namespaced


async def test_without_registered_search_attributes_the_coordinator_runs(
    temporal_client: Client, sqlite_url: str
) -> None:
    namespaced = await fresh_namespace(temporal_client)
    assert not await search_attributes_ready(namespaced, register=False)
    suffix = uuid.uuid4().hex[:8]
    async with coordinator_worker(namespaced, sqlite_url, f"coordinator-{suffix}"):
        handle = await ensure_coordinator(
            namespaced,
            workflow_id=f"coordinator-{suffix}",
            task_queue=f"coordinator-{suffix}",
            register_search_attributes=False,
        )
        client = CoordinatorClient(
            temporal_client.service_client.config.target_host,
            workflow_id=f"coordinator-{suffix}",
            namespace=namespaced.namespace,
        )
        await client.connect()
        try:
            created = await client.ask(m.CreateSink("out", COLUMNS, "VOID"))
            assert created["name"] == "out"
            details = await current_details(handle)
            assert "**Pass " in details
        finally:
            await asyncio.to_thread(client.close)
        events = await history_events(handle)
        assert count(events, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == 0
        # Only Temporal's own TemporalChangeVersion (the SDK records workflow.patched ids in
        # it; it is built into every namespace): none of the Web UI's attributes.
        names = {name for event in events for name in upserted(event)}
        assert names <= {"TemporalChangeVersion"}, names
        assert (await handle.describe()).typed_search_attributes.get(SNAPSHOT_VERSION) is None

    # Where the operator service allows it, they are registered before the coordinator starts.
    assert await search_attributes_ready(namespaced)
    assert await search_attributes_ready(namespaced, register=False)


@pytest.fixture
async def dev_server_with_ui(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    port, ui_port = free_port(), free_port()
    process = start_dev_server(
        tmp_path / "temporal.db", port, ui_port, log_file=tmp_path / "temporal.log"
    )
    try:
        await wait_for_server(f"127.0.0.1:{port}")
        await wait_until(lambda: port_open(ui_port), timeout=30)
        yield f"127.0.0.1:{port}", ui_port
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except Exception:
            process.kill()


async def test_the_web_ui_shows_the_coordinator(
    dev_server_with_ui: tuple[str, int], sqlite_url: str, tmp_path: Path
) -> None:
    missing = chromium_missing()
    if missing:
        pytest.skip(missing)
    address, ui_port = dev_server_with_ui
    temporal = await wait_for_server(address)
    workflow_id = f"coordinator-{uuid.uuid4().hex[:8]}"
    async with coordinator_worker(temporal, sqlite_url, workflow_id):
        handle = await ensure_coordinator(
            temporal,
            workflow_id=workflow_id,
            task_queue=workflow_id,
            catalog_url=sqlite_url,
            config=STEADY,
        )
        client = CoordinatorClient(address, workflow_id=workflow_id)
        await client.connect()
        try:
            async with stand_in_agent(temporal) as agent:
                await run_a_query(client, agent.name)

                async def shown() -> bool:
                    attributes = await search_attributes(handle)
                    return attributes.get(RUNNING_QUERIES) == 1

                await wait_until(shown)
                version = (await search_attributes(handle)).get(SNAPSHOT_VERSION)
                run_id = (await handle.describe()).run_id
                page = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{workflow_id}"
                # The browser blocks; the worker must keep answering the UI's metadata query.
                details, attributes_tab = await asyncio.to_thread(
                    look_at_the_ui, f"{page}/{run_id}", version, tmp_path
                )
        finally:
            await asyncio.to_thread(client.close)

    # The current details, rendered from Markdown in the "User Metadata" tab.
    assert "CurrentDetails" in details
    assert f"snapshotversion{version:g}" in details
    assert "agents:1ALIVE" in details and "queries:1RUNNING" in details
    assert "streamctlcoordinator" in details  # the static summary
    # The search attributes tab.
    assert f'"StreamctlSnapshotVersion":{version:g}' in attributes_tab
    assert '"StreamctlRunningQueries":1' in attributes_tab
    assert '"StreamctlAliveAgents":1' in attributes_tab
    assert '"StreamctlFailedQueries":0' in attributes_tab


def look_at_the_ui(page: str, version: float | None, shots: Path) -> tuple[str, str]:
    with HeadlessChromium() as browser:
        browser.open(f"{page}/user-metadata")
        details = browser.wait_for_text([f"snapshot version {version:g}", "1 RUNNING"])
        browser.screenshot(shots / "user-metadata.png")
    with HeadlessChromium() as browser:
        browser.open(f"{page}/search-attributes")
        attributes = browser.wait_for_text([f'"StreamctlSnapshotVersion": {version:g}'])
        browser.screenshot(shots / "search-attributes.png")
    return details, attributes
