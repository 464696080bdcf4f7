"""Every ``workflow.patched`` id of the workflows, in one registry.

Protocol
--------
A change to what a workflow commands (an activity, a timer, an order, a bound) is guarded by
``workflow.patched(ID)``: a run recorded before the change replays as it ran (``patched``
answers false when the history holds no marker of ``ID`` at that point), and every new run
records the marker and gets the new behaviour. The workflow code refers to each id through
the constant here, never through a literal, and each constant says what it guards.

Guarantees
----------
* An id is never changed, reused or removed while a recorded history (``tests/histories``) or
  a running coordinator may hold its marker: its string is part of the history.
  ``tests/test_patches.py`` pins every string and checks that no ``workflow.patched`` call in
  ``streamctl/workflows`` passes anything but one of these constants.
* ``workflow.patched`` memoizes its answer per id for the run: the first call decides, and
  (when not replaying) writes the marker where it happens. So a call is never moved to
  another point of the workflow, nor evaluated where it was not before (conditions in front of
  it short-circuit on purpose).
"""

from __future__ import annotations

# --- passes ----------------------------------------------------------------------------------

PASS_ISOLATION = "pass-isolation"
"""A pass ends after ``PASS_ATTEMPTS`` attempts and one that failed for good is split until
the message that fails alone is found and set aside; a pass whose catalog cannot be reached is
tried again with pauses. Older runs retried a failing pass forever."""

LOCAL_SMALL_PASSES = "local-small-passes"
"""A small pass without events (:data:`~streamctl.limits.LOCAL_PASS_MAX_MESSAGES`) runs as a
local activity; older runs ran every pass as an activity."""

BOUNDED_PASS_EVENTS = "bounded-pass-events"
"""A pass takes events up to :data:`~streamctl.limits.MAX_PASS_EVENT_BYTES` (older runs took
``batch_size`` of any size, and a pass's input could outgrow Temporal's 2 MB payload limit)."""

# --- events arriving -------------------------------------------------------------------------

BOUNDED_EVENT_NESTING = "bounded-event-nesting"
"""Events nested deeper than :data:`~streamctl.limits.MAX_NESTING_DEPTH` are dropped on
arrival (older runs buffered them, and one nested ~950 levels deep failed every workflow
task)."""

DROP_OVERSIZED_EVENTS = "drop-oversized-events"
"""An event over :data:`~streamctl.limits.MAX_REQUEST_BYTES` is dropped on arrival (older runs
buffered it)."""

BOUNDED_SENDER_MEMORY = "bounded-sender-memory"
"""The senders remembered for de-duplication take at most
:data:`~streamctl.limits.MAX_CARRIED_SENDER_BYTES` (the least recently heard is forgotten), and
an event batch whose ``seq`` is beyond 64 bits is dropped (:mod:`.sender_memory`). Older runs
remembered every sender of the last day, with any number."""

# --- continue-as-new -------------------------------------------------------------------------

BOUNDED_CONTINUE_AS_NEW_STATE = "bounded-continue-as-new-state"
"""Continue-as-new waits until the pending events fit
:data:`~streamctl.limits.MAX_CARRIED_EVENT_BYTES` (passes take them first), so the carried
state fits one payload; older runs carried whatever was pending."""

SERVE_WHILE_DRAINING = "serve-while-draining"
"""A run due to continue as new goes on answering requests while its actions under way drain
(``action_drain_timeout``: the ``DRAINING`` phase of :mod:`.run_phase`) and refuses them only
while it closes; it schedules at most :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK` actions
per workflow task (:mod:`.action_queue`). Older runs refused requests for the whole drain and
scheduled every action at once."""

DEFER_CONTINUE_AS_NEW_FOR_STARTS = "defer-continue-as-new-for-starts"
"""A run whose last pass left queries waiting to be started puts off continue-as-new at
``max_history_events`` (:mod:`.continue_as_new`): a draining run starts nothing, so a
continue-as-new in the middle of a failover's thousand restarts held half of them back by
10-20 s (``bench scale``). Older runs continued as new at ``max_history_events``."""

QUIET_CONTINUE_AS_NEW = "quiet-continue-as-new"
"""Continue-as-new only from a workflow task that holds nothing but a short timer's firing
(:mod:`.continue_as_new`), and a drain that waits ``action_drain_timeout`` once in all; older
runs continued at once."""

CALM_CONTINUE_AS_NEW = "calm-continue-as-new"
"""Past ``QUIET_ATTEMPTS`` quiet checks, continue-as-new only from a calm task (or at the run
length backstop, :mod:`.continue_as_new`); older runs continued from any timer's task."""

# --- agent actions ---------------------------------------------------------------------------

BOUNDED_ACTIONS_UNDER_WAY = "bounded-actions-under-way"
"""``max_actions_under_way`` is capped at :data:`~streamctl.limits.MAX_ACTIONS_UNDER_WAY`
(Temporal fails the workflow tasks of a run with more than 2,000 pending activities); a run
recorded with a larger one before the cap replays with it."""

STOP_UNTIL_STOPPED = "stop-until-stopped"
"""A stop that failed while its agent is there is run again instead of reported ``STOPPED``
(:mod:`.agent_calls`)."""

STOP_AFTER_FAILED_START = "stop-after-failed-start"
"""A failed start is followed by a stop of that run, in case the start landed after its
activity gave up (:mod:`.agent_calls`)."""

UNCONFIRMED_STOP_STAYS_STOPPING = "unconfirmed-stop-stays-stopping"
"""A stop no agent picked up is run again, like any failed stop, instead of reported
``STOPPED`` (:mod:`.agent_calls`)."""

ALL_PATCHES: tuple[str, ...] = (
    PASS_ISOLATION,
    LOCAL_SMALL_PASSES,
    BOUNDED_PASS_EVENTS,
    BOUNDED_EVENT_NESTING,
    DROP_OVERSIZED_EVENTS,
    BOUNDED_SENDER_MEMORY,
    BOUNDED_CONTINUE_AS_NEW_STATE,
    SERVE_WHILE_DRAINING,
    DEFER_CONTINUE_AS_NEW_FOR_STARTS,
    QUIET_CONTINUE_AS_NEW,
    CALM_CONTINUE_AS_NEW,
    BOUNDED_ACTIONS_UNDER_WAY,
    STOP_UNTIL_STOPPED,
    STOP_AFTER_FAILED_START,
    UNCONFIRMED_STOP_STAYS_STOPPING,
)
"""Every id above, once."""
