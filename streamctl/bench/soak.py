"""``streamctl bench soak``: many queries on two agents for minutes; does everything keep going?

A private stack (dev server, one coordinator worker process, two ``streamctl agent`` processes
with room for all queries) runs ``queries`` filter queries over one generator source (a
NebulaStream generator that never stops, ``rate`` rows/s) into ``VOID`` sinks. Every
``interval`` seconds the benchmark samples, through the coordinator's own requests:

* how many queries are ``RUNNING``;
* each agent's heartbeat count (must grow) and state;
* how many queries reported new statistics since the last sample, and the age of the oldest
  query's latest statistics (a query reports after each of its micro-batches);
* the resident memory of the coordinator worker process and its helper processes.

It prints the samples' summary: the fewest queries running in any sample, heartbeats and
statistics per interval, and the coordinator's memory at the start, end and peak (after the
first interval, once imports and caches are warm).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from streamctl.bench.process_cpu import tree_rss_bytes
from streamctl.bench.stack import bench_supervisor
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m

COLUMNS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "UINT64", False))


def _rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the activity pool), in MiB."""
    return round(tree_rss_bytes(pid) / 2**20, 1)


async def _soak(
    root: Path, queries: int, seconds: float, interval: float, rate: int
) -> dict[str, Any]:
    capacity = (queries + 1) // 2 + 1
    async with bench_supervisor(
        f"sqlite:///{root / 'catalog.db'}", agents=2, master="local[2]", capacity=capacity
    ) as supervisor:
        client = await CoordinatorClient(supervisor.address).connect()
        coordinator_pid = supervisor.workers[0].pid
        try:
            deadline = time.monotonic() + 180
            while sum(w["state"] == "ALIVE" for w in await client.ask(m.ListWorkers())) < 2:
                if time.monotonic() > deadline:
                    raise RuntimeError("the benchmark's agents did not register within 180 s")
                await asyncio.sleep(0.5)
            await client.ask(m.CreateLogicalSource("ticks", COLUMNS))
            generator = {
                "generator_schema": (
                    "SEQUENCE UINT64 0 1000000000000 1, SEQUENCE UINT64 0 1000000000000 3"
                ),
                "stop_when": "NONE",
                "rate_config": f"emit_rate {rate}",
            }
            await client.ask(m.CreatePhysicalSource("ticks", "GENERATOR", generator))
            ids = []
            for index in range(queries):
                await client.ask(m.CreateSink(f"discard_{index}", COLUMNS, "VOID"))
                created = await client.ask(
                    m.CreateQuery(f"SELECT id, v FROM ticks WHERE v >= id INTO discard_{index}")
                )
                ids.append(created["id"])
            started = time.monotonic()
            while True:
                listed = await client.ask(m.ListQueries())
                if all(q["current_state"] == "RUNNING" for q in listed):
                    break
                if time.monotonic() - started > 300:
                    raise RuntimeError("not every query reached RUNNING within 300 s")
                await asyncio.sleep(1)
            ramp_s = time.monotonic() - started

            samples: list[dict[str, Any]] = []
            last_heartbeats: dict[str, int] = {}
            last_stats: dict[int, float | None] = {}
            began, began_wall = time.monotonic(), time.time()
            while time.monotonic() - began < seconds:
                await asyncio.sleep(interval)
                listed = await client.ask(m.ListQueries())
                workers = await client.ask(m.ListWorkers())
                heartbeats = {w["name"]: w["heartbeats"] for w in workers}
                stats = {q["id"]: q["statistics_at"] for q in listed}
                samples.append(
                    {
                        "t_s": round(time.monotonic() - began, 1),
                        "running": sum(q["current_state"] == "RUNNING" for q in listed),
                        "agents_alive": sum(w["state"] == "ALIVE" for w in workers),
                        "heartbeats": sum(
                            heartbeats[n] - last_heartbeats.get(n, heartbeats[n])
                            for n in heartbeats
                        ),
                        "queries_with_new_statistics": sum(
                            1
                            for query_id, at in stats.items()
                            if at is not None and at != last_stats.get(query_id)
                        ),
                        # A query without statistics yet counts from when watching began.
                        "max_statistics_age_s": round(
                            max(time.time() - (at or began_wall) for at in stats.values()), 1
                        ),
                        "coordinator_rss_mb": _rss_mb(coordinator_pid),
                    }
                )
                last_heartbeats, last_stats = heartbeats, stats
        finally:
            await asyncio.to_thread(client.close)
    steady = samples[1:] or samples
    return {
        "queries": queries,
        "agents": 2,
        "seconds": seconds,
        "interval_s": interval,
        "rate_rows_per_s": rate,
        "ramp_to_running_s": round(ramp_s, 1),
        "min_running": min(s["running"] for s in samples),
        "min_agents_alive": min(s["agents_alive"] for s in samples),
        "min_heartbeats_per_interval": min(s["heartbeats"] for s in steady),
        "min_queries_with_new_statistics": min(s["queries_with_new_statistics"] for s in steady),
        "max_statistics_age_s": max(s["max_statistics_age_s"] for s in steady),
        "coordinator_rss_start_mb": steady[0]["coordinator_rss_mb"],
        "coordinator_rss_end_mb": steady[-1]["coordinator_rss_mb"],
        "coordinator_rss_max_mb": max(s["coordinator_rss_mb"] for s in steady),
        "all_running": all(s["running"] == queries for s in samples),
        "samples": samples,
    }


def run_soak_bench(
    queries: int = 20, seconds: float = 300.0, interval: float = 15.0, rate: int = 20
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="streamctl-bench-soak-"))
    try:
        return asyncio.run(_soak(root, queries, seconds, interval, rate))
    finally:
        shutil.rmtree(root, ignore_errors=True)
