"""What the coordinator's update validators refuse, before an update enters history.

Protocol
--------
A refusal is an :class:`~temporalio.exceptions.ApplicationError` whose ``type`` names it
(:mod:`streamctl.protocol.refusals`); the client retries ``ContinuingAsNew`` and ``Busy`` with
the same ids after a backoff, and ``InvalidBatch`` never (the workflow counts those in
``streamctl_refused_messages``).

* ``submit(ids, requests)`` (:func:`check_submit`): ``ContinuingAsNew`` while the run closes
  (:mod:`.run_phase`), and, once continue-as-new is due, for a batch that would start a query
  (:data:`~.run_phase.STARTS_WAIT_FOR_NEXT_RUN`: the next run answers it with the query
  started); ``InvalidBatch`` for no request, an empty or non-string id, more than
  :data:`~streamctl.limits.MAX_REQUESTS_PER_UPDATE` requests, a payload that is encrypted with
  a key this worker does not hold, not JSON, over ``max_batch_bytes``, or whose envelopes do not
  match its ids; ``Busy`` when the buffer already holds requests and this batch would take it
  past ``max_pending`` (an empty buffer takes any batch).
* ``wait_query(query_id, states, timeout)`` (:func:`check_wait_query`): ``ContinuingAsNew``
  while the run closes; ``InvalidBatch`` unless it is a 64-bit query id, a list of state names
  and a timeout of at least :data:`~streamctl.limits.MIN_QUERY_WAIT_SECONDS`; ``Busy`` when
  :data:`~streamctl.limits.MAX_QUERY_WAITERS` waits are open.

Deterministic: each check reads only its arguments.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from streamctl.limits import (
    INT64_MAX,
    INT64_MIN,
    MAX_QUERY_WAITERS,
    MAX_REQUESTS_PER_UPDATE,
    MIN_QUERY_WAIT_SECONDS,
)
from streamctl.protocol import refusals
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.raw_payloads import JSON_ENCODING
from streamctl.workflows.run_phase import STARTS_WAIT_FOR_NEXT_RUN, RunPhaseMachine
from streamctl.workflows.wire import request_batch_kinds, request_batch_problem


def continuing_as_new() -> ApplicationError:
    return ApplicationError(
        "coordinator is continuing as new; retry", type=refusals.CONTINUING_AS_NEW
    )


def check_submit(
    ids: list[str],
    payload: Payload,
    config: CoordinatorConfig,
    phases: RunPhaseMachine,
    pending_requests: int,
) -> None:
    """Raise the refusal of a ``submit`` batch, if any."""
    if phases.closing:
        raise continuing_as_new()
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise ApplicationError(
            "a request batch needs at least one request, each with a non-empty string id",
            type=refusals.INVALID_BATCH,
        )
    if len(ids) > MAX_REQUESTS_PER_UPDATE:
        raise ApplicationError(
            f"a request batch holds at most {MAX_REQUESTS_PER_UPDATE} requests, got {len(ids)}",
            type=refusals.INVALID_BATCH,
        )
    if payload.metadata.get("encoding") == b"binary/encrypted":
        # The codec leaves a payload it cannot decrypt as it is (payload_crypto).
        raise ApplicationError(
            "the request batch is encrypted with a payload key this coordinator worker "
            "does not hold; give every process the same STREAMCTL_PAYLOAD_KEY",
            type=refusals.INVALID_BATCH,
        )
    if payload.metadata.get("encoding") != JSON_ENCODING:
        raise ApplicationError("request batches must be JSON", type=refusals.INVALID_BATCH)
    if len(payload.data) > config.max_batch_bytes:
        raise ApplicationError(
            f"a request batch may hold at most {config.max_batch_bytes} bytes, "
            f"got {len(payload.data)}",
            type=refusals.INVALID_BATCH,
        )
    problem = request_batch_problem(ids, payload.data)
    if problem is not None:
        raise ApplicationError(problem, type=refusals.INVALID_BATCH)
    if phases.ending and STARTS_WAIT_FOR_NEXT_RUN & request_batch_kinds(payload.data):
        # A draining run decides no starts: the pass would leave the query waiting for the
        # next run. Refused, the client retries this batch with the same ids, and the next
        # run answers it with the query started.
        raise continuing_as_new()
    if pending_requests and pending_requests + len(ids) > config.max_pending:
        # An empty buffer takes any batch: one larger than max_pending was refused Busy
        # forever, its client retrying until its deadline.
        raise ApplicationError("coordinator buffer is full; retry later", type=refusals.BUSY)


def check_wait_query(
    query_id: Any, states: Any, timeout: Any, phases: RunPhaseMachine, open_waits: int
) -> None:
    """Raise the refusal of a ``wait_query``, if any (its arguments come raw from a client)."""
    if phases.closing:
        raise continuing_as_new()
    if (
        type(query_id) is not int
        or not INT64_MIN <= query_id <= INT64_MAX  # a pass looks it up in the catalog
        or not isinstance(states, list)
        or not all(isinstance(state, str) for state in states)
        or type(timeout) not in (int, float)
        or not timeout >= MIN_QUERY_WAIT_SECONDS  # a shorter timer is a zero one, refused
    ):
        raise ApplicationError(
            "wait_query takes a query id, a list of state names and a timeout of at least "
            f"{MIN_QUERY_WAIT_SECONDS} s",
            type=refusals.INVALID_BATCH,
        )
    if open_waits >= MAX_QUERY_WAITERS:
        raise ApplicationError(
            f"{MAX_QUERY_WAITERS} waits are open; ask GetQuery instead", type=refusals.BUSY
        )
