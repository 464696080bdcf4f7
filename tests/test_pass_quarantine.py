"""A message that fails its pass every time, even alone, is found, answered and set aside.

The pass's own savepoints contain what raises inside it; this covers what they cannot: a pass
that times out, crashes its process or fails before its savepoints (here: an activity
interceptor that fails every attempt of a pass carrying the poison message). The workflow
splits the failed pass until the poison message is alone, answers it ``INTERNAL`` with a
reference, keeps it (``ListQuarantined``), and answers every other message of the pass as if
nothing happened. On f29f918 such a pass was retried forever and every later request waited.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from catalog_tools import failed_workflow_tasks
from conftest import wait_until
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.pass_io import PassInput
from streamctl.worker.coordinator_worker import build_worker, ensure_coordinator

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)


def _pass_carrying(input: ExecuteActivityInput) -> tuple[PassInput, bytes] | None:
    """For an attempt of a pass, its input and what it carries (its requests' raw JSON and its
    events' text), which the interceptors below look for words in; ``None`` for any other
    activity."""
    if activity.info().activity_type != "apply_pass":
        return None
    pass_input, requests = input.args
    return pass_input, requests.payload.data + repr(pass_input.events).encode()


class FailsPassesWithPoison(Interceptor):
    """Every attempt of a pass whose requests or events mention ``poison`` fails."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        class _Failing(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                carrying = _pass_carrying(input)
                if carrying is not None and b"poison" in carrying[1]:
                    raise RuntimeError("this pass always fails (injected)")
                return await super().execute_activity(input)

        return _Failing(next)


class HangsPassesWithSlow(Interceptor):
    """Every attempt of a pass carrying a request for ``slow`` outlasts ``pass_timeout``."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        class _Hanging(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                carrying = _pass_carrying(input)
                if carrying is not None and b"slow" in carrying[1]:
                    await asyncio.sleep(3600)
                return await super().execute_activity(input)

        return _Hanging(next)


class CommitsThenFails(Interceptor):
    """Every attempt of an unsplit pass carrying a request for ``lost`` or a heartbeat runs
    (the first commits, the rest replay it) and then fails, as if the process died before its
    answer reached Temporal."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        class _Losing(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                result = await super().execute_activity(input)
                carrying = _pass_carrying(input)
                if carrying is not None:
                    pass_input, carried = carrying
                    lost = b"lost" in carried or b"Heartbeat" in carried
                    if lost and not pass_input.split_from:
                        raise RuntimeError("the answer of this pass is lost (injected)")
                return result

        return _Losing(next)


@contextlib.asynccontextmanager
async def poisoned_coordinator(
    temporal_client: Client,
    catalog_url: str,
    interceptor: Interceptor | None = None,
    config: CoordinatorConfig | None = None,
) -> AsyncIterator[tuple[str, Any]]:
    suffix = uuid.uuid4().hex[:10]
    task_queue = workflow_id = f"coordinator-{suffix}"
    executor = ThreadPoolExecutor(max_workers=4)
    worker = build_worker(
        temporal_client,
        catalog_url,
        executor,
        task_queue,
        interceptors=[interceptor or FailsPassesWithPoison()],
    )
    try:
        async with worker:
            handle = await ensure_coordinator(
                temporal_client,
                workflow_id=workflow_id,
                task_queue=task_queue,
                # The requests below share one pass.
                config=config or CoordinatorConfig(timeout=0.3),
            )
            yield workflow_id, handle
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


async def test_a_message_that_always_fails_its_pass_is_set_aside(
    temporal, temporal_client, catalog_url
):
    async with poisoned_coordinator(temporal_client, catalog_url) as (workflow_id, handle):
        client = await CoordinatorClient(
            temporal.address, workflow_id=workflow_id, request_timeout=120
        ).connect()
        try:
            names = ["a", "b", "poison", "c", "d", "e"]
            requests = [m.CreateLogicalSource(name, SCHEMA) for name in names]
            client.send_blocking(m.RegisterWorker("w1"))
            client.send_blocking(m.RegisterWorker("poison_worker"))
            answers = await asyncio.gather(
                *(client.ask_response(r, request_id=f"r-{r.name}") for r in requests)
            )
            by_name = dict(zip(names, answers, strict=True))
            assert all(by_name[n].ok for n in names if n != "poison"), by_name
            poisoned = by_name["poison"]
            assert poisoned.error_code == "INTERNAL"
            assert "kept aside as" in (poisoned.error_message or "")
            reference = (poisoned.error_message or "").split("kept aside as ")[1].split()[0]

            kept = await client.ask(m.ListQuarantined())
            references = {item["reference"]: item for item in kept}
            assert reference in references
            assert references[reference]["kind"] == "CreateLogicalSource"
            assert any(item["kind"] == "RegisterWorker" for item in kept), kept
            # A retry of the same id gets the stored answer: no pass fails for it again.
            again = await client.ask_response(requests[2], request_id="r-poison")
            assert again.error_code == "INTERNAL"
            # The coordinator goes on: other requests, other workers.
            workers = {w["name"] for w in await client.ask(m.ListWorkers())}
            assert "w1" in workers and "poison_worker" not in workers
            assert (await client.ask(m.GetLogicalSource("e")))["name"] == "e"
            assert await failed_workflow_tasks(handle) == 0
        finally:
            await asyncio.to_thread(client.close)


async def test_a_pass_that_committed_though_every_attempt_failed_applies_once(
    temporal, temporal_client, catalog_url
):
    """Its halves answer from what it stored and apply none of its messages again: the
    heartbeats it carried count once, its creations are not refused as duplicates."""
    async with poisoned_coordinator(temporal_client, catalog_url, CommitsThenFails()) as (
        workflow_id,
        handle,
    ):
        client = await CoordinatorClient(
            temporal.address, workflow_id=workflow_id, request_timeout=120
        ).connect()
        try:
            await client.send(m.RegisterWorker("w1"))

            async def registered() -> bool:
                return (await client.ask_response(m.GetWorker("w1"))).ok

            await wait_until(registered)
            # The pass that carries the heartbeat is lost, and so is the one that carries the
            # request for "lost" (the same pass, or another).
            await client.send(m.Heartbeat("w1", count=5))
            names = ["lost", "a", "b", "c"]
            answers = await asyncio.gather(
                *(
                    client.ask_response(m.CreateLogicalSource(name, SCHEMA), request_id=f"r-{name}")
                    for name in names
                )
            )
            assert [answer.ok for answer in answers] == [True] * 4, answers
            assert (await client.ask(m.GetWorker("w1")))["heartbeats"] == 5
            listed = await client.ask(m.ListLogicalSources())
            assert sorted(source["name"] for source in listed) == sorted(names)
            assert await failed_workflow_tasks(handle) == 0
        finally:
            await asyncio.to_thread(client.close)


async def test_a_pass_that_outlasts_its_timeout_every_time_is_split_and_set_aside(
    temporal, temporal_client, sqlite_url
):
    """A small pass runs as a local activity (``LOCAL_PASS_MAX_MESSAGES``), timed out by the
    worker rather than the server: it must be split and its one hanging request set aside like
    an activity's, not fail the workflow."""
    config = CoordinatorConfig(timeout=0.3, pass_timeout=1.0)
    async with poisoned_coordinator(temporal_client, sqlite_url, HangsPassesWithSlow(), config) as (
        workflow_id,
        handle,
    ):
        client = await CoordinatorClient(
            temporal.address, workflow_id=workflow_id, request_timeout=120
        ).connect()
        try:
            names = ["a", "slow", "b"]
            answers = await asyncio.gather(
                *(
                    client.ask_response(m.CreateLogicalSource(name, SCHEMA), request_id=f"r-{name}")
                    for name in names
                )
            )
            by_name = dict(zip(names, answers, strict=True))
            assert by_name["a"].ok and by_name["b"].ok, by_name
            assert by_name["slow"].error_code == "INTERNAL", by_name["slow"]
            assert "kept aside as" in (by_name["slow"].error_message or "")
            assert (await client.ask(m.GetLogicalSource("b")))["name"] == "b"
            assert await failed_workflow_tasks(handle) == 0
        finally:
            await asyncio.to_thread(client.close)
