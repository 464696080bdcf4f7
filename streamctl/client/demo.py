"""The demo behind ``streamctl demo``.

Waits for the stack's Spark agent to register, creates sources and sinks through the
coordinator, then prints the catalog.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from streamctl.client.client import CoordinatorClient
from streamctl.client.errors import AlreadyExists, CoordinatorError
from streamctl.workflows import messages as m

DEMO_REQUESTS: list[m.Request] = [
    m.CreateLogicalSource(
        "orders",
        (
            m.ColumnSpec("id", "UINT64", False),
            m.ColumnSpec("amount", "FLOAT64"),
            m.ColumnSpec("ts", "UINT64"),
        ),
    ),
    m.CreateLogicalSource(
        "clicks", (m.ColumnSpec("user", "VARSIZED"), m.ColumnSpec("ts", "UINT64"))
    ),
    m.CreatePhysicalSource("orders", "FILE", {"file_path": "data/orders", "format": "CSV"}),
    m.CreatePhysicalSource(
        "clicks",
        "GENERATOR",
        {
            "generator_schema": "RANDOMSTR 4 8, SEQUENCE UINT64 0 1000000000 1",
            "stop_when": "NONE",
            "rate_config": "emit_rate 100",
        },
    ),
    m.CreateSink(
        "big_orders",
        (m.ColumnSpec("id", "UINT64"), m.ColumnSpec("amount", "FLOAT64")),
        "FILE",
        {"file_path": "out/big_orders.csv", "format": "CSV"},
    ),
    m.CreateSink("console", (m.ColumnSpec("user", "VARSIZED"),), "PRINT"),
]


AGENT_WAIT_S = 120.0
"""Starting the agent's SparkSession takes ~10 s here; a cold JVM on a slow disk longer."""


def wait_for_agent(client: CoordinatorClient, console: Console) -> None:
    deadline = time.monotonic() + AGENT_WAIT_S
    with console.status("waiting for the Spark agent to register"):
        while time.monotonic() < deadline:
            if any(w["state"] == "ALIVE" for w in client.ask_blocking(m.ListWorkers())):
                return
            time.sleep(0.5)
    console.print(f"[yellow]no Spark agent registered within {AGENT_WAIT_S:.0f} s")


def run_demo(address: str, console: Console, expect_agent: bool = True) -> None:
    with CoordinatorClient(address) as client:
        if expect_agent:
            wait_for_agent(client, console)
        for request in DEMO_REQUESTS:
            try:
                client.ask_blocking(request)
                label = getattr(request, "name", getattr(request, "logical_source", ""))
                console.print(f"[green]✓[/] {request.kind} {label}")
            except AlreadyExists as error:
                console.print(f"[yellow]•[/] {error.message}")
        try:
            client.ask_blocking(m.DropLogicalSource("orders"))
        except CoordinatorError as error:
            console.print(f"[yellow]refused as expected[/] {error}")
        render_catalog(client, console)


def render_catalog(client: CoordinatorClient, console: Console) -> None:
    table = Table(title="workers (Spark agents)")
    for column in ("name", "state", "capacity", "load", "task queue"):
        table.add_column(column)
    for row in client.ask_blocking(m.ListWorkers()):
        table.add_row(
            row["name"], row["state"], str(row["capacity"]), str(row["load"]), row["task_queue"]
        )
    console.print(table)
    table = Table(title="logical sources")
    table.add_column("name")
    table.add_column("schema")
    for row in client.ask_blocking(m.ListLogicalSources()):
        table.add_row(row["name"], ", ".join(f"{c['name']} {c['type']}" for c in row["schema"]))
    console.print(table)
    table = Table(title="physical sources")
    for column in ("id", "logical source", "type", "config"):
        table.add_column(column)
    for row in client.ask_blocking(m.ListPhysicalSources()):
        table.add_row(str(row["id"]), row["logical_source"], row["type"], str(row["config"]))
    console.print(table)
    table = Table(title="sinks")
    for column in ("name", "type", "schema"):
        table.add_column(column)
    for row in client.ask_blocking(m.ListSinks()):
        table.add_row(
            row["name"], row["type"], ", ".join(f"{c['name']} {c['type']}" for c in row["schema"])
        )
    console.print(table)
