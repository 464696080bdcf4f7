"""What every command group of ``streamctl`` shares: the console, the options most commands
take (``--json``, ``--address``, ``--state-dir``, ``--workflow-id``), where the stack keeps its
files, which Temporal address to talk to, and whether the coordinator answers there."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from streamctl import config
from streamctl.exit_codes import EXIT_UNREACHABLE
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID
from streamctl.workflows.wire import connect

console = Console()

JsonOption = Annotated[bool, typer.Option("--json")]
AddressOption = Annotated[str | None, typer.Option(help="Temporal address.")]
StateDirOption = Annotated[Path | None, typer.Option()]
WorkflowIdOption = Annotated[str, typer.Option()]
"""The options most commands take, declared once (default: ``COORDINATOR_WORKFLOW_ID``)."""


def resolve_state_dir(state_dir: Path | None) -> Path:
    return (state_dir or config.state_dir()).resolve()


def temporal_address(address: str | None, state_dir: Path | None = None) -> str:
    if address:
        return address
    if "STREAMCTL_TEMPORAL_ADDRESS" not in os.environ:
        from streamctl.worker.supervisor import read_stack

        info = read_stack(resolve_state_dir(state_dir))
        if info is not None:
            return info.address
    return config.temporal_address()


DRIVER_MEMORY_HELP = "Heap of the agent's Spark driver JVM (spark.driver.memory), e.g. 2g"


def memory_size(value: str | None) -> str | None:
    from streamctl.agent.spark_session import check_memory_size

    try:
        return None if value is None else check_memory_size(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def batch_knobs() -> tuple[int, float]:
    """``STREAMCTL_BATCH_SIZE`` and ``STREAMCTL_BATCH_TIMEOUT``; a usage error naming the
    variable that is not a number."""
    try:
        return config.batch_size(), config.batch_timeout()
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def coordinator_status(
    address: str, workflow_id: str = COORDINATOR_WORKFLOW_ID
) -> dict[str, Any] | None:
    async def query() -> dict[str, Any] | None:
        try:
            client = await asyncio.wait_for(connect(address), 5)
            handle = client.get_workflow_handle(workflow_id)
            status = await asyncio.wait_for(handle.query("status"), 10)
            return dict(status) if isinstance(status, dict) else None
        except Exception:
            return None

    return asyncio.run(query())


def require_coordinator(address: str, workflow_id: str, as_json: bool) -> None:
    """Exit with :data:`EXIT_UNREACHABLE` unless the coordinator answers at ``address``."""
    if coordinator_status(address, workflow_id) is None:
        if as_json:
            print(json.dumps({"ok": False, "error_code": "UNREACHABLE", "address": address}))
        else:
            Console(stderr=True).print(
                f"[red]no coordinator answers at {address}[/] (start one with: streamctl up -d)"
            )
        raise typer.Exit(EXIT_UNREACHABLE)


def reachable_coordinator(
    address: str | None, state_dir: Path | None, workflow_id: str, as_json: bool
) -> str:
    """The Temporal address a command talks to (:func:`temporal_address`); exit as
    :func:`require_coordinator` does unless the coordinator answers there."""
    target = temporal_address(address, state_dir)
    require_coordinator(target, workflow_id, as_json)
    return target
