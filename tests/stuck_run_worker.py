"""A worker process whose workflow ignores the SDK's eviction, so the SDK cannot evict its run
(``Eviction processed, but 1 tasks remain``): what :mod:`streamctl.worker.stuck_runs` guards
the coordinator worker against. Run by ``test_stuck_runs.py`` as
``python stuck_run_worker.py ADDRESS TASK_QUEUE``; it exits 0 after 120 s if the watchdog
never ended it."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from streamctl.worker.stuck_runs import StuckRunWatchdog


@workflow.defn(sandboxed=False)
class IgnoresEviction:
    @workflow.run
    async def run(self) -> None:
        self.stubborn = asyncio.ensure_future(self._stubborn())
        await workflow.wait_condition(lambda: False)

    async def _stubborn(self) -> None:
        try:
            await workflow.wait_condition(lambda: False)
        except BaseException:  # the mistake: it swallows the eviction's cancellation
            await asyncio.Event().wait()


async def main(address: str, task_queue: str) -> None:
    logging.basicConfig(level=logging.INFO)
    client = await Client.connect(address)
    with StuckRunWatchdog().listening():
        # No cache: the run is evicted after its first workflow task.
        worker = Worker(
            client, task_queue=task_queue, workflows=[IgnoresEviction], max_cached_workflows=0
        )
        async with worker:
            await client.start_workflow(
                IgnoresEviction.run, id=f"stuck-{uuid.uuid4().hex}", task_queue=task_queue
            )
            await asyncio.sleep(120)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
