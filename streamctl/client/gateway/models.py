"""The gateway's request and response bodies: what its OpenAPI document describes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    """A request body: unknown fields are a mistake of the caller, refused with their name."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Result(BaseModel):
    """A coordinator result: fields it adds later pass through."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Column(BaseModel):
    name: str
    type: str = Field(description="NebulaStream type name, e.g. UINT64, INT32, FLOAT64, VARSIZED")
    nullable: bool = True


class StatementSpec(_Body):
    text: str = Field(description="NebulaStream statements, separated by ';'.")


class StatementOutcome(_Result):
    statement: str = Field(description="What ran, e.g. 'CREATE SINK' or 'SHOW QUERIES'.")
    line: int
    column: int
    result: Any = Field(description="The result of the request the statement stands for.")


class StatementResults(_Result):
    statements: list[StatementOutcome]


class LogicalSourceSpec(_Body):
    name: str
    columns: list[Column] = Field(alias="schema")


class LogicalSource(_Result):
    name: str
    columns: list[Column] = Field(alias="schema")
    created_version: int


class LogicalSourceDropped(_Result):
    logical_sources: list[str]
    physical_sources: list[int]
    queries: list[int]


class PhysicalSourceSpec(_Body):
    logical_source: str
    type: str = Field(description="Connector type, e.g. File, TCP, Generator.")
    config: dict[str, Any] = Field(default_factory=dict)
    worker: str | None = Field(default=None, description="Pin the source to this worker.")


class PhysicalSource(_Result):
    id: int
    logical_source: str
    type: str
    config: dict[str, Any]
    worker: str | None
    created_version: int


class PhysicalSourceDropped(_Result):
    physical_sources: list[int]


class SinkSpec(_Body):
    name: str
    columns: list[Column] = Field(alias="schema")
    type: str = Field(description="Connector type, e.g. File, Print, Void, Checksum.")
    config: dict[str, Any] = Field(default_factory=dict)


class Sink(_Result):
    name: str
    columns: list[Column] = Field(alias="schema")
    type: str
    config: dict[str, Any]
    created_version: int


class SinkDropped(_Result):
    sinks: list[str]
    queries: list[int]


class QuerySpec(_Body):
    statement: str = Field(description="SELECT ... INTO sink, in the NebulaStream dialect.")
    sink: str | None = Field(default=None, description="Must match the statement's INTO.")


class QueryInfo(_Result):
    id: int
    statement: str
    sink: str
    desired_state: str
    current_state: str
    worker: str | None
    error: str | None
    run: int
    restarts: int
    retry_at: float | None
    statistics: dict[str, Any] | None
    statistics_at: float | None
    created_version: int


class QueryDetail(QueryInfo):
    sources: list[str]
    plan: str


class QueryDropped(_Result):
    queries: list[int]


class Worker(_Result):
    name: str
    state: str
    capacity: int
    load: int
    task_queue: str
    address: str
    draining: bool
    last_heartbeat_at: float
    heartbeats: int
    created_version: int


class Change(_Result):
    version: int = Field(description="The snapshot version that made the change.")
    seq: int
    entity: str
    key: str
    action: str
    reason: str
    message_id: str


class QuarantinedMessage(_Result):
    reference: str = Field(description="Named by the message's error answer and the log.")
    message_id: str
    kind: str
    version: int = Field(description="The snapshot version when it was set aside.")
    error: str
    body: str = Field(description="The message as it was kept (cut to 2,000 characters).")
    created_at: float


class Decision(_Result):
    query: int
    reason: str
    restart: str | None = Field(None, description="The agent a failed query restarts on.")
    move: dict[str, str] | None = Field(None, description="``from`` and ``to`` agents.")


class ReoptimizeResult(_Result):
    decisions: list[Decision]


class Health(BaseModel):
    status: str


class FieldProblem(BaseModel):
    """One field that did not validate: ``pointer`` into the body, or ``parameter`` ``in``
    the path, query or a header."""

    detail: str
    pointer: str | None = None
    parameter: str | None = None
    location: str | None = Field(default=None, alias="in")


class Problem(BaseModel):
    """An RFC 9457 problem; ``code`` is the stable error code."""

    type: str = Field(description="Always about:blank: ``code`` says which problem it is.")
    title: str = Field(description="The HTTP status phrase.")
    status: int
    detail: str = Field(description="What went wrong, readable.")
    code: str = Field(description="The coordinator's error code, or the gateway's own.")
    errors: list[FieldProblem] = Field(
        default_factory=list, description="The fields that did not validate (422 only)."
    )
