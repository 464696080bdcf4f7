"""An agent's Spark watchdog: finds a dead Spark within seconds and rebuilds it, or gives up.

Protocol
--------
* The watchdog owns the agent's current session and its generation (1, 2, ...: one per session
  it built) and moves Spark through its lifecycle (:mod:`streamctl.lifecycle.spark_states`). The
  agent's parts that depend on Spark implement :class:`SparkUser`.
* A thread probes the session every ``probe_interval`` (:func:`~streamctl.agent.spark_session.
  spark_down_reason`: the driver JVM exited, the SparkContext stopped, or no answer within
  ``probe_timeout``) and, while it answers, runs the users' ``spark_tick`` (bounded alike: a
  tick that hangs means a hung JVM). Any thread may ask :meth:`still_up`, which probes at once
  (an action whose Spark call failed asks whether Spark died under it).
* When a probe fails, Spark turns ``DOWN`` and the watchdog, in this order: kills the old
  driver JVM (nothing it ran writes any more), tells the users ``spark_lost(generation,
  reason)`` (once per generation: they report their queries lost), builds a new session on a
  new JVM (``rebuild_attempts`` tries, with backoff), tells the users ``spark_recreated`` and
  turns ``UP`` again. Actions wait for that with :meth:`wait_until_up` (bounded).
* More than ``max_losses`` losses within ``loss_window``, or a session that cannot be rebuilt:
  ``BROKEN``, final; ``on_broken(reason)`` ends the agent, which unregisters so that its queries
  recover on other agents.

Guarantees: one session is live at a time; a generation's queries are reported lost only after
its JVM is dead (never two writers of one checkpoint); a session is handed to actions only after
its users know it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from streamctl.agent.spark_session import (
    discard_spark_session,
    killed_by_signal,
    spark_down_reason,
)
from streamctl.lifecycle.spark_states import SparkPolicy, SparkState, SparkTrigger, transition

log = logging.getLogger(__name__)


class SparkUser(Protocol):
    """A part of the agent that depends on its Spark. Its callbacks must not call back into
    the watchdog's :meth:`SparkWatchdog.still_up` from ``spark_lost`` or ``spark_recreated``
    (they run under the watchdog's lock); ``spark_tick`` may."""

    def spark_lost(self, generation: int, reason: str, by_itself: bool) -> None:
        """Spark ``generation`` died (its JVM is dead); ``by_itself``: not killed from
        outside, so what it ran may be to blame."""
        ...

    def spark_recreated(self, session: Any, generation: int) -> None: ...

    def spark_tick(self) -> None: ...


class SparkBroken(RuntimeError):
    """The agent could not keep its Spark alive; it must stop (and unregister)."""


class SparkWatchdog:
    """Keeps one agent's Spark alive, or says that it cannot (see the module docstring)."""

    def __init__(
        self,
        session: Any,
        build: Callable[[], Any],
        *,
        name: str,
        policy: SparkPolicy = SparkPolicy(),
        on_broken: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._session = session
        self._build = build
        self._name = name
        self.policy = policy
        self._on_broken = on_broken
        self._generation = 1
        self._state = SparkState.UP
        self._users: list[SparkUser] = []
        # Held while probing and while changing state; never while building a session.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._losses: deque[float] = deque()
        self._last_reason = ""
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        # Probes run under the lock, sweeps on the watchdog's thread: one caller each.
        self._probes = _BoundedCaller(f"spark-probe-{name}")
        self._sweeps = _BoundedCaller(f"spark-sweep-{name}")
        self.broken_reason: str | None = None

    # --- what actions see --------------------------------------------------------------------

    @property
    def session(self) -> Any:
        return self._session

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def state(self) -> SparkState:
        return self._state

    @property
    def up(self) -> bool:
        return self._state is SparkState.UP

    def still_up(self, generation: int) -> bool:
        """Whether the Spark of ``generation`` is the live one; probes it now, and a failed
        probe starts the recovery (:meth:`_lose`)."""
        with self._lock:
            if generation != self._generation or self._state is not SparkState.UP:
                return False
            reason = self._probe(lambda: spark_down_reason(self._session))
            if reason is None:
                return True
            self._lose(reason)
            return False

    def kill(self, generation: int, reason: str) -> bool:
        """Kill the Spark of ``generation`` on purpose (a run that will not stop: only its JVM's
        death makes sure it writes no more) and rebuild it like a lost one, blaming no query;
        whether that Spark is gone now."""
        with self._lock:
            if generation == self._generation and self._state is SparkState.UP:
                self._lose(reason, by_itself=False)
            return generation != self._generation or self._state is not SparkState.UP

    def wait_until_up(self, timeout: float, on_wait: Callable[[], None] | None = None) -> bool:
        """Wait at most ``timeout`` seconds while Spark is being rebuilt (calling ``on_wait``
        about every second); whether it is up."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                remaining = deadline - time.monotonic()
                if self._state is not SparkState.DOWN or remaining <= 0:
                    return self._state is SparkState.UP
                self._changed.wait(min(1.0, remaining))
            if on_wait is not None:
                on_wait()

    # --- the watchdog ----------------------------------------------------------------------

    def add_user(self, user: SparkUser) -> None:
        """Users are told of losses and new sessions in the order they were added."""
        self._users.append(user)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spark-watchdog", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Stop watching (before the agent stops its session on purpose)."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._closing.is_set():
            if self._state is SparkState.BROKEN:
                return
            if self._state is SparkState.DOWN:
                self._recover()
                continue
            self._wake.wait(self.policy.probe_interval)
            self._wake.clear()
            generation = self._generation
            if self._closing.is_set() or not self.still_up(generation):
                continue
            if not self._sweeps.run(self._tick, self.policy.probe_timeout):  # a hung JVM
                with self._lock:
                    if generation == self._generation and self._state is SparkState.UP:
                        self._lose(self._no_answer())

    def _tick(self) -> None:
        for user in self._users:
            try:
                user.spark_tick()
            except Exception:  # Spark's health is the probe's to judge, not a tick's error
                if not self._closing.is_set():
                    log.exception("agent %s: a sweep of the queries failed", self._name)

    def _probe(self, check: Callable[[], str | None]) -> str | None:
        """``check``'s answer (why Spark is down, or None), or why Spark counts as down when
        it does not answer within ``probe_timeout`` or fails."""
        outcome: list[str | None] = []

        def call() -> None:
            try:
                outcome.append(check())
            except Exception as error:
                log.exception("agent %s: a probe of Spark failed", self._name)
                outcome.append(f"a probe of Spark failed: {type(error).__name__}: {error}")

        if not self._probes.run(call, self.policy.probe_timeout):
            return self._no_answer()
        return outcome[0] if outcome else "a probe of Spark ended without an answer"

    def _no_answer(self) -> str:
        return f"Spark did not answer within {self.policy.probe_timeout:.0f} s"

    def _lose(self, reason: str, by_itself: bool | None = None) -> None:
        """Spark is dead (under the lock): kill its JVM, then tell the users. It died by
        itself unless it was killed on purpose or by a signal from outside."""
        self._state = transition(self._state, SparkTrigger.LOST)
        generation = self._generation
        self._last_reason = reason
        self._losses.append(time.monotonic())
        if by_itself is None:
            by_itself = not killed_by_signal(self._session)
        log.error("agent %s: Spark (session %d) is down: %s", self._name, generation, reason)
        try:
            discard_spark_session(self._session)
        except Exception:
            log.exception("agent %s: discarding the dead session failed", self._name)
        for user in self._users:
            try:
                user.spark_lost(generation, reason, by_itself)
            except Exception:
                log.exception("agent %s: reporting the loss of Spark failed", self._name)
        self._wake.set()

    def _recover(self) -> None:
        now = time.monotonic()
        while self._losses and now - self._losses[0] > self.policy.loss_window:
            self._losses.popleft()
        if len(self._losses) > self.policy.max_losses:
            self._give_up(
                f"Spark went down {len(self._losses)} times within "
                f"{self.policy.loss_window:.0f} s (last: {self._last_reason})"
            )
            return
        error: Exception | None = None
        for attempt in range(1, self.policy.rebuild_attempts + 1):
            if self._closing.is_set():
                return
            started = time.monotonic()
            try:
                session = self._build()
            except Exception as failure:
                error = failure
                log.exception("agent %s: building a new Spark session failed", self._name)
                self._closing.wait(self.policy.rebuild_backoff * attempt)
                continue
            with self._lock:
                self._session = session
                self._generation += 1
                for user in self._users:
                    try:
                        user.spark_recreated(session, self._generation)
                    except Exception:
                        log.exception("agent %s: setting up the new session failed", self._name)
                self._state = transition(self._state, SparkTrigger.RECREATED)
                self._changed.notify_all()
            log.warning(
                "agent %s: Spark is up again (session %d, built in %.1f s)",
                self._name, self._generation, time.monotonic() - started,
            )  # fmt: skip
            return
        self._give_up(f"a new Spark session could not be built: {error}")

    def _give_up(self, reason: str) -> None:
        with self._lock:
            self._state = transition(self._state, SparkTrigger.GIVE_UP)
            self.broken_reason = reason
            self._changed.notify_all()
        log.error("agent %s: giving up on Spark: %s", self._name, reason)
        self._on_broken(reason)


class _BoundedCaller:
    """Runs calls into Spark on one long-lived thread and waits for each a bounded time.

    One thread, not one per call: Py4J pins a connection (and a JVM thread) to each Python
    thread, so a thread per probe would open and close one every second. A call that does not
    return in time leaves its thread behind (stuck in the hung JVM until it is killed); the
    next call gets a new thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event] | None] | None
        self._jobs = None

    def run(self, call: Callable[[], None], timeout: float) -> bool:
        """Whether ``call`` returned within ``timeout`` seconds (its exceptions are its own)."""
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(jobs,), name=self._name, daemon=True).start()
        done = threading.Event()
        jobs.put((call, done))
        if done.wait(timeout):
            return True
        jobs.put(None)  # the stuck thread ends once its call returns
        self._jobs = None
        return False


def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event] | None]) -> None:
    while (job := jobs.get()) is not None:
        call, done = job
        try:
            call()
        except Exception:
            log.exception("a call into Spark failed")
        finally:
            done.set()
