"""Bounds of what the coordinator accepts, stores and sends: one home for every limit.

Every value a client, an agent or a raw Temporal caller sends must fit where it ends up (a
catalog column, a Temporal payload) *before* it gets there, so that no input can fail a
database statement, a workflow task or a pass. The numbers here are those bounds; the checks
that apply them live where values enter (:mod:`streamctl.domain.decode` for messages,
:mod:`streamctl.catalog.fit` for rows) and quote these names in their error messages.

A leaf module: it imports nothing of the project, so every package may import it.
"""

from __future__ import annotations

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
"""The range of an ``Integer`` catalog column (PostgreSQL ``integer``)."""
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""The range of a ``BigInteger`` catalog column, and of every integer a message may carry."""

MAX_NAME_LENGTH = 128
"""Entity names (workers, sources, sinks): the width of their key columns."""
MAX_ID_LENGTH = 255
"""Message ids: the width of the stored responses' key column."""
MAX_NESTING_DEPTH = 32
"""How deeply lists and objects may nest inside one message body."""

MAX_REQUEST_BYTES = 256 * 1024
"""A single request's encoded body may not be larger than this."""
MAX_PASS_EVENT_BYTES = 512 * 1024
"""The events one pass takes, in all (their buffered sizes; always one event at least). A pass's
input is one Temporal payload with its requests (``max_batch_bytes``, 1 MB by default), and
Temporal fails a payload above 2 MB: a dozen events of ~250 KB each make an input of 2.3 MB,
whose workflow task then fails on every retry."""
LOCAL_PASS_MAX_MESSAGES = 32
"""A pass of at most this many requests and no event, not split from a failed one, runs as a
local activity: inside the workflow task that decides it, on the coordinator worker,
with no activity task and no second workflow task. An idle coordinator answers a request in
~44 ms, ~23 of them the activity's round trips (three history events, a workflow task to take
the result); as a local activity, in ~31. While it runs, the workflow task stays open and new
messages wait at the server, so only small passes (a few milliseconds) take this path; the
large ones of a busy coordinator run as activities, and the next batch gathers meanwhile."""
MAX_RESPONSE_BYTES = 512 * 1024
"""A single answer (a listing) may not be larger than this; larger ones are paged or refused."""
MAX_PAGE_ROWS = 1000
"""Most items one page of a listing may ask for (``limit`` of the ``List*`` requests and of
``ExecuteStatement``'s ``SHOW``)."""
MAX_PAGE_BYTES = 384 * 1024
"""A page of a listing stops before its items reach this size (it holds one item at least),
so a page fits in one answer (``MAX_RESPONSE_BYTES``) whatever ``limit`` asked for."""
MAX_PASS_RESULT_BYTES = 1536 * 1024
"""The answers one pass hands back to the workflow, in all. Temporal fails a payload above
2 MB; the rest of the pass result (actions, counts) fits in the remaining half megabyte."""
MAX_PASS_WORK_SECONDS = 5.0
"""How long a pass applies requests: a request that comes up later is not applied but answered
``UNAVAILABLE ... ask again`` (the client library asks again, first in line). 600
``CreateQuery`` requests with 110-term predicates take 14 s in one pass on 2 busy cores,
near the pass's activity timeout (``pass_timeout``, 15 s by default); a pass past it
fails every attempt and is split again and again. A pass takes up to ``batch_size`` (4,000)
requests. Events are always applied; a pass applies one request at least."""
MAX_PASS_ACTION_BYTES = 256 * 1024
"""The start actions one pass hands to the workflow (their plans), in all; queries past it
wait for the next pass, which follows at once."""
MAX_ACTIONS_UNDER_WAY = 1000
"""Agent actions the coordinator workflow runs at once, each a pending activity: Temporal fails
every workflow task that would hold more than 2,000 (``limit.numPendingActivities.error``),
so a coordinator asked to start 10,000 queries would make no progress. A pass decides no more
starts than there is room for; the other queries wait (``CREATED``/``RECOVERING``) for the
passes that the actions' outcomes bring. Any other action past it (the stops of a mass drop)
waits in the workflow, in order, until one under way ends
(``CoordinatorConfig.max_actions_under_way``)."""
MAX_CARRIED_WAITING_ACTIONS = 8000
"""Actions waiting for room (:data:`MAX_ACTIONS_UNDER_WAY`) that continue-as-new carries to the
next run at most; above this the run first lets the excess drain. A waiting stop encodes to
~110 bytes (8,000: under 1 MB of the 2 MB payload), and waiting starts are few: a pass decides
no more starts than there is room for."""
MAX_STARTS_PER_PASS = 250
"""Start actions one pass decides at most; queries past it wait for the next pass, which
follows at once. The workflow schedules every start of a pass in one workflow task (an
activity each, its plan encoded), and again when it replays the run: a thousand of them make
that task take seconds on a loaded machine, past the SDK's deadlock detection (2 s), after
which the worker cannot evict the run (:mod:`streamctl.worker.stuck_runs`)."""
MAX_ACTIONS_PER_TASK = 250
"""Agent actions (activities) the coordinator workflow schedules in one workflow task at most;
the others wait in the workflow, in order, for the next tasks (:data:`ACTION_RELEASE_DELAY`).
For the same reason as :data:`MAX_STARTS_PER_PASS`: without it the next run's first task
would schedule every action a run carries through continue-as-new (up to
:data:`MAX_ACTIONS_UNDER_WAY` under way and more waiting), and one pass's task a mass drop's
stops."""
ACTION_RELEASE_DELAY = 0.05
"""How soon (seconds) the coordinator workflow schedules more actions when
:data:`MAX_ACTIONS_PER_TASK` left some waiting with room for them under way."""
MORE_TO_START_DELAY = 0.05
"""How soon (seconds) the next pass runs when a pass left queries waiting for that reason."""

MAX_WINDOW_MILLIS = 100 * 365 * 24 * 3600 * 1000
"""The longest window size, slide or allowed lateness (a hundred years, in milliseconds): a
statement over it is refused. Spark counts interval lengths in microseconds in 64 bits, and a
size they cannot hold (10**20 days) fails only when the query starts, after restarts."""
MAX_WINDOWS_PER_ROW = 1000
"""The most sliding windows one row may fall in (size over slide, rounded up): Spark copies
each row once per window, and a 1000-day window sliding by 1 ms (86.4e9 copies per row) takes
the agent's Spark down, and with it every other query on that agent."""
MAX_RANDOM_STRING_LENGTH = 65_536
"""The longest ``RANDOMSTR`` a generator writes per row: each row is built in the agent's
process, and a length of 10**14 grows it by 35 MB/s until it is killed."""
MAX_IN_LIST_VALUES = 1000
"""The most values an ``IN (...)`` list may hold: a list of 12,000 over a generator takes the
agent's Spark down while it plans the query."""

MAX_QUERY_WAITERS = 8
"""``wait_query`` updates one coordinator holds open at once (each holds one of Temporal's
in-flight updates of the workflow, 10 by default); more are refused ``Busy`` and the client
asks ``GetQuery`` instead. A pass reports each watched query's row (without its statement,
~1 KB), so this also bounds what the waits add to a pass result."""
MAX_QUERY_WAIT_SECONDS = 30.0
"""How long one ``wait_query`` update stays open at most; a client waiting longer asks again."""
MIN_QUERY_WAIT_SECONDS = 0.001
"""How long one ``wait_query`` update stays open at least: a shorter wait becomes a workflow
timer of zero nanoseconds, which the Temporal server refuses, failing the workflow task."""

MAX_REQUESTS_PER_UPDATE = 2000
"""Requests in one ``submit`` update (one request batch); a larger batch is refused before it
reaches history (``InvalidBatch``)."""
MAX_EVENTS_PER_SIGNAL = 5000
MAX_EVENT_BATCH_BYTES = 4 * 1024 * 1024
"""Bounds of one ``events`` signal: event count, and the sum of the events' sizes."""
MAX_CARRIED_EVENT_BYTES = 512 * 1024
"""Pending events a run hands to the next one at most (by their estimated size); above this it
runs passes first. Continue-as-new carries the state in one payload, which Temporal refuses
above 2 MB; a single event is at most ``MAX_REQUEST_BYTES`` (larger ones are dropped when
they arrive: the pass would refuse them anyway)."""
MAX_CARRIED_SENDER_BYTES = 256 * 1024
"""What the workflow's memory of event senders (each sender's last batch number, to drop a
batch delivered twice) may take in the carried state, its names counted as JSON writes them.
A run that hears from more senders forgets the one it heard from least recently; without a
bound, many distinct senders would grow the state past the 2 MB payload limit, failing every
workflow task."""
