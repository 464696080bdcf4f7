"""Running a query to its end through a coordinator, for the benchmarks that check results
(``bench differential``, ``bench exactness``).

Protocol: a benchmark waits for an ALIVE agent (:func:`wait_for_alive_agent`), creates its
query, polls it with :func:`wait_for_state` until one of the states it waits for (every state
seen in between is passed to ``seen``, so a caller can record the path the query took), then
reads the committed rows of the query's inline ``File()`` sink with :func:`inline_sink_rows`.
Every wait is bounded by a deadline on :func:`time.monotonic`; none raises on a query state,
only on the deadline (:class:`QueryWaitTimeout`) or on a request the coordinator refuses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from streamctl.client.client import CoordinatorClient
from streamctl.sink_files import AnsweredSink, read_file_sink_rows
from streamctl.workflows import messages as m
from streamctl.workflows.actions import query_name

__all__ = [
    "TERMINAL_STATES",
    "QueryWaitTimeout",
    "inline_sink_rows",
    "wait_for_alive_agent",
    "wait_for_state",
]

TERMINAL_STATES: Final = frozenset({"FINISHED", "FAILED", "STOPPED"})
_POLL_S: Final = 0.2


class QueryWaitTimeout(RuntimeError):
    """The deadline passed before what was waited for happened; ``last_state`` is the query's
    last state seen (empty for other waits)."""

    def __init__(self, what: str, last_state: str = "") -> None:
        super().__init__(f"{what}: not within the run's timeout")
        self.last_state = last_state


async def wait_for_alive_agent(client: CoordinatorClient, deadline: float) -> None:
    """Return once the coordinator lists an ALIVE worker."""
    while True:
        workers = await client.ask(m.ListWorkers())
        if any(worker["state"] == "ALIVE" for worker in workers):
            return
        if time.monotonic() > deadline:
            raise QueryWaitTimeout("an ALIVE Spark agent")
        await asyncio.sleep(_POLL_S)


async def wait_for_state(
    client: CoordinatorClient,
    query_id: int,
    wanted: frozenset[str],
    deadline: float,
    seen: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The query's answer (``GetQuery``) once its ``current_state`` is in ``wanted``; ``seen``
    gets the state of every poll."""
    while True:
        answer = await client.ask(m.GetQuery(query_id))
        state = str(answer["current_state"])
        if seen is not None:
            seen(state)
        if state in wanted:
            return dict(answer)
        if time.monotonic() > deadline:
            raise QueryWaitTimeout(f"query {query_id} {'/'.join(sorted(wanted))}", state)
        await asyncio.sleep(_POLL_S)


async def inline_sink_rows(
    client: CoordinatorClient, sink: str, query_id: int
) -> list[tuple[Any, ...]]:
    """The committed rows the query wrote into its inline ``File()`` sink ``sink``."""
    answered = AnsweredSink.of(await client.ask(m.GetSink(sink)))
    return await asyncio.to_thread(read_file_sink_rows, answered, query_name(query_id))
