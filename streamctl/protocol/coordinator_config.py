"""The coordinator's configuration, its name and task queue, and the status it reports: what
clients, workers and the workflow share, without importing the workflow class's module.

A leaf of :mod:`streamctl.workflows`: plain dataclasses, no Temporal workflow code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from streamctl.config import DEFAULT_BATCH_SIZE, DEFAULT_BATCH_TIMEOUT
from streamctl.limits import MAX_ACTIONS_UNDER_WAY

COORDINATOR_WORKFLOW_ID = "coordinator"
COORDINATOR_TASK_QUEUE = "coordinator"
COORDINATOR_TASK_TIMEOUT = timedelta(seconds=30)
"""How long one workflow task of the coordinator may take (Temporal's default: 10 s). A worker
that lost the run from its cache (a refused continue-as-new, a restarted worker) replays the
whole run in one task, and under load on 2 cores a long run's replay takes over 10 s; a
replay that times out is followed by one of a still longer run, so the coordinator would never
run again. The cost: a worker killed in the middle of a task delays the next one by up to
this."""


@dataclass
class CoordinatorConfig:
    """The knobs. ``batch_size`` and ``timeout`` are the ones a user must know."""

    batch_size: int = DEFAULT_BATCH_SIZE
    timeout: float = DEFAULT_BATCH_TIMEOUT
    max_pending: int = 20_000
    max_batch_bytes: int = 1_000_000
    passes_per_run: int = 1000
    max_history_events: int = 2000
    action_drain_timeout: float = 5.0
    """How long a run that is due to continue as new waits for its actions under way (it goes
    on answering requests meanwhile, but decides no starts); the next run runs the rest again."""
    max_actions_under_way: int = MAX_ACTIONS_UNDER_WAY
    """Agent actions run at once (pending activities); more wait in the workflow, in order."""
    suspect_after: float = 10.0
    dead_after: float = 30.0
    max_restarts: int = 5
    restart_delay: float = 1.0
    restart_max_delay: float = 60.0
    pass_timeout: float = 15.0
    search_attributes: bool = False
    """Whether the namespace has the Web UI's search attributes (:mod:`.web_ui`); an upsert of
    an unknown one would fail the workflow task, so without them the workflow upserts none."""
    catalog_kind: str = ""
    """``sqlite`` or ``postgresql``: shown in the memo (the URL may hold credentials)."""

    def problems(self) -> list[str]:
        """What makes this configuration unusable, a sentence per knob (none: it is usable).
        Counts are integers of at least 1 (``max_restarts``: 0; ``max_actions_under_way`` at
        most ``MAX_ACTIONS_UNDER_WAY``); durations are seconds within ``[0, MAX_CONFIG_SECONDS]``
        (the batching ``timeout`` at most ``MAX_BATCH_TIMEOUT``), ``suspect_after``,
        ``dead_after`` and ``pass_timeout`` at least ``MIN_NONZERO_SECONDS``."""
        found = (_knob_problem(name, getattr(self, name), _START_BOUNDS) for name in _BOUNDS)
        return [problem for problem in found if problem is not None]

    def usable(self) -> CoordinatorConfig:
        """This configuration with each unusable knob (:meth:`problems`) at its default: what
        the workflow runs with, since a NaN or infinite timer, or a batch of no events, would
        fail or stall its every workflow task. A ``max_actions_under_way`` above
        ``MAX_ACTIONS_UNDER_WAY`` is kept: runs that held one before it was refused must
        replay; the workflow caps it."""
        defaults = CoordinatorConfig()
        fixes = {
            name: getattr(defaults, name)
            for name in _BOUNDS
            if _knob_problem(name, getattr(self, name), _BOUNDS) is not None
        }
        return dataclasses.replace(self, **fixes) if fixes else self


def _knob_problem(name: str, value: Any, bounds: dict[str, tuple[Any, Any]]) -> str | None:
    """Why ``value`` cannot be the knob ``name`` (by ``bounds``), or None when it can."""
    low, high = bounds[name]
    integer = isinstance(low, int)
    if (
        not isinstance(value, bool)
        and isinstance(value, int if integer else (int, float))
        # false for NaN and the infinities too (no timer takes them); compared, not
        # converted, so an integer of any size is refused without OverflowError
        and low <= value <= high
        and not (name in _ABOVE_ZERO and value < MIN_NONZERO_SECONDS)
    ):
        return None
    if integer:
        allowed = f"an integer from {low} to {high}"
    elif name in _ABOVE_ZERO:
        allowed = f"a number of seconds from {MIN_NONZERO_SECONDS:g} to {high:g}"
    else:
        allowed = f"a number of seconds from {low:g} to {high:g}"
    shown = repr(value)
    if len(shown) > 40:
        shown = f"{shown[:37]}..."
    return f"{name} must be {allowed}, not {shown}"


MAX_BATCH_TIMEOUT: Final = 60.0
"""The longest batching ``timeout``: a request waits this long for its pass at most."""
MAX_CONFIG_SECONDS: Final = 86_400.0
"""The longest duration a knob may hold (a day); beyond, Temporal's timers overflow."""
_MAX_COUNT: Final = 2**31 - 1
_BOUNDS: Final[dict[str, tuple[Any, Any]]] = {
    "batch_size": (1, _MAX_COUNT),
    "timeout": (0.0, MAX_BATCH_TIMEOUT),
    "max_pending": (1, _MAX_COUNT),
    "max_batch_bytes": (1, _MAX_COUNT),
    "passes_per_run": (1, _MAX_COUNT),
    "max_history_events": (1, _MAX_COUNT),
    "action_drain_timeout": (0.0, MAX_CONFIG_SECONDS),
    "max_actions_under_way": (1, _MAX_COUNT),
    "suspect_after": (0.0, MAX_CONFIG_SECONDS),
    "dead_after": (0.0, MAX_CONFIG_SECONDS),
    "max_restarts": (0, _MAX_COUNT),
    "restart_delay": (0.0, MAX_CONFIG_SECONDS),
    "restart_max_delay": (0.0, MAX_CONFIG_SECONDS),
    "pass_timeout": (0.0, MAX_CONFIG_SECONDS),
}
_START_BOUNDS: Final[dict[str, tuple[Any, Any]]] = {
    **_BOUNDS,
    # Temporal fails every workflow task that holds more than 2,000 pending activities. A
    # configuration that starts a workflow is refused above this; one a run already holds
    # (usable()) keeps its value, which the workflow caps itself, behind a patch, so that
    # runs recorded before replay.
    "max_actions_under_way": (1, MAX_ACTIONS_UNDER_WAY),
}
_ABOVE_ZERO: Final = frozenset({"suspect_after", "dead_after", "pass_timeout"})
"""Durations that must not be zero: each becomes a timer or an activity's timeout."""
MIN_NONZERO_SECONDS: Final = 0.001
"""The shortest of those: a timedelta keeps microseconds and Temporal milliseconds, so a
shorter one became a zero timeout, which fails the workflow task that schedules it."""


@dataclass
class CoordinatorStatus:
    version: int
    pending: int
    pending_requests: int
    passes_run: int
    passes_this_run: int
    last_pass_ms: float
    draining: bool
    runs: int
    config: CoordinatorConfig


REOPTIMIZATION_WORKFLOW = "Reoptimization"
"""The type name of the reoptimization workflow a schedule starts."""


@dataclass(frozen=True)
class ReoptimizeTarget:
    """Which coordinator to ask, and the request id to ask under."""

    coordinator_workflow_id: str
    request_id: str = ""
