"""``streamctl agent`` refuses to start without what it needs, saying what is missing."""

from __future__ import annotations

import os
import subprocess
import sys


def run_agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamctl.cli", "agent", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_no_java_stops_the_agent_with_what_to_install(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java here
    result = run_agent("--name", "a1", env=env)
    assert result.returncode == 2
    assert "openjdk-17-jre-headless" in result.stdout.replace("\n", " ")


def test_an_invalid_agent_name_is_refused_before_anything_starts():
    result = run_agent("--name", "bad-name", env=dict(os.environ))
    assert result.returncode == 2
    assert "not a valid identifier" in (result.stdout + result.stderr).replace("\n", " ")
