"""``streamctl history`` and ``quarantine``: what the coordinator recorded, the changelog and the
messages it set aside."""

from __future__ import annotations

import json

import typer

from streamctl.cli.common import (
    AddressOption,
    JsonOption,
    StateDirOption,
    WorkflowIdOption,
    console,
    reachable_coordinator,
)
from streamctl.cli.frontend import ask
from streamctl.exit_codes import EXIT_OK
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID

app = typer.Typer()


@app.command()
def history(
    query: int | None = typer.Option(None, "--query", help="Only this query's changes."),
    entity: str | None = typer.Option(None, help="Only changes of this kind of entity."),
    key: str | None = typer.Option(None, help="Only changes of the entity with this key."),
    limit: int = typer.Option(50, min=1, help="The newest N changes."),
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """What changed in the deployment and why (the changelog), oldest of the newest first."""
    from streamctl.cli.render import rows_table
    from streamctl.protocol import messages as m

    if query is not None:
        entity, key = "query", str(query)
    target = reachable_coordinator(address, state_dir, workflow_id, as_json)
    code, changes = ask(
        target, workflow_id, m.ListChanges(entity=entity, key=key, limit=limit), as_json, console
    )
    if code != EXIT_OK:
        raise typer.Exit(code)
    if as_json:
        print(json.dumps(changes))
        return
    columns = ("version", "entity", "key", "action", "reason")
    console.print(rows_table("changes", changes, columns, whole=("reason",)))


@app.command()
def quarantine(
    limit: int = typer.Option(50, min=1, max=1000, help="The newest N messages."),
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """Messages the coordinator set aside because applying them failed, with the reference
    their error answer and the coordinator's log carry."""
    from streamctl.cli.render import rows_table
    from streamctl.protocol import messages as m

    target = reachable_coordinator(address, state_dir, workflow_id, as_json)
    code, kept = ask(target, workflow_id, m.ListQuarantined(limit=limit), as_json, console)
    if code != EXIT_OK:
        raise typer.Exit(code)
    if as_json:
        print(json.dumps(kept))
        return
    columns = ("reference", "kind", "message_id", "error")
    console.print(rows_table("quarantined messages", kept, columns, whole=("error",)))
