"""``streamctl coordinator``, ``agent`` and ``gateway``: run one process of a deployment (a
coordinator worker, a Spark agent, the REST gateway) in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from streamctl import config
from streamctl.cli.common import (
    DRIVER_MEMORY_HELP,
    AddressOption,
    batch_knobs,
    console,
    memory_size,
    temporal_address,
)
from streamctl.exit_codes import EXIT_USAGE
from streamctl.protocol.coordinator_config import (
    COORDINATOR_TASK_QUEUE,
    COORDINATOR_WORKFLOW_ID,
    CoordinatorConfig,
)

if TYPE_CHECKING:
    from streamctl.process_metrics import MetricsAddress
app = typer.Typer()


METRICS_PORT_HELP = (
    "Serve Prometheus metrics on this port (0: none); default $STREAMCTL_METRICS_PORT, "
    "bound to $STREAMCTL_METRICS_HOST (default 127.0.0.1)."
)


def metrics_address(port: int | None) -> MetricsAddress:
    from streamctl.process_metrics import MetricsAddress

    return MetricsAddress(config.metrics_host(), config.metrics_port() if port is None else port)


def _workflow_config() -> CoordinatorConfig:
    """The coordinator configuration ``STREAMCTL_BATCH_SIZE``/``_TIMEOUT`` ask for; a usage
    error naming what is wrong."""
    batch_size, timeout = batch_knobs()
    workflow_config = CoordinatorConfig(batch_size=batch_size, timeout=timeout)
    problems = workflow_config.problems()
    if problems:
        raise typer.BadParameter(
            f"{'; '.join(problems)} (from STREAMCTL_BATCH_SIZE, STREAMCTL_BATCH_TIMEOUT)"
        )
    return workflow_config


@app.command()
def coordinator(
    address: AddressOption = None,
    catalog: str | None = typer.Option(None, help="Catalog URL."),
    start_workflow: bool = typer.Option(
        True, help="Start the coordinator workflow if it is not running."
    ),
    task_queue: str = typer.Option(COORDINATOR_TASK_QUEUE, help="Task queue to poll."),
    metrics_port: int | None = typer.Option(None, min=0, help=METRICS_PORT_HELP),
) -> None:
    """Run a coordinator worker (several may run; Temporal balances them)."""
    import logging

    from streamctl.worker.coordinator_worker import run_coordinator_worker

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The variables configure the workflow this worker starts; one that only polls (the
    # workers `up` runs, which inherit its environment) has no use for them.
    coordinator_config = _workflow_config() if start_workflow else None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            run_coordinator_worker(
                temporal_address(address),
                config.namespace(),
                catalog or config.catalog_url(),
                task_queue=task_queue,
                start_workflow=start_workflow,
                config=coordinator_config,
                metrics_address=metrics_address(metrics_port),
            )
        )


@app.command()
def agent(
    name: str = typer.Option(..., help="Agent name; its task queue is agent.<name>."),
    master: str = typer.Option("local[*]", help="Spark master URL, or sc:// for Spark Connect."),
    capacity: int = typer.Option(4, min=1, help="Queries this agent runs at most."),
    checkpoint_dir: Path | None = typer.Option(
        None,
        help="Checkpoint root (shared storage, so another agent can resume a query); "
        "default <state dir>/checkpoints.",
    ),
    address: AddressOption = None,
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID, help="Coordinator workflow id."),
    metrics_port: int | None = typer.Option(None, min=0, help=METRICS_PORT_HELP),
    driver_memory: str | None = typer.Option(
        None, callback=memory_size, help=DRIVER_MEMORY_HELP + " (default Spark's, 1g)."
    ),
) -> None:
    """Run a Spark agent: one SparkSession, a Temporal worker on task queue agent.<name>."""
    import logging

    from streamctl.agent.process import run_agent
    from streamctl.agent.spark_session import JavaMissing, require_java
    from streamctl.agent.spark_watchdog import SparkBroken
    from streamctl.client.client import CoordinatorClient
    from streamctl.client.outbox import new_id
    from streamctl.nes_types import InvalidName, check_identifier

    try:
        check_identifier(name, "agent name")
    except InvalidName as error:  # the coordinator would refuse its RegisterWorker
        raise typer.BadParameter(str(error), param_hint="--name") from None

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    state = config.state_dir()
    try:
        require_java()
    except JavaMissing as error:
        console.print(f"[red]{error}")
        raise typer.Exit(EXIT_USAGE) from None
    address = temporal_address(address)
    namespace = config.namespace()

    async def connect_coordinator() -> CoordinatorClient:
        # One sender per process: the coordinator drops event batches whose sequence number it
        # has seen from the sender, and a restarted agent counts from 1 again.
        sender = f"agent-{name}-{new_id()}"
        client = CoordinatorClient(
            address, namespace=namespace, workflow_id=workflow_id, sender=sender
        )
        return await client.connect()

    try:
        asyncio.run(
            run_agent(
                address,
                namespace,
                name,
                connect_coordinator=connect_coordinator,
                master=master,
                capacity=capacity,
                checkpoint_dir=checkpoint_dir or state / "checkpoints",
                work_dir=state / "agents",
                workflow_id=workflow_id,
                metrics_address=metrics_address(metrics_port),
                driver_memory=driver_memory,
            )
        )
    except KeyboardInterrupt:
        pass
    except SparkBroken as error:  # it unregistered; a supervisor may start it again
        console.print(f"[red]{error}")
        raise typer.Exit(1) from None


@app.command()
def gateway(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8080, help="HTTP port."),
    address: AddressOption = None,
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID, help="Coordinator workflow id."),
    token: str | None = typer.Option(
        None,
        help="Bearer token callers must send (visible in the process list: prefer "
        "STREAMCTL_GATEWAY_TOKEN).",
    ),
    insecure_no_auth: bool = typer.Option(
        False, "--insecure-no-auth", help="Serve without a token, on a loopback address only."
    ),
) -> None:
    """Serve the coordinator's requests and statements over HTTP (OpenAPI at /docs)."""
    import logging

    from streamctl.gateway.app import GatewayRefused, GatewaySettings, serve

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = GatewaySettings(
        address=temporal_address(address),
        namespace=config.namespace(),
        workflow_id=workflow_id,
        token=token or config.gateway_token(),
    )
    code = 0
    try:
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it handled
            code = serve(settings, host, port, insecure_no_auth)
    except GatewayRefused as error:
        console.print(f"[red]{error}")
        raise typer.Exit(EXIT_USAGE) from None
    raise typer.Exit(code)
