"""``streamctl repl``: NebulaStream statements typed by a person, answered by the coordinator.

A statement may span lines; it runs when a line ends with ``;``. ``quit``, ``exit``, ``\\q`` or
Ctrl-D leave; ``help`` lists what can be typed. History is kept in the state dir; Tab completes
keywords and the names of the catalog's sources, sinks and workers (read again after every
statement). Answers are rendered as tables; a refused statement prints its code and message
and the session goes on. With stdin not a terminal, the whole input runs as one script (as
``streamctl sql -f -``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console
from rich.markup import escape

from streamctl.cli.frontend import with_spark_plans
from streamctl.cli.render import render_statement
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import ClientError, CoordinatorError
from streamctl.client.paging import PAGE_ROWS, complete_show_pages, first_page
from streamctl.nes_types import NES_TYPE_NAMES
from streamctl.protocol import messages as m

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "INTO", "GROUP BY", "HAVING", "WINDOW", "TUMBLING", "SLIDING",
    "SIZE", "ADVANCE BY", "UNION", "INNER JOIN", "ON", "AS", "AND", "OR", "NOT", "CREATE",
    "LOGICAL SOURCE", "PHYSICAL SOURCE FOR", "SINK", "WORKER", "TYPE", "SET", "SHOW", "QUERIES",
    "LOGICAL SOURCES", "PHYSICAL SOURCES", "SINKS", "WORKERS", "FORMAT", "JSON", "TEXT", "DROP",
    "QUERY", "CASCADE", "EXPLAIN", "NOT NULL", *NES_TYPE_NAMES, "MS",
    "SEC", "MINUTE", "HOUR", "File", "Generator", "Print", "Void", "Checksum", "Kafka", "TCP",
)  # fmt: skip
COMPLETION_NAMES = 500
"""Names of each kind Tab completes at most (the first in key order)."""
QUIT = {"quit", "exit", "\\q", "quit;", "exit;"}
HELP = """Statements end with ';' and may span lines. Examples:
  CREATE LOGICAL SOURCE s(id UINT64 NOT NULL, v INT64);
  CREATE PHYSICAL SOURCE FOR s TYPE File SET('/data/s/' AS `SOURCE`.FILE_PATH);
  CREATE SINK o(id UINT64 NOT NULL, v INT64) TYPE File SET('/data/o' AS `SINK`.FILE_PATH);
  SELECT id, v FROM s WHERE v > 10 INTO o;
  SHOW QUERIES;   SHOW WORKERS;   EXPLAIN SELECT ...;   DROP QUERY 1;
quit, exit, \\q or Ctrl-D leave; Tab completes keywords and catalog names."""


class CatalogCompleter(Completer):
    """Keywords plus the catalog's names, refreshed by :meth:`refresh`."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def refresh(self, client: CoordinatorClient) -> None:
        names: list[str] = []
        for request, key in (
            (m.ListLogicalSources(), "name"),
            (m.ListSinks(), "name"),
            (m.ListWorkers(), "name"),
        ):
            # the first page only: it runs after every statement, and a catalog of 100,000
            # names completes no better than one of 500
            try:
                page = client.ask_blocking(first_page(request, COMPLETION_NAMES))
            except (ClientError, CoordinatorError):
                continue  # completion goes on with what it has
            names.extend(str(row[key]) for row in page["items"])
        self.names = names

    def get_completions(self, document: Document, complete_event: object) -> Iterable[Completion]:
        words = WordCompleter([*KEYWORDS, *self.names], ignore_case=True, WORD=True)
        yield from words.get_completions(document, complete_event)  # type: ignore[arg-type]


def _statement_done(text: str) -> bool:
    stripped = text.strip()
    return not stripped or stripped.endswith(";") or stripped.lower() in QUIT | {"help"}


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    def _(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if _statement_done(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    return bindings


def run_repl(client: CoordinatorClient, console: Console, history: Path) -> int:
    """The interactive loop; returns the exit code (0, or 1 if the last statement failed)."""
    errors = Console(stderr=True)
    completer = CatalogCompleter()
    completer.refresh(client)
    history.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)),
        completer=completer,
        complete_while_typing=False,  # Tab completes, as in a shell
        multiline=True,
        key_bindings=_key_bindings(),
        prompt_continuation=lambda width, _line, _soft: "...> ".rjust(width),
    )
    console.print("streamctl repl: NebulaStream statements end with ';' (help, quit)")
    code = 0
    while True:
        try:
            text = session.prompt("streamctl> ")
        except KeyboardInterrupt:
            continue  # Ctrl-C drops the statement being typed
        except EOFError:
            return code
        command = text.strip()
        if not command:
            continue
        if command.lower() in QUIT:
            return code
        if command.lower() == "help":
            console.print(escape(HELP))
            continue
        request = m.ExecuteStatement(text, limit=PAGE_ROWS)
        response = client.ask_response_blocking(request)
        if response.ok:
            code = 0
            try:
                result = complete_show_pages(client.ask_blocking, request, response.result)
            except (ClientError, CoordinatorError) as error:
                errors.print(f"[red]listing the next page failed[/]: {escape(str(error))}")
                code, result = 1, response.result
            for answer in with_spark_plans(client, result, console)["statements"]:
                render_statement(console, answer)
            completer.refresh(client)
        else:
            code = 1
            errors.print(
                f"[red]{response.error_code}[/]: {escape(str(response.error_message))}",
                highlight=False,
            )
