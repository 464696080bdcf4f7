"""``streamctl bench deploy``: how long a start takes through the coordinator, against Spark alone.

Both measurements start the same query (a CSV directory source, a ``VOID`` sink) on a warm
SparkSession (one start and stop first):

* ``deploy``: a private stack (dev server, coordinator worker, one ``streamctl agent``
  process); the clock runs from sending ``StartQuery`` until the client library's
  ``wait_for_query`` (what ``--wait-running`` uses) returns ``RUNNING``, the query is
  stopped again before the next round.
* ``raw``: in this process, a SparkSession on the same master builds the same DataFrame with the
  same planner and connectors and calls ``writeStream.start()``; the clock stops when
  ``start()`` returns.

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

from streamctl.bench.stack import bench_stack
from streamctl.client.client import CoordinatorClient
from streamctl.workflows import messages as m

COLUMNS = (
    m.ColumnSpec("id", "UINT64", False),
    m.ColumnSpec("amount", "INT64", False),
    m.ColumnSpec("ts", "UINT64", False),
)
STATEMENT = "SELECT id, amount FROM orders WHERE amount > 10 INTO discard"
DEPLOY_OVERHEAD_TARGET_MS = 150.0
"""Issue 19: what a deploy through the coordinator may cost above ``writeStream.start()``."""


def _median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


async def _wait_state(client: CoordinatorClient, query_id: int, state: str) -> None:
    reached = await client.wait_for_query(query_id, frozenset({state, "FAILED"}), timeout=120)
    if reached["current_state"] != state:
        raise RuntimeError(f"query {query_id} {reached['current_state']}: {reached['error']}")


async def _deploy(root: Path, source_dir: Path, rounds: int, master: str) -> list[float]:
    async with bench_stack(  # the source directory lies in root: a file root of the stack
        f"sqlite:///{root / 'catalog.db'}", agents=1, master=master, file_roots=(root,)
    ) as (
        address,
        _temporal,
    ):
        client = await CoordinatorClient(address).connect()
        try:
            deadline = time.monotonic() + 180
            while not any(w["state"] == "ALIVE" for w in await client.ask(m.ListWorkers())):
                if time.monotonic() > deadline:
                    raise RuntimeError("the benchmark's agent did not register within 180 s")
                await asyncio.sleep(0.2)
            await client.ask(m.CreateLogicalSource("orders", COLUMNS))
            await client.ask(
                m.CreatePhysicalSource("orders", "FILE", {"file_path": str(source_dir)})
            )
            await client.ask(m.CreateSink("discard", COLUMNS[:2], "VOID"))
            query = await client.ask(m.CreateQuery(STATEMENT))
            await _wait_state(client, query["id"], "RUNNING")  # the warm-up start
            timings: list[float] = []
            for _ in range(rounds):
                await client.ask(m.StopQuery(query["id"]))
                await _wait_state(client, query["id"], "STOPPED")
                started = time.perf_counter()
                await client.ask(m.StartQuery(query["id"]))
                await _wait_state(client, query["id"], "RUNNING")
                timings.append(time.perf_counter() - started)
            return timings
        finally:
            await asyncio.to_thread(client.close)


def _raw(root: Path, source_dir: Path, rounds: int, master: str) -> list[float]:
    from streamctl.planner.binder import bind_query
    from streamctl.planner.catalog_lookup import MemoryCatalog, SinkInfo
    from streamctl.planner.parser import parse_query
    from streamctl.spark.sinks import start_sink
    from streamctl.spark.sources import read_source
    from streamctl.spark.specs import SinkSpec, SourceSpec
    from streamctl.spark.translate import build
    from streamctl.worker.agent import agent_spark_session

    session = agent_spark_session("bench_raw", master, root / "raw")
    try:
        schema = [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in COLUMNS]
        catalog = MemoryCatalog(
            {"orders": list(COLUMNS)}, [SinkInfo("discard", list(COLUMNS[:2]), "VOID", {})]
        )
        bound = bind_query(parse_query(STATEMENT), catalog)
        source = SourceSpec(1, "FILE", {"file_path": str(source_dir)}, schema)
        sink = SinkSpec("discard", "VOID", {}, schema[:2])
        timings: list[float] = []
        for round_no in range(rounds + 1):  # the first start warms the session up
            started = time.perf_counter()
            translated = build(
                bound.plan,
                session,
                lambda _name: read_source(session, source, root / "raw-staging"),
                bounded=False,
                work_dir=root / f"raw-{round_no}",
            )
            spark_query = start_sink(
                translated.dataframe,
                sink,
                query_name=f"raw{round_no}",
                checkpoint_dir=str(root / "raw-checkpoint"),
                output_mode=translated.output_mode,
                available_now=False,
            )
            if round_no > 0:
                timings.append(time.perf_counter() - started)
            spark_query.stop()
        return timings
    finally:
        session.stop()


def run_deploy_bench(rounds: int = 10, master: str = "local[2]") -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="streamctl-bench-deploy-"))
    try:
        source_dir = root / "orders"
        source_dir.mkdir()
        (source_dir / "1.csv").write_text("1,50,1000\n2,5,2000\n")
        raw = _raw(root, source_dir, rounds, master)
        deploy = asyncio.run(_deploy(root, source_dir, rounds, master))
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
