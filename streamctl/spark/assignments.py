"""An agent's query assignment as Spark DataFrames (imports pyspark).

Protocol: an agent starting, validating or explaining a query calls :func:`build_assignment`
with the assignment the coordinator sent (its plan as JSON text, its physical sources by
logical source, its sink); it gets the query's DataFrame and settings
(:class:`~streamctl.spark.translate.TranslatedQuery`) and the sink's spec, or a non-retryable
``QueryRejected`` error naming the query and the agent when the plan cannot run here (a
planner error, a source that cannot be read, a bad value). Nothing starts: the caller starts
the sink (:func:`streamctl.spark.sink_writers.start_sink`) or prints the plan. Sources stage what
they
generate or inline under ``<work_root>/query-<id>/staging``, stable across restarts of the
query on this agent.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from temporalio.exceptions import ApplicationError

from streamctl.planner.plan import QueryPlan
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol import refusals
from streamctl.protocol.agent_contract import QueryAssignment
from streamctl.spark.source_readers import is_bounded, read_source, source_relation
from streamctl.spark.specs import ConnectorError, SinkSpec, SourceSpec
from streamctl.spark.sql_text import Relation
from streamctl.spark.translate import TranslatedQuery, build

__all__ = ["build_assignment"]


def build_assignment(
    session: SparkSession, agent: str, work_root: Path, assignment: QueryAssignment
) -> tuple[TranslatedQuery, SinkSpec]:
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
        work_dir = work_root / f"query-{assignment.query_id}"
        staging = work_dir / "staging"

        def read(name: str) -> DataFrame | Relation:
            specs = sources.get(name.casefold())
            if not specs:
                raise ConnectorError(f"logical source {name!r} has no physical source")
            if len(specs) == 1:  # analysed with the query's operators (build)
                return source_relation(session, specs[0], staging)
            frames = [read_source(session, spec, staging) for spec in specs]
            frame = frames[0]
            for other in frames[1:]:
                frame = frame.unionByName(other)
            return frame

        bounded = all(is_bounded(spec) for specs in sources.values() for spec in specs)
        translated = build(query_plan, session, read, bounded=bounded)
        return translated, sink
    except (PlannerError, ConnectorError, ValueError) as error:
        raise ApplicationError(
            f"query {assignment.query_id} cannot run on agent {agent}: {error}",
            type=refusals.QUERY_REJECTED,
            non_retryable=True,
        ) from None
