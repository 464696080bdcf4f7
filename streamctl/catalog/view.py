"""The catalog as one pass sees it.

A pass applies hundreds of messages in one transaction. Issuing SQL per message would cap the
coordinator at a few hundred requests per second, so a :class:`CatalogView` loads the rows a
batch refers to in a few bulk SELECTs, lets the pass change them in memory as plain rows
(:mod:`streamctl.catalog.rows`) and writes what changed at the end, in a handful of set-based
statements. Creating and dropping the same entity in one pass therefore costs no SQL at all:
this is the compaction DESIGN §3 allows, and it never changes an answer because every message
still sees the state left by the messages before it.

What :meth:`CatalogView.write` sends, in this order, so that every foreign key holds after
each statement:

1. new rows, parents before children (PostgreSQL ``COPY``, elsewhere one executemany);
2. changed rows, as full-row UPDATEs by key (a row dropped and re-created in the pass is one
   of these: the name stays taken throughout, so nothing that points at it breaks);
3. deleted rows, children before parents, one ``DELETE ... WHERE key = ANY(keys)`` per table.

Only the pass activity uses a view; it is the catalog's single writer, so rows loaded at the
start of a pass cannot change underneath it.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, Generic, TypeVar

from sqlalchemy import Column, String, bindparam, delete, func, select, text, update
from sqlalchemy.orm import Session

from streamctl.catalog.fit import check_rows_fit
from streamctl.catalog.models import IdSequence, Query, QuerySource, Worker, table_of
from streamctl.catalog.rows import (
    ENTITY_ROWS,
    EntityRow,
    ExplanationRow,
    LogicalSourceRow,
    PhysicalSourceRow,
    QueryRow,
    SinkRow,
    WorkerRow,
)
from streamctl.catalog.store import bulk_insert, key_chunks, one_of
from streamctl.lifecycle.worker_states import AgentState

K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound=EntityRow)


class EntityMap(Generic[K, R]):
    """Rows of one table keyed by primary key: loaded on demand, changed in memory.

    ``_rows`` holds what the pass sees (``None``: no such row); ``_loaded`` holds the values of
    every row as the catalog had it before the pass, which tells new, changed and deleted rows
    apart when the pass writes.
    """

    def __init__(self, session: Session, row_type: type[R]) -> None:
        self._session = session
        self._row_type = row_type
        table = row_type.TABLE
        self._columns: list[Column[Any]] = list(table.columns)
        self._names = [column.name for column in self._columns]
        self.key_column = table.c[row_type.KEY]
        self._key_index = self._names.index(row_type.KEY)
        self._values_of = attrgetter(*self._names)
        self._rows: dict[K, R | None] = {}
        self._loaded: dict[K, tuple[Any, ...]] = {}
        self._all_loaded = False

    # --- reading --------------------------------------------------------------------------

    def absorb_where(self, *conditions: Any) -> None:
        """Load the rows matching ``conditions``, keeping what this pass already changed."""
        key_index = self._key_index
        for values in self._session.execute(select(*self._columns).where(*conditions)):
            key = values[key_index]
            if key not in self._rows:
                self._rows[key] = self._row_type(*values)
                self._loaded[key] = tuple(values)

    def preload(self, keys: Iterable[K]) -> None:
        if self._all_loaded:
            return
        missing = [key for key in set(keys) if key not in self._rows]
        if not missing:  # most lookups of a pass: key_chunks asks the session for its bind
            return
        for chunk in key_chunks(self._session, missing):
            self.absorb_where(one_of(self._session, self.key_column, chunk))
            for key in chunk:
                self._rows.setdefault(key, None)

    def get(self, key: K) -> R | None:
        if key not in self._rows:
            self.preload([key])
        return self._rows.get(key)

    def all(self) -> list[R]:
        if not self._all_loaded:
            self.absorb_where()
            self._all_loaded = True
        return self.all_loaded()

    def all_loaded(self) -> list[R]:
        """Rows this map holds now, without loading the rest of the table."""
        return [row for row in self._rows.values() if row is not None]

    def page(self, after: K | None, count: int) -> list[R]:
        """The first ``count`` rows with a key above ``after`` (all keys when None), in key
        order, as this pass sees them (its own creates and drops included).

        Reads the catalog in key order, ``count`` rows at a time, only as far as needed: a
        window of the table that was read in full is complete in memory, so the rows this
        pass added or removed in it are placed right; a window whose rows this pass dropped
        reads the next one.
        """
        found: list[R] = []
        low = after
        while len(found) < count:
            high = None if self._all_loaded else self._absorb_window(low, count)
            window = sorted(
                (row for key, row in self._rows.items() if row is not None and _above(key, low)),
                key=attrgetter(self._row_type.KEY),
            )
            if high is not None:
                window = [row for row in window if getattr(row, self._row_type.KEY) <= high]
            found.extend(window[: count - len(found)])
            if high is None:
                break
            low = high
        return found

    def _absorb_window(self, after: K | None, count: int) -> K | None:
        """Load the next ``count`` catalog rows above ``after`` in key order; the last key
        read when the catalog may hold more, None when it holds no more."""
        ordered: Any = self.key_column
        if isinstance(self.key_column.type, String) and not _orders_by_code_point(self._session):
            # Python compares strings by code point, as SQLite's BINARY collation does; this
            # database's default collation does not, and both must agree on the order. (The
            # key's index is in the default collation, so such a page scans the table.)
            ordered = self.key_column.collate("C")
        statement = select(*self._columns).order_by(ordered).limit(count)
        if after is not None:
            statement = statement.where(ordered > after)
        key_index = self._key_index
        last: K | None = None
        read = 0
        for values in self._session.execute(statement):
            read += 1
            last = values[key_index]
            if last not in self._rows:
                self._rows[last] = self._row_type(*values)
                self._loaded[last] = tuple(values)
        return last if read == count else None

    # --- changing -------------------------------------------------------------------------

    def add(self, row: R) -> None:
        self._rows[getattr(row, self._row_type.KEY)] = row

    def remove(self, key: K) -> None:
        if self._rows.get(key) is not None:
            self._rows[key] = None

    # --- writing --------------------------------------------------------------------------

    def inserts(self) -> list[dict[str, Any]]:
        loaded = self._loaded
        return [
            dict(zip(self._names, self._values_of(row), strict=True))
            for key, row in self._rows.items()
            if row is not None and key not in loaded
        ]

    def write_updates(self) -> None:
        loaded = self._loaded
        changed: list[dict[str, Any]] = []
        for key, row in self._rows.items():
            if row is None or key not in loaded:
                continue
            values = self._values_of(row)
            if values != loaded[key]:
                changed.append({f"v_{n}": v for n, v in zip(self._names, values, strict=True)})
        if not changed:
            return
        check_rows_fit(self._row_type.TABLE, changed, prefix="v_")
        # Bind names differ from column names: SQLAlchemy reserves those for the SET clause.
        statement = (
            update(self._row_type.TABLE)
            .where(self.key_column == bindparam(f"v_{self._row_type.KEY}"))
            .values({n: bindparam(f"v_{n}") for n in self._names if n != self._row_type.KEY})
        )
        self._session.execute(statement, changed)

    def write_deletes(self) -> None:
        gone = [key for key, row in self._rows.items() if row is None and key in self._loaded]
        for chunk in key_chunks(self._session, gone):
            self._session.execute(
                delete(self._row_type.TABLE).where(one_of(self._session, self.key_column, chunk))
            )

    def mark_written(self) -> None:
        """Take what this map holds as what the catalog holds (after :meth:`write_deletes`)."""
        for key, row in self._rows.items():
            if row is None:
                self._loaded.pop(key, None)
            else:
                self._loaded[key] = tuple(self._values_of(row))


_CODE_POINT_COLLATIONS = frozenset({"C", "POSIX", "C.UTF8", "UCS_BASIC"})
"""Collation names (upper case, without "-") that sort text by code point."""
_code_point_order: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _orders_by_code_point(session: Session) -> bool:
    """Whether the database sorts text by code point (SQLite's BINARY; PostgreSQL's libc C,
    POSIX and C.UTF-8 collations and its builtin provider; not ICU, whatever the libc locale
    beside it says), asked once per engine."""
    bind = session.get_bind()
    engine = getattr(bind, "engine", bind)
    known = _code_point_order.get(engine)
    if known is None:
        if bind.dialect.name != "postgresql":
            known = bind.dialect.name == "sqlite"
        else:
            # The default collation may come from ICU (PostgreSQL 15+: datlocprovider 'i'),
            # whatever datcollate says; 17's builtin provider ('b') orders by code point.
            # to_jsonb reads the column where it exists (NULL before 15: libc).
            collation, provider = session.execute(
                text(
                    "SELECT datcollate, to_jsonb(d) ->> 'datlocprovider' FROM pg_database d"
                    " WHERE datname = current_database()"
                )
            ).one()
            known = provider == "b" or (
                provider in (None, "c")
                and str(collation).upper().replace("-", "") in _CODE_POINT_COLLATIONS
            )
        _code_point_order[engine] = known
    return known


def _above(key: Any, low: Any) -> bool:
    return low is None or key > low


class CatalogView:
    """Everything a pass reads and writes, bound to one session (one transaction)."""

    def __init__(self, session: Session, version: int, now: float) -> None:
        self.session = session
        self.version = version
        self.now = now
        self.workers: EntityMap[str, WorkerRow] = EntityMap(session, WorkerRow)
        self.logical_sources: EntityMap[str, LogicalSourceRow] = EntityMap(
            session, LogicalSourceRow
        )
        self.physical_sources: EntityMap[int, PhysicalSourceRow] = EntityMap(
            session, PhysicalSourceRow
        )
        self.sinks: EntityMap[str, SinkRow] = EntityMap(session, SinkRow)
        self.queries: EntityMap[int, QueryRow] = EntityMap(session, QueryRow)
        self.explanations: EntityMap[int, ExplanationRow] = EntityMap(session, ExplanationRow)
        self._physical_loaded_for: set[str] = set()
        self._query_sources: dict[int, set[str]] = {}
        """Logical sources per query, as far as read: :meth:`load_queries_reading` records only
        the sources it was asked about, so a query's set is whole only once in
        ``_query_sources_whole``."""
        self._query_sources_whole: set[int] = set()
        self._query_sources_loaded_for: set[str] = set()
        self._query_sinks_loaded_for: set[str] = set()
        self._sequences: dict[str, IdSequence] = {}
        self._new_query_sources: list[tuple[int, str]] = []
        self._states_loaded: set[str] = set()

    def _maps(self) -> dict[type[EntityRow], EntityMap[Any, Any]]:
        return {
            WorkerRow: self.workers,
            LogicalSourceRow: self.logical_sources,
            SinkRow: self.sinks,
            PhysicalSourceRow: self.physical_sources,
            QueryRow: self.queries,
            ExplanationRow: self.explanations,
        }

    # --- dependents -----------------------------------------------------------------------

    def load_physical_sources_of(self, logical_names: Iterable[str]) -> None:
        names = [name for name in set(logical_names) if name not in self._physical_loaded_for]
        if not names:
            return
        column = PhysicalSourceRow.TABLE.c.logical_source
        self.physical_sources.absorb_where(one_of(self.session, column, names))
        self._physical_loaded_for.update(names)

    def physical_sources_of(self, logical_name: str) -> list[PhysicalSourceRow]:
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

    def queries_reading(self, logical_name: str) -> list[QueryRow]:
        self.load_queries_reading([logical_name])
        ids = [qid for qid, sources in self._query_sources.items() if logical_name in sources]
        self.queries.preload(ids)
        return [q for q in (self.queries.get(qid) for qid in ids) if q is not None]

    def load_queries_writing(self, sink_names: Iterable[str]) -> None:
        names = [n for n in set(sink_names) if n not in self._query_sinks_loaded_for]
        if not names:
            return
        self.queries.absorb_where(one_of(self.session, QueryRow.TABLE.c.sink, names))
        self._query_sinks_loaded_for.update(names)

    def queries_writing(self, sink_name: str) -> list[QueryRow]:
        self.load_queries_writing([sink_name])
        return [q for q in self.queries.all_loaded() if q.sink == sink_name]

    def add_query_sources(self, query_id: int, logical_names: Iterable[str]) -> None:
        """Record that a query created in this pass reads these logical sources."""
        self._query_sources.setdefault(query_id, set())
        self._query_sources_whole.add(query_id)  # new in this pass: no stored links yet
        for name in logical_names:
            self._query_sources[query_id].add(name)
            self._new_query_sources.append((query_id, name))

    def load_sources_of_queries(self, query_ids: Iterable[int]) -> None:
        """Read the logical sources of many queries at once (for :meth:`sources_of_query`)."""
        missing = sorted({qid for qid in query_ids if qid not in self._query_sources_whole})
        for chunk in key_chunks(self.session, missing):
            for qid in chunk:
                self._query_sources.setdefault(qid, set())
            links = self.session.execute(
                select(QuerySource.query_id, QuerySource.logical_source).where(
                    one_of(self.session, QuerySource.query_id, chunk)
                )
            )
            for query_id, source in links:
                self._query_sources[query_id].add(source)
            self._query_sources_whole.update(chunk)

    def sources_of_query(self, query_id: int) -> list[str]:
        """The logical sources a query reads (loaded on first use)."""
        self.load_sources_of_queries([query_id])
        return sorted(self._query_sources[query_id])

    def queries_in_states(self, states: Iterable[str]) -> list[QueryRow]:
        """Queries whose current state is one of ``states`` (as this pass left them)."""
        wanted = set(states)
        missing = wanted - self._states_loaded
        if missing:
            self.queries.absorb_where(QueryRow.TABLE.c.current_state.in_(sorted(missing)))
            self._states_loaded |= missing
        return [q for q in self.queries.all_loaded() if q.current_state in wanted]

    def queries_on(self, worker: str, states: Iterable[str]) -> list[QueryRow]:
        return [q for q in self.queries_in_states(states) if q.worker == worker]

    # --- case-insensitive lookups (the binder upper-cases unquoted names) -----------------

    def find_logical_source(self, name: str) -> LogicalSourceRow | None:
        return _find(self.logical_sources, name)

    def find_sink(self, name: str) -> SinkRow | None:
        return _find(self.sinks, name)

    # --- ids ------------------------------------------------------------------------------

    def peek_id(self, sequence: str) -> int:
        """The id :meth:`next_id` will hand out next, without taking it."""
        value = self.next_id(sequence)
        self._sequences[sequence].next_value = value
        return value

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
        """Send the pass's changes to the database (the transaction stays open)."""
        maps = self._maps()
        ordered: Sequence[EntityMap[Any, Any]] = [maps[row_type] for row_type in ENTITY_ROWS]
        for row_type, entity_map in zip(ENTITY_ROWS, ordered, strict=True):
            bulk_insert(self.session, row_type.TABLE, entity_map.inserts())
        for entity_map in ordered:
            entity_map.write_updates()
        links = [
            {"query_id": query_id, "logical_source": name}
            for query_id, name in self._new_query_sources
            if self.queries.get(query_id) is not None  # not dropped again in this pass
        ]
        bulk_insert(self.session, table_of(QuerySource), links)
        for entity_map in reversed(ordered):
            entity_map.write_deletes()
        self.session.flush()  # id sequences (ORM rows)

    def mark_written(self) -> None:
        """After :meth:`write`: what the view holds is now the catalog's state, so a later
        :meth:`write` in the same transaction sends only what changed after this one (a pass
        applying its messages one savepoint at a time writes after each message)."""
        for entity_map in self._maps().values():
            entity_map.mark_written()
        self._new_query_sources = []

    # --- liveness -------------------------------------------------------------------------

    def live_workers(self) -> list[WorkerRow]:
        live = (AgentState.ALIVE, AgentState.SUSPECT)
        self.workers.absorb_where(WorkerRow.TABLE.c.state.in_(live))
        return [w for w in self.workers.all_loaded() if w.state in live]

    def next_liveness_deadline(self, suspect_after: float, dead_after: float) -> float | None:
        """The earliest time an ALIVE or SUSPECT worker changes state, or a recovering query's
        backoff ends (after :meth:`write`).

        Only backoffs still running count: a recovering query whose ``retry_at`` has passed
        was tried by this pass's scheduling and waits for an agent with room, which only a
        later message can bring (and every pass schedules the waiting queries again). Its
        past ``retry_at`` as a deadline would run passes back to back while nothing changes.
        """
        candidates: list[float] = []
        retry_at = self.session.scalar(
            select(func.min(Query.retry_at)).where(
                Query.current_state == "RECOVERING", Query.retry_at > self.now
            )
        )
        if retry_at is not None:
            candidates.append(float(retry_at))
        for state, after in ((AgentState.ALIVE, suspect_after), (AgentState.SUSPECT, dead_after)):
            oldest = self.session.scalar(
                select(func.min(Worker.last_heartbeat_at)).where(Worker.state == state)
            )
            if oldest is not None:
                candidates.append(float(oldest) + after)
        return min(candidates) if candidates else None


def _find(rows: EntityMap[str, R], name: str) -> R | None:
    """The row named ``name``, or else the only one whose name equals it ignoring case
    (catalog names are ASCII identifiers, so SQL ``lower`` and Python ``lower`` agree)."""
    exact = rows.get(name)
    if exact is not None:
        return exact
    folded = name.lower()
    rows.absorb_where(func.lower(rows.key_column) == folded)
    matches = [row for row in rows.all_loaded() if str(getattr(row, row.KEY)).lower() == folded]
    return matches[0] if len(matches) == 1 else None
