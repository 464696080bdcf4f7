"""The shapes of the coordinator's answers: what each request's ``result`` holds.

Part of the wire contract beside :mod:`streamctl.protocol.messages` (the requests): the pass
builds these (:mod:`streamctl.domain`), and every frontend reads them through this module: the
HTTP gateway declares them as its response models (and so in its OpenAPI document), the CLI
and the client library type their results with them. One declaration per shape; a field added
here is added everywhere.

They are ``TypedDict`` classes because an answer travels as plain JSON: no conversion on
either side, and a newer coordinator may add fields an older frontend passes through (each
class allows extra keys, so the gateway passes them on). Descriptions are pydantic ``Field``
annotations, which the gateway's OpenAPI document shows. ``typing_extensions.TypedDict``, not
``typing``'s: pydantic reads only that one before Python 3.12.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

_ANSWER = ConfigDict(extra="allow")
"""Fields a newer coordinator adds pass through a frontend that does not know them."""


@with_config(_ANSWER)
class Column(TypedDict):
    name: str
    type: Annotated[str, Field(description="NebulaStream type name, e.g. UINT64, INT32, VARSIZED")]
    nullable: bool


@with_config(_ANSWER)
class Worker(TypedDict):
    """An agent (``RegisterWorker``) or a declared worker (``CREATE WORKER``)."""

    name: str
    state: Annotated[str, Field(description="ALIVE, SUSPECT, DEAD, UNREGISTERED or DECLARED.")]
    capacity: int
    load: int
    task_queue: str
    address: str
    draining: bool
    last_heartbeat_at: float
    heartbeats: int
    created_version: int


@with_config(_ANSWER)
class WorkerDropped(TypedDict):
    """``DROP WORKER``: the worker and the physical sources pinned to it (``CASCADE``)."""

    workers: list[str]
    physical_sources: list[int]


@with_config(_ANSWER)
class LogicalSource(TypedDict):
    name: str
    schema: list[Column]
    created_version: int


@with_config(_ANSWER)
class LogicalSourceDropped(TypedDict):
    logical_sources: list[str]
    physical_sources: list[int]
    queries: list[int]


@with_config(_ANSWER)
class PhysicalSource(TypedDict):
    id: int
    logical_source: str
    type: str
    config: Annotated[dict[str, Any], Field(description="Secret option values show as ***.")]
    worker: str | None
    created_version: int


@with_config(_ANSWER)
class PhysicalSourceDropped(TypedDict):
    physical_sources: list[int]


@with_config(_ANSWER)
class Sink(TypedDict):
    name: str
    schema: list[Column]
    type: str
    config: Annotated[dict[str, Any], Field(description="Secret option values show as ***.")]
    created_version: int


@with_config(_ANSWER)
class SinkDropped(TypedDict):
    sinks: list[str]
    queries: list[int]


@with_config(_ANSWER)
class Query(TypedDict):
    id: int
    statement: Annotated[str, Field(description="As submitted, secret option values as ***.")]
    sink: str
    desired_state: str
    current_state: str
    worker: str | None
    error: str | None
    run: Annotated[int, Field(description="How many times the coordinator started it.")]
    restarts: int
    retry_at: Annotated[
        float | None,
        Field(
            description="RECOVERING: when it may start again; STOPPING: when a stop may be "
            "sent again if its agent still runs it."
        ),
    ]
    statistics: dict[str, Any] | None
    statistics_at: float | None
    created_version: int


@with_config(_ANSWER)
class QueryDetail(Query):
    sources: list[str]
    plan: str


@with_config(_ANSWER)
class QueryDropped(TypedDict):
    queries: list[int]


@with_config(_ANSWER)
class Explanation(TypedDict):
    """``ExplainQuery`` (``EXPLAIN``): the coordinator's plan; Spark's follows by
    ``GetExplanation`` when ``explanation`` is set."""

    plan: str
    output: Annotated[list[Column], Field(description="The query's output schema.")]
    sources: list[str]
    sink: str | None
    placement: Annotated[str | None, Field(description="The agent it would run on, if any.")]
    explanation: Annotated[
        int | None, Field(description="What to ask GetExplanation for (none: no alive agent).")
    ]


@with_config(_ANSWER)
class ExplanationState(TypedDict):
    """``GetExplanation``: Spark's plan of an explained query, once its agent answered."""

    id: int
    agent: str
    ready: bool
    spark_plan: str | None
    error: str | None


@with_config(_ANSWER)
class Change(TypedDict):
    version: Annotated[int, Field(description="The snapshot version that made the change.")]
    seq: int
    entity: str
    key: str
    action: str
    reason: str
    message_id: str


@with_config(_ANSWER)
class QuarantinedMessage(TypedDict):
    reference: Annotated[str, Field(description="Named by the message's error answer and the log.")]
    message_id: str
    kind: str
    version: Annotated[int, Field(description="The snapshot version when it was set aside.")]
    error: str
    body: Annotated[str, Field(description="The message as it was kept (cut to 2,000 characters).")]
    created_at: float


Move = TypedDict("Move", {"from": str, "to": str})
"""Where reoptimization moves a query (declared functionally: ``from`` is a keyword)."""
with_config(_ANSWER)(Move)


@with_config(_ANSWER)
class Decision(TypedDict):
    query: int
    reason: str
    restart: NotRequired[Annotated[str, Field(description="The agent a failed query restarts on.")]]
    move: NotRequired[Annotated[Move, Field(description="``from`` and ``to`` agents.")]]


@with_config(_ANSWER)
class ReoptimizeResult(TypedDict):
    decisions: list[Decision]


@with_config(_ANSWER)
class StatementOutcome(TypedDict):
    statement: Annotated[str, Field(description="What ran, e.g. 'CREATE SINK' or 'SHOW QUERIES'.")]
    line: int
    column: int
    result: Annotated[Any, Field(description="The result of the request the statement stands for.")]


@with_config(_ANSWER)
class StatementResults(TypedDict):
    statements: list[StatementOutcome]


def lone_show(answer: Any) -> dict[str, Any] | None:
    """The ``SHOW`` result of an ``ExecuteStatement`` answer whose text was one ``SHOW``
    statement (the only kind of text that is paged); None for any other answer."""
    statements = answer.get("statements") if isinstance(answer, dict) else None
    if not isinstance(statements, list) or len(statements) != 1:
        return None
    outcome = statements[0]
    if not str(outcome.get("statement", "")).startswith("SHOW "):
        return None
    result: dict[str, Any] = outcome["result"]
    return result


@with_config(_ANSWER)
class Page(TypedDict):
    """One page of a listing asked for with ``limit`` (:mod:`streamctl.protocol.messages`)."""

    items: Annotated[list[Any], Field(description="The listing's items in key order.")]
    next: Annotated[
        str | int | None,
        Field(description="The key of the last item when more may follow (ask with after=next)."),
    ]
