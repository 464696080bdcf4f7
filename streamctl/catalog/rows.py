"""Catalog entities as a pass handles them: plain rows, one dataclass per entity table.

The ORM models in :mod:`streamctl.catalog.models` define the schema and its migrations; a pass
does not use them for entities. Hydrating and tracking ORM objects would be a third of a pass
that touches a thousand rows, so :class:`~streamctl.catalog.view.CatalogView` reads these rows with
plain SELECTs and writes what changed with set-based statements.

Each row class has exactly the columns of its table, in table order (a unit test holds them
together), so a result row builds a row object positionally and a row object's fields are the
values an INSERT writes. Handlers change a row by assigning its attributes; JSON values
(schemas, configs) are replaced, never mutated in place, because the view detects updates by
comparing a row's values with those it loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import Table

from streamctl.catalog import models
from streamctl.catalog.models import table_of


@dataclass(slots=True)
class WorkerRow:
    TABLE: ClassVar[Table] = table_of(models.Worker)
    KEY: ClassVar[str] = "name"

    name: str
    state: str
    capacity: int
    load: int
    task_queue: str
    address: str
    draining: bool
    registered_at: float
    last_heartbeat_at: float
    heartbeats: int
    created_version: int
    updated_version: int


@dataclass(slots=True)
class LogicalSourceRow:
    TABLE: ClassVar[Table] = table_of(models.LogicalSource)
    KEY: ClassVar[str] = "name"

    name: str
    schema: list[Any]
    created_version: int
    updated_version: int


@dataclass(slots=True)
class PhysicalSourceRow:
    TABLE: ClassVar[Table] = table_of(models.PhysicalSource)
    KEY: ClassVar[str] = "id"

    id: int
    logical_source: str
    type: str
    config: dict[str, Any]
    worker: str | None
    created_version: int
    updated_version: int


@dataclass(slots=True)
class SinkRow:
    TABLE: ClassVar[Table] = table_of(models.Sink)
    KEY: ClassVar[str] = "name"

    name: str
    schema: list[Any]
    type: str
    config: dict[str, Any]
    created_version: int
    updated_version: int


@dataclass(slots=True)
class QueryRow:
    TABLE: ClassVar[Table] = table_of(models.Query)
    KEY: ClassVar[str] = "id"

    id: int
    statement: str
    sink: str
    desired_state: str
    current_state: str
    worker: str | None
    error: str | None
    plan: str
    run: int
    restarts: int
    retry_at: float | None
    started_at: float | None
    statistics: dict[str, Any] | None
    statistics_at: float | None
    created_version: int
    updated_version: int


@dataclass(slots=True)
class ExplanationRow:
    TABLE: ClassVar[Table] = table_of(models.Explanation)
    KEY: ClassVar[str] = "id"

    id: int
    agent: str
    spark_plan: str | None
    error: str | None
    created_version: int
    updated_version: int


EntityRow = WorkerRow | LogicalSourceRow | PhysicalSourceRow | SinkRow | QueryRow | ExplanationRow

ENTITY_ROWS: tuple[type[EntityRow], ...] = (
    WorkerRow,
    LogicalSourceRow,
    SinkRow,
    PhysicalSourceRow,
    QueryRow,
    ExplanationRow,
)
"""Entity row classes, parents before children: the order in which new rows are inserted
(and the reverse of the order in which rows are deleted)."""
