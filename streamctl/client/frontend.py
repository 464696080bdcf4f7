"""What ``streamctl sql`` and ``streamctl query ...`` do: send one request, show its answer.

They formulate messages only (``ExecuteStatement`` with the text as typed, ``StartQuery``...);
the coordinator parses, binds and answers. Output is for people by default and the
coordinator's answer as JSON with ``--json``; the exit code is what scripts trust:

* ``0`` every statement / the request succeeded;
* ``1`` the coordinator refused it (the error code and message go to stderr, or into the JSON);
* ``3`` no coordinator answered at the address.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from streamctl.client.client import CoordinatorClient
from streamctl.client.errors import CoordinatorError
from streamctl.client.render import query_line, record_table, render_statement
from streamctl.workflows import messages as m

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3

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
        try:
            return EXIT_OK, client.ask_blocking(request)
        except CoordinatorError as error:
            if as_json:
                print(json.dumps({"ok": False, "error_code": error.code, "error": error.message}))
            else:
                Console(stderr=True).print(
                    f"[red]{error.code}[/]: {escape(error.message)}", highlight=False
                )
            return EXIT_REFUSED, None


def run_sql(address: str, workflow_id: str, text: str, as_json: bool, console: Console) -> int:
    code, result = ask(address, workflow_id, m.ExecuteStatement(text), as_json, console)
    if code != EXIT_OK:
        return code
    if as_json:
        print(json.dumps({"ok": True, **result}, default=str))
    else:
        for answer in result["statements"]:
            render_statement(console, answer)
    return EXIT_OK


def run_query_action(
    address: str, workflow_id: str, action: str, query_id: int, as_json: bool, console: Console
) -> int:
    request = QUERY_ACTIONS[action](query_id)
    code, result = ask(address, workflow_id, request, as_json, console)
    if code != EXIT_OK:
        return code
    if as_json:
        print(json.dumps(result, default=str))
    elif action == "drop":
        console.print(f"[green]✓[/] dropped query {query_id}")
    elif action == "show":
        console.print(record_table(f"query {query_id}", result))
    else:
        console.print(f"[green]✓[/] {query_line(result)}")
    return EXIT_OK


def read_sql_file(path: str) -> str:
    """The statements of ``sql -f``; ``-`` reads standard input."""
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()
