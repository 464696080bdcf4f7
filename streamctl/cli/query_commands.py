"""``streamctl query start|stop|drop|show ID``: one query by id."""

from __future__ import annotations

from typing import Any

import typer

from streamctl.cli.common import (
    AddressOption,
    JsonOption,
    StateDirOption,
    WorkflowIdOption,
    console,
    reachable_coordinator,
)
from streamctl.cli.frontend import run_query_action
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID, MAX_CONFIG_SECONDS

WAIT_RUNNING: Any = typer.Option(
    None,
    "--wait-running",
    min=0.0,
    max=MAX_CONFIG_SECONDS,  # a day; an infinite wait would never return
    metavar="SECONDS",
    help="Return once the query runs or has ended, waiting at most this long; exit 1 if it "
    "FAILED or did not settle in time.",
)

query_app = typer.Typer(help="Start, stop, drop or show one query by id.", no_args_is_help=True)


QUERY_ID: Any = typer.Argument(..., metavar="ID", help="The query's id.")


@query_app.command("start")
def start(
    query_id: int = QUERY_ID,
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
    wait_running: float | None = WAIT_RUNNING,
) -> None:
    """Start a stopped, finished or failed query again."""
    target = reachable_coordinator(address, state_dir, workflow_id, as_json)
    raise typer.Exit(
        run_query_action(target, workflow_id, "start", query_id, as_json, console, wait_running)
    )


def _query_command(action: str) -> Any:
    def command(
        query_id: int = QUERY_ID,
        as_json: JsonOption = False,
        address: AddressOption = None,
        state_dir: StateDirOption = None,
        workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
    ) -> None:
        target = reachable_coordinator(address, state_dir, workflow_id, as_json)
        raise typer.Exit(run_query_action(target, workflow_id, action, query_id, as_json, console))

    command.__doc__ = {
        "stop": "Stop a query (it keeps its checkpoint and can start again).",
        "drop": "Stop a query if it runs and remove it from the catalog.",
        "show": "Show a query: state, agent, statistics, error.",
    }[action]
    return command


for _action in ("stop", "drop", "show"):
    query_app.command(_action)(_query_command(_action))
