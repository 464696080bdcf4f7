"""What a chaos run is (:mod:`streamctl.bench.chaos`): its settings, the seeded kill schedule,
and the record it keeps of requests sent and processes killed."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamctl.bench.private_postgres import PrivatePostgres
from streamctl.protocol import messages as m
from streamctl.worker.supervisor import Supervisor

KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}
TARGETS = ("coordinator_worker", "agent", "spark_jvm", "temporal", "postgres")


SPARK_TARGETS = ("agent", "spark_jvm")


COLUMNS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "UINT64", False))


SINK_SCHEMA = [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in COLUMNS]


KILL_WINDOW = (0.1, 0.75)
"""Kills fall within these fractions of the run, leaving a quarter of it to recover."""


MIN_KILL_GAP_S = 8.0


POSTGRES_DOWNTIME_S = (2.0, 6.0)


ROWS_PER_FILE = 10


@dataclass
class ChaosSettings:
    seconds: float = 300.0
    seed: int = 0
    agents: int = 2
    queries: int = 4
    coordinators: int = 2
    simulated_agents: int = 50
    request_rate: float = 4.0
    heartbeat_interval: float = 2.0
    feed_interval: float = 1.0
    request_timeout: float = 180.0
    sink_timeout: float = 300.0
    master: str = "local[1]"
    capacity: int = 4
    kills: dict[str, int] | None = None
    """Kills per target for the whole run; None: :data:`KILLS_PER_5_MIN` scaled to ``seconds``."""
    keep_state: bool = False

    def kill_counts(self) -> dict[str, int]:
        if self.kills is not None:
            unknown = set(self.kills) - set(TARGETS)
            if unknown:
                raise ValueError(f"unknown kill targets {sorted(unknown)}; known: {TARGETS}")
            counts = dict(self.kills)
        else:
            counts = {
                target: max(1, round(per_5_min * self.seconds / 300))
                for target, per_5_min in KILLS_PER_5_MIN.items()
            }
        if self.agents == 0:
            for target in SPARK_TARGETS:
                if counts.get(target):
                    if self.kills is not None:
                        raise ValueError(f"cannot kill {target} without agents")
                    counts.pop(target)
        return {target: n for target, n in counts.items() if n > 0}


def kill_schedule(settings_: ChaosSettings) -> list[tuple[float, str]]:
    """(seconds into the load, target) for every kill, sorted; the same seed, the same list."""
    rng = random.Random(settings_.seed)
    targets = [t for t, n in sorted(settings_.kill_counts().items()) for _ in range(n)]
    rng.shuffle(targets)
    low, high = (fraction * settings_.seconds for fraction in KILL_WINDOW)
    gap = min(MIN_KILL_GAP_S, (high - low) / (len(targets) + 1)) if targets else 0.0
    for _ in range(1000):
        times = sorted(rng.uniform(low, high) for _ in targets)
        if all(b - a >= gap for a, b in itertools.pairwise(times)):
            break
    else:  # evenly spread, jittered within the gap
        step = (high - low) / max(1, len(targets))
        times = [low + step * i + rng.uniform(0, step - gap) for i in range(len(targets))]
    return [(round(at, 2), target) for at, target in zip(times, targets, strict=True)]


@dataclass
class SentRequest:
    name: str
    request_id: str
    sent_s: float
    outcome: str = "pending"
    """``ok``, an error code, or ``failed: <client error>``."""
    latency_s: float | None = None


@dataclass
class Kill:
    target: str
    at_s: float
    scheduled_s: float
    pid: int | None = None
    which: str | None = None
    slot: int | None = None
    """The supervisor's index of the killed coordinator worker or agent."""
    restarted_after_s: float | None = None
    jvm_exited_after_s: float | None = None
    """An agent's kill: how long its driver JVM outlived it (None: still alive after 60 s)."""
    jvms: list[int] = field(default_factory=list)
    wall: float = 0.0
    note: str | None = None

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at_s": round(self.at_s, 1),
            "pid": self.pid,
            "which": self.which,
            "restarted_after_s": (
                None if self.restarted_after_s is None else round(self.restarted_after_s, 1)
            ),
        }
        if self.target == "agent":
            out["jvm_exited_after_s"] = (
                None if self.jvm_exited_after_s is None else round(self.jvm_exited_after_s, 1)
            )
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class ChaosRun:
    settings: ChaosSettings
    root: Path
    supervisor: Supervisor
    postgres: PrivatePostgres
    t0: float = 0.0
    wall0: float = 0.0
    stopping: bool = False
    requests: list[SentRequest] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    fed: dict[int, int] = field(default_factory=dict)
    """Rows fed per query index (ids 1..n)."""
    heartbeats_sent: int = 0
    heartbeats_outbox_full: int = 0
    heartbeat_max_gap_s: float = 0.0
    supervisor_failures: list[str] = field(default_factory=list)
    background: list[asyncio.Task[Any]] = field(default_factory=list)

    def now_s(self) -> float:
        return time.monotonic() - self.t0


def sim_names(count: int) -> list[str]:
    return [f"sim_{index:03d}" for index in range(count)]
