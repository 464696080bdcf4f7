"""The coordinator worker: a Temporal worker on task queue ``coordinator``.

It hosts the coordinator workflow, the reoptimization workflow that schedules start, and the
catalog activities (plus ``request_reoptimize``, which runs on the worker's event loop).
Several replicas may run at once; Temporal hands each workflow task and activity to one of
them, and the pass activity's claim on its pass number keeps the catalog single-writer even
when an abandoned attempt and its retry overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Interceptor, PollerBehaviorSimpleMaximum, Worker

from streamctl.activities.coordinator_requests import request_reoptimize
from streamctl.activities.pass_activity import CatalogActivities, CatalogWork
from streamctl.catalog.store import catalog_engine
from streamctl.catalog.urls import catalog_kind
from streamctl.domain import decode
from streamctl.gc_policy import collect_young_garbage_less_often, freeze_what_is_loaded
from streamctl.process_metrics import MetricsAddress, SdkMetrics
from streamctl.protocol.coordinator_config import (
    COORDINATOR_TASK_QUEUE,
    COORDINATOR_TASK_TIMEOUT,
    COORDINATOR_WORKFLOW_ID,
    CoordinatorConfig,
)
from streamctl.worker.activity_pool import RenewingProcessPool
from streamctl.worker.coordinator_metrics import CoordinatorMetrics, workflow_status
from streamctl.worker.search_attributes import search_attributes_ready
from streamctl.worker.stuck_runs import StuckRunWatchdog
from streamctl.workflows.coordinator import CoordinatorWorkflow
from streamctl.workflows.reoptimize_workflow import ReoptimizationWorkflow
from streamctl.workflows.state import CoordinatorInput
from streamctl.workflows.web_ui import config_memo, static_details, static_summary
from streamctl.workflows.wire import connect

log = logging.getLogger(__name__)

ACTIVITY_SLOTS = 2
"""Passes run one at a time per coordinator; the second slot serves ``catalog_position``."""


def build_worker(
    client: Client,
    catalog_url: str,
    executor: Executor,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    interceptors: Sequence[Interceptor] = (),
) -> Worker:
    """The coordinator worker; ``executor`` runs the catalog activities' work.

    A thread pool shares the interpreter lock with the workflow tasks; a process pool (what
    :func:`run_coordinator_worker` uses) lets a pass run while the next updates are accepted.
    """
    catalog_engine(catalog_url)  # migrate before taking work
    activities = CatalogActivities(CatalogWork(catalog_url), executor)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[CoordinatorWorkflow, ReoptimizationWorkflow],
        activities=[
            activities.apply_pass,
            activities.catalog_position,
            activities.quarantine_message,
            request_reoptimize,
        ],
        # One more than the pool: ``request_reoptimize`` waits for a pass, so it must never
        # hold the slot that pass needs.
        max_concurrent_activities=ACTIVITY_SLOTS + 1,
        # Each activity poll holds a slot while it waits. With the SDK's 5 polls every slot
        # is held, no slot is left to take a pass eagerly (the server hands the pass back in
        # the workflow task's answer, system.enableActivityEagerExecution), and every pass
        # waited for matching instead: one poll leaves the other slots for eager passes.
        activity_task_poller_behavior=PollerBehaviorSimpleMaximum(1),
        interceptors=interceptors,
    )


async def ensure_coordinator(
    client: Client,
    workflow_id: str = COORDINATOR_WORKFLOW_ID,
    config: CoordinatorConfig | None = None,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    *,
    catalog_url: str | None = None,
    register_search_attributes: bool = True,
) -> WorkflowHandle[CoordinatorWorkflow, None]:
    """Start the coordinator workflow unless it already runs (then attach to it; it keeps the
    configuration it started with).

    The workflow upserts its search attributes only if the namespace has them
    (:func:`~streamctl.worker.search_attributes.search_attributes_ready`, which registers them
    unless ``register_search_attributes`` is false); it starts with its configuration as memo
    (the catalog's kind from ``catalog_url``, never the URL) and a static summary for the Web
    UI (:mod:`streamctl.workflows.web_ui`). An unusable ``config``
    (:meth:`~streamctl.protocol.coordinator_config.CoordinatorConfig.problems`) raises ValueError.
    """
    problems = (config or CoordinatorConfig()).problems()
    if problems:
        raise ValueError(f"unusable coordinator configuration: {'; '.join(problems)}")
    config = dataclasses.replace(
        config or CoordinatorConfig(),
        search_attributes=await search_attributes_ready(
            client, register=register_search_attributes
        ),
        catalog_kind=catalog_kind(catalog_url) if catalog_url else "",
    )
    return await client.start_workflow(
        CoordinatorWorkflow.run,
        CoordinatorInput(config=config),
        id=workflow_id,
        task_queue=task_queue,
        task_timeout=COORDINATOR_TASK_TIMEOUT,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo=config_memo(config),
        static_summary=static_summary(workflow_id),
        static_details=static_details(config),
    )


def exit_with_parent(parent_pid: int) -> None:
    """Make a helper process (of the activity pool) end when the worker process does.

    A worker killed with ``kill -9`` cannot stop its children; without this they would stay
    forever, each holding catalog connections.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def prepare_activity_process(parent_pid: int, catalog_url: str) -> None:
    """Start an activity process: end it with the worker, and pay the one-time costs (the
    pass code's imports, the message adapters, the catalog's connection pool) now rather than
    in the first passes after a (re)start, which would otherwise take seconds."""
    exit_with_parent(parent_pid)
    decode.prepare()
    try:
        catalog_engine(catalog_url).connect().close()
    except Exception:  # the catalog may be down now: the passes retry, a broken pool never would
        log.warning("could not open the catalog yet; the first pass will", exc_info=True)
    # What is loaded now lives as long as the process (gc_policy has the measurements).
    freeze_what_is_loaded()
    collect_young_garbage_less_often()


def _process_ready() -> int:
    time.sleep(0.2)  # both slots at once: the pool starts a process for each
    return os.getpid()


async def run_coordinator_worker(
    address: str,
    namespace: str,
    catalog_url: str,
    *,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    start_workflow: bool = True,
    config: CoordinatorConfig | None = None,
    ready: asyncio.Event | None = None,
    workflow_id: str = COORDINATOR_WORKFLOW_ID,
    metrics_address: MetricsAddress = MetricsAddress(),
) -> None:
    """Serve the coordinator's task queue until cancelled; with ``metrics_address`` enabled,
    also its Prometheus endpoint (:mod:`streamctl.worker.coordinator_metrics`), the pending
    messages of
    ``workflow_id``'s coordinator among its series. The process ends if the SDK cannot evict
    a run (:mod:`streamctl.worker.stuck_runs`)."""
    sdk = SdkMetrics() if metrics_address.enabled else None
    client = await connect(address, namespace, runtime=sdk.runtime if sdk else None)
    metrics = CoordinatorMetrics()
    # Spawned, not forked: this process already runs gRPC and asyncio threads.
    context = multiprocessing.get_context("spawn")
    with RenewingProcessPool(
        lambda: ProcessPoolExecutor(
            max_workers=ACTIVITY_SLOTS,
            mp_context=context,
            initializer=prepare_activity_process,
            initargs=(os.getpid(), catalog_url),
        )
    ) as executor:
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(executor, _process_ready) for _ in range(ACTIVITY_SLOTS))
        )
        worker = build_worker(
            client,
            catalog_url,
            executor,
            task_queue,
            [metrics.interceptor()],
        )
        status = workflow_status(client, workflow_id, loop)
        async with worker, contextlib.AsyncExitStack() as endpoint:
            endpoint.enter_context(StuckRunWatchdog().listening())
            if metrics_address.enabled:
                served = metrics.serve(
                    metrics_address.host, metrics_address.port, sdk, catalog_url, status
                )
                endpoint.callback(served.close)
                log.info("metrics on %s:%d/metrics", metrics_address.host, served.port)
            if start_workflow:
                await ensure_coordinator(
                    client,
                    workflow_id=workflow_id,
                    config=config,
                    task_queue=task_queue,
                    catalog_url=catalog_url,
                )
            log.info("coordinator worker polling %s on %s", task_queue, address)
            if ready is not None:
                ready.set()
            await asyncio.Event().wait()
