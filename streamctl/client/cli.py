"""``streamctl``: the one command (kubectl / temporal CLI conventions).

Human tables by default, ``--json`` for scripts. Exit codes: 0 success, 1 a request failed or
a benchmark missed nothing but reported, 2 bad usage, 3 the stack is not reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from streamctl import config
from streamctl.client.frontend import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ask,
    print_refusal,
    read_sql_file,
    run_query_action,
    run_sql,
)
from streamctl.workflows.coordinator import (
    COORDINATOR_TASK_QUEUE,
    COORDINATOR_WORKFLOW_ID,
    CoordinatorConfig,
)
from streamctl.workflows.wire import connect

if TYPE_CHECKING:
    from streamctl.worker.metrics import MetricsAddress

app = typer.Typer(
    help="Coordinator for continuous stream queries on Temporal and Spark.", no_args_is_help=True
)
bench_app = typer.Typer(help="Benchmarks that print their figures.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
query_app = typer.Typer(help="Start, stop, drop or show one query by id.", no_args_is_help=True)
app.add_typer(query_app, name="query")
schedule_app = typer.Typer(
    help="Temporal Schedules that drive the coordinator.", no_args_is_help=True
)
app.add_typer(schedule_app, name="schedule")
console = Console()


def _state_dir(state_dir: Path | None) -> Path:
    return (state_dir or config.state_dir()).resolve()


def _address(address: str | None, state_dir: Path | None = None) -> str:
    if address:
        return address
    if "STREAMCTL_TEMPORAL_ADDRESS" not in os.environ:
        from streamctl.worker.supervisor import read_stack

        info = read_stack(_state_dir(state_dir))
        if info is not None:
            return info.address
    return config.temporal_address()


DRIVER_MEMORY_HELP = "Heap of the agent's Spark driver JVM (spark.driver.memory), e.g. 2g"


def _memory_size(value: str | None) -> str | None:
    from streamctl.worker.spark_session import check_memory_size

    try:
        return None if value is None else check_memory_size(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


@app.command()
def up(
    detach: bool = typer.Option(
        False, "--detach", "-d", help="Return once the coordinator answers."
    ),
    state_dir: Path | None = typer.Option(None, help="Where the stack keeps its files."),
    catalog: str | None = typer.Option(
        None,
        help="Catalog URL (default: $STREAMCTL_CATALOG_URL, else SQLite in the state dir); "
        "one with a password is better set in $STREAMCTL_CATALOG_URL, which ps does not show.",
    ),
    port: int = typer.Option(7233, help="Temporal frontend port."),
    ui_port: int = typer.Option(8233, help="Temporal Web UI port."),
    batch_size: int = typer.Option(config.batch_size(), help="Messages per pass."),
    timeout: float = typer.Option(config.batch_timeout(), help="Seconds to gather a batch."),
    coordinators: int = typer.Option(1, help="Coordinator worker processes."),
    agents: int = typer.Option(1, min=0, help="Local Spark agents (local_1 ... local_N)."),
    file_root: list[Path] = typer.Option(
        [],
        "--file-root",
        help="A directory file sources and sinks (inline or catalog) may use, besides "
        "<state dir>/files (repeatable).",
    ),
    driver_memory: str | None = typer.Option(
        None, callback=_memory_size, help=DRIVER_MEMORY_HELP + " (every agent)."
    ),
) -> None:
    """Start the embedded stack: Temporal dev server, coordinator worker and workflow, agents."""
    from streamctl.catalog.urls import redact_url
    from streamctl.worker.supervisor import (
        Supervisor,
        catalog_environment,
        read_stack,
        run_foreground,
    )

    directory = _state_dir(state_dir)
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
            sys.executable, "-m", "streamctl.client.cli", "up",
            "--state-dir", str(directory),
            "--port", str(port), "--ui-port", str(ui_port),
            "--batch-size", str(batch_size), "--timeout", str(timeout),
            "--coordinators", str(coordinators), "--agents", str(agents),
            *(argument for root in file_roots for argument in ("--file-root", str(root))),
            *(["--driver-memory", driver_memory] if driver_memory is not None else []),
        ]  # fmt: skip
        log = open(directory / "supervisor.log", "ab")  # noqa: SIM115
        process = subprocess.Popen(  # the catalog URL may hold a password: not in argv
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **catalog_environment(catalog_url)},
        )
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        with console.status("starting Temporal, the coordinator and the agents"):
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    log_file = directory / "supervisor.log"
                    console.print(f"[red]the stack failed to start; see {log_file}")
                    raise typer.Exit(1)
                if read_stack(directory) is not None and _status(address) is not None:
                    ui = f"http://127.0.0.1:{ui_port}"
                    console.print(
                        f"stack up: Temporal {address}, UI {ui}, catalog {redact_url(catalog_url)}"
                    )
                    return
                time.sleep(0.3)
        console.print("[red]the coordinator did not answer within 120 s")
        raise typer.Exit(1)
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
def down(state_dir: Path | None = typer.Option(None)) -> None:
    """Stop the embedded stack started by ``up``."""
    from streamctl.worker.supervisor import stop_stack

    if stop_stack(_state_dir(state_dir)):
        console.print("stack stopped")
    else:
        console.print("no stack running")


def _status(address: str, workflow_id: str = COORDINATOR_WORKFLOW_ID) -> dict[str, Any] | None:
    async def query() -> dict[str, Any] | None:
        try:
            client = await asyncio.wait_for(connect(address), 5)
            handle = client.get_workflow_handle(workflow_id)
            status = await asyncio.wait_for(handle.query("status"), 10)
            return dict(status) if isinstance(status, dict) else None
        except Exception:
            return None

    return asyncio.run(query())


@app.command()
def status(
    as_json: bool = typer.Option(False, "--json"),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """Show the coordinator's snapshot version, pending messages and passes."""
    target = _address(address, state_dir)
    result = _status(target, workflow_id)
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


def _start_default_stack(directory: Path, file_roots: tuple[Path, ...] = ()) -> None:
    """``up --detach`` with the defaults, for commands that bring their own stack; its
    messages go to stderr, so that a command's ``--json`` output stays alone on stdout."""
    with contextlib.redirect_stdout(sys.stderr):
        up(
            detach=True,
            state_dir=directory,
            catalog=None,
            port=7233,
            ui_port=8233,
            batch_size=config.batch_size(),
            timeout=config.batch_timeout(),
            coordinators=1,
            agents=1,
            file_root=list(file_roots),
        )


def _reachable(address: str, workflow_id: str, as_json: bool) -> None:
    """Exit with :data:`EXIT_UNREACHABLE` unless the coordinator answers at ``address``."""
    if _status(address, workflow_id) is None:
        if as_json:
            print(json.dumps({"ok": False, "error_code": "UNREACHABLE", "address": address}))
        else:
            Console(stderr=True).print(
                f"[red]no coordinator answers at {address}[/] (start one with: streamctl up -d)"
            )
        raise typer.Exit(EXIT_UNREACHABLE)


@app.command()
def sql(
    text: str | None = typer.Argument(None, help="Statements, separated by ';'."),
    file: str | None = typer.Option(None, "--file", "-f", help="Read statements from a file."),
    as_json: bool = typer.Option(False, "--json", help="The coordinator's answer as JSON."),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
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
    target = _address(address, state_dir)
    _reachable(target, workflow_id, as_json)
    raise typer.Exit(run_sql(target, workflow_id, statements, as_json, console))


@app.command()
def systest(
    paths: list[Path] = typer.Argument(..., help="NebulaStream .test files or folders of them."),
    jobs: int = typer.Option(2, "--jobs", "-j", min=1, help="Queries of a file run at once."),
    groups: list[str] = typer.Option([], "--groups", help="Only files in these groups."),
    as_json: bool = typer.Option(False, "--json", help="Every query's outcome as JSON."),
    address: str | None = typer.Option(None, help="Temporal address (default: the stack)."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """Run NebulaStream system tests through the coordinator on Spark; exit 1 if any failed."""
    from streamctl.client.systest_cli import run_systest_command

    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        Console(stderr=True).print(f"[red]no such file or folder: {', '.join(missing)}")
        raise typer.Exit(EXIT_USAGE)
    directory = _state_dir(state_dir)
    target = _address(address, directory)
    started_here = False
    if address is None and _status(target, workflow_id) is None:
        from streamctl.client.systest import suite_testdata

        _start_default_stack(directory, suite_testdata(paths))
        started_here = True
        target = _address(None, directory)
    _reachable(target, workflow_id, as_json)
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
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """An interactive session: statements end with ';', history, Tab completion, tables."""
    from streamctl.client.client import CoordinatorClient
    from streamctl.client.repl import run_repl

    directory = _state_dir(state_dir)
    target = _address(address, directory)
    _reachable(target, workflow_id, False)
    if not sys.stdin.isatty():  # piped input: one script, as `sql -f -`
        raise typer.Exit(run_sql(target, workflow_id, sys.stdin.read(), False, console))
    with CoordinatorClient(target, workflow_id=workflow_id) as client:
        code = run_repl(client, console, directory / "repl_history")
    raise typer.Exit(code)


@app.command()
def apply(
    verb: str = typer.Argument("register", help="register, start, stop or unregister."),
    file: Path = typer.Option(..., "--file", "-f", help="The query.yaml file."),
    as_json: bool = typer.Option(False, "--json"),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """Register, start, stop or unregister the query of a YAML file with its sources and sinks."""
    from streamctl.client.apply import Applier, ApplyFileError, Verb, read_query_file
    from streamctl.client.client import CoordinatorClient
    from streamctl.client.errors import CoordinatorError

    errors = Console(stderr=True)
    if verb not in ("register", "start", "stop", "unregister"):
        errors.print(f"unknown verb {verb!r}; use register, start, stop or unregister")
        raise typer.Exit(EXIT_USAGE)
    try:
        spec = read_query_file(file)
    except ApplyFileError as error:
        print_refusal("INVALID_FILE", str(error), as_json)
        raise typer.Exit(EXIT_USAGE) from None
    target = _address(address, state_dir)
    _reachable(target, workflow_id, as_json)
    log = (lambda _line: None) if as_json else (lambda line: console.print(f"[green]✓[/] {line}"))
    with CoordinatorClient(target, workflow_id=workflow_id) as client:
        try:
            result = Applier(client, spec, log).run(cast(Verb, verb))
        except CoordinatorError as error:
            print_refusal(error.code, error.message, as_json)
            raise typer.Exit(EXIT_REFUSED) from None
    if as_json:
        print(json.dumps({"ok": True, **result}, default=str))


def _query_command(action: str) -> Any:
    def command(
        query_id: int = typer.Argument(..., metavar="ID", help="The query's id."),
        as_json: bool = typer.Option(False, "--json"),
        address: str | None = typer.Option(None, help="Temporal address."),
        state_dir: Path | None = typer.Option(None),
        workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
    ) -> None:

        target = _address(address, state_dir)
        _reachable(target, workflow_id, as_json)
        raise typer.Exit(run_query_action(target, workflow_id, action, query_id, as_json, console))

    command.__doc__ = {
        "start": "Start a stopped, finished or failed query again.",
        "stop": "Stop a query (it keeps its checkpoint and can start again).",
        "drop": "Stop a query if it runs and remove it from the catalog.",
        "show": "Show a query: state, agent, statistics, error.",
    }[action]
    return command


for _action in ("start", "stop", "drop", "show"):
    query_app.command(_action)(_query_command(_action))


@app.command()
def history(
    query: int | None = typer.Option(None, "--query", help="Only this query's changes."),
    entity: str | None = typer.Option(None, help="Only changes of this kind of entity."),
    key: str | None = typer.Option(None, help="Only changes of the entity with this key."),
    limit: int = typer.Option(50, min=1, help="The newest N changes."),
    as_json: bool = typer.Option(False, "--json"),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """What changed in the deployment and why (the changelog), oldest of the newest first."""
    from streamctl.client.render import rows_table
    from streamctl.workflows import messages as m

    if query is not None:
        entity, key = "query", str(query)
    target = _address(address, state_dir)
    _reachable(target, workflow_id, as_json)
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
    as_json: bool = typer.Option(False, "--json"),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID),
) -> None:
    """Messages the coordinator set aside because applying them failed, with the reference
    their error answer and the coordinator's log carry."""
    from streamctl.client.render import rows_table
    from streamctl.workflows import messages as m

    target = _address(address, state_dir)
    _reachable(target, workflow_id, as_json)
    code, kept = ask(target, workflow_id, m.ListQuarantined(limit=limit), as_json, console)
    if code != EXIT_OK:
        raise typer.Exit(code)
    if as_json:
        print(json.dumps(kept))
        return
    columns = ("reference", "kind", "message_id", "error")
    console.print(rows_table("quarantined messages", kept, columns, whole=("error",)))


def _schedule_call(
    address: str | None, state_dir: Path | None, call: Any, name: str = "reoptimize"
) -> Any:
    """Run ``call(client)`` against Temporal; a schedule Temporal does not know is a refusal."""
    from temporalio.service import RPCError, RPCStatusCode

    target = _address(address, state_dir)

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
    as_json: bool = typer.Option(False, "--json"),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID, help="The coordinator to ask."),
    task_queue: str = typer.Option(COORDINATOR_TASK_QUEUE, help="The coordinator's task queue."),
    name: str = typer.Option("reoptimize", help="The schedule's id."),
) -> None:
    """Reoptimize every interval: restart retryable failed queries, move queries off lagging or
    SUSPECT agents, rebalance (decisions in ``streamctl history``)."""
    from streamctl.client import schedules

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
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
) -> None:
    """Run a schedule's action once now."""
    from streamctl.client import schedules

    _schedule_call(
        address, state_dir, lambda client: schedules.trigger_schedule(client, name), name
    )
    console.print(f"[green]✓[/] triggered schedule {name}")


@schedule_app.command("delete")
def schedule_delete(
    name: str = typer.Argument(..., help="The schedule, e.g. reoptimize."),
    address: str | None = typer.Option(None, help="Temporal address."),
    state_dir: Path | None = typer.Option(None),
) -> None:
    """Delete a schedule (runs already started finish)."""
    from streamctl.client import schedules

    _schedule_call(address, state_dir, lambda client: schedules.delete_schedule(client, name), name)
    console.print(f"[green]✓[/] deleted schedule {name}")


METRICS_PORT_HELP = (
    "Serve Prometheus metrics on this port (0: none); default $STREAMCTL_METRICS_PORT, "
    "bound to $STREAMCTL_METRICS_HOST (default 127.0.0.1)."
)


def _metrics_address(port: int | None) -> MetricsAddress:
    from streamctl.worker.metrics import MetricsAddress

    return MetricsAddress(config.metrics_host(), config.metrics_port() if port is None else port)


@app.command()
def coordinator(
    address: str | None = typer.Option(None, help="Temporal address."),
    catalog: str | None = typer.Option(None, help="Catalog URL."),
    start_workflow: bool = typer.Option(
        True, help="Start the coordinator workflow if it is not running."
    ),
    task_queue: str = typer.Option(COORDINATOR_TASK_QUEUE, help="Task queue to poll."),
    metrics_port: int | None = typer.Option(None, min=0, help=METRICS_PORT_HELP),
) -> None:
    """Run a coordinator worker (several may run; Temporal balances them)."""
    import logging

    from streamctl.worker.coordinator import run_coordinator_worker

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            run_coordinator_worker(
                _address(address),
                config.namespace(),
                catalog or config.catalog_url(),
                task_queue=task_queue,
                start_workflow=start_workflow,
                config=CoordinatorConfig(
                    batch_size=config.batch_size(), timeout=config.batch_timeout()
                ),
                metrics_address=_metrics_address(metrics_port),
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
    address: str | None = typer.Option(None, help="Temporal address."),
    workflow_id: str = typer.Option(COORDINATOR_WORKFLOW_ID, help="Coordinator workflow id."),
    metrics_port: int | None = typer.Option(None, min=0, help=METRICS_PORT_HELP),
    driver_memory: str | None = typer.Option(
        None, callback=_memory_size, help=DRIVER_MEMORY_HELP + " (default Spark's, 1g)."
    ),
) -> None:
    """Run a Spark agent: one SparkSession, a Temporal worker on task queue agent.<name>."""
    import logging

    from streamctl.catalog.schema import InvalidName, check_identifier
    from streamctl.worker.agent import run_agent
    from streamctl.worker.spark_session import JavaMissing, require_java
    from streamctl.worker.spark_watchdog import SparkBroken

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
    try:
        asyncio.run(
            run_agent(
                _address(address),
                config.namespace(),
                name,
                master=master,
                capacity=capacity,
                checkpoint_dir=checkpoint_dir or state / "checkpoints",
                work_dir=state / "agents",
                workflow_id=workflow_id,
                metrics_address=_metrics_address(metrics_port),
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
    address: str | None = typer.Option(None, help="Temporal address."),
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

    from streamctl.client.gateway import GatewayRefused, GatewaySettings, serve

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = GatewaySettings(
        address=_address(address),
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


@app.command()
def demo(
    state_dir: Path | None = typer.Option(None),
    keep: bool = typer.Option(False, help="Leave the stack running afterwards."),
) -> None:
    """Start the stack if needed, create sources and sinks, and print the catalog."""
    from streamctl.client.demo import run_demo
    from streamctl.worker.supervisor import pid_alive, read_stack, stop_stack

    directory = _state_dir(state_dir)
    info = read_stack(directory)
    started_here = info is None or not pid_alive(info.supervisor_pid)
    if started_here:
        _start_default_stack(directory)
    try:
        run_demo(_address(None, directory), console, expect_agent=started_here)
    finally:
        if started_here and not keep:
            stop_stack(directory)


@bench_app.command("requests")
def bench_requests(
    as_json: bool = typer.Option(False, "--json"),
    catalog: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL server for the benchmark."
    ),
    requests: int = typer.Option(20_000, help="Requests in the batched run."),
    naive_requests: int = typer.Option(2_000, help="Requests in the one-update-per-request run."),
    sweep: bool = typer.Option(True, help="Sweep batch_size/timeout."),
    batch_size: int = typer.Option(CoordinatorConfig.batch_size, help="Coordinator batch_size."),
    timeout: float = typer.Option(CoordinatorConfig.timeout, help="Coordinator timeout (s)."),
    concurrency: int = typer.Option(4000, help="Concurrent callers in the batched runs."),
) -> None:
    """Batched requests/s against one update per request, same run, PostgreSQL catalog."""
    from streamctl.bench.requests import run_requests_bench

    base = CoordinatorConfig(batch_size=batch_size, timeout=timeout)
    result = run_requests_bench(catalog, requests, naive_requests, sweep, base, concurrency)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("events")
def bench_events(
    as_json: bool = typer.Option(False, "--json"),
    workers: int = typer.Option(1000, help="Simulated workers."),
    seconds: float = typer.Option(10.0, help="How long to send."),
    catalog: str | None = typer.Option(None, help="Catalog URL (default: a fresh SQLite file)."),
) -> None:
    """Heartbeats from many simulated workers: accepted events/s and lost events."""
    from streamctl.bench.events import run_events_bench

    result = run_events_bench(workers, seconds, catalog)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("deploy")
def bench_deploy(
    as_json: bool = typer.Option(False, "--json"),
    rounds: int = typer.Option(10, min=1, help="Starts measured on each side."),
    master: str = typer.Option("local[2]", help="Spark master of both sides."),
) -> None:
    """StartQuery until RUNNING through the coordinator, against writeStream.start() alone."""
    from streamctl.bench.deploy import run_deploy_bench

    result = run_deploy_bench(rounds, master)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("adversarial")
def bench_adversarial(
    as_json: bool = typer.Option(False, "--json"),
    cases: int = typer.Option(1000, "--cases", min=1, help="Hostile messages per catalog."),
    seed: int = typer.Option(0, help="Seed of the case generator (the same seed, the same cases)."),
    catalog: list[str] = typer.Option(
        ["sqlite", "postgresql://postgres@127.0.0.1:5432/postgres"],
        help="Catalogs to run on: 'sqlite' (a temporary file) or a PostgreSQL server URL "
        "(a scratch database on it). Repeat for several.",
    ),
) -> None:
    """Hostile messages through the client, the gateway, raw updates and raw signals; a canary
    request after each. Exit 1 if the coordinator wedged or a workflow task failed."""
    from streamctl.bench.adversarial import run_adversarial_bench

    result = run_adversarial_bench(
        cases, seed, [None if name == "sqlite" else name for name in catalog]
    )
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
    if not result["ok"]:
        raise typer.Exit(1)


@bench_app.command("soak")
def bench_soak(
    as_json: bool = typer.Option(False, "--json"),
    queries: int = typer.Option(20, min=1, help="Concurrent queries across two agents."),
    seconds: float = typer.Option(300.0, help="How long to watch them."),
    interval: float = typer.Option(15.0, help="Seconds between samples."),
    rate: int = typer.Option(20, min=1, help="Generator rows per second."),
) -> None:
    """Many queries on two agents for minutes: running, heartbeats, statistics, memory."""
    from streamctl.bench.soak import run_soak_bench

    result = run_soak_bench(queries, seconds, interval, rate)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("chaos")
def bench_chaos(
    as_json: bool = typer.Option(False, "--json"),
    seconds: float = typer.Option(300.0, min=1, help="How long the load and the kills last."),
    seed: int = typer.Option(0, help="Seed of the kill schedule (the same seed, the same kills)."),
    queries: int = typer.Option(4, min=0, help="File queries on the agents."),
    agents: int = typer.Option(2, min=0, help="Spark agents (local[1], capacity 4)."),
    keep_state: bool = typer.Option(False, help="Keep the run's directory even when ok."),
) -> None:
    """Requests, heartbeats and queries while every process of a private stack (PostgreSQL
    included) is killed -9 at random times; then lost, doubled, declared dead, sink rows.
    Exit 1 if any of them is not 0 or a query is not RUNNING at the end."""
    from streamctl.bench.chaos import ChaosSettings, run_chaos_bench

    result = run_chaos_bench(
        ChaosSettings(
            seconds=seconds, seed=seed, queries=queries, agents=agents, keep_state=keep_state
        )
    )
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
    if not result["ok"]:
        raise typer.Exit(1)


def main() -> None:
    """Run the command, then leave without interpreter finalization: the Temporal client's
    Tokio threads (its Rust core) can outlive the command and race the interpreter's teardown,
    which aborts the process (``Fatal Python error: PyGILState_Release``) after the command
    has done its work. This is the SDK's open issue temporalio/sdk-python#300; skipping
    finalization (after flushing) is the known way around it."""
    import logging

    code: int = 0
    try:
        app()
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None else 1)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
