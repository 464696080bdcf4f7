"""The demo behind ``streamctl demo``: one windowed aggregation query, from statements to rows.

Protocol
--------
Against a running stack (the CLI starts one first if there is none, and stops it afterwards),
:func:`run_demo`

1. waits until a Spark agent is ALIVE (:data:`AGENT_WAIT_S` for a stack just started, whose
   agent is still starting its JVM; :data:`RUNNING_STACK_AGENT_WAIT_S` for one that was
   running);
2. sends NebulaStream statements (:func:`demo_statements`), one ``ExecuteStatement`` each: a
   logical source, a Generator physical source (deterministic: row ``k`` is ``id = k``,
   ``ts = 100 k`` milliseconds, ten rows a second, so event time keeps pace with the clock), a
   CSV File sink in the stack's files directory, and ``SELECT ... GROUP BY sensor WINDOW
   TUMBLING(ts, SIZE 1 SEC) INTO`` the sink, which counts and sums the ids per sensor
   (``id % 3``) and second;
3. waits for the query to be RUNNING and prints its state;
4. prints the sink's rows as the agent commits them (read from the sink's files with
   :mod:`streamctl.sink_files`), until :data:`WINDOWS_SHOWN` windows (``WINDOWS_SHOWN *
   SENSORS`` rows) were shown; a window appears once event time passes its end;
5. prints where to watch the query: the coordinator workflow in Temporal's Web UI and
   ``streamctl query show <id>``;
6. stops and drops the query, drops the sink and the source, and deletes the sink's files.

Guarantees
----------
* Every wait is bounded; when one runs out the demo says what did not happen (no ALIVE agent,
  the query not RUNNING and its error, no rows in the sink's directory), cleans up and exits
  with status 1. Ctrl-C cleans up too.
* Names carry a random suffix (``demo_readings_<hex>``, ``demo_totals_<hex>``, files in
  ``<files dir>/demo-<hex>``), so demos run twice, or at once, against one stack do not collide;
  what the demo created is all it drops.
* It reads the sink's files where the coordinator says they are, so it needs the stack's
  filesystem: the embedded stack of ``streamctl up``.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from streamctl import config
from streamctl.cli.render import query_line, render_statement
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import ClientError, CoordinatorError, NotFound
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import query_name
from streamctl.sink_files import AnsweredSink, SinkFileError, read_file_sink_rows
from streamctl.worker.supervisor import read_stack

AGENT_WAIT_S = 120.0
"""Starting the agent's SparkSession takes ~10 s here; a cold JVM on a slow disk longer."""
RUNNING_STACK_AGENT_WAIT_S = 30.0
"""A running stack's agent is ALIVE already, or back within a few heartbeats."""
RUNNING_WAIT_S = 120.0
"""From ``SELECT`` to RUNNING: the agent's first query builds slowly (Python workers start)."""
ROWS_WAIT_S = 90.0
"""From RUNNING to the last window shown: about ``WINDOWS_SHOWN + 1`` seconds of event time,
plus the first micro-batches of a fresh query."""
STOP_WAIT_S = 60.0
POLL_S = 0.5

ROWS_PER_SECOND = 10
"""The generator's rate; its timestamps advance ``1000 / ROWS_PER_SECOND`` ms a row."""
SENSORS = 3
"""The query's group key is ``id % SENSORS``."""
WINDOW_MS = 1000
WINDOWS_SHOWN = 3

RESULT_COLUMNS = ("start", "end", "sensor", "readings", "total")
_WIDTH = 10


@dataclass(frozen=True)
class DemoNames:
    """The names of what one demo run creates."""

    source: str
    sink: str
    files: str
    """The sink's ``file_path``, relative to the stack's files directory."""

    @classmethod
    def fresh(cls) -> DemoNames:
        suffix = uuid.uuid4().hex[:8]
        return cls(f"demo_readings_{suffix}", f"demo_totals_{suffix}", f"demo-{suffix}")


def demo_statements(names: DemoNames) -> list[str]:
    """The statements the demo sends, in order; the last one starts the query."""
    step = 1000 // ROWS_PER_SECOND
    columns = ", ".join(f"{column} UINT64 NOT NULL" for column in RESULT_COLUMNS)
    return [
        f"CREATE LOGICAL SOURCE {names.source}(id UINT64 NOT NULL, ts UINT64 NOT NULL)",
        f"CREATE PHYSICAL SOURCE FOR {names.source} TYPE Generator SET(\n"
        f"  'SEQUENCE UINT64 0 1000000000 1, SEQUENCE UINT64 0 {1000000000 * step} {step}'"
        " AS `SOURCE`.GENERATOR_SCHEMA,\n"
        "  'NONE' AS `SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES,\n"
        f"  'emit_rate {ROWS_PER_SECOND}' AS `SOURCE`.GENERATOR_RATE_CONFIG)",
        f"CREATE SINK {names.sink}({columns})\n"
        f"  TYPE File SET('{names.files}' AS `SINK`.FILE_PATH, 'CSV' AS `SINK`.OUTPUT_FORMAT)",
        "SELECT start, end, sensor, COUNT(reading) AS readings, SUM(reading) AS total\n"
        f"  FROM (SELECT id % {SENSORS} AS sensor, id AS reading, ts FROM {names.source})\n"
        f"  GROUP BY sensor WINDOW TUMBLING(ts, SIZE {WINDOW_MS // 1000} SEC)\n"
        f"  INTO {names.sink}",
    ]


class DemoFailed(Exception):
    """A step of the demo did not happen; the message says which."""


@dataclass
class _Created:
    """What this run created (names as the coordinator answered them: upper case), for the
    clean-up."""

    source: str | None = None
    sink: AnsweredSink | None = None
    query_id: int | None = None


def run_demo(
    address: str,
    console: Console,
    expect_agent: bool = True,
    state_dir: Path | None = None,
) -> None:
    """Run the demo against the stack at ``address`` (see the module docstring).

    ``expect_agent``: the stack was just started, so its agent may still be starting
    (:data:`AGENT_WAIT_S`; else :data:`RUNNING_STACK_AGENT_WAIT_S`). ``state_dir``: the
    stack's state directory (default: :func:`streamctl.config.state_dir`), for its payload
    key and Web UI address. Raises ``SystemExit(1)`` after cleaning up when a step fails.
    """
    state = (state_dir or config.state_dir()).resolve()
    info = read_stack(state)
    ui_url = info.ui_url if info is not None and info.address == address else None
    names = DemoNames.fresh()
    created = _Created()
    failure: str | None = None
    client = CoordinatorClient(address, payload_keys=config.payload_keys(state))
    try:
        client.connect_blocking()
    except Exception as error:
        client.close(0)
        reason = escape(f"no coordinator answers at {address}: {error}")
        console.print(f"[red]demo failed:[/] {reason}", highlight=False)
        raise SystemExit(1) from None
    try:
        wait_s = AGENT_WAIT_S if expect_agent else RUNNING_STACK_AGENT_WAIT_S
        agent = wait_for_agent(client, console, wait_s)
        console.print(f"[green]✓[/] Spark agent {escape(agent)} is ALIVE", highlight=False)
        query_id = create_query(client, console, names, created)
        query = wait_running(client, console, query_id)
        console.print(f"[green]✓[/] {escape(query_line(query))}", highlight=False)
        assert created.sink is not None
        show_rows(client, console, created.sink, query_id)
        _print_where_to_watch(console, query_id, ui_url, client.workflow_id)
    except DemoFailed as error:
        failure = str(error)
    except (ClientError, CoordinatorError) as error:
        failure = f"{type(error).__name__}: {error}"
    finally:
        try:
            clean_up(client, console, created)
        finally:
            client.close()
    if failure is not None:
        console.print(f"[red]demo failed:[/] {escape(failure)}", highlight=False)
        raise SystemExit(1)


def wait_for_agent(client: CoordinatorClient, console: Console, wait_s: float) -> str:
    """The name of an ALIVE agent; :class:`DemoFailed` after ``wait_s`` seconds without."""
    deadline = time.monotonic() + wait_s
    workers: list[dict[str, Any]] = []
    with console.status("waiting for a Spark agent to be ALIVE"):
        while True:
            workers = client.ask_blocking(m.ListWorkers())
            alive = [w["name"] for w in workers if w["state"] == "ALIVE"]
            if alive:
                return str(alive[0])
            if time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
    seen = ", ".join(f"{w['name']} {w['state']}" for w in workers) or "none registered"
    raise DemoFailed(
        f"no Spark agent became ALIVE within {wait_s:.0f} s (agents: {seen}); start one with "
        "'streamctl up --agents 1' or 'streamctl agent', see the agent's log in the state dir"
    )


def create_query(
    client: CoordinatorClient, console: Console, names: DemoNames, created: _Created
) -> int:
    """Send the demo's statements, showing each with its answer; the query's id."""
    query_id: int | None = None
    for statement in demo_statements(names):
        shown = escape(statement.replace("\n", "\n  "))
        console.print(f"[dim]> {shown}[/]", highlight=False, soft_wrap=True)
        answer = client.ask_blocking(m.ExecuteStatement(statement))["statements"][0]
        render_statement(console, answer)
        kind = answer["statement"]
        result = answer["result"]
        if kind == "CREATE LOGICAL SOURCE":
            created.source = str(result["name"])
        elif kind == "CREATE SINK":
            created.sink = AnsweredSink.of(result)
        elif kind == "SELECT":
            query_id = created.query_id = int(result["id"])
    assert query_id is not None
    return query_id


def wait_running(client: CoordinatorClient, console: Console, query_id: int) -> dict[str, Any]:
    """The query once RUNNING; :class:`DemoFailed` if it fails or is not within
    :data:`RUNNING_WAIT_S`."""
    deadline = time.monotonic() + RUNNING_WAIT_S
    with console.status(f"waiting for query {query_id} to be RUNNING"):
        while True:
            query: dict[str, Any] = client.ask_blocking(m.GetQuery(query_id))
            if query["current_state"] == "RUNNING":
                return query
            if query["current_state"] == "FAILED" or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
    raise DemoFailed(
        f"query {query_id} is not RUNNING after {RUNNING_WAIT_S:.0f} s: {query_line(query)}"
    )


def show_rows(
    client: CoordinatorClient, console: Console, sink: AnsweredSink, query_id: int
) -> list[tuple[Any, ...]]:
    """Print the rows ``query_id`` committed to ``sink`` as they come, ordered by window and
    sensor, until :data:`WINDOWS_SHOWN` windows were shown; the rows shown."""
    root = sink.config["file_path"]
    wanted = WINDOWS_SHOWN * SENSORS
    console.print(f"results of query {query_id} in {escape(root)}, as the sink commits them")
    console.print(
        f"(a {WINDOW_MS // 1000}-second window appears once event time has passed its end; times "
        "in ms):",
        highlight=False,
    )
    console.print("".join(f"{c:>{_WIDTH}}" for c in RESULT_COLUMNS), highlight=False)
    shown: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + ROWS_WAIT_S
    while len(shown) < wanted:
        try:
            rows = read_file_sink_rows(sink, query_name(query_id))
        except (OSError, SinkFileError):  # a file replaced while read: read again
            rows = []
        new = sorted(set(rows) - set(shown))[: wanted - len(shown)]
        for row in new:
            console.print("".join(f"{value:>{_WIDTH}}" for value in row), highlight=False)
        shown.extend(new)
        if len(shown) >= wanted:
            break
        if time.monotonic() > deadline:
            query = client.ask_blocking(m.GetQuery(query_id))
            raise DemoFailed(
                f"{len(shown)} of {wanted} result rows appeared in {root} within "
                f"{ROWS_WAIT_S:.0f} s ({query_line(query)})"
            )
        time.sleep(POLL_S)
    return shown


def _print_where_to_watch(
    console: Console, query_id: int, ui_url: str | None, workflow_id: str
) -> None:
    workflow = f"/namespaces/{config.namespace()}/workflows/{workflow_id}"
    where = f"{ui_url}{workflow}" if ui_url else f"Temporal's Web UI, workflow {workflow_id}"
    console.print("watch queries while they run:", highlight=False)
    console.print(f"  Web UI  {escape(where)} (the coordinator)", soft_wrap=True)
    console.print(
        f"  CLI     streamctl query show {query_id}  ·  streamctl sql 'SHOW QUERIES'",
        soft_wrap=True,
        highlight=False,
    )
    console.print(f"the demo stops query {query_id} now and drops what it created", highlight=False)


def clean_up(client: CoordinatorClient, console: Console, created: _Created) -> None:
    """Stop and drop what this run created and delete the sink's files; a step that fails is
    reported, the rest still runs."""
    steps: list[tuple[str, Callable[[], object]]] = []
    query_id, sink, source = created.query_id, created.sink, created.source
    if query_id is not None:
        steps.append((f"stopped query {query_id}", lambda: _stop(client, query_id)))
        steps.append(
            (f"dropped query {query_id}", lambda: client.ask_blocking(m.DropQuery(query_id)))
        )
    if sink is not None:
        root = Path(sink.config["file_path"])
        steps.append(
            (f"dropped sink {sink.name}", lambda: client.ask_blocking(m.DropSink(sink.name)))
        )
        steps.append((f"deleted {root}", lambda: shutil.rmtree(root, ignore_errors=True)))
    if source is not None:
        steps.append(
            (
                f"dropped source {source}",
                lambda: client.ask_blocking(m.DropLogicalSource(source, cascade=True)),
            )
        )
    done: list[str] = []
    for what, step in steps:
        try:
            step()
        except NotFound:
            pass
        except (ClientError, CoordinatorError, DemoFailed) as error:
            console.print(f"[yellow]could not clean up ({what}): {escape(str(error))}")
            continue
        done.append(what)
    if done:
        console.print(f"[green]✓[/] {escape('; '.join(done))}", highlight=False, soft_wrap=True)


def _stop(client: CoordinatorClient, query_id: int) -> None:
    """Stop the query (unless it ended already) and wait until it has."""
    ended = ("STOPPED", "FAILED", "FINISHED")
    if client.ask_blocking(m.GetQuery(query_id))["current_state"] not in ended:
        client.ask_blocking(m.StopQuery(query_id))
    deadline = time.monotonic() + STOP_WAIT_S
    while client.ask_blocking(m.GetQuery(query_id))["current_state"] not in ended:
        if time.monotonic() > deadline:
            raise DemoFailed(f"query {query_id} did not stop within {STOP_WAIT_S:.0f} s")
        time.sleep(POLL_S)
