"""Concurrent load against the real stack, with faults injected in the middle of it.

Every test sends a create/get/drop mix from 32 threads and 32 asyncio tasks through one
client and then checks, on the catalog the coordinator wrote:

* every request got exactly one response, and every one succeeded (each caller works on its
  own names, so a request applied twice would surface as an error or a missing entity);
* replaying the recorded requests one by one, in the order the coordinator applied them, on a
  fresh catalog gives the same answers and the same final catalog;
* snapshot versions increase with pass numbers and no message changed an entity twice.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from catalog_tools import catalog_invariants, dump, failed_workflow_tasks, replay_one_by_one
from conftest import RunningCoordinator

from streamctl.bench.requests import SCHEMA, mixed_request
from streamctl.client.outbox import new_id
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.protocol.messages import Response
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.worker.supervisor import catalog_environment, coordinator_command

pytestmark = pytest.mark.slow

THREADS = 32
TASKS = 32


async def run_load(
    coordinator: RunningCoordinator, total: int, fault: Any = None
) -> dict[str, list[Response]]:
    """Send ``total`` mixed requests from 32 threads and 32 tasks; run ``fault`` meanwhile."""
    client = await coordinator.client().connect()
    tag = f"t{uuid.uuid4().hex[:6]}"
    per_caller = total // (THREADS + TASKS)
    answers: dict[str, list[Response]] = defaultdict(list)
    lock = threading.Lock()

    def record(request_id: str, response: Response) -> None:
        with lock:
            answers[request_id].append(response)

    def thread_caller(index: int) -> None:
        for step in range(per_caller):
            request_id = new_id()
            response = client.ask_response_blocking(
                mixed_request(tag, index, step), request_id=request_id, timeout=600
            )
            record(request_id, response)

    async def task_caller(index: int) -> None:
        for step in range(per_caller):
            request_id = new_id()
            response = await client.ask_response(
                mixed_request(tag, index, step), request_id=request_id
            )
            record(request_id, response)

    try:
        await asyncio.gather(
            *(asyncio.to_thread(thread_caller, i) for i in range(THREADS)),
            *(task_caller(THREADS + i) for i in range(TASKS)),
            *([fault()] if fault else []),
        )
    finally:
        await asyncio.to_thread(client.close)
    assert len(answers) == per_caller * (THREADS + TASKS)
    return answers


def check_exactly_once(
    answers: dict[str, list[Response]], catalog_url: str, replay_url: str
) -> None:
    assert all(len(responses) == 1 for responses in answers.values()), "a request answered twice"
    wrong = [(i, r[0]) for i, r in answers.items() if r[0].id != i or not r[0].ok]
    assert not wrong, wrong[:5]

    invariants = catalog_invariants(catalog_url)
    assert invariants["versions_increase_with_passes"]
    assert invariants["applied_twice"] == []
    assert invariants["responses"] == len(answers)

    assert replay_one_by_one(catalog_url, replay_url) == []
    assert dump(catalog_url) == dump(replay_url)


@pytest.mark.postgres
@pytest.mark.timeout(900)  # 6,000 requests, then 6,000 one-by-one replay passes
async def test_6000_mixed_requests_from_threads_and_tasks(
    temporal, temporal_client, pg_url, tmp_path
):
    # The coordinator worker runs in its own process, as deployed: in this one it would share
    # the interpreter lock with the 32 sending threads.
    coordinator, processes = await _process_coordinator(
        temporal, temporal_client, pg_url, tmp_path, workers=1
    )
    try:
        # A CI-sized load; `streamctl bench requests` sends any number.
        answers = await run_load(coordinator, 6_000)
    finally:
        for process in processes:
            process.kill()
    check_exactly_once(answers, pg_url, f"sqlite:///{tmp_path / 'replay.db'}")
    assert await failed_workflow_tasks(coordinator.handle) == 0


async def test_continue_as_new_every_50_passes_with_10000_in_flight(
    start_coordinator, sqlite_url, tmp_path
):
    config = CoordinatorConfig(batch_size=100, passes_per_run=50)
    coordinator = await start_coordinator(sqlite_url, config)
    client = await coordinator.client(max_requests_per_update=100).connect()
    tag = f"c{uuid.uuid4().hex[:6]}"
    try:
        # 10,000 requests queued at once: all of them are in flight while the runs roll over.
        # Concurrent requests carry no order, so each one stands alone.
        requests: list[m.Request] = []
        for index in range(5000):
            requests.append(m.CreateLogicalSource(f"{tag}_{index}", SCHEMA))
            requests.append(m.CreateSink(f"{tag}_{index}_out", SCHEMA, "VOID"))
        responses = await client.ask_many(requests)
    finally:
        await asyncio.to_thread(client.close)
    assert len(responses) == 10_000 and all(r.ok for r in responses)
    assert len({r.id for r in responses}) == 10_000
    status = await coordinator.handle.query("status")
    assert status["runs"] >= 2, status  # 100+ passes at about 50 per run
    answers = {r.id: [r] for r in responses}
    check_exactly_once(answers, sqlite_url, f"sqlite:///{tmp_path / 'replay.db'}")
    assert await failed_workflow_tasks(coordinator.handle) == 0


# --- faults -----------------------------------------------------------------------------------


def start_worker_process(address: str, catalog_url: str, task_queue: str, log: Path) -> Any:
    return subprocess.Popen(
        coordinator_command(address, task_queue),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **catalog_environment(catalog_url)},
    )


FAULT_CONFIG = CoordinatorConfig(batch_size=200, pass_timeout=5.0)
FAULT_LOAD = 3_200


async def _process_coordinator(temporal, temporal_client, catalog_url, tmp_path, workers: int):
    suffix = uuid.uuid4().hex[:8]
    task_queue = f"faults-{suffix}"
    processes = [
        start_worker_process(temporal.address, catalog_url, task_queue, tmp_path / "worker.log")
        for _ in range(workers)
    ]
    handle = await ensure_coordinator(
        temporal_client, workflow_id=f"faults-{suffix}", config=FAULT_CONFIG, task_queue=task_queue
    )
    coordinator = RunningCoordinator(handle.id, task_queue, catalog_url, handle, temporal.address)
    return coordinator, processes


@pytest.mark.postgres
async def test_kill_9_of_the_coordinator_worker_then_restart(
    temporal, temporal_client, pg_url, tmp_path
):
    coordinator, processes = await _process_coordinator(
        temporal, temporal_client, pg_url, tmp_path, workers=1
    )

    async def fault() -> None:
        await asyncio.sleep(4)
        processes[0].kill()  # SIGKILL: no goodbye to Temporal or PostgreSQL
        processes[0].wait()
        await asyncio.sleep(2)
        processes.append(
            start_worker_process(
                temporal.address, pg_url, coordinator.task_queue, tmp_path / "worker.log"
            )
        )

    try:
        answers = await run_load(coordinator, FAULT_LOAD, fault)
    finally:
        for process in processes:
            process.kill()
    check_exactly_once(answers, pg_url, f"sqlite:///{tmp_path / 'replay.db'}")
    assert await failed_workflow_tasks(coordinator.handle) == 0


@pytest.mark.postgres
async def test_kill_9_of_one_of_two_coordinator_workers(
    temporal, temporal_client, pg_url, tmp_path
):
    coordinator, processes = await _process_coordinator(
        temporal, temporal_client, pg_url, tmp_path, workers=2
    )

    async def fault() -> None:
        await asyncio.sleep(4)
        processes[0].kill()
        processes[0].wait()

    try:
        answers = await run_load(coordinator, FAULT_LOAD, fault)
        assert processes[1].poll() is None, "the surviving worker carried the load"
    finally:
        for process in processes:
            process.kill()
    check_exactly_once(answers, pg_url, f"sqlite:///{tmp_path / 'replay.db'}")


async def test_restart_of_the_temporal_dev_server(
    start_coordinator, temporal, sqlite_url, tmp_path
):
    coordinator = await start_coordinator(sqlite_url, FAULT_CONFIG)

    async def fault() -> None:
        await asyncio.sleep(3)
        await asyncio.to_thread(temporal.restart)  # same SQLite file

    answers = await run_load(coordinator, FAULT_LOAD, fault)
    check_exactly_once(answers, sqlite_url, f"sqlite:///{tmp_path / 'replay.db'}")


def _restart_postgres() -> None:
    versions = sorted(Path("/etc/postgresql").iterdir())
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1].name, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.postgres
@pytest.mark.skipif(
    not Path("/etc/postgresql").is_dir(), reason="needs a local PostgreSQL cluster to restart"
)
@pytest.mark.alone  # every other test's PostgreSQL connections would break with it
async def test_restart_of_postgresql_under_the_catalog(start_coordinator, pg_url, tmp_path):
    coordinator = await start_coordinator(pg_url, FAULT_CONFIG)

    async def fault() -> None:
        await asyncio.sleep(3)
        await asyncio.to_thread(_restart_postgres)

    answers = await run_load(coordinator, FAULT_LOAD, fault)
    check_exactly_once(answers, pg_url, f"sqlite:///{tmp_path / 'replay.db'}")
