"""Running a query to its end through a coordinator, for the benchmarks that check results
(``bench differential``, ``bench exactness``).

Protocol: a benchmark waits for an ALIVE agent (:func:`wait_for_alive_agent`), creates its
query, polls it with :func:`~streamctl.client.query_wait.wait_for_state` until one of the
states it waits for (every state seen in between is passed to ``seen``, so a caller can record
the path the query took), then reads the committed rows of the query's inline ``File()`` sink
with :func:`inline_sink_rows`.
Every wait is bounded by a deadline on :func:`time.monotonic`; none raises on a query state,
only on the deadline (:class:`QueryWaitTimeout`) or on a request the coordinator refuses.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from streamctl.client.client import CoordinatorClient
from streamctl.client.query_wait import TERMINAL_STATES, QueryWaitTimeout, wait_for_state
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import query_name
from streamctl.sink_files import AnsweredSink, read_file_sink_rows

__all__ = [
    "TERMINAL_STATES",
    "QueryWaitTimeout",
    "inline_sink_rows",
    "wait_for_alive_agent",
    "wait_for_state",
]

_POLL_S: Final = 0.2


async def wait_for_alive_agent(client: CoordinatorClient, deadline: float) -> None:
    """Return once the coordinator lists an ALIVE worker."""
    while True:
        workers = await client.ask(m.ListWorkers())
        if any(worker["state"] == "ALIVE" for worker in workers):
            return
        if time.monotonic() > deadline:
            raise QueryWaitTimeout("an ALIVE Spark agent")
        await asyncio.sleep(_POLL_S)


async def inline_sink_rows(
    client: CoordinatorClient, sink: str, query_id: int
) -> list[tuple[Any, ...]]:
    """The committed rows the query wrote into its inline ``File()`` sink ``sink``."""
    answered = AnsweredSink.of(await client.ask(m.GetSink(sink)))
    return await asyncio.to_thread(read_file_sink_rows, answered, query_name(query_id))
