"""``streamctl up``, ``down`` and ``status``: the embedded stack (Temporal dev server, coordinator
worker and workflow, agents) and the coordinator's snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import typer
from rich.table import Table

from streamctl import config
from streamctl.cli.common import (
    DRIVER_MEMORY_HELP,
    AddressOption,
    JsonOption,
    StateDirOption,
    WorkflowIdOption,
    batch_knobs,
    console,
    coordinator_status,
    memory_size,
    resolve_state_dir,
    temporal_address,
)
from streamctl.exit_codes import EXIT_UNREACHABLE
from streamctl.protocol.coordinator_config import (
    COORDINATOR_WORKFLOW_ID,
    MAX_BATCH_TIMEOUT,
    CoordinatorConfig,
)

app = typer.Typer()


@app.command()
def up(
    detach: bool = typer.Option(
        False,
        "--detach",
        "-d",
        help="Return once the coordinator answers and the agents are ALIVE.",
    ),
    state_dir: Path | None = typer.Option(None, help="Where the stack keeps its files."),
    catalog: str | None = typer.Option(
        None,
        help="Catalog URL (default: $STREAMCTL_CATALOG_URL, else SQLite in the state dir); "
        "one with a password is better set in $STREAMCTL_CATALOG_URL, which ps does not show.",
    ),
    port: int = typer.Option(7233, help="Temporal frontend port."),
    ui_port: int = typer.Option(8233, help="Temporal Web UI port."),
    # Read from the environment by the option itself, so that a bad value is this command's
    # usage error, not a failure of every command at import.
    batch_size: int = typer.Option(
        config.DEFAULT_BATCH_SIZE, envvar="STREAMCTL_BATCH_SIZE", min=1, help="Messages per pass."
    ),
    timeout: float = typer.Option(
        config.DEFAULT_BATCH_TIMEOUT,
        envvar="STREAMCTL_BATCH_TIMEOUT",
        min=0.0,
        max=MAX_BATCH_TIMEOUT,
        help="Seconds to gather a batch.",
    ),
    coordinators: int = typer.Option(1, help="Coordinator worker processes."),
    agents: int = typer.Option(1, min=0, help="Local Spark agents (local_1 ... local_N)."),
    file_root: list[Path] = typer.Option(
        [],
        "--file-root",
        help="A directory file sources and sinks (inline or catalog) may use, besides "
        "<state dir>/files (repeatable).",
    ),
    driver_memory: str | None = typer.Option(
        None, callback=memory_size, help=DRIVER_MEMORY_HELP + " (every agent)."
    ),
) -> None:
    """Start the embedded stack: Temporal dev server, coordinator worker and workflow, agents."""
    from streamctl.secret_options import redact_url
    from streamctl.worker.supervisor import (
        Supervisor,
        catalog_environment,
        read_stack,
        run_foreground,
        wait_until_up,
    )

    directory = resolve_state_dir(state_dir)
    existing = read_stack(directory)
    from streamctl.worker.supervisor import pid_alive

    if existing is not None and pid_alive(existing.supervisor_pid):
        console.print(f"stack already running at {existing.address} (UI {existing.ui_url})")
        return
    catalog_url = catalog or config.catalog_url(directory)
    file_roots = tuple(root.resolve() for root in file_root)
    if detach:
        directory.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "streamctl.cli", "up",
            "--state-dir", str(directory),
            "--port", str(port), "--ui-port", str(ui_port),
            "--batch-size", str(batch_size), "--timeout", str(timeout),
            "--coordinators", str(coordinators), "--agents", str(agents),
            *(argument for root in file_roots for argument in ("--file-root", str(root))),
            *(["--driver-memory", driver_memory] if driver_memory is not None else []),
        ]  # fmt: skip
        log = open(directory / "supervisor.log", "ab")  # noqa: SIM115
        launched = time.time()
        process = subprocess.Popen(  # the catalog URL may hold a password: not in argv
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **catalog_environment(catalog_url)},
        )
        address = f"127.0.0.1:{port}"
        with console.status("starting Temporal, the coordinator and the agents"):
            problem = wait_until_up(process, directory, address, agents, since=launched)
        if problem is not None:
            console.print(f"[red]{problem}")
            raise typer.Exit(1)
        ui = f"http://127.0.0.1:{ui_port}"
        console.print(f"stack up: Temporal {address}, UI {ui}, catalog {redact_url(catalog_url)}")
        return
    supervisor = Supervisor(
        directory,
        catalog_url,
        port,
        ui_port,
        CoordinatorConfig(batch_size=batch_size, timeout=timeout),
        coordinators,
        agents,
        file_roots=file_roots,
        agent_driver_memory=driver_memory,
    )
    asyncio.run(
        run_foreground(
            supervisor, lambda: console.print(f"stack up at 127.0.0.1:{port}; Ctrl-C stops it")
        )
    )


@app.command()
def down(state_dir: StateDirOption = None) -> None:
    """Stop the embedded stack started by ``up``."""
    from streamctl.worker.supervisor import stop_stack

    if stop_stack(resolve_state_dir(state_dir)):
        console.print("stack stopped")
    else:
        console.print("no stack running")


@app.command()
def status(
    as_json: JsonOption = False,
    address: AddressOption = None,
    state_dir: StateDirOption = None,
    workflow_id: WorkflowIdOption = COORDINATOR_WORKFLOW_ID,
) -> None:
    """Show the coordinator's snapshot version, pending messages and passes."""
    target = temporal_address(address, state_dir)
    result = coordinator_status(target, workflow_id)
    if result is None:
        if as_json:
            print(json.dumps({"address": target, "running": False}))
        else:
            console.print(f"[red]coordinator not reachable at {target}")
        raise typer.Exit(EXIT_UNREACHABLE)
    result = {"address": target, "running": True, **result}
    if as_json:
        print(json.dumps(result))
        return
    table = Table(title=f"coordinator at {target}")
    table.add_column("field")
    table.add_column("value")
    for key in (
        "version",
        "pending",
        "pending_requests",
        "passes_run",
        "last_pass_ms",
        "runs",
        "draining",
    ):
        table.add_row(key, str(result.get(key)))
    console.print(table)


def start_default_stack(directory: Path, file_roots: tuple[Path, ...] = ()) -> None:
    """``up --detach`` with the defaults, for commands that bring their own stack; its
    messages go to stderr, so that a command's ``--json`` output stays alone on stdout."""
    batch_size, timeout = batch_knobs()
    with contextlib.redirect_stdout(sys.stderr):
        up(
            detach=True,
            state_dir=directory,
            catalog=None,
            port=7233,
            ui_port=8233,
            batch_size=batch_size,
            timeout=timeout,
            coordinators=1,
            agents=1,
            file_root=list(file_roots),
            driver_memory=None,  # called as a function: typer's OptionInfo default is no value
        )
