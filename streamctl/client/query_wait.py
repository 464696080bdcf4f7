"""Waiting for a query to reach a state: what ``--wait-running`` and the benchmarks use.

A query's state changes when its agent reports (the start action's outcome, a status push);
the coordinator records it in the next pass. Two ways to wait:

* :func:`wait_pushed` (``CoordinatorClient.wait_for_query``): the ``wait_query`` update
  (:mod:`streamctl.workflows.query_waits`), which the workflow answers from the pass that
  records the state, with no request of its own in between; it is asked again until the
  deadline (one update stays open at most ``MAX_QUERY_WAIT_SECONDS``). The coordinator holds
  only a few such waits open (each is one of the workflow's in-flight updates); when it
  refuses one (``Busy``, draining for continue-as-new, a coordinator without the update) the
  wait goes on by polling.
* :func:`wait_for_state`, polling: ask ``GetQuery`` until the query's ``current_state`` is one
  it waits for: first after :data:`FIRST_POLL_S`, then at intervals growing by half up to
  :data:`MAX_POLL_S`, so a start that settles quickly is seen within a few milliseconds of its
  pass and a slow one costs at most ten requests a second.

Every wait is bounded by a deadline on :func:`time.monotonic` (a NaN one, which no clock
passes, is refused with :class:`ValueError`), and ends at most :data:`LAST_LOOK_S` after it,
whatever the coordinator does. Before giving up it looks at the query once
more (``GetQuery``), so a deadline that passed already (a timeout of 0, the rest of a budget
shared with other waits) still answers a query that is where the wait wants it, and
``NOT_FOUND`` for one that does not exist. It raises only :class:`QueryWaitTimeout` (with the
last state seen) or the coordinator's ``NOT_FOUND`` (a query dropped meanwhile), never on a
state.

A wait takes any client that can ask (:class:`Asker`) and, for a pushed one, send the
``wait_query`` update (:class:`PushedWaitAsker`): :class:`~streamctl.client.client.
CoordinatorClient` is both, and offers these waits as its own methods.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from streamctl.client.coordinator_errors import NotFound, RequestTimeout
from streamctl.limits import MAX_QUERY_WAIT_SECONDS
from streamctl.protocol import messages as m
from streamctl.workflows.query_waits import QueryWait

TERMINAL_STATES: Final = frozenset({"FINISHED", "FAILED", "STOPPED"})
SETTLED_STATES: Final = TERMINAL_STATES | {"RUNNING"}
"""What ``--wait-running`` waits for: running, or ended (failed, stopped or finished: a bounded
query may finish before a poll sees it run)."""
FIRST_POLL_S: Final = 0.01
MAX_POLL_S: Final = 0.1
LAST_LOOK_S: Final = 1.0
"""How long past its deadline a wait may take at most: the last look at the query (a
``GetQuery``). A ``wait_query`` update not answered by the deadline (a paused or busy worker,
or one whose timer fires just after it) is left for that last look."""
STOPPED_RECHECK_S: Final = 1.0
"""How long one ``wait_query`` update waits past a ``STOPPED`` that is a start on its way (see
:func:`_settles`). The coordinator answers an update by ``current_state`` alone and cannot tell
that ``STOPPED`` from the one a later ``StopQuery`` leaves, so the client re-asks this often to
see such a stop (an update's answer is the latest row reported, also at its timeout)."""


class Asker(Protocol):
    """What polling needs of a client: to ask a request by a deadline
    (:meth:`~streamctl.client.client.CoordinatorClient.ask`). Stated here, so that this module
    needs nothing of the client, which offers these waits as its own methods."""

    async def ask(self, request: m.Request, *, timeout: float | None = None) -> Any: ...


class PushedWaitAsker(Asker, Protocol):
    """What a pushed wait needs besides: one ``wait_query`` update, ``None`` when the
    coordinator refused it
    (:meth:`~streamctl.client.client.CoordinatorClient.wait_query_update`)."""

    async def wait_query_update(
        self, query_id: int, states: frozenset[str], timeout: float
    ) -> QueryWait | None: ...


class QueryWaitTimeout(RuntimeError):
    """The deadline passed before what was waited for happened; ``last_state`` is the query's
    last state seen (empty for other waits)."""

    def __init__(self, what: str, last_state: str = "") -> None:
        super().__init__(f"{what}: not within the wait's timeout")
        self.last_state = last_state


def _timed_out(query_id: int, wanted: frozenset[str], last_state: str) -> QueryWaitTimeout:
    return QueryWaitTimeout(f"query {query_id} {'/'.join(sorted(wanted))}", last_state)


def _require_deadline(query_id: int, deadline: float) -> None:
    if math.isnan(deadline):  # no clock ever passes it: the wait would never end
        raise ValueError(f"the wait for query {query_id} has no deadline (its timeout is NaN)")


def _settles(row: Mapping[str, Any], wanted: frozenset[str]) -> bool:
    """Whether ``row`` ends a wait for ``wanted``. A ``STOPPED`` query whose desired state is
    ``RUNNING`` is on its way to running (a start that waits for a pass with room for starts,
    or a move), so it does not end a wait that wants ``RUNNING``."""
    state = row["current_state"]
    on_its_way = state == "STOPPED" and row.get("desired_state") == "RUNNING"
    return state in wanted and not (on_its_way and "RUNNING" in wanted)


async def wait_for_state(
    client: Asker,
    query_id: int,
    wanted: frozenset[str],
    deadline: float,
    seen: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The query's answer (``GetQuery``) once its ``current_state`` is in ``wanted``; ``seen``
    gets the state of every poll."""
    _require_deadline(query_id, deadline)
    pause = FIRST_POLL_S
    state = ""
    while True:
        try:
            answer = await client.ask(
                m.GetQuery(query_id), timeout=max(deadline - time.monotonic(), LAST_LOOK_S)
            )
        except RequestTimeout:  # ``request_timeout`` may be shorter than the wait: ask again
            answer = None
        if answer is not None:
            state = str(answer["current_state"])
            if seen is not None:
                seen(state)
            if _settles(answer, wanted):
                return dict(answer)
        now = time.monotonic()
        if now >= deadline:
            raise _timed_out(query_id, wanted, state)
        await asyncio.sleep(min(pause, deadline - now))
        pause = min(pause * 1.5, MAX_POLL_S)


async def wait_pushed(
    client: PushedWaitAsker, query_id: int, wanted: frozenset[str], deadline: float
) -> dict[str, Any]:
    """The query's row (``GetQuery``'s fields but the statement, sources and plan) once its
    ``current_state`` is in ``wanted``, as the coordinator's passes report it."""
    _require_deadline(query_id, deadline)
    pushed, longest = wanted, MAX_QUERY_WAIT_SECONDS  # what the next update waits for, how long
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return await wait_for_state(client, query_id, wanted, deadline)  # one last look
        try:
            wait = await asyncio.wait_for(
                client.wait_query_update(query_id, pushed, min(remaining, longest)), remaining
            )
        except TimeoutError:  # not answered by the deadline: the last look decides
            wait = None
        if wait is None:  # refused: poll instead
            return await wait_for_state(client, query_id, wanted, deadline)
        if not wait.found:
            raise NotFound(f"query {query_id!r} does not exist")
        if wait.row is not None:
            if _settles(wait.row, wanted):
                return dict(wait.row)
            # A start on its way (see _settles): the next update waits past STOPPED, or it
            # would be answered at once, pass after pass; briefly, to see a later stop.
            on_its_way = wait.row["current_state"] == "STOPPED"
            pushed = wanted - {"STOPPED"} if on_its_way else wanted
            longest = STOPPED_RECHECK_S if on_its_way else MAX_QUERY_WAIT_SECONDS
