"""``streamctl sql``, ``systest``, ``repl`` and ``apply``: statements and query files sent to the
coordinator."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import cast

import typer
from rich.console import Console

from streamctl.cli.common import (
    AddressOption,
    JsonOption,
    StateDirOption,
    WorkflowIdOption,
    console,
    coordinator_status,
    reachable_coordinator,
    require_coordinator,
    resolve_state_dir,
    temporal_address,
)
from streamctl.cli.frontend import (
    print_refusal,
    read_sql_file,
    run_sql,
)
from streamctl.cli.query_commands import WAIT_RUNNING
from streamctl.cli.stack_commands import start_default_stack
from streamctl.exit_codes import EXIT_REFUSED, EXIT_USAGE
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID

app = typer.Typer()


@app.command()
def sql(
    text: str | None = typer.Argument(None, help="Statements, separated by ';'."),
    file: str | None = typer.Option(None, "--file", "-f", help="Read statements from a file."),
    as_json: bool = typer.Option(False, "--json", help="The coordinator's answer as JSON."),
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
    wait_running: float | None = WAIT_RUNNING,
) -> None:
    """Run NebulaStream statements (CREATE, SELECT ... INTO, SHOW, DROP, EXPLAIN) in order."""

    if (text is None) == (file is None):
        Console(stderr=True).print("give the statements as an argument or with -f FILE, not both")
        raise typer.Exit(EXIT_USAGE)
    try:
        statements = text if text is not None else read_sql_file(str(file))
    except OSError as error:
        Console(stderr=True).print(f"[red]cannot read {file}: {error.strerror}")
        raise typer.Exit(EXIT_USAGE) from None
    target = reachable_coordinator(address, state_dir, workflow_id, as_json)
    raise typer.Exit(run_sql(target, workflow_id, statements, as_json, console, wait_running))


@app.command()
def systest(
    paths: list[Path] = typer.Argument(..., help="NebulaStream .test files or folders of them."),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="Queries of a file run at once."),
    groups: list[str] = typer.Option([], "--groups", help="Only files in these groups."),
    as_json: bool = typer.Option(False, "--json", help="Every query's outcome as JSON."),
    address: str | None = typer.Option(None, help="Temporal address (default: the stack)."),
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """Run NebulaStream system tests through the coordinator on Spark; exit 1 if any failed."""
    from streamctl.systest.progress import run_systest_command

    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        Console(stderr=True).print(f"[red]no such file or folder: {', '.join(missing)}")
        raise typer.Exit(EXIT_USAGE)
    directory = resolve_state_dir(state_dir)
    target = temporal_address(address, directory)
    started_here = False
    if address is None and coordinator_status(target, workflow_id) is None:
        from streamctl.systest.runner import suite_testdata

        start_default_stack(directory, suite_testdata(paths))
        started_here = True
        target = temporal_address(None, directory)
    require_coordinator(target, workflow_id, as_json)
    try:
        code = run_systest_command(
            target, workflow_id, paths, jobs, set(groups), as_json, directory, console
        )
    finally:
        if started_here:
            from streamctl.worker.supervisor import stop_stack

            stop_stack(directory)
    raise typer.Exit(code)


@app.command()
def repl(
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """An interactive session: statements end with ';', history, Tab completion, tables."""
    from streamctl.cli.repl import run_repl
    from streamctl.client.client import CoordinatorClient

    directory = resolve_state_dir(state_dir)
    target = temporal_address(address, directory)
    require_coordinator(target, workflow_id, False)
    if not sys.stdin.isatty():  # piped input: one script, as `sql -f -`
        raise typer.Exit(run_sql(target, workflow_id, sys.stdin.read(), False, console))
    with CoordinatorClient(target, workflow_id=workflow_id) as client:
        code = run_repl(client, console, directory / "repl_history")
    raise typer.Exit(code)


@app.command()
def apply(
    verb: str = typer.Argument("register", help="register, start, stop or unregister."),
    file: Path = typer.Option(..., "--file", "-f", help="The query.yaml file."),
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """Register, start, stop or unregister the query of a YAML file with its sources and sinks."""
    from streamctl.cli.apply import Applier, ApplyFileError, Verb, read_query_file
    from streamctl.client.client import CoordinatorClient
    from streamctl.client.coordinator_errors import CoordinatorError

    errors = Console(stderr=True)
    if verb not in ("register", "start", "stop", "unregister"):
        errors.print(f"unknown verb {verb!r}; use register, start, stop or unregister")
        raise typer.Exit(EXIT_USAGE)
    try:
        spec = read_query_file(file)
    except ApplyFileError as error:
        print_refusal("INVALID_FILE", str(error), as_json)
        raise typer.Exit(EXIT_USAGE) from None
    target = reachable_coordinator(address, state_dir, workflow_id, as_json)
    log = (lambda _line: None) if as_json else (lambda line: console.print(f"[green]✓[/] {line}"))
    with CoordinatorClient(target, workflow_id=workflow_id) as client:
        try:
            result = Applier(client, spec, log).run(cast(Verb, verb))
        except CoordinatorError as error:
            print_refusal(error.code, error.message, as_json)
            raise typer.Exit(EXIT_REFUSED) from None
    if as_json:
        print(json.dumps({"ok": True, **result}, default=str))
