"""``streamctl bench events``: heartbeats from many simulated workers, and whether any got lost.

Every simulated worker registers, then queues heartbeats with ``try_send`` as fast as the
client's bounded outbox takes them (backing off when it is full) for ``seconds``; then the
outbox is flushed. ``events_per_s`` is the number of heartbeats queued divided by the time until
the coordinator had accepted all of them. The client merges a worker's unsent heartbeats into
one event that carries their count, exactly as the workflow does, so the load a real fleet
creates costs signals in proportion to workers, not to heartbeats. Then the benchmark waits
for the passes to apply what is pending and reads every worker back: ``lost`` is the number of
accepted heartbeats missing from the catalog's per-worker counts (compaction merges heartbeats
of one worker but adds their counts, so nothing may be missing). The stack is private (see
:mod:`streamctl.bench.stack`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from streamctl.bench.stack import bench_catalog, bench_stack
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import OutboxFull
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.coordinator_worker import ensure_coordinator


async def _run(workers: int, seconds: float, catalog_url: str) -> dict[str, Any]:
    async with bench_stack(catalog_url) as (address, temporal):
        workflow_id = f"bench-events-{uuid.uuid4().hex[:8]}"
        # Liveness thresholds far beyond the run: the benchmark measures delivery, not DEAD.
        config = CoordinatorConfig(suspect_after=3600, dead_after=7200)
        handle = await ensure_coordinator(temporal, workflow_id=workflow_id, config=config)
        client = await CoordinatorClient(address, workflow_id=workflow_id).connect()
        names = [f"w{index:05d}" for index in range(workers)]
        sent = dict.fromkeys(names, 0)
        try:
            await client.send_many(m.RegisterWorker(name, capacity=4) for name in names)
            deadline = time.perf_counter() + seconds

            async def worker(name: str) -> None:
                load = 0
                while time.perf_counter() < deadline:
                    load = (load + 1) % 4
                    try:
                        client.try_send(m.Heartbeat(name, load=load))
                    except OutboxFull:
                        await asyncio.sleep(0.01)
                        continue
                    sent[name] += 1
                    if sent[name] % 20 == 0:
                        await asyncio.sleep(0)  # let the other workers run

            started = time.perf_counter()
            await asyncio.gather(*(worker(name) for name in names))
            await asyncio.to_thread(client.flush_events)
            elapsed = time.perf_counter() - started
            accepted = sum(sent.values())
            signals = client.stats.signals_sent

            # Everything accepted is applied by the next passes; wait for them to run.
            async def recorded() -> dict[str, int]:
                rows = await client.ask(m.ListWorkers())
                return {row["name"]: int(row["heartbeats"]) for row in rows}

            counts = await recorded()
            settle_deadline = time.perf_counter() + 60
            while (
                any(counts.get(name, 0) < sent[name] for name in names)
                and time.perf_counter() < settle_deadline
            ):
                await asyncio.sleep(0.5)
                counts = await recorded()
        finally:
            await asyncio.to_thread(client.close)
            await handle.terminate("benchmark done")
    lost = sum(max(0, sent[name] - counts.get(name, 0)) for name in names)
    extra = sum(max(0, counts.get(name, 0) - sent[name]) for name in names)
    return {
        "workers": workers,
        "seconds": round(elapsed, 3),
        "events_accepted": accepted,
        "events_per_s": round(accepted / elapsed, 1),
        "signals_per_s": round(signals / elapsed, 2),
        "lost": lost,
        "counted_twice": extra,
        "workers_recorded": len(counts),
    }


def run_events_bench(workers: int, seconds: float, catalog: str | None) -> dict[str, Any]:
    with bench_catalog(catalog) as catalog_url:
        return asyncio.run(_run(workers, seconds, catalog_url))
