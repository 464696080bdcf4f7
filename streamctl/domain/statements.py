"""``ExecuteStatement``: NebulaStream statements, parsed and run by the coordinator in a pass.

Protocol
--------
A frontend (``streamctl sql``, the REPL, the systest runner) sends the statement text as it
is; it never parses or binds. The pass parses the whole text (:mod:`streamctl.planner.parser`),
then runs the statements in order, each through the handler of the typed request a client
could have sent instead (``CREATE SINK`` is ``CreateSink``, ``SELECT ... INTO`` is
``CreateQuery``, ``DROP QUERY 7`` is ``DropQuery(7)``), so a statement and its request never
disagree. Later statements see what earlier ones did.

The answer is ``{"statements": [...]}``, one entry per statement in order::

    {"statement": "CREATE SINK", "line": 3, "column": 1, "result": <the request's result>}

``SHOW`` answers ``{"rows": [...], "format": "TEXT" | "JSON", "next": ...}`` as its result (the
frontend renders it). A text that is one ``SHOW`` sent with ``limit`` lists one page of at most
that many rows, and ``next`` is the cursor of the following page (the last listed key; the
same text with ``after=next`` answers it), or None after the last page. Otherwise a ``SHOW``
lists every row (``next`` None): in a script, later pages would list the catalog as the
statements after the ``SHOW`` left it. ``SHOW ... WHERE attr = value`` and ``DROP ... WHERE
attr = value`` filter by one attribute of the listed rows (names compare case-insensitively; a
page is filtered after it is listed, so it may hold fewer rows than the limit, or none, and
still have a ``next``).

Guarantees
----------
* A text that does not parse changes nothing; its error points at line and column.
* The first statement that fails stops the request: the answer is that statement's error
  (code and message, pointing into the whole text) and says how many statements before it
  were applied. Those stay applied, as in a SQL script run with ``ON_ERROR_STOP``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from streamctl.domain import explain, inline, workers
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext, RequestFailed, RequestHandler
from streamctl.domain.listing import check_page
from streamctl.error_codes import INVALID_STATEMENT, ErrorCode
from streamctl.limits import INT32_MAX, INT64_MAX, INT64_MIN
from streamctl.planner import ast
from streamctl.planner.parser import parse_statements, statement_kind
from streamctl.planner.placement import pop_pinned_worker
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol import messages as m

SHOW_LISTINGS: dict[str, m.Request] = {
    "QUERIES": m.ListQueries(),
    "LOGICAL SOURCES": m.ListLogicalSources(),
    "PHYSICAL SOURCES": m.ListPhysicalSources(),
    "SINKS": m.ListSinks(),
    "WORKERS": m.ListWorkers(),
}
"""The listing request behind each ``SHOW`` subject (and behind ``DROP ... WHERE``)."""

FILTER_ATTRIBUTES: dict[str, frozenset[str]] = {
    "QUERIES": frozenset(
        {"id", "statement", "sink", "desired_state", "current_state", "worker", "error", "run",
         "restarts", "retry_at", "statistics_at", "created_version"}
    ),
    "LOGICAL SOURCES": frozenset({"name", "created_version"}),
    "PHYSICAL SOURCES": frozenset({"id", "logical_source", "type", "worker", "created_version"}),
    "SINKS": frozenset({"name", "type", "created_version"}),
    "WORKERS": frozenset(
        {"name", "state", "capacity", "load", "task_queue", "address", "draining",
         "last_heartbeat_at", "heartbeats", "created_version"}
    ),
}  # fmt: skip
"""The scalar attributes of each listing's rows that ``WHERE attr = value`` may name."""

ATTRIBUTE_ALIASES = {"STATE": {"QUERIES": "current_state", "WORKERS": "state"}}
"""Short attribute names users write (``SHOW QUERIES WHERE state = 'RUNNING'``)."""

DROP_SUBJECTS = {
    "QUERY": ("QUERIES", "id"),
    "LOGICAL SOURCE": ("LOGICAL SOURCES", "name"),
    "PHYSICAL SOURCE": ("PHYSICAL SOURCES", "id"),
    "SINK": ("SINKS", "name"),
    "WORKER": ("WORKERS", "name"),
}
"""What a ``DROP`` subject lists to find its matches, and the key each match is dropped by."""

CAPACITY_KEYS = ("CAPACITY", "WORKER.CAPACITY", "SLOTS", "WORKER.SLOTS")
DEFAULT_DECLARED_CAPACITY = 4


def execute_statement(
    ctx: PassContext,
    request: m.ExecuteStatement,
    handlers: Mapping[str, RequestHandler],
) -> Any:
    """Run ``request``'s statements in order, each through the handler ``handlers`` maps its
    typed request's kind to (the pass's table, :data:`streamctl.domain.passes.REQUEST_HANDLERS`,
    which maps ``ExecuteStatement`` here: it hands itself over rather than being imported, so
    the two modules do not import each other)."""
    text = request.text
    if not isinstance(text, str) or not text.strip():
        raise RequestFailed(ErrorCode.INVALID_REQUEST, "the statement text is empty")
    try:
        statements = parse_statements(text)
    except PlannerError as error:
        raise RequestFailed(error.code, error.message) from None
    if not statements:
        raise RequestFailed(ErrorCode.INVALID_REQUEST, "the text holds no statement")
    check_page(request.limit, request.after, request.kind)
    one_show = len(statements) == 1 and isinstance(statements[0], ast.ShowStatement)
    if request.after is not None and not one_show:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST,
            "after (the cursor of a SHOW's next page) goes with a text that is one SHOW statement",
        )
    # Only a lone SHOW is paged: its next pages list the catalog as it is then, which in a
    # script would be after the statements behind it, not where the SHOW stands.
    runner = _Runner(ctx, handlers, request.limit if one_show else None, request.after)
    answers: list[dict[str, Any]] = []
    for number, (statement, statement_text) in enumerate(
        zip(statements, _texts(text, statements), strict=True), start=1
    ):
        try:
            result = runner.run(statement, statement_text)
        except RequestFailed as error:
            if len(statements) == 1:
                raise
            applied = (
                "none before it was applied"
                if number == 1
                else f"statements 1-{number - 1} before it were applied and stay"
            )
            raise RequestFailed(
                error.code,
                f"statement {number} of {len(statements)} failed ({applied}): {error.message}",
            ) from None
        answers.append(
            {
                "statement": _kind(statement),
                "line": statement.line,
                "column": statement.column,
                "result": result,
            }
        )
    return {"statements": answers}


class _Runner:
    def __init__(
        self,
        ctx: PassContext,
        handlers: Mapping[str, RequestHandler],
        limit: int | None = None,
        after: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.handlers = handlers
        """The pass's request handlers by kind: what a statement's typed request runs through."""
        self.limit = limit
        """Rows a SHOW answers at most (one page of its listing); None: every row."""
        self.after = after
        """The cursor of the page a (single) SHOW answers: the key its rows follow."""

    def ask(self, request: m.Request) -> Any:
        return self.handlers[request.kind](self.ctx, request)

    def run(self, statement: ast.Statement, text: str) -> Any:
        if isinstance(statement, ast.QueryStatement):
            return queries_stage.create(self.ctx, text, parsed=statement)
        if isinstance(statement, ast.ExplainStatement):
            return explain.explain(self.ctx, statement.statement)
        if isinstance(statement, ast.CreateLogicalSource):
            return self.ask(m.CreateLogicalSource(statement.name, _columns(statement.columns)))
        if isinstance(statement, ast.CreatePhysicalSource):
            config = ast.options_to_config(statement.options)
            worker = pop_pinned_worker(config)
            logical = self._logical_source_name(statement.logical_source)
            return self.ask(m.CreatePhysicalSource(logical, statement.source_type, config, worker))
        if isinstance(statement, ast.CreateSink):
            return self.ask(
                m.CreateSink(
                    statement.name,
                    _columns(statement.columns),
                    statement.sink_type,
                    ast.options_to_config(statement.options),
                )
            )
        if isinstance(statement, ast.CreateWorker):
            return workers.declare_worker(self.ctx, statement.name, _capacity(statement))
        if isinstance(statement, ast.ShowStatement):
            return self.show(statement)
        return self.drop(statement)

    # --- SHOW and DROP --------------------------------------------------------------------

    def show(self, statement: ast.ShowStatement) -> dict[str, Any]:
        """``{"rows", "format", "next"}``: the listing's rows (one page with a limit), filtered,
        and the cursor of the next page (None: no more)."""
        listing = SHOW_LISTINGS[statement.subject]
        if statement.for_logical_source is not None:
            logical = self._logical_source_name(statement.for_logical_source)
            listing = m.ListPhysicalSources(logical_source=logical)
        following: str | None = None
        if self.limit is None:
            rows: list[dict[str, Any]] = self.ask(listing)
        else:
            after = _cursor(self.after, m.PAGE_KEYS[listing.kind])
            # every SHOW listing is one of the paged List* requests (m.PAGE_KEYS)
            page = self.ask(replace(cast(Any, listing), limit=self.limit, after=after))
            rows = page["items"]
            following = None if page["next"] is None else str(page["next"])
        if statement.filter is not None:
            rows = _matching(rows, statement.subject, statement.filter)
        return {"rows": rows, "format": statement.format, "next": following}

    def drop(self, statement: ast.DropStatement) -> Any:
        subject, key = DROP_SUBJECTS[statement.subject]
        matches = _matching(self.ask(SHOW_LISTINGS[subject]), subject, statement.filter)
        if not matches:
            value = statement.filter.value.python_value()
            raise RequestFailed(
                ErrorCode.NOT_FOUND,
                f"line {statement.line}, column {statement.column}: no "
                f"{statement.subject.lower()} has {statement.filter.attribute.lower()} = "
                f"{value!r}",
            )
        catalog_objects = [row for row in matches if _inline_owner(row) is None]
        if catalog_objects:
            # Objects defined inline in a query go with their query; a filter that also
            # matches catalog objects drops only those (naming only inline ones is refused).
            matches = catalog_objects
        dropped: dict[str, list[Any]] = {}
        for row in matches:
            result = self._drop_one(statement.subject, row[key], statement.cascade)
            for entity, keys in result.items():
                dropped.setdefault(entity, []).extend(keys)
        return {entity: sorted(set(keys)) for entity, keys in dropped.items()}

    def _drop_one(self, subject: str, key: Any, cascade: bool) -> dict[str, list[Any]]:
        if subject == "QUERY":
            return dict(self.ask(m.DropQuery(key)))
        if subject == "LOGICAL SOURCE":
            return dict(self.ask(m.DropLogicalSource(key, cascade)))
        if subject == "PHYSICAL SOURCE":
            return dict(self.ask(m.DropPhysicalSource(key, cascade)))
        if subject == "SINK":
            return dict(self.ask(m.DropSink(key, cascade)))
        return dict(workers.drop_worker(self.ctx, key, cascade))

    def _logical_source_name(self, name: str) -> str:
        """The catalog's spelling of a logical source a statement names in any case."""
        row = self.ctx.view.find_logical_source(name)
        return name if row is None else row.name


def _cursor(after: str | None, key: str) -> str | int | None:
    """A SHOW cursor as its listing's key: an id is a whole number."""
    if after is None or key != "id":
        return after
    if re.fullmatch(r"-?[0-9]{1,19}", after) is None or not INT64_MIN <= int(after) <= INT64_MAX:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST, f"after must be the id a page ended with, got {after!r}"
        )
    return int(after)


def _inline_owner(row: Mapping[str, Any]) -> int | None:
    """The query that defined a listed source or sink inline, if one did."""
    name = row.get("logical_source", row.get("name"))
    return inline.owner_of(name) if isinstance(name, str) else None


def _kind(statement: ast.Statement) -> str:
    if isinstance(statement, ast.ShowStatement | ast.DropStatement):
        return f"{statement_kind(statement)} {statement.subject}"
    return statement_kind(statement)


def _texts(text: str, statements: list[ast.Statement]) -> list[str]:
    """Each statement's own text: from its start to the next one's, without the ``;``."""
    line_starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            line_starts.append(index + 1)
    starts = [line_starts[s.line - 1] + s.column - 1 for s in statements]
    ends = [*starts[1:], len(text)]
    pieces = (text[start:end] for start, end in zip(starts, ends, strict=True))
    return [piece.strip().rstrip(";").rstrip() for piece in pieces]


def _columns(columns: tuple[ast.ColumnDef, ...]) -> tuple[m.ColumnSpec, ...]:
    return tuple(m.ColumnSpec(c.catalog_name, c.type, c.nullable) for c in columns)


def _capacity(statement: ast.CreateWorker) -> int:
    config = ast.options_to_config(statement.options)
    for key, value in config.items():
        if key.upper() in CAPACITY_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
                raise RequestFailed(
                    INVALID_STATEMENT,
                    f"line {statement.line}, column {statement.column}: worker capacity must "
                    f"be a whole number from 0 to {INT32_MAX}, got {value!r}",
                )
            return value
        raise RequestFailed(
            INVALID_STATEMENT,
            f"line {statement.line}, column {statement.column}: unknown worker option "
            f"{key!r}; CREATE WORKER takes CAPACITY",
        )
    return DEFAULT_DECLARED_CAPACITY


def _matching(rows: list[dict[str, Any]], subject: str, where: ast.Filter) -> list[dict[str, Any]]:
    attribute = ATTRIBUTE_ALIASES.get(where.attribute, {}).get(subject, where.attribute.lower())
    if attribute not in FILTER_ATTRIBUTES[subject]:
        known = ", ".join(sorted(FILTER_ATTRIBUTES[subject]))
        raise RequestFailed(
            INVALID_STATEMENT,
            f"line {where.line}, column {where.column}: {subject.lower()} have no attribute "
            f"{where.attribute.lower()!r}; filter by one of {known}",
        )
    wanted = where.value.python_value()
    return [row for row in rows if _same(row.get(attribute), wanted)]


def _same(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, str) and isinstance(wanted, str):
        return actual.casefold() == wanted.casefold()
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return actual is wanted
    if isinstance(actual, int | float) and isinstance(wanted, str):
        return str(actual) == wanted.strip()
    return bool(actual == wanted)
