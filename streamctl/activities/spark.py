"""Spark actions: the activities a Spark agent hosts for the coordinator (imports pyspark).

The protocol (who calls what, what comes back, which events an agent pushes) is in
:mod:`streamctl.workflows.actions`. This module keeps one :class:`SparkQueries` per agent
process: the agent's SparkSession, the Spark queries it started keyed by catalog query id, and
a ``StreamingQueryListener`` that turns Spark's callbacks into ``QueryStatusChanged`` and
``Statistics`` events for the coordinator.

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
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener
from pyspark.sql.streaming.query import StreamingQuery
from temporalio import activity
from temporalio.exceptions import ApplicationError

from streamctl.planner.connectors.sinks import start_sink
from streamctl.planner.connectors.sources import is_bounded, read_source
from streamctl.planner.connectors.specs import ConnectorError, SinkSpec, SourceSpec
from streamctl.planner.errors import PlannerError
from streamctl.planner.plan import QueryPlan
from streamctl.planner.translate import TranslatedQuery, build, spark_conf
from streamctl.workflows import messages as m
from streamctl.workflows.actions import (
    AgentStatus,
    ExplainAssignment,
    ExplainReport,
    QueryAssignment,
    QueryReport,
    StopAssignment,
    query_name,
)

log = logging.getLogger(__name__)

EXPLAIN_MODE = "formatted"
"""How Spark prints a plan for ``EXPLAIN``: the physical plan as an outline, then each
operator's details."""

LOCK_TIMEOUT_S = 60.0
"""How long an action waits for another start or stop of this agent to finish."""

MAX_ENDED_EARLY = 1000
"""Run ids remembered as ended before their start was recorded (a bound: a run id of no query
of this agent would otherwise stay forever)."""

EventSink = Callable[[m.Event], None]
"""Where an agent's events go (the client's non-blocking ``try_send`` in the agent process)."""


@dataclass
class _Started:
    query: StreamingQuery
    run: int
    run_id: str  # Spark's run id, kept here so the listener needs no call into Spark
    stopping: bool = False


class SparkQueries:
    """The Spark queries of one agent."""

    def __init__(
        self,
        session: SparkSession,
        agent: str,
        checkpoint_root: Path,
        work_root: Path,
        emit: EventSink,
    ) -> None:
        self.session = session
        self.agent = agent
        self.checkpoint_root = Path(checkpoint_root)
        self.work_root = Path(work_root)
        self._emit = emit
        self._lock = threading.RLock()  # one start or stop at a time
        # Guards the two maps below only, never a call into Spark: the listener takes it too.
        self._registry = threading.Lock()
        self._started: dict[int, _Started] = {}  # runs started here and not yet ended
        self._ended_early: dict[str, str | None] = {}  # run id -> error, ended before recorded
        self._active: set[int] = set()  # query ids started here and not yet terminated
        self._listener = _Listener(self)
        session.streams.addListener(self._listener)

    # --- actions --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, action: str) -> Iterator[None]:
        if not self._lock.acquire(timeout=LOCK_TIMEOUT_S):
            raise ApplicationError(
                f"agent {self.agent} is busy: another start or stop has held it for "
                f"{LOCK_TIMEOUT_S:.0f} s; {action} will be retried",
                type="AgentBusy",
            )
        try:
            yield
        finally:
            self._lock.release()

    def start(self, assignment: QueryAssignment) -> QueryReport:
        with self._locked(f"starting query {assignment.query_id}"):
            current = self._started.get(assignment.query_id)
            if current is not None and current.query.isActive:
                current.run = max(current.run, assignment.run)
                return self._report(assignment.query_id, current.run, AgentStatus.RUNNING)
            translated, sink = self._build(assignment)
            # Spark Connect analyses the plan when the query starts, so the planner's settings
            # (C++ integer semantics) must hold then; a classic session analysed it already.
            settings = (
                spark_conf(self.session, translated.spark_conf)
                if _is_connect(self.session)
                else contextlib.nullcontext()
            )
            with settings:
                spark_query = start_sink(
                    translated.dataframe,
                    sink,
                    query_name=query_name(assignment.query_id),
                    checkpoint_dir=str(self.checkpoint_dir(assignment.query_id)),
                    output_mode=translated.output_mode,
                    available_now=translated.available_now,
                )
            started = _Started(spark_query, assignment.run, str(spark_query.runId))
            self._record_start(assignment.query_id, started)
            return self._report(assignment.query_id, assignment.run, AgentStatus.RUNNING)

    def stop(self, assignment: StopAssignment) -> QueryReport:
        with self._locked(f"stopping query {assignment.query_id}"):
            current = self._started.get(assignment.query_id)
            if current is None or not current.query.isActive:
                return self._report(assignment.query_id, assignment.run, AgentStatus.STOPPED)
            if assignment.run < current.run:
                # A stop decided before the coordinator started it here again: stale.
                return self._report(assignment.query_id, current.run, AgentStatus.RUNNING)
            current.stopping = True
            spark_query = current.query
        spark_query.stop()  # outside the lock: waits for the running batch's thread
        self._active.discard(assignment.query_id)
        return self._report(assignment.query_id, assignment.run, AgentStatus.STOPPED)

    def list(self) -> list[QueryReport]:
        with self._locked("listing queries"):
            return [
                self._report(query_id, started.run, AgentStatus.RUNNING)
                for query_id, started in sorted(self._recorded())
                if started.query.isActive
            ]

    def validate(self, assignment: QueryAssignment) -> None:
        self._build(assignment)

    def explain(self, request: ExplainAssignment) -> ExplainReport:
        """Spark's plan for the query, built but never started (or why it cannot be built)."""
        try:
            translated, _sink = self._build(request.query)
            # The lock: the plan is analysed under the query's session settings, which
            # start also sets while it holds the lock.
            with (
                self._locked(f"explaining {request.explanation_id}"),
                spark_conf(self.session, translated.spark_conf),
                contextlib.redirect_stdout(io.StringIO()) as printed,
            ):
                translated.dataframe.explain(mode=EXPLAIN_MODE)
        except ApplicationError as error:
            if error.type == "AgentBusy":
                raise
            return ExplainReport(request.explanation_id, self.agent, None, str(error))
        return ExplainReport(request.explanation_id, self.agent, printed.getvalue().strip())

    def active_count(self) -> int:
        return len(self._active)

    def checkpoint_dir(self, query_id: int) -> Path:
        return self.checkpoint_root / f"query-{query_id}"

    def stop_all(self) -> None:
        with self._lock:
            running = [s for _, s in self._recorded() if s.query.isActive]
            for started in running:
                started.stopping = True
        for started in running:
            started.query.stop()

    # --- building -------------------------------------------------------------------------

    def _build(self, assignment: QueryAssignment) -> tuple[TranslatedQuery, SinkSpec]:
        """The query's DataFrame and sink; a plan that cannot run raises a non-retryable error."""
        try:
            query_plan = QueryPlan.from_json_text(assignment.plan)
            sources = {
                name.casefold(): [
                    SourceSpec(s.id, s.type, s.config, s.schema) for s in physical_sources
                ]
                for name, physical_sources in assignment.sources.items()
            }
            sink = SinkSpec(
                assignment.sink.name,
                assignment.sink.type,
                assignment.sink.config,
                assignment.sink.schema,
            )
            work_dir = self.work_root / f"query-{assignment.query_id}"
            staging = work_dir / "staging"

            def read(name: str) -> DataFrame:
                specs = sources.get(name.casefold())
                if not specs:
                    raise ConnectorError(f"logical source {name!r} has no physical source")
                frames = [read_source(self.session, spec, staging) for spec in specs]
                frame = frames[0]
                for other in frames[1:]:
                    frame = frame.unionByName(other)
                return frame

            bounded = all(is_bounded(spec) for specs in sources.values() for spec in specs)
            translated = build(query_plan, self.session, read, bounded=bounded, work_dir=work_dir)
            return translated, sink
        except (PlannerError, ConnectorError, ValueError) as error:
            raise ApplicationError(
                f"query {assignment.query_id} cannot run on agent {self.agent}: {error}",
                type="QueryRejected",
                non_retryable=True,
            ) from None

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
            del self._started[query_id]
        self._report_end(query_id, started, error)

    def _recorded(self) -> tuple[tuple[int, _Started], ...]:
        with self._registry:
            return tuple(self._started.items())

    def _record_start(self, query_id: int, started: _Started) -> None:
        with self._registry:
            self._started[query_id] = started
            self._active.add(query_id)
            ended_early = started.run_id in self._ended_early
            error = self._ended_early.pop(started.run_id, None)
            if ended_early:
                del self._started[query_id]
        if ended_early:
            self._report_end(query_id, started, error)

    def _report_end(self, query_id: int, started: _Started, error: str | None) -> None:
        self._active.discard(query_id)
        if error:
            status = AgentStatus.CRASHED
        elif started.stopping:
            status = AgentStatus.STOPPED
        else:
            status = AgentStatus.FINISHED
        self._emit(
            m.QueryStatusChanged(query_id, str(status), error, agent=self.agent, run=started.run)
        )

    def on_progress(self, name: str | None, values: dict[str, float]) -> None:
        query_id = self._query_id_of(name)
        if query_id is not None:
            self._emit(m.Statistics(query_id, values))


def _is_connect(session: SparkSession) -> bool:
    return type(session).__module__.startswith("pyspark.sql.connect")


class _Listener(StreamingQueryListener):
    """Spark's callbacks (on a Py4J thread) turned into the agent's events."""

    def __init__(self, queries: SparkQueries) -> None:
        self._queries = queries

    def onQueryStarted(self, event: Any) -> None:
        pass  # the start action's answer reports RUNNING

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = event.progress
            values = {
                "input_rows_per_s": float(progress.inputRowsPerSecond or 0.0),
                "processed_rows_per_s": float(progress.processedRowsPerSecond or 0.0),
                "batch_duration_ms": float(progress.batchDuration or 0),
                "input_rows": float(progress.numInputRows or 0),
                "state_rows": float(sum(op.numRowsTotal for op in progress.stateOperators)),
                "batch_id": float(progress.batchId),
            }
            self._queries.on_progress(progress.name, values)
        except Exception:  # a listener must never break Spark's listener bus
            log.exception("could not report streaming progress")

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        try:
            self._queries.on_terminated(str(event.runId), event.exception)
        except Exception:
            log.exception("could not report a terminated streaming query")


class SparkActivities:
    """The agent's activities (run in threads: every Spark call blocks)."""

    def __init__(self, queries: SparkQueries) -> None:
        self.queries = queries

    @activity.defn(name="start_query")
    def start_query(self, assignment: QueryAssignment) -> QueryReport:
        return self.queries.start(assignment)

    @activity.defn(name="stop_query")
    def stop_query(self, assignment: StopAssignment) -> QueryReport:
        return self.queries.stop(assignment)

    @activity.defn(name="list_queries")
    def list_queries(self, _agent: str) -> list[QueryReport]:
        return self.queries.list()

    @activity.defn(name="validate_plan")
    def validate_plan(self, assignment: QueryAssignment) -> None:
        self.queries.validate(assignment)

    @activity.defn(name="explain_query")
    def explain_query(self, request: ExplainAssignment) -> ExplainReport:
        return self.queries.explain(request)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.start_query,
            self.stop_query,
            self.list_queries,
            self.validate_plan,
            self.explain_query,
        ]
