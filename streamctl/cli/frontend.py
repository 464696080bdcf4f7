"""What ``streamctl sql`` and ``streamctl query ...`` do: send one request, show its answer.

They formulate messages only (``ExecuteStatement`` with the text as typed, ``StartQuery``...);
the coordinator parses, binds and answers. Output is for people by default and the
coordinator's answer as JSON with ``--json``; the exit code is what scripts trust:

* ``0`` every statement / the request succeeded;
* ``1`` the coordinator refused it (the error code and message go to stderr, or into the JSON);
* ``2`` bad usage or a malformed file (nothing was sent);
* ``3`` no coordinator answered at the address.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from streamctl.cli.render import query_line, record_table, render_statement
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import CoordinatorError
from streamctl.client.paging import PAGE_ROWS, complete_show_pages
from streamctl.client.query_wait import QueryWaitTimeout
from streamctl.exit_codes import EXIT_OK, EXIT_REFUSED
from streamctl.protocol import messages as m

EXPLAIN_WAIT_S = 60.0
"""How long ``EXPLAIN`` waits for the agent's Spark plan (its first query builds slowly)."""
EXPLAIN_POLL_S = 0.2

QUERY_ACTIONS = {
    "start": m.StartQuery,
    "stop": m.StopQuery,
    "drop": m.DropQuery,
    "show": m.GetQuery,
}


def ask(
    address: str, workflow_id: str, request: m.Request, as_json: bool, console: Console
) -> tuple[int, Any]:
    """Send ``request``; on refusal print the error (stderr, or JSON on stdout)."""
    with CoordinatorClient(address, workflow_id=workflow_id) as client:
        return _ask(client, request, as_json)


def _ask(client: CoordinatorClient, request: m.Request, as_json: bool) -> tuple[int, Any]:
    try:
        return EXIT_OK, client.ask_blocking(request)
    except CoordinatorError as error:
        print_refusal(error.code, error.message, as_json)
        return EXIT_REFUSED, None


def print_refusal(code: str, message: str, as_json: bool) -> None:
    """A refusal as scripts and people read it: JSON on stdout, or the code and message on
    stderr."""
    if as_json:
        print(json.dumps({"ok": False, "error_code": code, "error": message}))
    else:
        Console(stderr=True).print(f"[red]{code}[/]: {escape(message)}", highlight=False)


def with_spark_plans(
    client: CoordinatorClient, result: dict[str, Any], console: Console | None
) -> dict[str, Any]:
    """Fill in Spark's plan for every ``EXPLAIN`` answer: ask ``GetExplanation`` until the
    agent has answered (``spark_plan``, or ``spark_plan_error`` saying why there is none)."""
    for answer in result["statements"]:
        explained = answer["result"]
        if answer["statement"] != "EXPLAIN":
            continue
        if explained.get("explanation") is None:
            explained["spark_plan"] = None
            explained["spark_plan_error"] = "no alive agent to build the query"
            continue
        waiting = (
            console.status("asking the agent for Spark's plan")
            if console is not None
            else contextlib.nullcontext()
        )
        deadline = time.monotonic() + EXPLAIN_WAIT_S
        with waiting:
            got = client.ask_blocking(m.GetExplanation(explained["explanation"]))
            while not got["ready"] and time.monotonic() < deadline:
                time.sleep(EXPLAIN_POLL_S)
                got = client.ask_blocking(m.GetExplanation(explained["explanation"]))
        explained["spark_plan"] = got["spark_plan"]
        explained["spark_plan_error"] = got["error"] or (
            None
            if got["ready"]
            else f"agent {got['agent']} did not answer within {EXPLAIN_WAIT_S:.0f} s"
        )
    return result


def run_sql(
    address: str,
    workflow_id: str,
    text: str,
    as_json: bool,
    console: Console,
    wait_running: float | None = None,
) -> int:
    """``streamctl sql``; with ``wait_running`` (seconds) every query a ``SELECT ... INTO``
    created is waited for until it runs or ends (:func:`settle_queries`)."""
    with CoordinatorClient(address, workflow_id=workflow_id) as client:
        request = m.ExecuteStatement(text, limit=PAGE_ROWS)
        code, result = _ask(client, request, as_json)
        if code != EXIT_OK:
            return code
        code, result = _every_show_row(client, request, result, as_json)
        if code != EXIT_OK:
            return code
        with_spark_plans(client, result, None if as_json else console)
        if wait_running is not None:
            queries = [a["result"] for a in result["statements"] if a["statement"] == "SELECT"]
            code = settle_queries(client, queries, wait_running)
    if as_json:
        print(json.dumps({"ok": code == EXIT_OK, **result}, default=str))
    else:
        for answer in result["statements"]:
            render_statement(console, answer)
    return code


def settle_queries(client: CoordinatorClient, queries: list[dict[str, Any]], timeout: float) -> int:
    """``--wait-running``: wait (together at most ``timeout`` seconds) until each of these
    query answers runs or has ended, and update them in place with the state reached.
    ``EXIT_REFUSED`` when one FAILED or did not settle in time (its ``error`` says which),
    else ``EXIT_OK``."""
    deadline = time.monotonic() + timeout
    code = EXIT_OK
    for query in queries:
        try:
            query.update(
                client.wait_for_query_blocking(
                    query["id"], timeout=max(0.0, deadline - time.monotonic())
                )
            )
        except QueryWaitTimeout as late:
            query["current_state"] = late.last_state or query["current_state"]
            query["error"] = f"not RUNNING within {timeout:g} s"
            code = EXIT_REFUSED
            continue
        except CoordinatorError as refused:  # e.g. TOO_LARGE: a GetQuery answer over the limit
            query["error"] = f"cannot wait for it: {refused}"
            code = EXIT_REFUSED
            continue
        if query["current_state"] == "FAILED":
            code = EXIT_REFUSED
    return code


def _every_show_row(
    client: CoordinatorClient, request: m.ExecuteStatement, result: dict[str, Any], as_json: bool
) -> tuple[int, dict[str, Any]]:
    """The answer with the following pages of a lone ``SHOW`` (asked for one by one)."""
    try:
        return EXIT_OK, complete_show_pages(client.ask_blocking, request, result)
    except CoordinatorError as error:
        print_refusal(error.code, f"listing the next page: {error.message}", as_json)
        return EXIT_REFUSED, result


def run_query_action(
    address: str,
    workflow_id: str,
    action: str,
    query_id: int,
    as_json: bool,
    console: Console,
    wait_running: float | None = None,
) -> int:
    """``streamctl query ACTION ID``; ``wait_running`` (seconds, for ``start``) waits until
    the query runs or has ended (:func:`settle_queries`)."""
    request = QUERY_ACTIONS[action](query_id)
    with CoordinatorClient(address, workflow_id=workflow_id) as client:
        code, result = _ask(client, request, as_json)
        if code != EXIT_OK:
            return code
        if wait_running is not None:
            code = settle_queries(client, [result], wait_running)
    if as_json:
        print(json.dumps(result, default=str))
    elif action == "drop":
        console.print(f"[green]✓[/] dropped query {query_id}")
    elif action == "show":
        console.print(record_table(f"query {query_id}", result))
    else:
        mark = "[green]✓[/]" if code == EXIT_OK else "[red]✗[/]"
        console.print(f"{mark} {escape(query_line(result))}", highlight=False)
    return code


def read_sql_file(path: str) -> str:
    """The statements of ``sql -f``; ``-`` reads standard input."""
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()
