"""``streamctl bench deploy``: how long a start takes through the coordinator, against Spark alone.

Both sides start the same query (a CSV directory source, a ``VOID`` sink) on a warm
SparkSession (:data:`WARM_UP_ROUNDS` starts and stops first), round by round in turns, so
that both see the same machine: the first side of a round alternates, and a busy moment (a JIT
compilation, a continue-as-new) falls on both alike rather than on a whole side.

* ``deploy``: a private stack (dev server, coordinator worker, one ``streamctl agent``
  process); the clock runs from sending ``StartQuery`` until the client library's
  ``wait_for_query`` (what ``--wait-running`` uses) returns ``RUNNING``, the query is
  stopped again before the next round.
* ``raw``: in this process, a SparkSession on the same master builds the same DataFrame with the
  same planner and connectors and calls ``writeStream.start()``; the clock stops when
  ``start()`` returns (Spark's query thread runs then; the agent reports ``RUNNING`` at the
  same point), and the query is stopped.

The difference is what the coordinator adds: a pass, the action on the agent's task queue, the
report back and the pass that records it.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from streamctl.bench.query_runs import wait_for_alive_agent
from streamctl.bench.stack import bench_stack
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m

COLUMNS = (
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("amount", "INT64", False),
    m.ColumnSpec("ts", "UINT64", False),
)
STATEMENT = "SELECT id, amount FROM orders WHERE amount > 10 INTO discard"
AGENT_ALIVE_TIMEOUT_S = 180.0
WARM_UP_ROUNDS = 3
"""Rounds of both sides before the measured ones: the first starts of a JVM run interpreted
code, and each side's JVM compiles its own."""
DEPLOY_OVERHEAD_TARGET_MS = 150.0
"""What a deploy through the coordinator may cost above ``writeStream.start()`` (the product's
target: see docs/decisions.md)."""


def _median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


async def _wait_state(client: CoordinatorClient, query_id: int, state: str) -> None:
    reached = await client.wait_for_query(query_id, frozenset({state, "FAILED"}), timeout=120)
    if reached["current_state"] != state:
        raise RuntimeError(f"query {query_id} {reached['current_state']}: {reached['error']}")


class _RawSide:
    """``writeStream.start()`` of the same query on a SparkSession of this process."""

    def __init__(self, root: Path, source_dir: Path, master: str) -> None:
        from streamctl.agent.process import agent_spark_session
        from streamctl.planner.binder import bind_query
        from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
        from streamctl.planner.parser import parse_query
        from streamctl.spark.specs import SinkSpec, SourceSpec

        self.root = root
        schema = [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in COLUMNS]
        catalog = MemoryCatalog(
            {"orders": list(COLUMNS)}, [SinkInfo("discard", list(COLUMNS[:2]), "VOID", {})]
        )
        self.plan = bind_query(parse_query(STATEMENT), catalog).plan
        self.source = SourceSpec(1, "FILE", {"file_path": str(source_dir)}, schema)
        self.sink = SinkSpec("discard", "VOID", {}, schema[:2])
        self.starts = 0
        self.session = agent_spark_session("bench_raw", master, root / "raw")  # last: close()

    def start_and_stop(self) -> float:
        """Seconds from building the query to ``start()`` returning (then it is stopped)."""
        from streamctl.spark.sink_writers import start_sink
        from streamctl.spark.source_readers import source_relation
        from streamctl.spark.translate import build

        self.starts += 1
        session = self.session
        started = time.perf_counter()
        translated = build(
            self.plan,
            session,
            lambda _name: source_relation(session, self.source, self.root / "raw-staging"),
            bounded=False,
        )
        spark_query = start_sink(
            translated.dataframe,
            self.sink,
            query_name=f"raw{self.starts}",
            checkpoint_dir=str(self.root / "raw-checkpoint"),
            output_mode=translated.output_mode,
            available_now=False,
        )
        seconds = time.perf_counter() - started
        spark_query.stop()
        return seconds

    def close(self) -> None:
        self.session.stop()


async def _deploy_once(client: CoordinatorClient, query_id: int) -> float:
    """Seconds from sending ``StartQuery`` until the query is ``RUNNING`` (then stopped)."""
    started = time.perf_counter()
    await client.ask(m.StartQuery(query_id))
    await _wait_state(client, query_id, "RUNNING")
    seconds = time.perf_counter() - started
    await client.ask(m.StopQuery(query_id))
    await _wait_state(client, query_id, "STOPPED")
    return seconds


async def _both(
    root: Path, source_dir: Path, rounds: int, master: str
) -> tuple[list[float], list[float]]:
    """Deploy and raw start times, ``rounds`` of each, measured in turns."""
    raw_side = await asyncio.to_thread(_RawSide, root, source_dir, master)
    try:
        async with bench_stack(  # the source directory lies in root: a file root of the stack
            f"sqlite:///{root / 'catalog.db'}", agents=1, master=master, file_roots=(root,)
        ) as (address, _temporal):
            client = await CoordinatorClient(address).connect()
            try:
                await wait_for_alive_agent(client, time.monotonic() + AGENT_ALIVE_TIMEOUT_S)
                await client.ask(m.CreateLogicalSource("orders", COLUMNS))
                await client.ask(
                    m.CreatePhysicalSource("orders", "FILE", {"file_path": str(source_dir)})
                )
                await client.ask(m.CreateSink("discard", COLUMNS[:2], "VOID"))
                query = await client.ask(m.CreateQuery(STATEMENT))
                await _wait_state(client, query["id"], "RUNNING")  # the first start
                await client.ask(m.StopQuery(query["id"]))
                await _wait_state(client, query["id"], "STOPPED")
                for _ in range(WARM_UP_ROUNDS):  # both JVMs compile the start's code first
                    await asyncio.to_thread(raw_side.start_and_stop)
                    await _deploy_once(client, query["id"])
                deploy: list[float] = []
                raw: list[float] = []
                for round_no in range(rounds):
                    if round_no % 2:
                        deploy.append(await _deploy_once(client, query["id"]))
                        raw.append(await asyncio.to_thread(raw_side.start_and_stop))
                    else:
                        raw.append(await asyncio.to_thread(raw_side.start_and_stop))
                        deploy.append(await _deploy_once(client, query["id"]))
                return deploy, raw
            finally:
                await asyncio.to_thread(client.close)
    finally:
        await asyncio.to_thread(raw_side.close)


def run_deploy_bench(rounds: int = 20, master: str = "local[2]") -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="streamctl-bench-deploy-"))
    try:
        source_dir = root / "orders"
        source_dir.mkdir()
        (source_dir / "1.csv").write_text("1,50,1000\n2,5,2000\n")
        deploy, raw = asyncio.run(_both(root, source_dir, rounds, master))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    deploy_p50, raw_p50 = _median_ms(deploy), _median_ms(raw)
    return {
        "rounds": rounds,
        "master": master,
        "deploy_p50_ms": deploy_p50,
        "raw_start_p50_ms": raw_p50,
        "overhead_p50_ms": round(deploy_p50 - raw_p50, 1),
        "deploy_max_ms": round(max(deploy) * 1000, 1),
        "raw_start_max_ms": round(max(raw) * 1000, 1),
        "target_met": deploy_p50 <= raw_p50 + DEPLOY_OVERHEAD_TARGET_MS,
    }
