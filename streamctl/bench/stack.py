"""A private embedded stack for one benchmark run.

Benchmarks never touch a user's stack: each run starts its own Temporal dev server (free ports,
state in a temporary directory) and coordinator worker processes through the same
:class:`~streamctl.worker.supervisor.Supervisor` that ``streamctl up`` uses, and removes
everything afterwards.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from temporalio.client import Client

from streamctl.catalog.scratch import scratch_database
from streamctl.local_ports import free_port
from streamctl.protocol.coordinator_config import CoordinatorConfig
from streamctl.worker.supervisor import Supervisor


@contextlib.asynccontextmanager
async def bench_supervisor(
    catalog_url: str,
    coordinators: int = 1,
    agents: int = 0,
    master: str = "local[*]",
    capacity: int = 4,
    file_roots: tuple[Path, ...] = (),
) -> AsyncIterator[Supervisor]:
    """A started stack (with ``agents`` local Spark agents on ``master``, file sources and
    sinks allowed under ``file_roots`` besides its files directory), stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="streamctl-bench-") as directory:
        supervisor = Supervisor(
            Path(directory),
            catalog_url,
            free_port(),
            free_port(),
            CoordinatorConfig(),
            coordinators,
            agents,
            master,
            capacity,
            file_roots,
        )
        try:
            await supervisor.start()
            yield supervisor
        finally:
            supervisor.stop()


@contextlib.asynccontextmanager
async def bench_stack(
    catalog_url: str,
    coordinators: int = 1,
    agents: int = 0,
    master: str = "local[*]",
    capacity: int = 4,
    file_roots: tuple[Path, ...] = (),
) -> AsyncIterator[tuple[str, Client]]:
    """Yield the Temporal address and a connected client of a fresh stack."""
    async with bench_supervisor(
        catalog_url, coordinators, agents, master, capacity, file_roots
    ) as supervisor:
        assert supervisor.client is not None
        yield supervisor.address, supervisor.client


@contextlib.contextmanager
def bench_catalog(catalog: str | None) -> Iterator[str]:
    """A catalog URL for one run: a scratch database on the PostgreSQL server ``catalog``
    names (dropped afterwards), ``catalog`` itself if it is another URL, else a SQLite file
    in a temporary directory."""
    if catalog is not None and catalog.startswith(("postgres://", "postgresql")):
        with scratch_database(catalog, prefix="streamctl_bench") as url:
            yield url
        return
    if catalog is not None:
        yield catalog
        return
    with tempfile.TemporaryDirectory(prefix="streamctl-bench-catalog-") as directory:
        yield f"sqlite:///{Path(directory) / 'catalog.db'}"
