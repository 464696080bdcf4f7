"""The contract between the coordinator workflow and the pass activity.

The workflow calls ``apply_pass(pass_input, requests)``:

* ``pass_input`` (:class:`PassInput`) holds the pass number, the workflow's clock, the events
  in arrival order and the arrival time of each request batch;
* ``requests`` is one raw JSON payload, the array of the pass's request batches, each the
  array of envelopes exactly as a client's ``submit`` update carried it. The workflow joins the
  update payloads byte for byte (:func:`streamctl.raw_payloads.join_request_batches`) and
  never parses them: request bodies cost the workflow nothing, and a malformed one can only
  fail its own request.

The activity answers a :class:`PassResult` after committing one catalog transaction:
``responses[i]`` is the JSON array of :class:`~streamctl.protocol.messages.Response` objects
for request batch ``i``, in that batch's order, which the workflow returns as the update's
result without parsing it either.

A pass number is applied at most once per workflow id: a retried activity with a pass number
the catalog already holds gets the stored answers back (``replayed``) and changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from streamctl.protocol.agent_contract import AgentAction
from streamctl.protocol.messages import Envelope, Response


@dataclass(frozen=True)
class PendingMessage:
    """An event in the workflow's buffer: the envelope, when it arrived, its estimated size and
    its arrival number (:attr:`PassInput.request_batch_seqs`)."""

    envelope: Envelope
    received_at: float
    size: int = 0
    seq: int = 0


@dataclass(frozen=True)
class PassInput:
    workflow_id: str
    pass_no: int
    now: float
    events: list[PendingMessage]
    request_batch_arrivals: list[float]
    suspect_after: float
    dead_after: float
    max_restarts: int = 5
    restart_delay: float = 1.0
    restart_max_delay: float = 60.0
    watched_queries: list[int] = field(default_factory=list)
    """Queries a ``wait_query`` update waits on: the result reports each one's row."""
    action_room: int | None = None
    """How many more start actions the workflow takes now (``MAX_ACTIONS_UNDER_WAY`` minus
    those under way); ``None``: no bound (passes recorded before it existed)."""
    request_batch_seqs: list[int] = field(default_factory=list)
    """The arrival number of each request batch. The workflow numbers every message it takes
    in (events and request batches alike, :attr:`.state.CoordinatorState.arrivals`), so a pass
    applies the messages of one stage in the order they arrived even where they arrived in one
    workflow task and share an arrival time. Empty in passes recorded before the numbers
    existed: those order by arrival time alone."""
    split_from: list[int] = field(default_factory=list)
    """The passes whose messages this one holds a part of: a pass that failed for good is
    split, and so on down. Its last attempt may have committed all the same (the process died
    after the commit, before the answer reached Temporal): then the pass answers from what that
    pass stored, as a retry of it would, and applies nothing again."""


@dataclass(frozen=True)
class PassTally:
    """What a pass handled, counted once per pass for the worker's metrics
    (:mod:`streamctl.worker.coordinator_metrics`): ``outcomes[kind][outcome]`` is the number of
    requests of
    that kind answered ``"ok"``, with that error code, or ``"asked_again"`` (an answer to ask
    again: :func:`streamctl.domain.pass_requests.tally`); unknown kinds count as ``"invalid"``."""

    requests: int
    events: int
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PassResult:
    version: int
    responses: list[str]
    next_liveness_deadline: float | None
    changes: int
    replayed: bool = False
    actions: list[AgentAction] = field(default_factory=list)
    """What agents should do now (:mod:`streamctl.protocol.agent_contract`); the workflow runs
    them."""
    tally: PassTally | None = None
    agents_by_state: dict[str, int] = field(default_factory=dict)
    queries_by_state: dict[str, int] = field(default_factory=dict)
    """The snapshot's agents by liveness state and queries by current state (a state with none
    is absent), for the coordinator's search attributes and details in the Web UI."""
    watched_queries: list[dict[str, Any]] = field(default_factory=list)
    """The row (``GetQuery``'s fields but the statement, sources and plan) of each of the
    input's ``watched_queries`` that exists, as this pass left it."""
    starts_waiting: bool = False
    """Queries wait to be started that this pass could not start (its bound of starts, or the
    workflow's room): the workflow puts off continue-as-new while a wave of starts lasts."""
    events_not_applied: list[int] = field(default_factory=list)
    """Positions in ``PassInput.events`` of events a replayed pass did not apply: the pass
    that committed under this number carried none. A pass that ran as a local activity has no
    recorded input, so the workflow task that runs it again (its first attempt failed after
    the commit) may give the same number to more messages, events that arrived meanwhile among
    them; the workflow buffers these again for the next pass (requests of that kind are
    answered "ask again", and their clients retry them)."""


@dataclass(frozen=True)
class QuarantineInput:
    """A message that failed its pass on its own, for ``quarantine_message``: it is kept for
    inspection and, for a request, ``answer`` is stored under its id (a retry of the id gets
    that answer instead of failing another pass)."""

    message_id: str
    kind: str
    body: str
    reference: str
    error: str
    answer: Response | None = None


@dataclass(frozen=True)
class CatalogPosition:
    """Where a workflow id stands in the catalog: its last pass and the newest version."""

    version: int
    last_pass_no: int


def request_batches_json(batches: list[list[Envelope]]) -> bytes:
    """The ``requests`` argument's JSON for batches built in Python (replays and tests)."""
    plain: list[list[dict[str, Any]]] = [
        [{"id": e.id, "kind": e.kind, "body": e.body, "v": e.v} for e in batch] for batch in batches
    ]
    return json.dumps(plain).encode()
