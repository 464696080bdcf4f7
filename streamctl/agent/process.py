"""The Spark agent process (``streamctl agent``): one SparkSession, one Temporal worker.

Lifecycle of an agent process:

1. Build its SparkSession (``local[*]`` by default, any Spark master URL, or a Spark Connect
   ``sc://`` URL).
2. Start a Temporal worker on task queue ``agent.<name>`` hosting the Spark actions
   (:mod:`streamctl.agent.activities`), run in threads because every Spark call blocks.
3. Send ``RegisterWorker`` (capacity, task queue, host), then a ``Heartbeat`` every
   ``heartbeat_interval`` seconds with its load (active queries) and capacity. Registering
   again after a restart makes the coordinator reconcile what this agent should run.
4. Watch its Spark (:mod:`streamctl.agent.spark_watchdog`): a driver JVM that is gone, a
   stopped SparkContext or a JVM that does not answer is found within seconds; the agent
   kills that JVM, reports every query it ran lost (the coordinator restarts them from their
   checkpoints, here or elsewhere; one query that keeps taking Spark down ends ``FAILED``),
   heartbeats capacity 0 while it builds a new session on a new JVM, and goes on. If it cannot
   keep Spark alive it stops as in 5. and exits with an error (``streamctl up`` restarts it).
   The driver's heap is ``driver_memory`` (``spark.driver.memory``, fixed when the JVM starts).
5. On a normal stop: stop its queries gracefully and send ``UnregisterWorker``. After
   ``kill -9`` nothing is sent: the coordinator notices the missing heartbeats, declares the
   agent ``DEAD`` and moves its queries elsewhere.

With a metrics port it serves its load, its actions and its queries' rates on Prometheus'
format, with the Temporal SDK's series (:mod:`streamctl.worker.coordinator_metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from temporalio.worker import Worker

from streamctl.agent.agent_metrics import AgentMetrics
from streamctl.agent.spark_watchdog import SparkBroken, SparkWatchdog
from streamctl.lifecycle.spark_states import SparkPolicy
from streamctl.process_metrics import MetricsAddress, SdkMetrics
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import agent_task_queue
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID
from streamctl.workflows.wire import connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 2.0


def agent_spark_session(
    name: str, master: str, work_root: Path, driver_memory: str | None = None
) -> SparkSession:
    """The agent's session: ``sc://`` URLs connect to a Spark Connect server (a new session
    each time: the agent replaces a lost one), any other master gets a driver JVM of its own
    with a heap of ``driver_memory`` (Spark's default, 1g, when None)."""
    if master.startswith("sc://"):
        from pyspark.sql import SparkSession

        if driver_memory is not None:
            log.warning("--driver-memory does not apply to Spark Connect: set it on the server")
        return SparkSession.builder.remote(master).appName(f"streamctl-agent-{name}").create()
    from streamctl.agent.spark_session import build_spark_session

    config = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}
    if driver_memory is not None:
        config["spark.driver.memory"] = driver_memory
    return build_spark_session(master, f"streamctl-agent-{name}", work_root / "warehouse", config)


class CoordinatorLink(Protocol):
    """How the agent reaches its coordinator: events, sent in order (``send`` waits until the
    coordinator has them, ``try_send`` queues one without waiting). The process that runs the
    agent gives it one connected sender (the client library's
    :class:`~streamctl.client.client.CoordinatorClient`, composed by ``streamctl agent``); the
    agent imports no frontend."""

    async def send(self, event: m.Event) -> None: ...

    def try_send(self, event: m.Event) -> None: ...

    def close(self) -> None: ...


class _Heartbeats:
    """Tells the coordinator at once when the agent's Spark is lost (capacity 0: nothing is
    placed here while it is rebuilt) and when it is back (a :class:`SparkUser`)."""

    def __init__(self, send: Callable[[bool], None]) -> None:
        self._send = send

    def spark_lost(self, generation: int, reason: str, by_itself: bool) -> None:
        self._send(False)

    def spark_recreated(self, session: Any, generation: int) -> None:
        self._send(True)

    def spark_tick(self) -> None:
        pass


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
    connect_coordinator: Callable[[], Awaitable[CoordinatorLink]],
    master: str = "local[*]",
    capacity: int = 4,
    checkpoint_dir: Path,
    work_dir: Path,
    workflow_id: str = COORDINATOR_WORKFLOW_ID,
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
    ready: asyncio.Event | None = None,
    metrics_address: MetricsAddress = MetricsAddress(),
    driver_memory: str | None = None,
    spark_policy: SparkPolicy = SparkPolicy(),
) -> None:
    """Run the agent until SIGTERM/SIGINT; raises :class:`SparkBroken` (after unregistering)
    when it could not keep its Spark alive."""
    from streamctl.agent.activities import SparkActivities
    from streamctl.agent.runs import SparkQueries

    metrics = AgentMetrics(name, capacity)
    sdk = SdkMetrics() if metrics_address.enabled else None
    work_root = work_dir / name

    def build() -> SparkSession:
        return agent_spark_session(name, master, work_root, driver_memory)

    session = await asyncio.to_thread(build)
    stopped = _stop_on_signals()
    loop = asyncio.get_running_loop()
    broken: list[str] = []

    def on_broken(reason: str) -> None:  # the watchdog's thread
        broken.append(reason)
        loop.call_soon_threadsafe(stopped.set)

    watchdog = SparkWatchdog(session, build, name=name, policy=spark_policy, on_broken=on_broken)
    temporal = await connect(address, namespace, runtime=sdk.runtime if sdk else None)
    coordinator = await connect_coordinator()
    queries = SparkQueries(
        session,
        name,
        checkpoint_dir,
        work_root,
        metrics.observing(coordinator.try_send),
        coordinator=workflow_id,
        spark=watchdog,
        policy=spark_policy,
    )

    def heartbeat(spark_up: bool) -> m.Heartbeat:
        # While its Spark is down the agent has no room for queries.
        room = capacity if spark_up else 0
        return m.Heartbeat(name, load=queries.active_count(), capacity=room)

    # First the heartbeat, then the queries' losses: the coordinator must see no room here
    # before it restarts them.
    watchdog.add_user(_Heartbeats(lambda up: coordinator.try_send(heartbeat(up))))
    watchdog.add_user(queries)
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
                watchdog.start()
                log.info("agent %s polling %s on %s (master %s)", name, task_queue, address, master)
                if ready is not None:
                    ready.set()
                while not stopped.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopped.wait(), heartbeat_interval)
                    if not stopped.is_set():
                        await coordinator.send(heartbeat(watchdog.up))
    finally:
        await asyncio.to_thread(watchdog.close)
        await asyncio.to_thread(queries.stop_all)
        # Stopping the session drains Spark's listener bus: the stopped queries' reports go
        # out before the goodbye and before the client closes.
        with contextlib.suppress(Exception):  # a broken Spark may not stop cleanly
            await asyncio.to_thread(watchdog.session.stop)
        with contextlib.suppress(Exception):
            await coordinator.send(m.UnregisterWorker(name))
        await asyncio.to_thread(coordinator.close)
    if broken:
        raise SparkBroken(f"agent {name} stopped: {broken[0]}")
