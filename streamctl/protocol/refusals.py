"""Refusal names: the ``type`` of every Temporal ``ApplicationError`` streamctl raises on
purpose, in one place, so that the side that raises one and the side that matches it share a
constant instead of a string.

Who raises what, and what the other side does:

* The coordinator workflow's update validators (before an update enters history):

  - :data:`BUSY`: the buffer (or the set of open query waits) is full. The client retries
    later with the same request ids.
  - :data:`CONTINUING_AS_NEW`: the run is closing for continue-as-new. The client retries with
    the same ids; the next run answers.
  - :data:`INVALID_BATCH`: the update's arguments are not a request batch (wrong shape, too
    large, ids that do not match). Not retried: the same bytes would be refused again.

  :data:`RETRYABLE_REJECTIONS` is what a client retries.

* The pass activity: :data:`CATALOG_UNAVAILABLE` when the catalog cannot be reached; the
  workflow tries that pass again instead of splitting it to find a failing message.
* A Spark agent's activities:

  - :data:`QUERY_REJECTED`: the plan cannot run on this agent (non-retryable: the workflow
    reports the start failed);
  - :data:`AGENT_BUSY`: the agent runs as many queries as its capacity allows;
  - :data:`SPARK_UNAVAILABLE`: the agent's Spark is being rebuilt;
  - :data:`START_TOO_LATE`: the start arrived after its deadline (the workflow has moved on).

* The coordinator-request activity (a schedule's reoptimization):
  :data:`ASK_AGAIN` (the coordinator asked for a retry) and :data:`REQUEST_REFUSED`
  (non-retryable: the request's answer was an error).
"""

from __future__ import annotations

from typing import Final

BUSY: Final = "Busy"
CONTINUING_AS_NEW: Final = "ContinuingAsNew"
INVALID_BATCH: Final = "InvalidBatch"
RETRYABLE_REJECTIONS: Final = frozenset({BUSY, CONTINUING_AS_NEW})
"""Update rejections a client retries with the same ids."""

CATALOG_UNAVAILABLE: Final = "CatalogUnavailable"

QUERY_REJECTED: Final = "QueryRejected"
AGENT_BUSY: Final = "AgentBusy"
SPARK_UNAVAILABLE: Final = "SparkUnavailable"
START_TOO_LATE: Final = "StartTooLate"
AGENT_RETRIES_LATER: Final = frozenset({AGENT_BUSY, SPARK_UNAVAILABLE})
"""Agent refusals that say "not now" rather than "never"."""

ASK_AGAIN: Final = "AskAgain"
REQUEST_REFUSED: Final = "RequestRefused"
