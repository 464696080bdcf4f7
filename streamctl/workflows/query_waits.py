"""Waiting in the workflow for a query to reach a state: the ``wait_query`` update.

Protocol
--------
* A client sends ``wait_query(query_id, states, timeout)``. The validator refuses it
  (before it enters history) while the run is closing for continue-as-new
  (``ContinuingAsNew``), when :data:`~streamctl.limits.MAX_QUERY_WAITERS` waits are open
  (``Busy``; the client then asks ``GetQuery`` instead), or when the arguments are not a query
  id, a list of state names and a number (``InvalidBatch``).
* The handler registers a :class:`QueryWaiter` and makes a pass due. Every pass that *starts*
  after the waiter was registered lists the query in its ``watched_queries`` and reports its
  row as the pass left it (or none: the query does not exist), which the workflow hands to
  the waiters registered before that pass began (:meth:`QueryWaiter.report`). A row from a
  pass that began before the wait could predate what the client did just before waiting (a
  ``StartQuery``), so it never counts.
* The update returns :class:`QueryWait` as soon as a reported state is one of ``states``, the
  query does not exist, the run starts closing, or after ``timeout`` (at most
  :data:`~streamctl.limits.MAX_QUERY_WAIT_SECONDS`), whichever is first; ``row`` is then the
  latest row reported, or ``None`` when no pass has reported yet.

Nothing here changes the catalog: a wait is a read the passes answer for free, so it needs no
request id, and a retried wait is simply a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QueryWait:
    """The ``wait_query`` update's answer. ``row``: the query's fields (``GetQuery``'s but the
    statement, sources and plan), ``None`` when no pass reported since the wait began;
    ``found``: false when a pass reported that the query does not exist."""

    row: dict[str, Any] | None
    found: bool = True


@dataclass
class QueryWaiter:
    """One open ``wait_query``; ``since_pass`` is the pass number current when it began (the
    passes after it report to it)."""

    query_id: int
    states: frozenset[str]
    since_pass: int
    answer: QueryWait = field(default_factory=lambda: QueryWait(None))

    def report(self, pass_no: int, rows: dict[int, dict[str, Any]]) -> None:
        """Take what pass ``pass_no`` reported, if that pass began after the wait did."""
        if pass_no <= self.since_pass:
            return
        row = rows.get(self.query_id)
        self.answer = QueryWait(row, found=row is not None)

    @property
    def reported(self) -> bool:
        return self.answer.row is not None or not self.answer.found

    @property
    def settled(self) -> bool:
        """The state waited for is reached, or the query does not exist."""
        row = self.answer.row
        return not self.answer.found or (row is not None and row["current_state"] in self.states)
