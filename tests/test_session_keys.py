"""The test session's processes agree on the payload key, whatever the working directory holds
(issue 16, measurement 7).

``test_queries_e2e.py::test_a_query_whose_sink_always_fails_ends_failed_and_harms_no_other``
failed with ``start on <agent> failed: Failed decoding arguments`` when pytest ran in a clone
where ``streamctl demo`` (the README's first command) had left ``.state/payload.key``: the
in-process coordinator read that key and encrypted the start action of the query's PostgreSQL
sink (its options name a ``password``), while the agents the test spawned, each with a state
dir of its own, held no key. Not a race: a test environment that gave processes different
keys. The session now gives every process one state dir of its own (conftest).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamctl import config


def test_the_test_process_and_the_agents_it_spawns_hold_the_same_payload_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on f29f918 (this process takes the key left in ``./.state``), passes now."""
    leftover = tmp_path / ".state"
    leftover.mkdir()
    (leftover / config.PAYLOAD_KEY_FILE).write_text(base64.b64encode(os.urandom(32)).decode())
    monkeypatch.chdir(tmp_path)  # pytest started where a stack once ran
    ours = sorted(key.hex() for key in config.payload_keys())

    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    # The environment and working directory tests/test_agent_process.py's spawn_agent gives.
    agent = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from streamctl import config; "
            "print(json.dumps(sorted(key.hex() for key in config.payload_keys())))",
        ],
        cwd=agent_dir,
        env={**os.environ, "STREAMCTL_STATE_DIR": str(agent_dir / "state")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ours == json.loads(agent.stdout)
