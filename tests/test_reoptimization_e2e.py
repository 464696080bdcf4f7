"""Scheduled reoptimization end to end (issue 5, acceptance b): the real dev server, a
coordinator, two ``streamctl agent`` processes on Spark, and a Temporal Schedule created and
triggered with ``streamctl schedule``.

The query's agent reports that it processes 40% of the query's input rate for three statistics
intervals. Those three reports are sent by the test, in the agent's own event (``Statistics``
with Spark's ``inputRowsPerSecond``/``processedRowsPerSecond``), because making one of two
local Spark sessions fall behind on cue is not reproducible on a two-core machine; everything
after them is real: the schedule's run asks the coordinator to reoptimize, the agent stops the
query, the other agent starts it from its checkpoint and it goes on writing its sink, and
``streamctl history`` shows the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from conftest import wait_until
from test_queries_e2e import FILTER, deploy

from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import query_name
from streamctl.spark.sink_writers import read_file_sink

pytestmark = [pytest.mark.spark, pytest.mark.slow]


async def streamctl(
    *args: str, address: str, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    """Run ``streamctl`` in a thread: this test's event loop hosts the coordinator worker, which
    must stay free to answer the command's workflow queries and updates."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "streamctl.cli", *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "STREAMCTL_TEMPORAL_ADDRESS": address, "COLUMNS": str(columns)},
    )


async def test_a_scheduled_reoptimization_moves_a_query_off_a_lagging_agent(
    start_coordinator, sqlite_url, tmp_path, spark
):
    async with deploy(start_coordinator, sqlite_url, tmp_path) as deployment:
        client = deployment.client
        coordinator = deployment.client.workflow_id
        address = deployment.client.address
        query = await client.ask(m.CreateQuery(FILTER))
        running = await deployment.wait_state(query["id"], "RUNNING")
        lagging = running["worker"]
        [other] = [name for name in deployment.agents if name != lagging]
        deployment.write("1.csv", [(1, 50, 1000)])

        def sink_rows() -> list[tuple[Any, ...]]:
            return sorted(read_file_sink(spark, deployment.big, query_name(query["id"])))

        await wait_until(lambda: sink_rows() == [(1, 50)], timeout=120, interval=0.5)

        # Three intervals in which the query processes 40% of its input rate, one per pass (the
        # coordinator keeps the latest statistics of a query, so each must land before the next).
        for interval in (1, 2, 3):
            await client.send(
                m.Statistics(
                    query["id"], {"input_rows_per_s": 500.0, "processed_rows_per_s": 200.0}
                )
            )

            async def counted(expected: int = interval) -> bool:
                statistics = (await deployment.query(query["id"]))["statistics"] or {}
                return bool(statistics.get("lag_intervals", 0) >= expected)

            await wait_until(counted, timeout=30, interval=0.2)

        name = f"reoptimize-{coordinator}"
        created = await streamctl(
            "schedule", "reoptimize", "--every", "1h", "--json", "--name", name,
            "--workflow-id", coordinator, "--task-queue", deployment.task_queue,
            address=address,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["created"] is True
        try:
            triggered = await streamctl("schedule", "trigger", name, address=address)
            assert triggered.returncode == 0, triggered.stderr

            async def moved() -> bool:
                now = await deployment.query(query["id"])
                return bool(now["current_state"] == "RUNNING" and now["worker"] == other)

            await wait_until(moved, timeout=180, interval=0.5)
        finally:
            await streamctl("schedule", "delete", name, address=address)

        # It goes on from its checkpoint on the other agent: new input only, once.
        deployment.write("2.csv", [(2, 70, 2000)])
        await wait_until(lambda: sink_rows() == [(1, 50), (2, 70)], timeout=120, interval=0.5)

        shown = await streamctl(
            "history", "--query", str(query["id"]), "--workflow-id", coordinator, "--json",
            address=address,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        # The agent's own reports count too: a first micro-batch that took longer than its
        # input's interval lags as well, so the streak may be longer and the mean lower.
        expected = re.compile(
            f"moved query {query['id']} from {lagging} to {other}: {lagging} processed "
            r"\d{1,2}% of its input rate for [3-9] intervals"
        )
        [reason] = [
            c["reason"] for c in json.loads(shown.stdout) if expected.fullmatch(c["reason"])
        ]
        table = await streamctl(  # a terminal wide enough that the reason is not wrapped
            "history", "--query", str(query["id"]), "--workflow-id", coordinator,
            address=address, columns=250,
        )  # fmt: skip
        assert table.returncode == 0, table.stderr
        assert reason in table.stdout
