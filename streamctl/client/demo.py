"""The demo behind ``streamctl demo``.

Creates sources and sinks through the coordinator, then prints the catalog.
"""

from __future__ import annotations

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
    m.CreatePhysicalSource("clicks", "GENERATOR", {"rate": 100}),
    m.CreateSink(
        "big_orders",
        (m.ColumnSpec("id", "UINT64"), m.ColumnSpec("amount", "FLOAT64")),
        "FILE",
        {"file_path": "out/big_orders.csv", "format": "CSV"},
    ),
    m.CreateSink("console", (m.ColumnSpec("user", "VARSIZED"),), "PRINT"),
]


def run_demo(address: str, console: Console) -> None:
    with CoordinatorClient(address) as client:
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
