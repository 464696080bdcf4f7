"""The catalog URL's password stays secret in the embedded stack (issue 16, item 7).

``streamctl up`` with a PostgreSQL catalog URL that holds a password: no process of the stack
has it on its command line (``ps`` shows command lines to every user), ``stack.json`` is
private (0600) and names the catalog without it, and neither ``up``'s output nor the stack's
logs print it. On f29f918 the password was on every coordinator worker's command line, in a
world-readable ``stack.json`` and printed by ``up``.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from test_stack import streamctl

from streamctl.client.client import CoordinatorClient
from streamctl.local_ports import free_port
from streamctl.protocol import messages as m
from streamctl.secret_options import redact_url
from streamctl.worker.supervisor import STACK_FILE, coordinator_command, pid_alive, read_stack

PASSWORD = "Sekr1t-catalog-pw"


@pytest.mark.quick
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:pw@db:5432/catalog", "postgresql://app:***@db:5432/catalog"),
        ("postgresql+psycopg://app:p%40ss@db/catalog", "postgresql+psycopg://app:***@db/catalog"),
        ("postgresql://app:a/b@c@db/catalog", "postgresql://app:***@db/catalog"),
        (
            "postgresql://db/catalog?user=app&password=pw",
            "postgresql://db/catalog?user=app&password=***",
        ),
        ("host=db password='p w' dbname=catalog", "host=db password=*** dbname=catalog"),
        ("postgresql://app@db/catalog", "postgresql://app@db/catalog"),
        ("sqlite:////tmp/a:b@c/catalog.db", "sqlite:////tmp/a:b@c/catalog.db"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.quick
def test_a_coordinator_command_line_carries_no_catalog() -> None:
    """Fails on f29f918 (the command took the catalog URL and put it after ``--catalog``)."""
    command = coordinator_command("127.0.0.1:7233", "coordinator")
    assert "--catalog" not in command and "coordinator" in command


def _command_lines_holding(secret: str) -> dict[int, str]:
    """Every process on this machine whose command line holds ``secret``."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command_line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if secret in command_line:
            found[int(entry.name)] = command_line
    return found


@pytest.mark.postgres
@pytest.mark.slow
def test_up_keeps_the_catalog_password_off_command_lines_files_and_output(
    pg_url: str, tmp_path: Path
) -> None:
    """Fails on f29f918 (the coordinator worker's command line holds the password)."""
    url = make_url(pg_url).set(password=PASSWORD).render_as_string(hide_password=False)
    state = tmp_path / "state"
    up = streamctl(
        "up",
        "--detach",
        "--state-dir",
        str(state),
        "--catalog",
        url,
        "--port",
        str(free_port()),
        "--ui-port",
        str(free_port()),
        "--agents",
        "0",
    )
    info = read_stack(state)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert info is not None
        # `up` itself has returned: none of the stack's processes may show the password.
        pids = [info.supervisor_pid, info.temporal_pid, *info.coordinator_pids]
        assert all(pid_alive(pid) for pid in pids)
        assert _command_lines_holding(PASSWORD) == {}
        assert "postgres:***@" in up.stdout and PASSWORD not in up.stdout + up.stderr
        # The coordinator worker still reached the catalog it was given: a pass answers.
        with CoordinatorClient(info.address) as client:
            assert client.ask_blocking(m.ListWorkers(), timeout=60) == []

        stack_file = state / STACK_FILE
        assert stat.S_IMODE(stack_file.stat().st_mode) & 0o077 == 0
        assert PASSWORD not in stack_file.read_text()
        assert info.catalog_url == redact_url(url)
        logs = {path.name: path.read_text(errors="replace") for path in state.glob("*.log")}
        assert "coordinator.log" in logs
        assert not [name for name, text in logs.items() if PASSWORD in text]
    finally:
        down = streamctl("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stdout + down.stderr
        if info is not None:
            deadline = time.monotonic() + 30
            pids = [info.supervisor_pid, info.temporal_pid, *info.coordinator_pids]
            while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
                time.sleep(0.2)
