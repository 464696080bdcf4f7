"""Spark actions: what the activities a Spark agent hosts for the coordinator do (imports
pyspark; the activities themselves are :mod:`streamctl.agent.activities`).

The protocol (who calls what, what comes back, which events an agent pushes) is in
:mod:`streamctl.protocol.agent_contract`. This module keeps one :class:`SparkQueries` per agent
process: the agent's SparkSession (:mod:`streamctl.agent.spark_handle`), the Spark queries it
started
keyed by catalog query id, and a ``StreamingQueryListener`` (:mod:`streamctl.agent.listener`)
that turns Spark's callbacks into ``QueryStatusChanged`` and ``Statistics`` events for the
coordinator.

Guarantees:

* At most one Spark query per query id: ``start`` and ``stop`` hold one lock, and ``start`` of
  a query that is active reports it instead of starting it again. An action that cannot get
  the lock within :data:`LOCK_TIMEOUT_S` fails as ``AgentBusy`` (retryable) instead of waiting
  forever behind a Spark call that hangs.
* The agent's load (for heartbeats) is counted without the lock and without calling Spark, so
  a hanging action never stops the heartbeats.
* A query runs under the Spark name ``q<id>`` with its checkpoint at
  ``<checkpoint root>/query-<id>``, so whichever agent starts it next resumes from the last
  committed batch (the checkpoint root must be shared storage when agents run on different
  machines).
* A query's termination is reported once, as ``STOPPED`` after a stop asked for, ``FINISHED``
  when bounded input ended, or ``CRASHED`` with Spark's error, also when it ends before its
  start action has recorded it; then the agent forgets the query, so a long-lived agent does
  not keep every query it ever ran (their plans and progress) in the JVM.
* A query's Spark query never ends unreported: besides the listener, the agent's watchdog
  (:mod:`streamctl.agent.spark_watchdog`) sweeps the runs every second and reports one that
  ended without a callback; every ``report_interval`` seconds it reports each run its
  coordinator started that is still active (``RUNNING`` with its run), so a run the coordinator
  no longer wants here (a start that landed after its action gave up, a stop that failed) is
  found and stopped as a stray. (Runs other callers start, tools and tests, are theirs.)
* When the agent's Spark dies, every run on it is reported ``CRASHED`` after its driver JVM is
  dead: the one the death is blamed on (:func:`streamctl.lifecycle.spark_states.suspect`) as an
  ordinary crash, or ``[CONTAINED]`` at its ``max_strikes``-th strike, the others
  ``[SPARK_LOST]`` (:mod:`streamctl.lifecycle.query_states`: they restart at once, without counting
  a
  restart). While Spark is being rebuilt, actions wait for it (bounded) or fail retryably
  (``SparkUnavailable``); none fails a query for good.
* Never two runs of one query: a start while a previous run of it is stopping waits for that
  run to end; a start that completes after its activity attempt gave up (timed out or
  cancelled) stops what it started and fails, since the coordinator may have placed the query
  elsewhere meanwhile; a run that does not stop within Spark's stop timeout is ended by
  killing the driver JVM (the agent rebuilds Spark; the other runs restart, blamed on nobody),
  so a stop answers ``STOPPED`` only when the run is gone.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from temporalio.exceptions import ApplicationError

from streamctl.agent.attempt import Attempt
from streamctl.agent.listener import QueryListener
from streamctl.agent.spark_handle import FixedSpark, SparkHandle
from streamctl.lifecycle.query_states import SPARK_CONTAINED, SPARK_LOST
from streamctl.lifecycle.spark_states import Containment, RunFacts, SparkPolicy, Strikes, suspect
from streamctl.protocol import messages as m
from streamctl.protocol import refusals
from streamctl.protocol.agent_contract import (
    AgentStatus,
    ExplainAssignment,
    ExplainReport,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    query_name,
)
from streamctl.spark.assignments import build_assignment
from streamctl.spark.session_kind import is_connect
from streamctl.spark.sink_writers import start_sink
from streamctl.spark.specs import SinkSpec
from streamctl.spark.sql_text import explainable
from streamctl.spark.translate import TranslatedQuery, spark_conf

log = logging.getLogger(__name__)

EXPLAIN_MODE = "formatted"
"""How Spark prints a plan for ``EXPLAIN``: the physical plan as an outline, then each
operator's details."""

LOCK_TIMEOUT_S = 60.0
"""How long an action waits for another start or stop of this agent to finish."""

MAX_STOPPED_RUNS = 10_000
"""Queries whose latest stopped run the agent remembers (a start of that run that comes after
its stop is answered STOPPED instead of run)."""
MAX_ENDED_EARLY = 1000
"""Run ids remembered as ended before their start was recorded (a bound: a run id of no query
of this agent would otherwise stay forever)."""

REPORT_INTERVAL_S = 5.0
"""How often the agent reports each run it has active (``RUNNING`` with its run number)."""

MAX_UNSENT = 10_000
"""Reports of ended runs kept while the client's outbox is full (sent again by the sweeps)."""

EventSink = Callable[[m.Event], None]
"""Where an agent's events go (the client's non-blocking ``try_send`` in the agent process)."""


@dataclass
class _Started:
    query: StreamingQuery
    run: int
    run_id: str  # Spark's run id, kept here so the listener needs no call into Spark
    stopping: bool = False
    generation: int = 1  # of the agent's Spark it runs on
    started_at: float = 0.0  # monotonic
    progressed_at: float | None = None  # its last completed micro-batch (monotonic)
    busy_since: float | None = None  # in a micro-batch since then, as the last sweep saw it
    reconciled: bool = False  # started by the coordinator's action: reported periodically


class SparkQueries:
    """The Spark queries of one agent."""

    def __init__(
        self,
        session: SparkSession,
        agent: str,
        checkpoint_root: Path,
        work_root: Path,
        emit: EventSink,
        *,
        coordinator: str | None = None,
        spark: SparkHandle | None = None,
        containment: Containment = Containment(),
        policy: SparkPolicy = SparkPolicy(),
        report_interval: float = REPORT_INTERVAL_S,
    ) -> None:
        self._spark: SparkHandle = spark if spark is not None else FixedSpark(session)
        self._coordinator = coordinator  # its workflow id: whose runs are reconciled
        self.agent = agent
        self.checkpoint_root = Path(checkpoint_root)
        self.work_root = Path(work_root)
        self._emit = emit
        self._containment = containment
        self._policy = policy
        self._report_interval = report_interval
        self._last_report = time.monotonic()
        self._lock = threading.RLock()  # one start or stop at a time
        # Guards the maps below and the reports about them, never a call into Spark: the
        # listener and the watchdog take it too.
        self._registry = threading.Lock()
        self._started: dict[int, _Started] = {}  # runs started here and not yet ended
        self._ended_early: dict[str, str | None] = {}  # run id -> error, ended before recorded
        self._active: set[int] = set()  # query ids started here and not yet terminated
        self._starting: tuple[int, float] | None = None  # (query, since) calling into Spark
        self._planning = 0  # explains and validations under way: Spark work of no query
        # query id -> the latest run a stop was asked for: a start of that run or an older one
        # that comes after its stop (retried, or overtaken by the stop) must not run
        self._stopped_runs: dict[int, int] = {}
        self._verdicts: dict[int, str] = {}  # a lost start's crash report, for its action
        self._strikes = Strikes(containment.memory)
        self._unsent: deque[m.Event] = deque(maxlen=MAX_UNSENT)
        self._listener = QueryListener(self)
        self.session.streams.addListener(self._listener)

    @property
    def session(self) -> Any:
        """The agent's current session (a new one after its Spark was rebuilt)."""
        return self._spark.session

    # --- actions --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, action: str) -> Iterator[None]:
        if not self._lock.acquire(timeout=LOCK_TIMEOUT_S):
            raise ApplicationError(
                f"agent {self.agent} is busy: another start or stop has held it for "
                f"{LOCK_TIMEOUT_S:.0f} s; {action} will be retried",
                type=refusals.AGENT_BUSY,
            )
        try:
            yield
        finally:
            self._lock.release()

    def _await_spark(self, attempt: Attempt, action: str) -> None:
        """Return once Spark is up; while it is being rebuilt wait (bounded), then refuse
        retryably: an action must not fail a query for good because Spark is down."""
        if self._spark.up:
            return
        wait = max(0.0, min(self._policy.wait_for_spark, attempt.remaining()))
        if not self._spark.wait_until_up(wait, attempt.heartbeat):
            raise self._unavailable(action)

    def _unavailable(self, action: str) -> ApplicationError:
        return ApplicationError(
            f"{SPARK_LOST} the Spark of agent {self.agent} is down and being rebuilt; "
            f"{action} will be retried",
            type=refusals.SPARK_UNAVAILABLE,
        )

    def start(self, assignment: QueryAssignment) -> QueryReport:
        query_id = assignment.query_id
        attempt = Attempt.current()
        self._await_spark(attempt, f"starting query {query_id}")
        with self._locked(f"starting query {query_id}"):
            if assignment.run <= self._stopped_runs.get(query_id, -1):
                # Its stop came first (the start waited for Spark, or was retried): started
                # now, the run would go on where the coordinator has it stopped, or started
                # elsewhere, two runs writing one checkpoint.
                return self._report(query_id, assignment.run, AgentStatus.STOPPED)
            current = self._started.get(query_id)
            if current is not None and current.stopping:
                self._await_end(current, attempt)  # never two runs of one query
                current = self._started.get(query_id)
            if current is not None and self._is_active(current):
                current.run = max(current.run, assignment.run)
                return self._report(query_id, current.run, AgentStatus.RUNNING)
            if not self._spark.up:
                raise self._unavailable(f"starting query {query_id}")
            if attempt.gave_up():  # waited too long for the lock or for Spark
                raise self._too_late(assignment, "did not start it")
            generation = self._spark.generation
            self._starting = (query_id, time.monotonic())
            try:
                try:
                    spark_query = self._start_on_spark(assignment)
                except Exception:
                    if self._spark.still_up(generation):
                        raise
                    return self._start_lost(assignment)
                if attempt.gave_up():
                    # The coordinator stopped waiting and may start the query elsewhere: two
                    # runs must never write one checkpoint.
                    with contextlib.suppress(Exception):
                        self._end_run(spark_query, generation, f"a late start of {query_id}")
                    raise self._too_late(assignment, "stopped it again")
                started = _Started(
                    spark_query,
                    assignment.run,
                    str(spark_query.runId),
                    generation=generation,
                    started_at=time.monotonic(),
                    reconciled=attempt.workflow_id is not None
                    and attempt.workflow_id == self._coordinator,
                )
                if not self._record_start(query_id, started):
                    return self._start_lost(assignment)
                return self._report(query_id, assignment.run, AgentStatus.RUNNING)
            finally:
                self._starting = None
                with self._registry:
                    self._verdicts.pop(query_id, None)

    def _start_on_spark(self, assignment: QueryAssignment) -> StreamingQuery:
        translated, sink = self._build(assignment)
        # Spark Connect analyses the plan when the query starts, so the planner's settings (C++
        # integer semantics) must hold then; a classic session analysed it already, and its
        # start copies the session's settings into the run's own: the session's own, never
        # another thread's temporary ones (spark_conf with none holds its lock alone).
        settings = translated.spark_conf if is_connect(self.session) else {}
        with spark_conf(self.session, settings):
            return start_sink(
                translated.dataframe,
                sink,
                query_name=query_name(assignment.query_id),
                checkpoint_dir=str(self.checkpoint_dir(assignment.query_id)),
                output_mode=translated.output_mode,
                available_now=translated.available_now,
            )

    def _too_late(self, assignment: QueryAssignment, outcome: str) -> ApplicationError:
        log.warning(
            "agent %s: the start of query %d (run %d) outlived its action: %s",
            self.agent, assignment.query_id, assignment.run, outcome,
        )  # fmt: skip
        return ApplicationError(
            f"the start of query {assignment.query_id} (run {assignment.run}) on agent "
            f"{self.agent} outlived its action (timed out or cancelled); {outcome}",
            type=refusals.START_TOO_LATE,
        )

    def _end_run(self, query: StreamingQuery, generation: int, what: str) -> None:
        """Stop a run for sure: one that does not stop within Spark's stop timeout is ended by
        killing its driver JVM, since the coordinator may start the query elsewhere next
        (the other runs restart, blamed on nobody). Raises if neither is possible."""
        try:
            query.stop()  # waits for the running micro-batch's thread
        except Exception as error:
            still_running = self._spark.still_up(generation) and _quietly_active(query)
            if still_running and not self._spark.kill(generation, f"{what} did not stop: {error}"):
                raise
            # Gone: its Spark died meanwhile (its JVM is killed), or it ended after all.

    def _start_lost(self, assignment: QueryAssignment) -> QueryReport:
        """The answer of a start whose Spark died under it: the crash it is blamed for, or (not
        to blame) a retryable refusal, so that it starts on the rebuilt Spark."""
        with self._registry:
            verdict = self._verdicts.pop(assignment.query_id, None)
        if verdict is None:
            raise self._unavailable(f"starting query {assignment.query_id}")
        return self._report(assignment.query_id, assignment.run, AgentStatus.CRASHED, verdict)

    def _await_end(self, started: _Started, attempt: Attempt) -> None:
        """Wait for a run being stopped (by a stop action outside the lock) to end."""
        timeout = max(1.0, min(self._policy.wait_for_spark, attempt.remaining()))
        with contextlib.suppress(Exception):  # ended with an error: ended all the same
            started.query.awaitTermination(int(timeout))
        if self._is_active(started):
            raise ApplicationError(
                f"agent {self.agent} is still stopping run {started.run} of this query; "
                "the start will be retried",
                type=refusals.AGENT_BUSY,
            )

    def stop(self, assignment: StopAssignment) -> QueryReport:
        with self._locked(f"stopping query {assignment.query_id}"):
            self._remember_stop(assignment.query_id, assignment.run)
            current = self._started.get(assignment.query_id)
            if current is None or not self._is_active(current):
                return self._report(assignment.query_id, assignment.run, AgentStatus.STOPPED)
            if assignment.run < current.run:
                # A stop decided before the coordinator started it here again: stale.
                return self._report(assignment.query_id, current.run, AgentStatus.RUNNING)
            current.stopping = True
        # Outside the lock: a stop waits for the running micro-batch.
        what = f"run {current.run} of query {assignment.query_id}"
        self._end_run(current.query, current.generation, what)
        self._active.discard(assignment.query_id)
        return self._report(assignment.query_id, assignment.run, AgentStatus.STOPPED)

    def _remember_stop(self, query_id: int, run: int) -> None:
        """Keep the latest run asked to stop per query (the oldest queries forgotten first:
        a start overtaken by its stop arrives within the action's retries, seconds later)."""
        self._stopped_runs[query_id] = max(run, self._stopped_runs.pop(query_id, run))
        while len(self._stopped_runs) > MAX_STOPPED_RUNS:
            del self._stopped_runs[next(iter(self._stopped_runs))]

    def list(self) -> list[QueryReport]:
        with self._locked("listing queries"):
            return [
                self._report(query_id, started.run, AgentStatus.RUNNING)
                for query_id, started in sorted(self._recorded())
                if self._is_active(started)
            ]

    @contextlib.contextmanager
    def _planning_work(self) -> Iterator[None]:
        """Spark work for no query (a plan built to validate or explain it): a death of Spark
        meanwhile is blamed on none of the queries running here (otherwise two explains of a
        statement that takes Spark down would get an innocent one contained)."""
        with self._registry:
            self._planning += 1
        try:
            yield
        finally:
            with self._registry:
                self._planning -= 1

    def validate(self, assignment: QueryAssignment) -> None:
        self._await_spark(Attempt.current(), f"validating query {assignment.query_id}")
        with self._planning_work():
            self._build(assignment)

    def explain(self, request: ExplainAssignment) -> ExplainReport:
        """Spark's plan for the query, built but never started (or why it cannot be built)."""
        try:
            self._await_spark(Attempt.current(), f"explaining {request.explanation_id}")
            with self._planning_work():
                translated, _sink = self._build(request.query)
                # Planned under the query's settings (spark_conf: no start or other build
                # changes them meanwhile).
                with (
                    spark_conf(self.session, translated.spark_conf),
                    contextlib.redirect_stdout(io.StringIO()) as printed,
                ):
                    explainable(translated.dataframe).explain(mode=EXPLAIN_MODE)
        except ApplicationError as error:
            if error.type in refusals.AGENT_RETRIES_LATER:
                raise
            return ExplainReport(request.explanation_id, self.agent, None, str(error))
        return ExplainReport(request.explanation_id, self.agent, printed.getvalue().strip())

    def active_count(self) -> int:
        return len(self._active)

    def checkpoint_dir(self, query_id: int) -> Path:
        return self.checkpoint_root / f"query-{query_id}"

    def stop_all(self) -> None:
        with self._lock:
            running = [s for _, s in self._recorded() if _quietly_active(s.query)]
            for started in running:
                started.stopping = True
        for started in running:
            _stop_quietly(started.query)

    def _is_active(self, started: _Started) -> bool:
        """Whether the run still runs; a run of a Spark that died does not."""
        if started.generation != self._spark.generation:
            return False
        try:
            return bool(started.query.isActive)
        except Exception:
            if self._spark.still_up(started.generation):
                raise
            return False

    def _build(self, assignment: QueryAssignment) -> tuple[TranslatedQuery, SinkSpec]:
        return build_assignment(self.session, self.agent, self.work_root, assignment)

    # --- reports --------------------------------------------------------------------------

    def _report(
        self, query_id: int, run: int, status: AgentStatus, error: str | None = None
    ) -> QueryReport:
        return QueryReport(query_id, run, str(status), self.agent, error)

    def _query_id_of(self, name: str | None) -> int | None:
        if not name or not name.startswith("q") or not name[1:].isdigit():
            return None  # not one of ours
        return int(name[1:])

    def on_terminated(self, run_id: str, error: str | None) -> None:
        """Spark ended the run ``run_id``: report how, and forget the query (a terminated
        ``StreamingQuery`` keeps its plans and progress alive in the JVM)."""
        # Spark's listener thread never takes the action lock: an action holding it may be
        # waiting on Spark, and Spark on this callback.
        with self._registry:
            ended = next(((qid, s) for qid, s in self._started.items() if s.run_id == run_id), None)
            if ended is None:
                # A bounded query can end before start() has recorded its run: start()
                # reports it when it does.
                self._ended_early[run_id] = error
                while len(self._ended_early) > MAX_ENDED_EARLY:
                    del self._ended_early[next(iter(self._ended_early))]
                return
        query_id, started = ended
        # An error may be Spark itself going down (a stopped SparkContext fails every run):
        # then the runs are reported as lost with it, and the death blamed on one of them.
        if error and not self._spark.still_up(started.generation):
            return
        with self._registry:
            if self._started.get(query_id) is not started:
                return  # reported by whoever forgot it first
            del self._started[query_id]
            self._report_end(query_id, started, error)

    def _recorded(self) -> tuple[tuple[int, _Started], ...]:
        with self._registry:
            return tuple(self._started.items())

    def _record_start(self, query_id: int, started: _Started) -> bool:
        """Record a started run; False if its Spark was lost meanwhile (nothing recorded)."""
        with self._registry:
            # Spark turns DOWN before its runs are reported lost under this lock: a run
            # recorded here is reported then, and one of a lost Spark is never recorded.
            if not self._spark.up or self._spark.generation != started.generation:
                return False
            self._started[query_id] = started
            self._active.add(query_id)
            if started.run_id in self._ended_early:
                error = self._ended_early.pop(started.run_id)
                del self._started[query_id]
                self._report_end(query_id, started, error)
        return True

    def _report_end(self, query_id: int, started: _Started, error: str | None) -> None:
        """Report a run's end (under the registry lock, so that no periodic ``RUNNING``
        report of it can follow)."""
        self._active.discard(query_id)
        if error:
            status = AgentStatus.CRASHED
        elif started.stopping:
            status = AgentStatus.STOPPED
        else:
            status = AgentStatus.FINISHED
        self._send(
            m.QueryStatusChanged(query_id, str(status), error, agent=self.agent, run=started.run)
        )

    def _send(self, event: m.Event) -> None:
        """Emit ``event``. A report of a run's end that the outbox cannot take now (the
        coordinator is away) is kept and sent again by the next sweep: lost, it would leave
        the coordinator believing a dead run runs. Progress and ``RUNNING`` reports come
        again anyway."""
        try:
            self._emit(event)
        except Exception as error:
            ended = isinstance(event, m.QueryStatusChanged) and event.status != AgentStatus.RUNNING
            if ended:
                self._unsent.append(event)
            log.warning("agent %s: could not send %s (%s)", self.agent, type(event).__name__, error)

    def _send_unsent(self) -> None:
        with self._registry:
            while self._unsent:
                try:
                    self._emit(self._unsent[0])
                except Exception:
                    return
                self._unsent.popleft()

    def on_progress(self, name: str | None, run_id: str, values: dict[str, float]) -> None:
        query_id = self._query_id_of(name)
        if query_id is None:
            return
        started = self._started.get(query_id)
        if started is not None and started.run_id == run_id:
            started.progressed_at = time.monotonic()
        self._send(m.Statistics(query_id, values))

    # --- the agent's Spark (streamctl.agent.spark_watchdog.SparkUser) ---------------------

    def spark_tick(self) -> None:
        """Each second while Spark is up: report runs that ended without a callback, note
        which runs are in a micro-batch (for the blame if Spark dies), and every
        ``report_interval`` report the active runs."""
        self._send_unsent()
        generation = self._spark.generation
        now = time.monotonic()
        for _query_id, started in self._recorded():
            if started.generation != generation:
                continue
            query = started.query
            if not query.isActive:
                self.on_terminated(started.run_id, _error_of(query))
                continue
            status = query.status
            if status.get("isTriggerActive") and status.get("isDataAvailable"):
                # In a micro-batch that began after the last one completed.
                started.busy_since = started.progressed_at or started.started_at
            else:
                started.busy_since = None
        if now - self._last_report >= self._report_interval:
            self._last_report = now
            with self._registry:
                for query_id, started in self._started.items():
                    if started.generation == generation and started.reconciled:
                        self._send(
                            m.QueryStatusChanged(
                                query_id,
                                str(AgentStatus.RUNNING),
                                agent=self.agent,
                                run=started.run,
                            )
                        )

    def spark_lost(self, generation: int, reason: str, by_itself: bool) -> None:
        """Spark ``generation`` died (its JVM is dead already): report every run on it
        ``CRASHED``; a death ``by_itself`` (not a JVM killed from outside) is blamed on at most
        one of them (streamctl.lifecycle.spark_states)."""
        now = time.monotonic()
        starting = self._starting
        limit = self._containment.max_strikes
        with self._registry:
            lost = [(q, s) for q, s in self._started.items() if s.generation <= generation]
            facts = [
                RunFacts(
                    query_id,
                    started.started_at,
                    started.busy_since,
                    started.progressed_at is not None,
                    self._strikes.count(query_id, now),
                )
                for query_id, started in lost
            ]
            if starting is not None and all(q != starting[0] for q, _ in lost):
                since = starting[1]
                facts.append(RunFacts(starting[0], since, since, False))  # its start is its work
            window = self._containment.suspect_window
            blamed = suspect(facts, now, window) if by_itself and not self._planning else None
            strikes = self._strikes.add(blamed, now) if blamed is not None else 0
            for query_id, _started in lost:
                del self._started[query_id]
                self._active.discard(query_id)
            for query_id, started in lost:
                error = (
                    self._blame(query_id, reason, strikes, limit)
                    if query_id == blamed
                    else f"{SPARK_LOST} the Spark of agent {self.agent} went down ({reason}); "
                    "the query restarts from its checkpoint"
                )
                self._send(
                    m.QueryStatusChanged(
                        query_id, str(AgentStatus.CRASHED), error, agent=self.agent, run=started.run
                    )
                )
            if blamed is not None and all(q != blamed for q, _ in lost):
                # Blamed while starting: its start action answers with the crash.
                self._verdicts[blamed] = self._blame(blamed, reason, strikes, limit)
        if blamed is not None:
            log.warning(
                "agent %s: Spark died (%s); blamed on query %d (strike %d of %d); %d run(s) lost",
                self.agent, reason, blamed, strikes, limit, len(lost),
            )  # fmt: skip

    def _blame(self, query_id: int, reason: str, strikes: int, limit: int) -> str:
        if strikes >= limit:
            return (
                f"{SPARK_CONTAINED} query {query_id} took the Spark of agent {self.agent} down "
                f"{strikes} times (last: {reason}); it is not restarted, so that it takes no "
                "other query down with it"
            )
        return (
            f"the Spark of agent {self.agent} went down ({reason}), blamed on this query "
            f"(strike {strikes} of {limit}; at {limit} it is not restarted)"
        )

    def spark_recreated(self, session: Any, generation: int) -> None:
        """A new session (on a new JVM) replaced the lost one: listen to its queries."""
        self._listener = QueryListener(self)  # a listener is bound to the JVM it was added to
        session.streams.addListener(self._listener)


def _error_of(query: StreamingQuery) -> str | None:
    try:
        exception = query.exception()
    except Exception as error:
        return str(error) or type(error).__name__
    return None if exception is None else str(exception)


def _quietly_active(query: StreamingQuery) -> bool:
    try:
        return bool(query.isActive)
    except Exception:
        return False


def _stop_quietly(query: StreamingQuery) -> None:
    try:
        query.stop()
    except Exception:
        log.exception("could not stop streaming query %s", getattr(query, "name", "?"))
