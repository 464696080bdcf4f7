"""The Spark agent process (``streamctl agent``): one SparkSession, one Temporal worker.

Lifecycle of an agent process:

1. Build its SparkSession (``local[*]`` by default, any Spark master URL, or a Spark Connect
   ``sc://`` URL).
2. Start a Temporal worker on task queue ``agent.<name>`` hosting the Spark actions
   (:mod:`streamctl.activities.spark`), run in threads because every Spark call blocks.
3. Send ``RegisterWorker`` (capacity, task queue, host), then a ``Heartbeat`` every
   ``heartbeat_interval`` seconds with its load (active queries) and capacity. Registering
   again after a restart makes the coordinator reconcile what this agent should run.
4. On a normal stop: stop its queries gracefully and send ``UnregisterWorker``. After
   ``kill -9`` nothing is sent: the coordinator notices the missing heartbeats, declares the
   agent ``DEAD`` and moves its queries elsewhere.

With a metrics port it serves its load, its actions and its queries' rates on Prometheus'
format, with the Temporal SDK's series (:mod:`streamctl.worker.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.worker import Worker

from streamctl.client.client import CoordinatorClient, new_id
from streamctl.worker.metrics import AgentMetrics, MetricsAddress, SdkMetrics
from streamctl.workflows import messages as m
from streamctl.workflows.actions import agent_task_queue
from streamctl.workflows.coordinator import COORDINATOR_WORKFLOW_ID
from streamctl.workflows.wire import connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 2.0


def agent_spark_session(name: str, master: str, work_root: Path) -> SparkSession:
    """The agent's session: ``sc://`` URLs connect to a Spark Connect server."""
    if master.startswith("sc://"):
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(master).appName(f"streamctl-agent-{name}").getOrCreate()
    from streamctl.worker.spark_session import build_spark_session

    return build_spark_session(
        master,
        f"streamctl-agent-{name}",
        work_root / "warehouse",
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
    )


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (where this loop may handle signals)."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal_number, stopped.set)
    return stopped


async def run_agent(
    address: str,
    namespace: str,
    name: str,
    *,
    master: str = "local[*]",
    capacity: int = 4,
    checkpoint_dir: Path,
    work_dir: Path,
    workflow_id: str = COORDINATOR_WORKFLOW_ID,
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
    ready: asyncio.Event | None = None,
    metrics_address: MetricsAddress = MetricsAddress(),
) -> None:
    from streamctl.activities.spark import SparkActivities, SparkQueries

    metrics = AgentMetrics(name, capacity)
    sdk = SdkMetrics() if metrics_address.enabled else None
    work_root = work_dir / name
    session = await asyncio.to_thread(agent_spark_session, name, master, work_root)
    temporal = await connect(address, namespace, runtime=sdk.runtime if sdk else None)
    # One sender per process: the coordinator drops event batches whose sequence number it has
    # seen from the sender, and a restarted agent counts from 1 again.
    coordinator = await CoordinatorClient(
        address, namespace=namespace, workflow_id=workflow_id, sender=f"agent-{name}-{new_id()}"
    ).connect()
    queries = SparkQueries(
        session, name, checkpoint_dir, work_root, metrics.observing(coordinator.try_send)
    )
    metrics.track_load(queries.active_count)
    activities = SparkActivities(queries)
    task_queue = agent_task_queue(name)
    try:
        with contextlib.ExitStack() as endpoint, ThreadPoolExecutor(capacity + 2) as executor:
            if metrics_address.enabled:
                served = metrics.serve(metrics_address.host, metrics_address.port, sdk)
                endpoint.callback(served.close)
                log.info("metrics on %s:%d/metrics", metrics_address.host, served.port)
            worker = Worker(
                temporal,
                task_queue=task_queue,
                activities=activities.all(),
                activity_executor=executor,
                max_concurrent_activities=capacity + 2,
                interceptors=[metrics.interceptor()],
            )
            async with worker:
                await coordinator.send(
                    m.RegisterWorker(name, capacity, task_queue, socket.gethostname())
                )
                log.info("agent %s polling %s on %s (master %s)", name, task_queue, address, master)
                if ready is not None:
                    ready.set()
                stopped = _stop_on_signals()
                while not stopped.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopped.wait(), heartbeat_interval)
                    if not stopped.is_set():
                        await coordinator.send(
                            m.Heartbeat(name, load=queries.active_count(), capacity=capacity)
                        )
    finally:
        await asyncio.to_thread(queries.stop_all)
        with contextlib.suppress(Exception):
            await coordinator.send(m.UnregisterWorker(name))
        await asyncio.to_thread(coordinator.close)
        await asyncio.to_thread(session.stop)
