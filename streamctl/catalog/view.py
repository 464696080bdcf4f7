"""The catalog as one pass sees it.

A pass applies hundreds of messages in one transaction. Issuing SQL per message would cap the
coordinator at a few hundred requests per second, so a :class:`CatalogView` loads the rows a
batch refers to in a few bulk queries, lets the pass change them in memory (through the ORM
session's identity map, with autoflush off) and writes everything in one flush at commit.
Creating and dropping the same entity in one pass therefore costs no SQL at all: this is the
compaction DESIGN §3 allows, and it never changes an answer because every message still sees
the state left by the messages before it.

Only the pass activity uses a view; it is the catalog's single writer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

from sqlalchemy import func, inspect, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from streamctl.catalog.models import (
    Base,
    IdSequence,
    LogicalSource,
    PhysicalSource,
    Query,
    QuerySource,
    Sink,
    Worker,
)
from streamctl.catalog.store import bulk_insert, one_of
from streamctl.lifecycle.agents import AgentState

K = TypeVar("K", bound=Hashable)

Row = TypeVar("Row", bound=Base)

BULK_INSERT_ORDER: tuple[type[Base], ...] = (
    Worker,
    LogicalSource,
    Sink,
    PhysicalSource,
    Query,
    QuerySource,
)
"""Entity tables whose new rows :meth:`CatalogView.write` bulk-inserts, parents first."""


def column_values(row: Base) -> dict[str, Any]:
    """A new row's column values as an INSERT would write them (scalar defaults applied)."""
    values: dict[str, Any] = {}
    for attribute in inspect(type(row)).column_attrs:
        column = attribute.columns[0]
        value = getattr(row, attribute.key)
        if value is None and column.default is not None and column.default.is_scalar:
            value = column.default.arg
        values[column.name] = value
    return values


class EntityMap(Generic[K, Row]):
    """Rows of one table keyed by primary key: loaded on demand, changed in memory."""

    def __init__(
        self, session: Session, model: type[Row], key_column: InstrumentedAttribute[Any]
    ) -> None:
        self._session = session
        self._model = model
        self._key_column = key_column
        self._key_of: Callable[[Row], K] = lambda row: getattr(row, key_column.key)
        self._rows: dict[K, Row | None] = {}
        self._all_loaded = False

    def preload(self, keys: Iterable[K]) -> None:
        missing = [key for key in set(keys) if key not in self._rows]
        if self._all_loaded or not missing:
            return
        for chunk_start in range(0, len(missing), 500):
            chunk = missing[chunk_start : chunk_start + 500]
            for row in self._session.scalars(
                select(self._model).where(one_of(self._session, self._key_column, chunk))
            ):
                self._rows[self._key_of(row)] = row
            for key in chunk:
                self._rows.setdefault(key, None)

    def absorb(self, rows: Iterable[Row]) -> None:
        """Take rows loaded by another query, keeping what this pass already changed."""
        for row in rows:
            self._rows.setdefault(self._key_of(row), row)

    def get(self, key: K) -> Row | None:
        if key not in self._rows:
            self.preload([key])
        return self._rows.get(key)

    def all(self) -> list[Row]:
        if not self._all_loaded:
            self.absorb(self._session.scalars(select(self._model)))
            self._all_loaded = True
        return [row for row in self._rows.values() if row is not None]

    def all_loaded(self) -> list[Row]:
        """Rows this map holds now, without loading the rest of the table."""
        return [row for row in self._rows.values() if row is not None]

    def add(self, row: Row) -> None:
        self._session.add(row)
        self._rows[self._key_of(row)] = row

    def remove(self, key: K) -> None:
        row = self._rows.get(key)
        if row is None:
            return
        if row in self._session.new:
            self._session.expunge(row)
        else:
            self._session.delete(row)
        self._rows[key] = None


class CatalogView:
    """Everything a pass reads and writes, bound to one session (one transaction)."""

    def __init__(self, session: Session, version: int, now: float) -> None:
        self.session = session
        self.version = version
        self.now = now
        self.workers: EntityMap[str, Worker] = EntityMap(session, Worker, Worker.name)
        self.logical_sources: EntityMap[str, LogicalSource] = EntityMap(
            session, LogicalSource, LogicalSource.name
        )
        self.physical_sources: EntityMap[int, PhysicalSource] = EntityMap(
            session, PhysicalSource, PhysicalSource.id
        )
        self.sinks: EntityMap[str, Sink] = EntityMap(session, Sink, Sink.name)
        self.queries: EntityMap[int, Query] = EntityMap(session, Query, Query.id)
        self._physical_loaded_for: set[str] = set()
        self._query_sources: dict[int, set[str]] = {}
        self._query_sources_loaded_for: set[str] = set()
        self._query_sinks_loaded_for: set[str] = set()
        self._sequences: dict[str, IdSequence] = {}

    # --- dependents -----------------------------------------------------------------------

    def load_physical_sources_of(self, logical_names: Iterable[str]) -> None:
        names = [name for name in set(logical_names) if name not in self._physical_loaded_for]
        if not names:
            return
        self.physical_sources.absorb(
            self.session.scalars(
                select(PhysicalSource).where(
                    one_of(self.session, PhysicalSource.logical_source, names)
                )
            )
        )
        self._physical_loaded_for.update(names)

    def physical_sources_of(self, logical_name: str) -> list[PhysicalSource]:
        self.load_physical_sources_of([logical_name])
        return [
            row for row in self.physical_sources.all_loaded() if row.logical_source == logical_name
        ]

    def load_queries_reading(self, logical_names: Iterable[str]) -> None:
        names = [n for n in set(logical_names) if n not in self._query_sources_loaded_for]
        if not names:
            return
        links = self.session.execute(
            select(QuerySource.query_id, QuerySource.logical_source).where(
                one_of(self.session, QuerySource.logical_source, names)
            )
        )
        for query_id, source in links:
            self._query_sources.setdefault(query_id, set()).add(source)
        self._query_sources_loaded_for.update(names)

    def queries_reading(self, logical_name: str) -> list[Query]:
        self.load_queries_reading([logical_name])
        ids = [qid for qid, sources in self._query_sources.items() if logical_name in sources]
        self.queries.preload(ids)
        return [q for q in (self.queries.get(qid) for qid in ids) if q is not None]

    def load_queries_writing(self, sink_names: Iterable[str]) -> None:
        names = [n for n in set(sink_names) if n not in self._query_sinks_loaded_for]
        if not names:
            return
        self.queries.absorb(
            self.session.scalars(select(Query).where(one_of(self.session, Query.sink, names)))
        )
        self._query_sinks_loaded_for.update(names)

    def queries_writing(self, sink_name: str) -> list[Query]:
        self.load_queries_writing([sink_name])
        return [q for q in self.queries.all_loaded() if q.sink == sink_name]

    # --- ids ------------------------------------------------------------------------------

    def next_id(self, sequence: str) -> int:
        row = self._sequences.get(sequence)
        if row is None:
            row = self.session.get(IdSequence, sequence)
            if row is None:
                row = IdSequence(name=sequence, next_value=1)
                self.session.add(row)
            self._sequences[sequence] = row
        value = row.next_value
        row.next_value = value + 1
        return value

    # --- writing --------------------------------------------------------------------------

    def write(self) -> None:
        """Send the pass's changes to the database (the transaction stays open).

        On PostgreSQL, new entity rows go in by ``COPY`` (:func:`bulk_insert`), parents before
        children, and only updates and deletes take the unit of work: its per-row INSERTs were
        a third of a pass that creates hundreds of entities. COPY runs first, so an updated row
        may point at a row created in this pass. A new row that replaces a row deleted in this
        pass (drop and create of one name) stays with the unit of work, which turns the pair
        into an UPDATE. Elsewhere (SQLite) the unit of work writes everything.
        """
        session = self.session
        if session.get_bind().dialect.name == "postgresql":
            replaced = {(type(row), inspect(row).identity) for row in session.deleted}
            new_rows: dict[type[Base], list[Base]] = {}
            for row in session.new:
                model = type(row)
                if model in BULK_INSERT_ORDER:
                    key = inspect(model).primary_key_from_instance(row)
                    if (model, tuple(key)) not in replaced:
                        new_rows.setdefault(model, []).append(row)
            for model in BULK_INSERT_ORDER:
                rows = new_rows.get(model, [])
                for row in rows:
                    session.expunge(row)
                bulk_insert(session, model, [column_values(row) for row in rows])
        session.flush()

    # --- liveness -------------------------------------------------------------------------

    def live_workers(self) -> list[Worker]:
        self.workers.absorb(
            self.session.scalars(
                select(Worker).where(Worker.state.in_([AgentState.ALIVE, AgentState.SUSPECT]))
            )
        )
        return [
            w
            for w in self.workers.all_loaded()
            if w.state in (AgentState.ALIVE, AgentState.SUSPECT)
        ]

    def next_liveness_deadline(self, suspect_after: float, dead_after: float) -> float | None:
        """The earliest time an ALIVE or SUSPECT worker changes state (after :meth:`write`)."""
        candidates: list[float] = []
        for state, after in ((AgentState.ALIVE, suspect_after), (AgentState.SUSPECT, dead_after)):
            oldest = self.session.scalar(
                select(func.min(Worker.last_heartbeat_at)).where(Worker.state == state)
            )
            if oldest is not None:
                candidates.append(float(oldest) + after)
        return min(candidates) if candidates else None
