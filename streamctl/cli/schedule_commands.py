"""``streamctl schedule reoptimize|trigger|delete``: the Temporal Schedules that drive the
coordinator."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer

from streamctl import config
from streamctl.cli.common import (
    AddressOption,
    JsonOption,
    StateDirOption,
    console,
    temporal_address,
)
from streamctl.cli.frontend import (
    print_refusal,
)
from streamctl.exit_codes import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE
from streamctl.protocol.coordinator_config import COORDINATOR_TASK_QUEUE, COORDINATOR_WORKFLOW_ID
from streamctl.workflows.wire import connect

schedule_app = typer.Typer(
    help="Temporal Schedules that drive the coordinator.", no_args_is_help=True
)


def _schedule_call(
    address: str | None, state_dir: Path | None, call: Any, name: str = "reoptimize"
) -> Any:
    """Run ``call(client)`` against Temporal; a schedule Temporal does not know is a refusal."""
    from temporalio.service import RPCError, RPCStatusCode

    target = temporal_address(address, state_dir)

    async def run() -> Any:
        return await call(await connect(target, config.namespace()))

    try:
        return asyncio.run(run())
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            print_refusal("NOT_FOUND", f"there is no schedule {name!r}", False)
        else:
            print_refusal(error.status.name, error.message, False)
        raise typer.Exit(EXIT_REFUSED) from None
    except (ConnectionError, RuntimeError) as error:
        print_refusal("UNREACHABLE", f"Temporal at {target}: {error}", False)
        raise typer.Exit(EXIT_UNREACHABLE) from None


@schedule_app.command("reoptimize")
def schedule_reoptimize(
    every: str = typer.Option("5m", help="Interval: 30s, 5m, 1h30m ..."),
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID, help="The coordinator to ask."),
    task_queue: str = typer.Option(COORDINATOR_TASK_QUEUE, help="The coordinator's task queue."),
    name: str = typer.Option("reoptimize", help="The schedule's id."),
) -> None:
    """Reoptimize every interval: restart retryable failed queries, move queries off lagging or
    SUSPECT agents, rebalance (decisions in ``streamctl history``)."""
    from streamctl.cli import schedules

    try:
        interval = schedules.parse_interval(every)
    except ValueError as error:
        print_refusal("INVALID_REQUEST", str(error), as_json)
        raise typer.Exit(EXIT_USAGE) from None
    result = _schedule_call(
        address,
        state_dir,
        lambda client: schedules.schedule_reoptimize(
            client, interval, coordinator_id=workflow_id, task_queue=task_queue, schedule_id=name
        ),
        name,
    )
    if as_json:
        print(json.dumps(result))
    else:
        verb = "created" if result["created"] else "updated"
        console.print(f"[green]✓[/] schedule {result['schedule']} {verb}: reoptimize every {every}")


@schedule_app.command("trigger")
def schedule_trigger(
    name: str = typer.Argument(..., help="The schedule, e.g. reoptimize."),
    address: AddressOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Run a schedule's action once now."""
    from streamctl.cli import schedules

    _schedule_call(
        address, state_dir, lambda client: schedules.trigger_schedule(client, name), name
    )
    console.print(f"[green]✓[/] triggered schedule {name}")


@schedule_app.command("delete")
def schedule_delete(
    name: str = typer.Argument(..., help="The schedule, e.g. reoptimize."),
    address: AddressOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Delete a schedule (runs already started finish)."""
    from streamctl.cli import schedules

    _schedule_call(address, state_dir, lambda client: schedules.delete_schedule(client, name), name)
    console.print(f"[green]✓[/] deleted schedule {name}")
