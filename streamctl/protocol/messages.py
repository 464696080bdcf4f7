"""Message protocol between frontends, the coordinator workflow and the pass activity.

Who sends what
--------------
* Frontends (the client library and everything built on it) send **requests** and **events**.
  A request asks for something and gets exactly one :class:`Response`; an event says that
  something happened and gets none.
* On the wire every message is an :class:`Envelope`: a client-generated id, a ``kind`` naming
  one of the typed classes below, the message version ``v`` and the body as plain JSON.
  Requests travel in the coordinator's ``submit(ids, requests)`` update (one Temporal update
  carries many requests), events in an :class:`EventBatch` (one Temporal signal carries many
  events).
* The workflow never interprets bodies: it only orders envelopes, compacts events and hands
  batches to the pass activity. Decoding and validating a body into its typed class happens
  in the activity, so a malformed message fails only its own request (with an error code and a
  message naming the problem) and never a workflow task.

Guarantees
----------
* A request id is answered once: the response is stored in the catalog under that id, and a
  retried request (same id, from a client retry, an activity retry or across continue-as-new)
  gets the stored answer and is not applied again. The same id with a different request
  (kind, version or body) is refused with ``ID_REUSED``; the id keeps its first answer.
* An event batch carries ``(sender, seq)``; the workflow drops a batch whose ``seq`` it has
  already seen from that sender, so a retried signal is counted once.
* Message bodies are versioned by ``v``; the coordinator answers ``UNSUPPORTED_VERSION`` for
  versions it does not know.

Listings are paged on request: a ``List*`` request with ``limit`` answers
``{"items": [...], "next": <cursor or null>}``, at most ``limit`` items in key order (name or
id), fewer when their size reaches ``MAX_PAGE_BYTES``; ``next`` is the key of the last item
when more may follow, and the same request with ``after=next`` answers the following page.
The cursor is a key, not a position: objects created or dropped between pages move no other
object across a page boundary. Without ``limit`` a listing answers the whole list, and a list
too large for one answer is refused ``TOO_LARGE``.

This module is imported by workflow code: it holds only plain dataclasses and constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

MESSAGE_VERSION = 1
"""The body version this code writes and understands."""

# --------------------------------------------------------------------------------------------
# Envelopes and responses: what travels through Temporal.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """One message on the wire: id, kind, body version and JSON body."""

    id: str
    kind: str
    body: dict[str, Any] = field(default_factory=dict)
    v: int = MESSAGE_VERSION


@dataclass(frozen=True)
class EventBatch:
    """The argument of the coordinator's ``events`` signal.

    ``sender`` names one client instance and ``seq`` increases by one per batch it sends, so
    the workflow can drop a batch delivered twice.
    """

    sender: str
    seq: int
    events: list[Envelope]


@dataclass(frozen=True)
class Response:
    """The answer to one request. ``error_code`` (one of :mod:`streamctl.error_codes`) is set
    exactly when ``ok`` is false."""

    id: str
    ok: bool
    result: Any = None
    error_code: str | None = None
    error_message: str | None = None
    version: int = 0


# --------------------------------------------------------------------------------------------
# Typed messages. Each class names its kind; ``to_envelope`` builds the wire form.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """Base of every typed message."""

    kind: ClassVar[str] = ""
    stage: ClassVar[int] = 0
    """Pass stage: 1 infrastructure (workers), 2 sources and sinks, 3 queries."""

    def body(self) -> dict[str, Any]:
        return {
            name: _plain(value)
            for name in field_names(type(self))
            if (value := getattr(self, name)) is not None or name not in OMITTED_WHEN_NONE
        }

    def to_envelope(self, message_id: str) -> Envelope:
        return Envelope(id=message_id, kind=self.kind, body=self.body())


OMITTED_WHEN_NONE = frozenset({"limit", "after"})
"""Fields added to existing kinds (paging) that a body leaves out while unset, so that a
coordinator which predates them still takes the requests of a newer client."""


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names in order, computed once per class: ``dataclasses.fields``
    per message would be a fifth of a busy ``try_send`` (the client), and matters once per
    request in a pass's decoding and in the payload converter."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if hasattr(value, "__dataclass_fields__"):
        # A flat dataclass (ColumnSpec): ``asdict`` deep-copies, which would be most of a
        # create request's encoding on a busy client. Unlike ``asdict`` this turns a nested
        # dataclass's tuples into lists and keeps its dicts as they are: a message kind that
        # nests such a dataclass must check that its body (a workflow input) stays the same.
        return {name: _plain(getattr(value, name)) for name in field_names(type(value))}
    return value


@dataclass(frozen=True)
class Request(Message):
    """A message that gets exactly one response."""


@dataclass(frozen=True)
class Event(Message):
    """A fire-and-forget message. Some kinds compact: see :func:`compaction_key`."""


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a schema: name, NebulaStream type name, nullability."""

    name: str
    type: str
    nullable: bool = True


# --- workers (stage 1) -------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterWorker(Event):
    kind: ClassVar[str] = "RegisterWorker"
    stage: ClassVar[int] = 1
    name: str
    capacity: int = 8
    task_queue: str = ""
    address: str = ""


@dataclass(frozen=True)
class UnregisterWorker(Event):
    kind: ClassVar[str] = "UnregisterWorker"
    stage: ClassVar[int] = 1
    name: str


@dataclass(frozen=True)
class Heartbeat(Event):
    """A worker is alive. ``count`` is how many heartbeats this one stands for after merging.

    ``arrived_last`` is set by the workflow when it merges pending heartbeats: when the newest
    of them arrived. The merged event keeps the oldest arrival (so merging never delays its
    batch), and liveness must count from the newest one, or a pause in passes longer than
    ``dead_after`` would declare an agent DEAD whose heartbeats kept arriving. The pass bounds
    it by the event's own arrival and the pass's clock, so a client that sends it gains nothing
    over sending a heartbeat.
    """

    kind: ClassVar[str] = "Heartbeat"
    stage: ClassVar[int] = 1
    name: str
    load: int = 0
    capacity: int | None = None
    count: int = 1
    arrived_last: float | None = None


@dataclass(frozen=True)
class CheckLiveness(Event):
    """Internal: sent by the workflow's liveness timer so heartbeat ages are re-evaluated.

    ``late_by`` is how much of the time between its deadline and the moment the timer was
    seen no workflow task ran: time the coordinator itself was not running (its workers or the
    Temporal server were down), during which it could not hear any heartbeat, so that time does
    not count against the agents. A timer seen late by a busy coordinator, which ran tasks and
    heard heartbeats meanwhile, is late by nearly nothing."""

    kind: ClassVar[str] = "CheckLiveness"
    stage: ClassVar[int] = 1
    late_by: float = 0.0


@dataclass(frozen=True)
class ListWorkers(Request):
    kind: ClassVar[str] = "ListWorkers"
    stage: ClassVar[int] = 1
    limit: int | None = None
    after: str | None = None


@dataclass(frozen=True)
class GetWorker(Request):
    kind: ClassVar[str] = "GetWorker"
    stage: ClassVar[int] = 1
    name: str


@dataclass(frozen=True)
class DrainWorker(Request):
    """Stop placing new queries on a worker; its running queries stay until its agent leaves
    or is declared dead, and then recover on other agents."""

    kind: ClassVar[str] = "DrainWorker"
    stage: ClassVar[int] = 1
    name: str


# --- logical sources, physical sources, sinks (stage 2) ----------------------------------


@dataclass(frozen=True)
class CreateLogicalSource(Request):
    kind: ClassVar[str] = "CreateLogicalSource"
    stage: ClassVar[int] = 2
    name: str
    schema: tuple[ColumnSpec, ...]


@dataclass(frozen=True)
class DropLogicalSource(Request):
    kind: ClassVar[str] = "DropLogicalSource"
    stage: ClassVar[int] = 2
    name: str
    cascade: bool = False


@dataclass(frozen=True)
class GetLogicalSource(Request):
    kind: ClassVar[str] = "GetLogicalSource"
    stage: ClassVar[int] = 2
    name: str


@dataclass(frozen=True)
class ListLogicalSources(Request):
    kind: ClassVar[str] = "ListLogicalSources"
    stage: ClassVar[int] = 2
    limit: int | None = None
    after: str | None = None


@dataclass(frozen=True)
class CreatePhysicalSource(Request):
    kind: ClassVar[str] = "CreatePhysicalSource"
    stage: ClassVar[int] = 2
    logical_source: str
    type: str
    config: dict[str, Any] = field(default_factory=dict)
    worker: str | None = None


@dataclass(frozen=True)
class DropPhysicalSource(Request):
    kind: ClassVar[str] = "DropPhysicalSource"
    stage: ClassVar[int] = 2
    id: int
    cascade: bool = False


@dataclass(frozen=True)
class GetPhysicalSource(Request):
    kind: ClassVar[str] = "GetPhysicalSource"
    stage: ClassVar[int] = 2
    id: int


@dataclass(frozen=True)
class ListPhysicalSources(Request):
    kind: ClassVar[str] = "ListPhysicalSources"
    stage: ClassVar[int] = 2
    logical_source: str | None = None
    limit: int | None = None
    after: int | None = None


@dataclass(frozen=True)
class CreateSink(Request):
    kind: ClassVar[str] = "CreateSink"
    stage: ClassVar[int] = 2
    name: str
    schema: tuple[ColumnSpec, ...]
    type: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DropSink(Request):
    kind: ClassVar[str] = "DropSink"
    stage: ClassVar[int] = 2
    name: str
    cascade: bool = False


@dataclass(frozen=True)
class GetSink(Request):
    kind: ClassVar[str] = "GetSink"
    stage: ClassVar[int] = 2
    name: str


@dataclass(frozen=True)
class ListSinks(Request):
    kind: ClassVar[str] = "ListSinks"
    stage: ClassVar[int] = 2
    limit: int | None = None
    after: str | None = None


# --- queries (stage 3) -----------------------------------------------------------------------


@dataclass(frozen=True)
class CreateQuery(Request):
    kind: ClassVar[str] = "CreateQuery"
    stage: ClassVar[int] = 3
    statement: str
    sink: str | None = None


@dataclass(frozen=True)
class DropQuery(Request):
    kind: ClassVar[str] = "DropQuery"
    stage: ClassVar[int] = 3
    id: int


@dataclass(frozen=True)
class GetQuery(Request):
    kind: ClassVar[str] = "GetQuery"
    stage: ClassVar[int] = 3
    id: int


@dataclass(frozen=True)
class ListQueries(Request):
    kind: ClassVar[str] = "ListQueries"
    stage: ClassVar[int] = 3
    limit: int | None = None
    after: int | None = None


@dataclass(frozen=True)
class StartQuery(Request):
    kind: ClassVar[str] = "StartQuery"
    stage: ClassVar[int] = 3
    id: int


@dataclass(frozen=True)
class StopQuery(Request):
    kind: ClassVar[str] = "StopQuery"
    stage: ClassVar[int] = 3
    id: int


@dataclass(frozen=True)
class ExplainQuery(Request):
    kind: ClassVar[str] = "ExplainQuery"
    stage: ClassVar[int] = 3
    statement: str


@dataclass(frozen=True)
class GetExplanation(Request):
    """Spark's plan for an earlier ``EXPLAIN``, once its agent answered (see
    :mod:`streamctl.domain.explain`)."""

    kind: ClassVar[str] = "GetExplanation"
    stage: ClassVar[int] = 3
    id: int


@dataclass(frozen=True)
class Reoptimize(Request):
    """Restart retryable failed queries, move queries off lagging or SUSPECT agents, rebalance
    (:mod:`streamctl.planner.reoptimization`); answers the decisions with their reasons."""

    kind: ClassVar[str] = "Reoptimize"
    stage: ClassVar[int] = 3


@dataclass(frozen=True)
class ListChanges(Request):
    """The changelog, newest last: what changed, when (snapshot version) and why. ``entity``
    and ``key`` narrow it (``query``/``7``); ``limit`` bounds it (the newest entries)."""

    kind: ClassVar[str] = "ListChanges"
    stage: ClassVar[int] = 3
    entity: str | None = None
    key: str | None = None
    limit: int = 100


@dataclass(frozen=True)
class ListQuarantined(Request):
    """The messages the coordinator set aside because applying them failed (newest ``limit``,
    oldest first), each with the reference its error answer and the log carry."""

    kind: ClassVar[str] = "ListQuarantined"
    stage: ClassVar[int] = 3
    limit: int = 100


@dataclass(frozen=True)
class ExecuteStatement(Request):
    """NebulaStream statements (:mod:`streamctl.domain.statements`). A text that is one
    ``SHOW`` sent with ``limit`` answers one page of its listing and, when more may follow,
    ``next``: the cursor to send as ``after`` with the same text for the following page."""

    kind: ClassVar[str] = "ExecuteStatement"
    stage: ClassVar[int] = 3
    text: str
    limit: int | None = None
    after: str | None = None


@dataclass(frozen=True)
class Statistics(Event):
    kind: ClassVar[str] = "Statistics"
    stage: ClassVar[int] = 3
    query_id: int
    values: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryStatusChanged(Event):
    kind: ClassVar[str] = "QueryStatusChanged"
    stage: ClassVar[int] = 3
    query_id: int
    status: str
    error: str | None = None
    agent: str = ""  # the reporting agent (streamctl.protocol.agent_contract.AgentStatus protocol)
    run: int = 0  # the start the report belongs to (QueryAssignment.run)


@dataclass(frozen=True)
class SparkPlanExplained(Event):
    """An agent's answer to an explain action: Spark's plan, or why it could not build one."""

    kind: ClassVar[str] = "SparkPlanExplained"
    stage: ClassVar[int] = 3
    explanation_id: int
    agent: str
    spark_plan: str | None = None
    error: str | None = None


REQUEST_TYPES: dict[str, type[Request]] = {
    cls.kind: cls
    for cls in (
        ListWorkers,
        GetWorker,
        DrainWorker,
        CreateLogicalSource,
        DropLogicalSource,
        GetLogicalSource,
        ListLogicalSources,
        CreatePhysicalSource,
        DropPhysicalSource,
        GetPhysicalSource,
        ListPhysicalSources,
        CreateSink,
        DropSink,
        GetSink,
        ListSinks,
        CreateQuery,
        DropQuery,
        GetQuery,
        ListQueries,
        StartQuery,
        StopQuery,
        ExplainQuery,
        GetExplanation,
        Reoptimize,
        ListChanges,
        ListQuarantined,
        ExecuteStatement,
    )
}

EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RegisterWorker,
        UnregisterWorker,
        Heartbeat,
        CheckLiveness,
        Statistics,
        QueryStatusChanged,
        SparkPlanExplained,
    )
}

INTERNAL_EVENT_KINDS = frozenset({CheckLiveness.kind})
"""Events only the workflow itself may emit; clients sending them are ignored."""
LISTING_KINDS = frozenset(kind for kind in REQUEST_TYPES if kind.startswith("List"))
PAGE_KEYS: dict[str, str] = {
    ListWorkers.kind: "name",
    ListLogicalSources.kind: "name",
    ListPhysicalSources.kind: "id",
    ListSinks.kind: "name",
    ListQueries.kind: "id",
}
"""The paged listings and the key their items are ordered and paged by."""
READ_ONLY_KINDS = LISTING_KINDS | frozenset(k for k in REQUEST_TYPES if k.startswith("Get"))
"""Requests that change nothing: an answer that did not fit a pass may be asked again."""


COMPACTION_KEY_FIELDS: dict[str, str] = {Heartbeat.kind: "name", Statistics.kind: "query_id"}
"""Event kinds that compact, and the body field naming the entity they are about."""


def compaction_key(envelope: Envelope) -> tuple[str, str] | None:
    """The key under which an event merges with earlier pending ones (None: never merges).

    Works on raw envelopes because the workflow and the client's outbox compact without
    decoding bodies; a body without the key field simply does not compact.
    """
    field_name = COMPACTION_KEY_FIELDS.get(envelope.kind)
    body = envelope.body
    if field_name is None or not isinstance(body, dict):
        return None
    value = body.get(field_name)
    if not isinstance(value, str | int) or isinstance(value, bool):
        return None
    return (envelope.kind, str(value))


def merge_events(
    older: Envelope, newer: Envelope, newer_arrived_at: float | None = None
) -> Envelope | None:
    """One envelope standing for both (same compaction key), or None when they cannot merge.

    Heartbeats add their ``count`` so per-worker totals survive compaction, and carry
    ``newer_arrived_at`` (the workflow's arrival time of ``newer``; the client's outbox has
    none) as ``arrived_last``, since the merged envelope is queued at the older arrival;
    statistics keep the newest values.
    """
    if newer.kind == Heartbeat.kind:
        old_count = older.body.get("count", 1)
        new_count = newer.body.get("count", 1)
        if not (isinstance(old_count, int) and isinstance(new_count, int)):
            return None
        body = {**newer.body, "count": old_count + new_count}
        if newer_arrived_at is not None:
            body["arrived_last"] = newer_arrived_at
        return Envelope(id=newer.id, kind=newer.kind, v=newer.v, body=body)
    return newer


def stage_of(kind: str) -> int:
    """The pass stage of a message kind; unknown kinds run first so they fail early."""
    cls = REQUEST_TYPES.get(kind) or EVENT_TYPES.get(kind)
    return cls.stage if cls is not None else 0
