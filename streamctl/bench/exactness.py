"""``streamctl bench exactness``: a windowed aggregate over a large generated file, run by the
coordinator on a Spark agent and by the reference engine, compared exactly; again with
``kill -9`` of the agent while the query runs.

What a run does
---------------
1. Writes one CSV file of ``rows`` rows ``id,key,v,ts`` (seeded: ``key`` in ``0..keys-1``, ``v``
   a signed integer of up to 10**9, ``ts`` milliseconds in ascending order with ties), so that
   every row falls in exactly one tumbling window and counts, sums, minima and maxima are
   exact integers.
2. Starts a private stack (Temporal dev server, coordinator worker, one ``streamctl agent``
   process, restarted by the supervisor when it dies, as ``streamctl up`` does) with a SQLite
   catalog.
3. Creates the source once and runs the query
   ``SELECT start, end, key, COUNT(v), SUM(v), MIN(v), MAX(v) ... GROUP BY key WINDOW TUMBLING``
   into an inline ``File()`` sink until the coordinator reports it ``FINISHED``:

   * ``clean``: undisturbed; its wall time ``T`` (from RUNNING to FINISHED) sets the kill time;
   * ``killed``: the same query once more, and ``kill -9`` of the agent process at a seeded
     moment in ``[0.2 T, 0.8 T]`` after it is RUNNING (its Spark JVM ends with it). The
     supervisor starts the agent again; the coordinator runs the query again on it from its
     checkpoint. A warm Spark is faster than the clean run's cold one: when the query has
     ended by the kill's moment, nothing is killed and a new query is run and killed at half
     the delay (up to 4 times). The catalog learns that a query finished a moment after its
     agent does, so a kill that the catalog saw hit a RUNNING query may still have come just
     after the agent finished it; the query then ends in its first run, and that also counts
     as a miss. ``killed_while_running`` says whether the kill hit a running query: it was
     killed and started again.
4. Reads each sink's committed rows and compares them with
   :func:`~streamctl.reference.run_reference` over the same rows: the same plan (bound by the
   product's planner), DuckDB's execution.

Output (``--json``): ``rows``, ``windows`` (the reference's row count), per run its ``equal``
(the row multisets are identical), ``rows_written``, ``missing`` and ``extra`` rows (counts,
and up to 5 examples), the totals of COUNT and SUM over all windows against the reference's
and the number of input rows, ``seconds`` from RUNNING to FINISHED, and for the killed run when
the kill happened, the agent pid killed and the states the query went through; ``exact`` is
true when every run is equal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped]

from streamctl.bench.query_runs import (
    TERMINAL_STATES,
    QueryWaitTimeout,
    inline_sink_rows,
    wait_for_alive_agent,
    wait_for_state,
)
from streamctl.bench.stack import bench_supervisor
from streamctl.client.client import CoordinatorClient
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.catalog_lookup import MemoryCatalog
from streamctl.planner.parser import parse_query
from streamctl.protocol import messages as m
from streamctl.reference import run_reference
from streamctl.worker.supervisor import Supervisor

SOURCE: Final = "big"
COLUMNS: Final = (
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("key", "INT32", False),
    m.ColumnSpec("v", "INT64", False),
    m.ColumnSpec("ts", "UINT64", False),
)
WINDOW_SECONDS: Final = 60
STATEMENT: Final = (
    "SELECT start, end, key, COUNT(v) AS n, SUM(v) AS total, MIN(v) AS lo, MAX(v) AS hi "
    f"FROM {SOURCE} GROUP BY key WINDOW TUMBLING(ts, SIZE {WINDOW_SECONDS} SEC) INTO File()"
)
_KILL_ATTEMPTS: Final = 4


@dataclass(frozen=True)
class ExactnessSettings:
    rows: int = 5_000_000
    keys: int = 8
    seed: int = 0
    kill_agent: bool = True
    master: str = "local[2]"
    timeout_s: float = 1800.0
    """Longest wait for one query to end (and for the agent to register)."""


# --- the input -------------------------------------------------------------------------------


def generate(rows: int, keys: int, seed: int) -> pa.Table:
    """The input: ``id`` 0.., ``key``, ``v`` (|v| <= 10**9), ``ts`` ascending with ties
    (about 10 rows per 100 ms, so a 60 s window holds about 6,000 rows)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.uint64)
    key = rng.integers(0, keys, size=rows, dtype=np.int32)
    value = rng.integers(-(10**9), 10**9, size=rows, dtype=np.int64, endpoint=True)
    ts = np.cumsum(rng.integers(0, 21, size=rows, dtype=np.uint64), dtype=np.uint64)
    return pa.table(
        {"id": ids, "key": key, "v": value, "ts": ts},
        schema=pa.schema(
            [("id", pa.uint64()), ("key", pa.int32()), ("v", pa.int64()), ("ts", pa.uint64())]
        ),
    )


def write_csv(table: pa.Table, path: Path) -> None:
    """NES CSV: no header, ``,``, integers as digits."""
    options = pa_csv.WriteOptions(include_header=False, quoting_style="none")
    pa_csv.write_csv(table, str(path), write_options=options)


def bound_statement() -> plan.QueryPlan:
    """The query bound by the product's planner against the source's schema."""
    lookup = MemoryCatalog({SOURCE: list(COLUMNS)})
    return bind_query(parse_query(STATEMENT), lookup).plan


def reference_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return run_reference(bound_statement(), {SOURCE: table})


# --- comparing -------------------------------------------------------------------------------


def compare(
    written: Sequence[tuple[Any, ...]], expected: Sequence[tuple[Any, ...]], input_rows: int
) -> dict[str, Any]:
    """Row multisets and the totals of COUNT (column 3) and SUM (column 4)."""
    got, want = Counter(map(tuple, written)), Counter(map(tuple, expected))
    missing, extra = want - got, got - want
    return {
        "equal": not missing and not extra,
        "rows_written": len(written),
        "missing": sum(missing.values()),
        "extra": sum(extra.values()),
        "missing_examples": [list(row) for row in sorted(missing, key=repr)[:5]],
        "extra_examples": [list(row) for row in sorted(extra, key=repr)[:5]],
        "count_total": sum(int(row[3]) for row in written),
        "reference_count_total": sum(int(row[3]) for row in expected),
        "input_rows": input_rows,
        "sum_total": sum(int(row[4]) for row in written),
        "reference_sum_total": sum(int(row[4]) for row in expected),
    }


# --- running ---------------------------------------------------------------------------------


async def _run_query(
    client: CoordinatorClient,
    supervisor: Supervisor,
    settings: ExactnessSettings,
    kill_after_s: float | None,
) -> dict[str, Any]:
    """Run the statement once (killing the agent ``kill_after_s`` after RUNNING); its sink's
    rows and what happened."""
    deadline = time.monotonic() + settings.timeout_s
    created = await client.ask(m.CreateQuery(STATEMENT))
    query_id = int(created["id"])
    states: list[str] = []

    def seen(state: str) -> None:
        if not states or states[-1] != state:
            states.append(state)

    first = await wait_for_state(client, query_id, TERMINAL_STATES | {"RUNNING"}, deadline, seen)
    running_at = time.monotonic()
    report: dict[str, Any] = {"query": query_id, "first_run": first["run"]}
    if kill_after_s is not None:
        if states[-1] not in TERMINAL_STATES:
            kill_at = min(deadline, running_at + kill_after_s)
            with contextlib.suppress(QueryWaitTimeout):  # it may end before the kill is due
                await wait_for_state(client, query_id, TERMINAL_STATES, kill_at, seen)
        report["state_at_kill"] = states[-1]
        if states[-1] not in TERMINAL_STATES:
            # Only a query still at work is killed under: killing the agent after it ended
            # would leave the next try's query racing the agent's restart (placed on the dead
            # agent, then lost again while recovering).
            agent = supervisor.agents[0]
            report["killed_at_s"] = round(time.monotonic() - running_at, 2)
            report["killed_pid"] = agent.pid
            os.kill(agent.pid, signal.SIGKILL)
    final = await wait_for_state(client, query_id, TERMINAL_STATES, deadline, seen)
    report["seconds"] = round(time.monotonic() - running_at, 2)
    report["state"] = final["current_state"]
    report["run"] = final["run"]  # every start is a new run: above first_run, it started again
    # Killed at work, it cannot end in its first run: only that run's agent, now dead, could
    # report it ended. Ending there means the agent had finished it before the kill, and the
    # catalog (the poll) had not heard yet.
    report["hit_running"] = "killed_pid" in report and final["run"] > first["run"]
    report["states"] = states  # as polls saw them: a quick recovery may fall between two
    report["rows"] = await inline_sink_rows(client, str(created["sink"]), query_id)
    return report


async def run_exactness(settings: ExactnessSettings) -> dict[str, Any]:
    rng = random.Random(settings.seed)
    with tempfile.TemporaryDirectory(prefix="streamctl-exactness-") as directory:
        root = Path(directory)
        table = await asyncio.to_thread(generate, settings.rows, settings.keys, settings.seed)
        source_file = root / "big.csv"
        await asyncio.to_thread(write_csv, table, source_file)
        expected = await asyncio.to_thread(reference_rows, table)
        del table
        catalog = f"sqlite:///{root / 'catalog.db'}"
        async with bench_supervisor(
            catalog, agents=1, master=settings.master, file_roots=(root,)
        ) as supervisor:
            watcher = asyncio.create_task(supervisor.watch())  # restarts the killed agent
            try:
                assert supervisor.client is not None
                client = await CoordinatorClient(supervisor.address).connect()
                await wait_for_alive_agent(client, time.monotonic() + settings.timeout_s)
                await client.ask(m.CreateLogicalSource(SOURCE, COLUMNS))
                await client.ask(
                    m.CreatePhysicalSource(SOURCE, "FILE", {"file_path": str(source_file)})
                )
                runs: dict[str, dict[str, Any]] = {}
                clean = await _run_query(client, supervisor, settings, None)
                runs["clean"] = clean
                if settings.kill_agent:
                    # The clean run includes Spark's warm-up, so a later run is faster: a kill
                    # that finds the query ended already is tried again, earlier.
                    kill_after = clean["seconds"] * rng.uniform(0.2, 0.8)
                    for _ in range(_KILL_ATTEMPTS):
                        killed = await _run_query(client, supervisor, settings, kill_after)
                        if killed["hit_running"]:
                            break
                        kill_after /= 2
                    runs["killed"] = killed
            finally:
                watcher.cancel()
    figures: dict[str, Any] = {"rows": settings.rows, "windows": len(expected), "runs": {}}
    for name, run in runs.items():
        written = run.pop("rows")
        figures["runs"][name] = {**run, **compare(written, expected, settings.rows)}
    figures["exact"] = all(
        run["equal"] and run["state"] == "FINISHED" for run in figures["runs"].values()
    )
    killed = figures["runs"].get("killed")
    figures["killed_while_running"] = killed is not None and killed["hit_running"]
    return figures
