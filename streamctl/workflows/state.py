"""What a coordinator run carries to the next through continue-as-new: one dataclass
(:class:`CoordinatorState`), and the workflow's input, which holds either a fresh configuration
or a previous run's state.

Every field is part of recorded histories: add fields with defaults, never rename or remove
one (a new worker must replay and continue older runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamctl.protocol.agent_contract import AgentAction
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.pass_io import PendingMessage


@dataclass
class CoordinatorState:
    """Everything a run hands to the next one through continue-as-new."""

    config: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    position_loaded: bool = False
    version: int = 0
    pass_no: int = 0
    pending: list[PendingMessage] = field(default_factory=list)
    sender_seqs: dict[str, int] = field(default_factory=dict)
    sender_seen_at: dict[str, float] = field(default_factory=dict)
    next_liveness_deadline: float | None = None
    last_pass_ms: float = 0.0
    runs: int = 1
    actions_under_way: list[AgentAction] = field(default_factory=list)
    # The workflow times of the two latest workflow tasks seen to run (a message arriving, a
    # pass returning): whether the coordinator could hear its agents while a liveness timer
    # was late (streamctl.workflows.liveness_clock).
    arrivals: int = 0
    """How many messages (events, request batches, the workflow's own events) have arrived in
    all runs: each takes the next number, which orders a pass's messages (``seq``). Carried, so
    the messages a run carries keep numbers below those of the next run's arrivals."""
    heard_at: float | None = None
    heard_before: float | None = None


@dataclass
class CoordinatorInput:
    config: CoordinatorConfig | None = None
    state: CoordinatorState | None = None
