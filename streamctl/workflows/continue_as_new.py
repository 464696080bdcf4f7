"""When a coordinator run continues as new, and from which workflow task: the gate.

Protocol
--------
* **Due** (:meth:`ContinueAsNewGate.due`): after ``passes_per_run`` passes of the run, at
  ``max_history_events`` or when Temporal suggests it. With
  :data:`~streamctl.workflows.patches.DEFER_CONTINUE_AS_NEW_FOR_STARTS`, a run whose last pass
  left queries waiting to be started puts it off (only ``passes_per_run`` counts) while its
  history stays under :data:`STARTS_DEFER_LIMIT` times ``max_history_events``,
  :data:`STARTS_DEFER_MAX_EVENTS` events and :data:`STARTS_DEFER_MAX_BYTES`: a draining run
  starts nothing, so a continue-as-new in the middle of a failover's thousand restarts held
  half of them back by 10-20 s (``bench scale``).
* Once due, the run drains and closes (:mod:`.run_phase`) and, with
  :data:`~streamctl.workflows.patches.QUIET_CONTINUE_AS_NEW`, continues as new only from a
  **quiet** workflow task (:meth:`ContinueAsNewGate.quiet_after_timer`). Temporal refuses a
  continue-as-new (``UnhandledCommand``) when a signal arrived while its workflow task ran, and
  the worker, whose cached run issued a command that did not happen, replays the whole run for
  the next task. Continuing as new from that replay, which takes seconds in a long run, is
  refused again whenever a signal arrives meanwhile: under a steady stream of events no attempt
  ever succeeded and the run grew until its workflow tasks timed out (``bench scale``). So the
  workflow arms a short timer (:data:`QUIET_WAIT`) and continues as new only in a task that
  began with nothing but that timer's firing since it was armed (:data:`QUIET_EVENTS`): a task
  of a cached run, done in milliseconds. After a refusal, the replaying task sees the signals
  that arrived (a longer history) and arms the timer again instead, which it can complete. A
  task that arms the timer while it also sends other commands (a pass's actions, an answered
  update) spends an attempt; the next timer is armed by the task that fired the last one,
  which sends nothing else.
* After :data:`QUIET_ATTEMPTS` timers (senders that never pause: the README's Temporal
  settings) it continues as new from the next timer's task that is **calm**: one that began
  with at most :data:`CALM_EVENTS` more events than the calmest such task of the run
  (:data:`~streamctl.workflows.patches.CALM_CONTINUE_AS_NEW`; older runs took any timer's
  task). Not from any task: a refused continue-as-new is tried again by a task that replays the
  run, seconds long under load, and under ``bench scale``'s steady events every such retry was
  refused again, until the run hit Temporal's limit of signals per run and dropped events. The
  retry begins with the signals that came during the refused task's replay, so it arms a timer
  instead, and the next try comes from a cached run's short task. A run grown to
  :data:`RUN_LENGTH_BACKSTOP` times ``max_history_events`` (at most
  :data:`RUN_LENGTH_BACKSTOP_EVENTS`) continues as new from any timer's task.
* The run carries :class:`~streamctl.workflows.state.CoordinatorState` (:func:`carried_state`:
  version, pass number, pending events, sender marks, liveness times, the actions still under
  way or waiting) to the next run, which begins with a pass.

Guarantees
----------
Deterministic: the gate reads only the history's length and size and Temporal's suggestion,
handed to it as :class:`HistoryFacts`, and issues no command (the workflow arms the timers).
The patches are asked once, at the top of the run, in the order they always were.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from streamctl.protocol.agent_contract import AgentAction
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.workflows.state import CoordinatorState

QUIET_WAIT = timedelta(milliseconds=10)
"""The quiet check's timer."""
QUIET_EVENTS = 5
"""A timer armed at history length L fires in a task starting at L + 5 when nothing else
happened: WorkflowTaskCompleted, TimerStarted, TimerFired, WorkflowTaskScheduled and -Started."""
QUIET_ATTEMPTS = 30
"""Timers armed before a run continues as new all the same (senders that never pause)."""
CALM_EVENTS = 20
"""Past :data:`QUIET_ATTEMPTS`, how many more events than the calmest timer task of the run so
far a task may begin with and still continue as new: the signals of a cached run's timer task
(tens of milliseconds), not the many more that arrive while a worker replays a long run after a
refusal."""
RUN_LENGTH_BACKSTOP = 4
"""A run whose history reaches this many times ``max_history_events`` (at most
:data:`RUN_LENGTH_BACKSTOP_EVENTS`) continues as new from the next timer's task, calm or not:
senders so fast that no task is ever calm must not grow the run to Temporal's hard limit
(51,200 events), which terminates the workflow."""
RUN_LENGTH_BACKSTOP_EVENTS = 40_000
STARTS_DEFER_LIMIT = 3
"""How many times ``max_history_events`` a run may grow to while a wave of starts lasts (a
thousand starts write ~4,000 events), and never past :data:`STARTS_DEFER_MAX_EVENTS` events or
:data:`STARTS_DEFER_MAX_BYTES` of history."""
STARTS_DEFER_MAX_EVENTS = 8000
"""Under Temporal's history warning (10,240 events), whatever ``max_history_events`` is."""
STARTS_DEFER_MAX_BYTES = 4 * 1024 * 1024
"""Start plans ride in the activities' inputs: a run's history grows in bytes as well."""


@dataclass(frozen=True)
class HistoryFacts:
    """What Temporal tells the workflow about its run's history (``workflow.info()``)."""

    length: int
    size: int
    continue_as_new_suggested: bool


class ContinueAsNewGate:
    """Whether continue-as-new is due, and whether the current task may issue it."""

    def __init__(self, config: CoordinatorConfig) -> None:
        self.passes_per_run = config.passes_per_run
        self.max_history_events = config.max_history_events
        self.defer_for_starts = False
        """Whether the run has its patch (and serve-while-draining)."""
        self.quiet = False
        """Whether the run waits for a quiet task (its patch)."""
        self.calm = False
        """Whether the run waits for a calm task past :data:`QUIET_ATTEMPTS` (its patch)."""
        self.passes_this_run = 0
        self.starts_waiting = False
        """The last pass left queries waiting to be started (``PassResult.starts_waiting``)."""
        self.quiet_attempts = 0
        """Timers armed so far in this run to find a quiet task to continue as new from."""
        self.calmest_timer_task: int | None = None
        """The fewest events a quiet check's timer task of this run began with (since armed)."""

    def pass_done(self, starts_waiting: bool) -> None:
        """Count a pass of this run, and whether it left starts waiting."""
        self.passes_this_run += 1
        self.starts_waiting = starts_waiting

    def due(self, history: HistoryFacts, ending: bool) -> bool:
        """Whether the run should continue as new (``ending``: it already drains or closes)."""
        if self.defer_for_starts and self.starts_waiting and not ending:
            limit = STARTS_DEFER_LIMIT * self.max_history_events
            if (
                history.length < min(limit, STARTS_DEFER_MAX_EVENTS)
                and history.size < STARTS_DEFER_MAX_BYTES
            ):
                return self.passes_this_run >= self.passes_per_run
        return (
            self.passes_this_run >= self.passes_per_run
            or history.length >= self.max_history_events
            or history.continue_as_new_suggested
        )

    def arm_quiet_check(self) -> None:
        """Count a quiet check's timer (the workflow arms it, :data:`QUIET_WAIT`)."""
        self.quiet_attempts += 1

    def quiet_after_timer(self, armed_at: int, length: int) -> bool:
        """Whether the task in which the quiet check's timer fired may continue as new: the
        timer was armed at history length ``armed_at`` and the task began at ``length``."""
        since_armed = length - armed_at
        if since_armed == QUIET_EVENTS:
            return True
        calmest = min(since_armed, self.calmest_timer_task or since_armed)
        self.calmest_timer_task = calmest
        if self.quiet_attempts < QUIET_ATTEMPTS:
            return False
        if not self.calm or since_armed <= calmest + CALM_EVENTS:
            return True
        backstop = RUN_LENGTH_BACKSTOP * self.max_history_events
        return length >= min(backstop, RUN_LENGTH_BACKSTOP_EVENTS)


def carried_state(state: CoordinatorState, actions: list[AgentAction]) -> CoordinatorState:
    """What the run hands to the next: ``state``'s carried fields (copies of its collections),
    the next run's number, and ``actions`` (under way or waiting: the next run runs them
    again). ``arrivals`` is carried too: the carried events keep their arrival numbers, so
    the next run's arrivals must number after them, or a pass would apply an event that
    arrived later before one the previous run carried."""
    return CoordinatorState(
        config=state.config,
        position_loaded=True,
        version=state.version,
        pass_no=state.pass_no,
        pending=list(state.pending),
        sender_seqs=dict(state.sender_seqs),
        sender_seen_at=dict(state.sender_seen_at),
        next_liveness_deadline=state.next_liveness_deadline,
        last_pass_ms=state.last_pass_ms,
        runs=state.runs + 1,
        actions_under_way=actions,
        heard_at=state.heard_at,
        heard_before=state.heard_before,
        arrivals=state.arrivals,
    )
