"""``streamctl bench latency``: one request at a time on an idle coordinator.

A user at a prompt sends one statement and waits; this is the latency they feel. On a private
stack (Temporal dev server, one coordinator worker process; the catalog as ``streamctl up``
makes it, SQLite, or a scratch PostgreSQL database) the benchmark sends, strictly one after the
other, a ``CreateLogicalSource`` and a ``GetLogicalSource`` of it, ``rounds`` times, through the
client library as shipped, and reports each kind's p50 and p90.

Its baseline, in the same run, is a Temporal update alone: a ``submit`` update the workflow's
validator refuses (an empty batch). It travels client → server → a workflow task on the
coordinator worker → back, as every request does, and does no pass: what a request costs above
it is the coordinator's own. ``pass`` is the get's pass as the workflow timed it (from
scheduling its activity to its result).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable
from typing import Any

from temporalio.client import WorkflowUpdateFailedError

from streamctl.bench.stack import bench_catalog, bench_stack
from streamctl.client.client import CoordinatorClient
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.coordinator_worker import ensure_coordinator

SCHEMA = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("value", "FLOAT64"))
WARM_UP = 20


def _figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1] * 1000, 2),
    }


async def _timed(call: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


async def _run(catalog: str | None, rounds: int) -> dict[str, Any]:
    with bench_catalog(catalog) as catalog_url:
        async with bench_stack(catalog_url) as (address, temporal):
            workflow_id = f"bench-latency-{uuid.uuid4().hex[:8]}"
            handle = await ensure_coordinator(
                temporal, workflow_id=workflow_id, config=CoordinatorConfig()
            )
            client = await CoordinatorClient(address, workflow_id=workflow_id).connect()

            async def refused_update() -> None:
                try:
                    await handle.execute_update("submit", args=[[], []])
                except WorkflowUpdateFailedError:
                    return  # InvalidBatch: what the baseline measures
                raise RuntimeError("the empty batch was accepted")

            async def ask(request: m.Request) -> None:
                response = await client.ask_response(request)
                if not response.ok:
                    raise RuntimeError(f"{request}: {response.error_message}")

            creates: list[float] = []
            gets: list[float] = []
            updates: list[float] = []
            passes: list[float] = []
            try:
                for index in range(WARM_UP + rounds):
                    name = f"latency_{index}"
                    create = await _timed(ask(m.CreateLogicalSource(name, SCHEMA)))
                    get = await _timed(ask(m.GetLogicalSource(name)))
                    status = await handle.query("status")
                    update = await _timed(refused_update())
                    if index >= WARM_UP:
                        creates.append(create)
                        gets.append(get)
                        updates.append(update)
                        passes.append(status["last_pass_ms"] / 1000)
            finally:
                await asyncio.to_thread(client.close)
                await handle.terminate("benchmark measurement done")
    create_figures, get_figures = _figures(creates), _figures(gets)
    update_figures = _figures(updates)
    return {
        "catalog": "sqlite" if catalog is None else "postgresql",
        "rounds": rounds,
        "create_p50_ms": create_figures["p50_ms"],
        "get_p50_ms": get_figures["p50_ms"],
        "temporal_update_p50_ms": update_figures["p50_ms"],
        "create": create_figures,
        "get": get_figures,
        "temporal_update": update_figures,
        "pass": _figures(passes),
    }


def run_latency_bench(catalog: str | None, rounds: int) -> dict[str, Any]:
    return asyncio.run(_run(catalog, rounds))
