"""The books of a chaos run (:mod:`streamctl.bench.chaos`): sink rows against rows fed, the
catalog read directly (lost and doubled requests, changelog entries applied twice, healthy
agents declared dead) and failed workflow tasks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from streamctl.bench.chaos_state import SINK_SCHEMA, ChaosRun, Kill

KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}


def sink_rows(data: Path, index: int) -> Counter[tuple[Any, ...]]:
    from streamctl.spark.sink_writers import read_file_sink
    from streamctl.spark.specs import SinkSpec

    spec = SinkSpec(
        f"sink_{index}", "FILE", {"file_path": str(data / f"sink_{index}")}, SINK_SCHEMA
    )
    return Counter(read_file_sink(None, spec))


def sink_figures(data: Path, fed: dict[int, int]) -> dict[str, Any]:
    """The committed rows of sinks ``data/sink_N`` against the rows fed to ``src_N``
    (``fed[N]`` rows: ids 1..fed[N], ``v = 2 * id``), as multisets."""
    lost = doubled = unexpected = read = 0
    per_sink = {}
    for index, count in fed.items():
        got = sink_rows(data, index)
        expected = Counter((i, 2 * i) for i in range(1, count + 1))
        sink_lost = sum((expected - got).values())
        extra = got - expected
        sink_doubled = sum(n for row, n in extra.items() if row in expected)
        sink_unexpected = sum(n for row, n in extra.items() if row not in expected)
        per_sink[f"sink_{index}"] = {
            "fed": count,
            "read": sum(got.values()),
            "lost": sink_lost,
            "doubled": sink_doubled,
            "unexpected": sink_unexpected,
        }
        lost, doubled, unexpected = (
            lost + sink_lost,
            doubled + sink_doubled,
            unexpected + sink_unexpected,
        )
        read += sum(got.values())
    return {
        "sink_rows_fed": sum(fed.values()),
        "sink_rows_read": read,
        "sink_rows_lost": lost,
        "sink_rows_doubled": doubled,
        "sink_rows_unexpected": unexpected,
        "sinks": per_sink,
    }


def catalog_figures(run: ChaosRun) -> dict[str, Any]:
    """Everything read straight from the catalog tables of the private cluster."""
    with psycopg.connect(run.postgres.url, connect_timeout=10) as connection:
        sources = {
            row[0]
            for row in connection.execute(
                "SELECT name FROM logical_sources WHERE name LIKE 'chaos\\_%'"
            )
        }
        creates = Counter(
            {
                row[0]: row[1]
                for row in connection.execute(
                    "SELECT key, count(*) FROM changelog WHERE entity = 'logical_source' "
                    "AND action = 'create' AND key LIKE 'chaos\\_%' GROUP BY key"
                )
            }
        )
        twice = connection.execute(
            "SELECT count(*) FROM (SELECT 1 FROM changelog GROUP BY message_id, entity, key, "
            "action HAVING count(*) > 1) AS groups"
        ).fetchone()
        changelog = list(
            connection.execute(
                "SELECT s.committed_at, c.version, c.seq, c.entity, c.key, c.action, c.reason "
                "FROM changelog c JOIN snapshot_versions s ON s.version = c.version "
                "WHERE c.entity <> 'logical_source' ORDER BY c.version, c.seq"
            )
        )
        query_actions: dict[str, int] = dict(
            connection.execute(
                "SELECT action, count(*) FROM changelog WHERE entity = 'query' GROUP BY action"
            ).fetchall()
        )
    # For the diagnosis of a run that is kept: what happened to workers, queries and sinks.
    with (run.root / "changelog.tsv").open("w") as out:
        for at, version, seq, entity, key, action, reason in changelog:
            line = [f"{at - run.wall0:.2f}", version, seq, entity, key, action, reason]
            out.write("\t".join(str(part).replace("\n", " ") for part in line) + "\n")
    workers = [
        (key, action, at) for at, _, _, entity, key, action, _ in changelog if entity == "worker"
    ]
    return {
        "sources": sources,
        "creates": creates,
        "applied_twice": int(twice[0]) if twice else 0,
        "workers": workers,
        "worker_actions": dict(Counter(action for _, action, _ in workers)),
        "query_actions": query_actions,
    }


def dead_figures(
    kills: list[Kill], wall0: float, workers: list[tuple[str, str, float]]
) -> dict[str, Any]:
    """``->DEAD`` transitions among ``workers`` ((name, action, wall time) of the changelog),
    each counted unless its agent's process had been killed and had not registered again yet
    (``wall0``: when the load began)."""
    agent_kills: dict[str, list[float]] = {}
    for kill in kills:
        if kill.target == "agent" and kill.pid is not None and kill.which is not None:
            agent_kills.setdefault(kill.which, []).append(kill.wall)
    transitions = []
    counted = 0
    for name, action, at in workers:
        if not action.endswith("->DEAD"):
            continue
        excused = None
        for killed_at in agent_kills.get(name, []):
            back = next(
                (
                    t
                    for n, a, t in workers
                    if n == name and t > killed_at and (a == "register" or a.endswith("->ALIVE"))
                ),
                None,
            )
            if killed_at <= at and (back is None or at <= back):
                excused = f"its process was killed at {killed_at - wall0:.1f}s"
        transitions.append(
            {
                "agent": name,
                "at_s": round(at - wall0, 1),
                "counted": excused is None,
                **({"excused": excused} if excused else {}),
            }
        )
        counted += excused is None
    return {"healthy_agents_declared_dead": counted, "dead_transitions": transitions}


async def failed_workflow_tasks(run: ChaosRun) -> int | None:
    from streamctl.bench.adversarial import failed_workflow_tasks
    from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID

    client = run.supervisor.client
    if client is None:
        return None
    try:
        return await failed_workflow_tasks(client, COORDINATOR_WORKFLOW_ID)
    except Exception:
        return None
