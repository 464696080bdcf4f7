"""Answers rendered for people: tables of catalog rows and one line per statement.

Used by ``streamctl sql``, ``streamctl query`` and the REPL. Scripts use ``--json`` instead and
get the coordinator's answer unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from streamctl.protocol import answers
COLUMNS: dict[str, tuple[str, ...]] = {
    "QUERIES": ("id", "current_state", "desired_state", "worker", "sink", "statement", "error"),
    "LOGICAL SOURCES": ("name", "schema"),
    "PHYSICAL SOURCES": ("id", "logical_source", "type", "worker", "config"),
    "SINKS": ("name", "type", "schema", "config"),
    "WORKERS": ("name", "state", "capacity", "load", "heartbeats", "task_queue"),
}
"""The columns people see per ``SHOW`` subject (``--json`` and ``FORMAT JSON`` show all)."""

STATEMENT_WIDTH = 60


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list) and value and all(_is_column(v) for v in value):  # a schema
        return ", ".join(f"{c['name']} {c['type']}" for c in value)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def _is_column(value: Any) -> bool:
    return isinstance(value, dict) and "name" in value and "type" in value


def rows_table(
    title: str,
    rows: Sequence[Mapping[str, Any]],
    columns: tuple[str, ...],
    whole: tuple[str, ...] = (),
) -> Table:
    """A table of ``rows``; long values are shortened, except in the ``whole`` columns (which
    wrap instead: a changelog's reason is the point of reading it)."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column.replace("_", " "))
    for row in rows:
        table.add_row(
            *(
                cell(row.get(column)) if column in whole else _shorten(cell(row.get(column)))
                for column in columns
            )
        )
    return table


def record_table(title: str, record: Mapping[str, Any]) -> Table:
    """One row shown vertically: a field and its value per line."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in record.items():
        table.add_row(key.replace("_", " "), cell(value))
    return table


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= STATEMENT_WIDTH else text[: STATEMENT_WIDTH - 1] + "…"


def query_line(query: Mapping[str, Any]) -> str:
    """One line for a query answer (:class:`~streamctl.protocol.answers.Query`)."""
    where = f" on {query['worker']}" if query.get("worker") else ""
    line = f"query {query['id']} {query['current_state']}{where}"
    if query.get("error"):
        line += f" ({query['error']})"
    return line


def render_statement(console: Console, answer: answers.StatementOutcome) -> None:
    """One statement's answer: a table for ``SHOW``, a line for everything else."""
    kind: str = answer["statement"]
    result = answer["result"]
    if kind.startswith("SHOW "):
        subject = kind.removeprefix("SHOW ")
        if result.get("format") == "JSON":
            console.print_json(json.dumps(result["rows"], default=str))
        else:
            console.print(rows_table(subject.lower(), result["rows"], COLUMNS[subject]))
        return
    if kind == "SELECT":
        console.print(f"[green]✓[/] {escape(query_line(result))}", highlight=False)
    elif kind == "EXPLAIN":
        console.print(escape(result["plan"]), highlight=False)
        output = ", ".join(f"{c['name']} {c['type']}" for c in result["output"])
        placement = result["placement"] or "no alive agent with free capacity"
        console.print(escape(f"output: {output}\nplacement: {placement}"), highlight=False)
        if result.get("spark_plan"):
            console.print("Spark plan:", style="bold")
            console.print(escape(result["spark_plan"]), highlight=False)
        elif result.get("spark_plan_error"):
            console.print(escape(f"Spark plan: none ({result['spark_plan_error']})"))
    elif kind.startswith("DROP "):
        dropped = "; ".join(
            f"{entity} {', '.join(map(str, keys))}" for entity, keys in result.items() if keys
        )
        console.print(f"[green]✓[/] dropped {escape(dropped)}", highlight=False)
    else:
        name = result.get("name", result.get("id"))
        console.print(f"[green]✓[/] {kind} {escape(str(name))}", highlight=False)
