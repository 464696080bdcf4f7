"""The embedded stack behind ``streamctl up``: Temporal dev server, coordinator worker, workflow,
Spark agents.

``up`` runs a supervisor in the foreground (or, with ``--detach``, in a new session in the
background, returning once the coordinator answers and its agents are ALIVE:
:func:`wait_until_up`, which names the agent that is not). The supervisor starts the Temporal dev
server (state in ``<state-dir>/temporal.db``), then the coordinator worker processes, makes sure
the ``coordinator`` workflow runs, starts the Spark agents (``local_1`` ... ``local_N``, one
checkpoint root ``<state-dir>/checkpoints`` so any of them can resume another's query), writes
``<state-dir>/stack.json`` and restarts a child that dies. ``down`` stops the supervisor, which
stops the agents first (they stop their queries and unregister) and then the rest.

Every process of the stack gets one payload key (``STREAMCTL_PAYLOAD_KEY``, else
``<state-dir>/payload.key``, generated with mode 0600 on first start), so secrets in sink and
source configs are encrypted in the dev server's history; commands run later with the same
state dir read that file. The stack's processes ignore Temporal's env-config profiles
(``STREAMCTL_TEMPORAL_ENV_CONFIG=0``): their server is the local dev server, never the cluster
a profile names.

The catalog URL may hold a password, and command lines are visible to every user (``ps``), so
no child gets it as an argument: coordinator workers read it from ``STREAMCTL_CATALOG_URL`` in
their environment (readable by the same user only), agents, which never open the catalog, do
not get it at all. ``stack.json`` (mode 0600) records the URL without its password.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from streamctl import config as settings
from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import ClientError, CoordinatorError
from streamctl.local_ports import port_open
from streamctl.protocol import messages as m
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID, CoordinatorConfig
from streamctl.secret_options import redact_url
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.worker.temporal_server import start_dev_server, wait_for_server

STACK_FILE = "stack.json"

STARTUP_WAIT_S = 120.0
"""How long ``up --detach`` waits for the stack to answer and then for its agents to be ALIVE
(an agent's SparkSession starts in ~10 s here; a cold JVM on a slow disk takes longer)."""


@dataclass
class StackInfo:
    supervisor_pid: int
    temporal_pid: int
    coordinator_pids: list[int]
    address: str
    ui_url: str
    catalog_url: str
    """Without its password (:func:`~streamctl.secret_options.redact_url`)."""
    state_dir: str
    agent_pids: list[int] = field(default_factory=list)
    files_dir: str = ""
    """Where the stack's processes stage files (``STREAMCTL_FILES_DIR``, else ``<state
    dir>/files``), for clients that put files there (``systest``); empty in older files."""


def read_stack(state_dir: Path) -> StackInfo | None:
    path = state_dir / STACK_FILE
    if not path.exists():
        return None
    try:
        return StackInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def coordinator_command(address: str, task_queue: str | None = None) -> list[str]:
    """The command line of one coordinator worker process (it never starts the workflow). The
    catalog URL is not on it: give the process :func:`catalog_environment`."""
    queue = ["--task-queue", task_queue] if task_queue is not None else []
    return [
        sys.executable,
        "-m",
        "streamctl.cli",
        "coordinator",
        "--address",
        address,
        *queue,
        "--no-start-workflow",
    ]


def catalog_environment(catalog_url: str) -> dict[str, str]:
    """The environment entry that hands a child process the catalog URL, password and all,
    where only its own user can read it (``/proc/<pid>/environ``), unlike its command line."""
    return {"STREAMCTL_CATALOG_URL": catalog_url}


def agent_command(
    address: str,
    name: str,
    checkpoint_dir: Path,
    master: str = "local[*]",
    capacity: int = 4,
    workflow_id: str = COORDINATOR_WORKFLOW_ID,
    driver_memory: str | None = None,
) -> list[str]:
    """The command line of one local Spark agent process."""
    memory = ["--driver-memory", driver_memory] if driver_memory is not None else []
    return [
        sys.executable,
        "-m",
        "streamctl.cli",
        "agent",
        "--name",
        name,
        "--address",
        address,
        "--checkpoint-dir",
        str(checkpoint_dir),
        "--master",
        master,
        "--capacity",
        str(capacity),
        "--workflow-id",
        workflow_id,
        *memory,
    ]


def local_agent_names(count: int) -> list[str]:
    """The names of the stack's local agents: ``local_1`` ... ``local_<count>``."""
    return [f"local_{index}" for index in range(1, count + 1)]


class Supervisor:
    def __init__(
        self,
        state_dir: Path,
        catalog_url: str,
        port: int,
        ui_port: int,
        config: CoordinatorConfig,
        coordinators: int = 1,
        agents: int = 0,
        agent_master: str = "local[*]",
        agent_capacity: int = 4,
        file_roots: tuple[Path, ...] = (),
        agent_driver_memory: str | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.file_roots = file_roots
        self.catalog_url = catalog_url
        self.port = port
        self.ui_port = ui_port
        self.config = config
        self.coordinators = coordinators
        self.agent_names = local_agent_names(agents)
        self.agents: list[subprocess.Popen[bytes]] = []
        self.agent_master = agent_master
        self.agent_capacity = agent_capacity
        self.agent_driver_memory = agent_driver_memory
        self.client: Client | None = None
        self.address = f"127.0.0.1:{port}"
        self.temporal: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self._stopping = False
        self.payload_key = settings.ensure_payload_key(state_dir)

    def _start_worker(self) -> subprocess.Popen[bytes]:
        log = open(self.state_dir / "coordinator.log", "ab")  # noqa: SIM115
        return subprocess.Popen(
            coordinator_command(self.address),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**self._child_environment(), **catalog_environment(self.catalog_url)},
        )

    def _child_environment(self) -> dict[str, str]:
        """What the stack's processes read from the environment: its state directory (the
        files directory of inline sources and sinks lies in it) and the extra file roots; not
        the catalog URL, which only coordinator workers get."""
        environment = {
            **{k: v for k, v in os.environ.items() if k != "STREAMCTL_CATALOG_URL"},
            "STREAMCTL_STATE_DIR": str(self.state_dir),
            "STREAMCTL_PAYLOAD_KEY": self.payload_key,
            "STREAMCTL_TEMPORAL_ENV_CONFIG": "0",
        }
        if self.file_roots:
            # Added to the roots the environment already allows, never replacing them.
            inherited = [environment.get("STREAMCTL_FILE_ROOTS", "")]
            environment["STREAMCTL_FILE_ROOTS"] = os.pathsep.join(
                [part for part in inherited if part] + [str(root) for root in self.file_roots]
            )
        # One port for several processes would collide: the embedded stack serves no metrics.
        environment.pop("STREAMCTL_METRICS_PORT", None)
        return environment

    def _start_agent(self, name: str) -> subprocess.Popen[bytes]:
        log = open(self.state_dir / f"agent-{name}.log", "ab")  # noqa: SIM115
        return subprocess.Popen(
            agent_command(
                self.address,
                name,
                self.state_dir / "checkpoints",
                self.agent_master,
                self.agent_capacity,
                driver_memory=self.agent_driver_memory,
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=self._child_environment(),
        )

    def _connect_options(self) -> dict[str, Any]:
        return {
            "payload_keys": settings.parse_payload_keys(self.payload_key),
            "env_config": False,
        }

    def _write_stack(self) -> None:
        assert self.temporal is not None
        info = StackInfo(
            supervisor_pid=os.getpid(),
            temporal_pid=self.temporal.pid,
            coordinator_pids=[w.pid for w in self.workers],
            address=self.address,
            ui_url=f"http://127.0.0.1:{self.ui_port}",
            catalog_url=redact_url(self.catalog_url),
            state_dir=str(self.state_dir),
            agent_pids=[a.pid for a in self.agents],
            files_dir=str(settings.files_dir(self.state_dir)),
        )
        _write_private(self.state_dir / STACK_FILE, json.dumps(asdict(info), indent=2))

    async def start(self) -> Client:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if port_open(self.port):
            raise RuntimeError(
                f"port {self.port} is already in use; is a stack running? try 'streamctl down' "
                "or pass --port"
            )
        self.temporal = start_dev_server(
            self.state_dir / "temporal.db",
            self.port,
            self.ui_port,
            log_file=self.state_dir / "temporal.log",
        )
        client = await wait_for_server(self.address, **self._connect_options())
        self.client = client
        self.workers = [self._start_worker() for _ in range(self.coordinators)]
        await ensure_coordinator(client, config=self.config, catalog_url=self.catalog_url)
        self.agents = [self._start_agent(name) for name in self.agent_names]
        self._write_stack()
        return client

    async def watch(self) -> None:
        """Restart children that die until asked to stop."""
        while not self._stopping:
            await asyncio.sleep(0.5)
            if self._stopping:
                break
            if self.temporal is not None and self.temporal.poll() is not None:
                self.temporal = start_dev_server(
                    self.state_dir / "temporal.db",
                    self.port,
                    self.ui_port,
                    log_file=self.state_dir / "temporal.log",
                )
                await wait_for_server(self.address, **self._connect_options())
                self._write_stack()
            for index, worker in enumerate(self.workers):
                if worker.poll() is not None:
                    self.workers[index] = self._start_worker()
                    self._write_stack()
            for index, agent in enumerate(self.agents):
                if agent.poll() is not None:
                    self.agents[index] = self._start_agent(self.agent_names[index])
                    self._write_stack()

    def stop(self) -> None:
        self._stopping = True
        # Agents first, while the coordinator can still take their goodbyes.
        _terminate(self.agents, grace=30)
        _terminate([*self.workers, *([self.temporal] if self.temporal else [])], grace=10)
        (self.state_dir / STACK_FILE).unlink(missing_ok=True)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, readable by its owner only (mode 0600) from the first
    byte: written to a private temporary file first, then renamed, so a reader never sees a
    half-written file either."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    os.replace(partial, path)


def _terminate(children: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM the children, then SIGKILL those still running after ``grace`` seconds."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()


async def run_foreground(supervisor: Supervisor, on_ready: object = None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await supervisor.start()
        if callable(on_ready):
            on_ready()
        watcher = asyncio.create_task(supervisor.watch())
        await stop.wait()
        watcher.cancel()
    finally:
        supervisor.stop()


def stop_stack(state_dir: Path, timeout: float = 20.0) -> bool:
    """Stop a running stack; returns whether one was running."""
    info = read_stack(state_dir)
    if info is None:
        return False
    if pid_alive(info.supervisor_pid):
        os.kill(info.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(info.supervisor_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    for pid in [info.temporal_pid, *info.coordinator_pids, *info.agent_pids]:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    (state_dir / STACK_FILE).unlink(missing_ok=True)
    return True


def wait_until_up(
    supervisor: subprocess.Popen[bytes],
    state_dir: Path,
    address: str,
    agents: int,
    since: float,
    timeout: float = STARTUP_WAIT_S,
) -> str | None:
    """Wait until the stack that ``supervisor`` (``up`` in a new session) starts answers and its
    ``agents`` local agents are ALIVE; ``None`` then, else (after ``timeout`` seconds, or at once
    when the supervisor exits) what is not up, naming each agent that is not ALIVE and its log.

    An agent counts once it is ALIVE with a heartbeat from after ``since`` (``time.time()``
    when the supervisor was launched): a catalog kept in ``state_dir`` may still hold an ALIVE
    row from a stack that was killed.
    """
    deadline = time.monotonic() + timeout
    supervisor_log = state_dir / "supervisor.log"
    while read_stack(state_dir) is None:  # written once Temporal and the workflow run
        if supervisor.poll() is not None:
            return f"the stack failed to start; see {supervisor_log}"
        if time.monotonic() > deadline:
            return f"the stack did not start within {timeout:.0f} s; see {supervisor_log}"
        time.sleep(0.3)
    names = local_agent_names(agents)
    client = CoordinatorClient(address, payload_keys=settings.payload_keys(state_dir))
    workers: dict[str, dict[str, Any]] | None = None
    try:
        client.connect_blocking()
        while True:
            if supervisor.poll() is not None:
                return f"the stack stopped while starting; see {supervisor_log}"
            remaining = deadline - time.monotonic()
            try:
                answer = client.ask_blocking(m.ListWorkers(), timeout=max(1.0, remaining))
            except (ClientError, CoordinatorError):
                answer = None
            if answer is not None:
                workers = {row["name"]: row for row in answer}
                if all(_fresh_alive(workers.get(name), since) for name in names):
                    return None
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
    except Exception as error:  # the Temporal connection itself
        return f"the Temporal server at {address} did not answer: {error}"
    finally:
        client.close(0)
    if workers is None:
        return (
            f"the coordinator did not answer within {timeout:.0f} s; see "
            f"{state_dir / 'coordinator.log'}"
        )
    late = [name for name in names if not _fresh_alive(workers.get(name), since)]
    return "; ".join(
        f"agent {name} is not ALIVE after {timeout:.0f} s "
        f"({_agent_state(workers.get(name))}); see {state_dir / f'agent-{name}.log'}"
        for name in late
    )


def _fresh_alive(row: dict[str, Any] | None, since: float) -> bool:
    return row is not None and row["state"] == "ALIVE" and row["last_heartbeat_at"] >= since


def _agent_state(row: dict[str, Any] | None) -> str:
    if row is None:
        return "it never registered"
    if row["state"] == "ALIVE":
        return "ALIVE in the catalog, but no heartbeat since this start"
    return f"it is {row['state']}"


__all__ = [
    "COORDINATOR_WORKFLOW_ID",
    "STARTUP_WAIT_S",
    "StackInfo",
    "Supervisor",
    "local_agent_names",
    "read_stack",
    "run_foreground",
    "stop_stack",
    "wait_until_up",
]
