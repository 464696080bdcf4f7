"""The catalog's relational schema (SQLAlchemy 2 typed models).

The catalog is the coordinator's durable state. It has exactly one writer, the pass activity,
which changes it in one transaction per pass and records the snapshot version it produced.
Every entity row knows the version that created it (``created_version``) and last changed it
(``updated_version``). Foreign keys encode the relations of DESIGN §4: a physical source
belongs to a logical source and may be pinned to a worker; a query reads logical sources
(``query_sources``) and writes into a sink.

The same schema runs on SQLite and PostgreSQL; migrations live in ``migrations/``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from streamctl.limits import MAX_ID_LENGTH, MAX_NAME_LENGTH

NAME_LENGTH = MAX_NAME_LENGTH

naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=naming_convention)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


def table_of(model: type[Base]) -> Table:
    """A model's table, typed as a :class:`Table` (SQLAlchemy types it as any FROM clause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


class Versioned:
    created_version: Mapped[int] = mapped_column(BigInteger)
    updated_version: Mapped[int] = mapped_column(BigInteger)


class Worker(Versioned, Base):
    """A Spark agent. ``state`` follows :mod:`streamctl.lifecycle.worker_states`."""

    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    capacity: Mapped[int] = mapped_column(Integer)
    load: Mapped[int] = mapped_column(Integer, default=0)
    task_queue: Mapped[str] = mapped_column(String(255), default="")
    address: Mapped[str] = mapped_column(String(255), default="")
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    registered_at: Mapped[float] = mapped_column(Float)
    last_heartbeat_at: Mapped[float] = mapped_column(Float)
    heartbeats: Mapped[int] = mapped_column(BigInteger, default=0)


class LogicalSource(Versioned, Base):
    __tablename__ = "logical_sources"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    schema: Mapped[list[Any]] = mapped_column(JSON)


class PhysicalSource(Versioned, Base):
    __tablename__ = "physical_sources"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    logical_source: Mapped[str] = mapped_column(
        ForeignKey("logical_sources.name", ondelete="RESTRICT"), index=True
    )
    type: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    worker: Mapped[str | None] = mapped_column(
        ForeignKey("workers.name", ondelete="RESTRICT"), index=True, nullable=True
    )


class Sink(Versioned, Base):
    __tablename__ = "sinks"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    schema: Mapped[list[Any]] = mapped_column(JSON)
    type: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)


class Query(Versioned, Base):
    """A continuous query: desired state (what users asked) and current state (what runs)."""

    __tablename__ = "queries"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    statement: Mapped[str] = mapped_column(Text)
    sink: Mapped[str] = mapped_column(ForeignKey("sinks.name", ondelete="RESTRICT"), index=True)
    desired_state: Mapped[str] = mapped_column(String(16))
    current_state: Mapped[str] = mapped_column(String(16), index=True)
    worker: Mapped[str | None] = mapped_column(
        ForeignKey("workers.name", ondelete="RESTRICT"), index=True, nullable=True
    )
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    plan: Mapped[str] = mapped_column(Text, server_default="")
    # How many times the coordinator started it: reports name the run they belong to.
    run: Mapped[int] = mapped_column(Integer, server_default="0")
    restarts: Mapped[int] = mapped_column(Integer, server_default="0")
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The latest progress its agent reported (rows/s, batch duration, state rows).
    statistics: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    statistics_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Explanation(Versioned, Base):
    """Spark's plan for an ``EXPLAIN``, asked from the agent the query would run on: the pass
    that answers the ``EXPLAIN`` creates the row, the agent's answer fills it in later."""

    __tablename__ = "explanations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    agent: Mapped[str] = mapped_column(String(NAME_LENGTH))
    spark_plan: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class QuerySource(Base):
    """Which logical sources a query reads."""

    __tablename__ = "query_sources"

    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True
    )
    logical_source: Mapped[str] = mapped_column(
        ForeignKey("logical_sources.name", ondelete="RESTRICT"), primary_key=True, index=True
    )


class SnapshotVersion(Base):
    """One row per committed pass. ``pass_no`` makes a retried pass idempotent."""

    __tablename__ = "snapshot_versions"
    __table_args__ = (UniqueConstraint("workflow_id", "pass_no"),)

    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    pass_no: Mapped[int] = mapped_column(BigInteger)
    workflow_id: Mapped[str] = mapped_column(String(255))
    committed_at: Mapped[float] = mapped_column(Float)
    requests: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(Integer)
    changes: Mapped[int] = mapped_column(Integer)
    # What the pass asked agents to do (streamctl.protocol.agent_contract.AgentAction), for replays.
    actions: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)


class ChangelogEntry(Base):
    """What one pass changed, in the order it applied the changes, and why."""

    __tablename__ = "changelog"
    __table_args__ = (UniqueConstraint("version", "seq"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    # The snapshot version that made the change. No foreign key: its per-row check would be
    # most of a pass's changelog write, and the single writer inserts both rows in one transaction.
    version: Mapped[int] = mapped_column(BigInteger)
    seq: Mapped[int] = mapped_column(Integer)
    message_id: Mapped[str] = mapped_column(String(255))
    entity: Mapped[str] = mapped_column(String(32))
    key: Mapped[str] = mapped_column(String(NAME_LENGTH))
    action: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)


class StoredResponse(Base):
    """The answer to a request, kept so that a retried request id gets the same answer.

    ``(version, seq)`` is the order in which the coordinator applied the request.
    """

    __tablename__ = "responses"
    __table_args__ = (Index("ix_responses_version_seq", "version", "seq"),)

    request_id: Mapped[str] = mapped_column(String(MAX_ID_LENGTH), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    ok: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[Any] = mapped_column(JSON, nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class IdSequence(Base):
    """Catalog-assigned ids (physical sources, queries); allocated by the single writer."""

    __tablename__ = "id_sequences"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    next_value: Mapped[int] = mapped_column(BigInteger)


class QuarantinedMessage(Base):
    """A message the pass could not apply because of a fault of the coordinator or the
    database, not of the message's content as far as the checks could tell: its answer was an
    ``INTERNAL`` error carrying ``reference`` (also in the coordinator's log), and it is kept
    here for inspection (``streamctl quarantine``) instead of being retried forever."""

    __tablename__ = "quarantined_messages"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    message_id: Mapped[str] = mapped_column(String(MAX_ID_LENGTH))
    kind: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(BigInteger)
    reference: Mapped[str] = mapped_column(String(64), index=True)
    error: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
