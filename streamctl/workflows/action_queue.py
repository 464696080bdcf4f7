"""The agent actions a coordinator run has under way, and those waiting for room.

Protocol
--------
A pass decides agent actions (start, stop, explain, reconcile:
:class:`~streamctl.protocol.agent_contract.AgentAction`); :meth:`ActionQueue.start` takes each,
and the queue runs it as an asyncio task of the workflow (the ``run`` it is given:
:func:`streamctl.workflows.agent_calls.run_action` and its outcome's events) beside the loop.

* At most ``max_actions_under_way`` run at once (:meth:`ActionQueue.max_under_way`; Temporal
  fails a workflow task past 2,000 pending activities, so with
  :data:`~streamctl.workflows.patches.BOUNDED_ACTIONS_UNDER_WAY` it is capped at
  :data:`~streamctl.limits.MAX_ACTIONS_UNDER_WAY`). Later ones wait, in the order they came,
  and count against the room for starts a pass gets (:meth:`ActionQueue.room_for_starts`), so
  only a pass's stops (a drop of many queries), follow-up actions and the actions a run
  carries ever wait.
* In a run that serves while draining
  (:data:`~streamctl.workflows.patches.SERVE_WHILE_DRAINING`), every action goes through the
  waiting list and one workflow task schedules at most
  :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK` of them (a longer task risks the SDK's
  deadlock detection); the loop comes back for the rest after
  :data:`~streamctl.limits.ACTION_RELEASE_DELAY` (:meth:`ActionQueue.to_release`). A closing
  run schedules only what it could not carry (past
  :data:`~streamctl.limits.MAX_CARRIED_WAITING_ACTIONS`): an activity completing while it
  closes would make Temporal refuse its continue-as-new. Older runs scheduled every action at
  once, up to ``max_actions_under_way``.
* A run that is due to continue as new decides no starts (:meth:`ActionQueue.room_for_starts`
  is 0): its actions under way then end instead of being replaced, so the next run carries (and
  starts again) few of them. Carrying a thousand starts made both workflow tasks around
  continue-as-new take seconds (every payload encoded, the activities scheduled again), and a
  signal that arrives during the closing one makes Temporal refuse it: under a steady stream of
  events the run never ended (``bench scale``). The queries wait for the next run's first pass.

Guarantees
----------
An action is never lost: before continue-as-new the run waits up to ``action_drain_timeout``
for the actions under way, and carries the ones still running or waiting
(:meth:`ActionQueue.carried`) to the next run, which runs them again (every action is
idempotent on the agent: a start of a query it runs reports it, a stop of one it does not run
reports ``STOPPED``, a stale stop is ignored). Histories that never reached a bound replay
unchanged (no command differs below it).

Deterministic workflow code: the workflow hands the queue the current workflow task's identity
(its history length, the same all through one task) and whether the run has its patches
(asked only where they always were). The bounds are read from :mod:`streamctl.limits` when
used, not bound at import: this module is imported once, outside the workflow sandbox that
imports the workflow's own file afresh for every run (a test lowers
``MAX_ACTIONS_PER_TASK`` for the runs it starts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from streamctl import limits
from streamctl.protocol.agent_contract import AgentAction
from streamctl.workflows.run_phase import RunPhaseMachine

RunAction = Callable[[AgentAction], Coroutine[Any, Any, None]]
"""Runs one action to its end (its outcome's events go to the buffer)."""


class ActionQueue:
    """Actions under way (each an asyncio task) and actions waiting, in the order they came."""

    def __init__(
        self,
        run: RunAction,
        phases: RunPhaseMachine,
        configured_max: int,
        bounded: Callable[[], bool],
        task_number: Callable[[], int],
    ) -> None:
        self._run = run
        self._phases = phases
        self._configured_max = configured_max
        self._bounded = bounded
        """Whether the run caps ``max_actions_under_way`` (its patch); asked only above it."""
        self._task_number = task_number
        """The current workflow task's identity (its history length)."""
        self.under_way: dict[asyncio.Task[None], AgentAction] = {}
        self.waiting: list[AgentAction] = []
        """Actions past ``max_actions_under_way`` (or, serving while draining, past this
        workflow task's :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`), in the order they
        came; they start as actions under way end and as the loop comes round
        (:meth:`release`)."""
        self._launch_task = -1
        """The workflow task that :attr:`_launched_in_task` counts for."""
        self._launched_in_task = 0

    def max_under_way(self) -> int:
        """``max_actions_under_way``, at most :data:`MAX_ACTIONS_UNDER_WAY`; a run recorded
        with a larger one before it was capped replays with it."""
        if self._configured_max > limits.MAX_ACTIONS_UNDER_WAY and self._bounded():
            return limits.MAX_ACTIONS_UNDER_WAY
        return self._configured_max

    def room_for_starts(self) -> int:
        """How many more start actions the next pass may decide (``PassInput.action_room``):
        none once continue-as-new is due. A replay takes the passes' results from history, so
        older histories are unaffected."""
        if self._phases.ending:
            return 0
        taken = len(self.under_way) + len(self.waiting)
        return max(0, self.max_under_way() - taken)

    def empty(self) -> bool:
        """No action is under way or waiting."""
        return not (self.under_way or self.waiting)

    def carried(self) -> list[AgentAction]:
        """The actions the next run runs again: those under way, then those waiting."""
        return [*self.under_way.values(), *self.waiting]

    def descriptions(self) -> list[str]:
        """The actions under way, as the Web UI shows them."""
        return [action.description for action in self.under_way.values()]

    def start(self, action: AgentAction) -> None:
        """Run ``action`` now, or after those before it when ``max_actions_under_way`` run or
        this workflow task has scheduled :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`."""
        if self._phases.serve_while_draining:
            self.waiting.append(action)
            self.release()
            return
        if len(self.under_way) >= self.max_under_way():
            self.waiting.append(action)
            return
        self._launch(action)

    def release(self) -> None:
        """Schedule waiting actions, in order, while there is room under way and this workflow
        task has scheduled fewer than :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`; a closing
        run only those past :data:`~streamctl.limits.MAX_CARRIED_WAITING_ACTIONS`. For runs
        that serve while draining."""
        closing = self._phases.closing
        excess = len(self.waiting) - limits.MAX_CARRIED_WAITING_ACTIONS
        if closing and excess <= 0:
            return
        task = self._task_number()
        if task != self._launch_task:
            self._launch_task, self._launched_in_task = task, 0
        room = self.max_under_way() - len(self.under_way)
        count = min(room, limits.MAX_ACTIONS_PER_TASK - self._launched_in_task, len(self.waiting))
        if closing:
            count = min(count, excess)
        if count <= 0:
            return
        releasing = self.waiting[:count]
        del self.waiting[:count]
        self._launched_in_task += count
        for action in releasing:
            self._launch(action)

    def to_release(self) -> bool:
        """Actions wait that only this task's :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`
        holds back (the loop should come round soon)."""
        return (
            self._phases.serve_while_draining
            and not self._phases.closing
            and bool(self.waiting)
            and len(self.under_way) < self.max_under_way()
        )

    def _launch(self, action: AgentAction) -> None:
        task = asyncio.create_task(self._run(action))
        self.under_way[task] = action
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self.under_way.pop(task, None)
        if self._phases.serve_while_draining:
            self.release()
            return
        while self.waiting and len(self.under_way) < self.max_under_way():
            self.start(self.waiting.pop(0))
