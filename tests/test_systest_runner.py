"""``streamctl systest`` through a real stack (dev server, coordinator, one Spark agent): a
sample of the NebulaStream suite's files, one or two of each folder the product passes (guide,
every operator folder, the inline source and sink files, TCP and mixed sources), must pass
completely; and the runner's own pieces (statement options, testdata paths, file reading,
summary) on their own. The whole suite is ``streamctl systest <suite>`` (docs/conformance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conformance import needs_suite, systests_dir

from streamctl.local_ports import free_port
from streamctl.systest.runner import Outcome, Summary, in_testdata, with_option
from streamctl.systest.suite_files import read_systest
from streamctl.worker.supervisor import read_stack

SUITE = systests_dir()
SAMPLE = (
    "guide/guide5.test",
    "guide/guide6.test",
    "operator/map/Map_Null.test",
    "operator/projection/ProjectWindowAggregationsStartEndAndWithRenames.test",
    "operator/projection/ProjectionNull.test",
    "operator/selection/Selection.test",
    "operator/union/SourceExpansionUnion.test",
    "sinks/InlineSink.test",
    "sources/InlineSource.test",
    "sources/TCP.test",
    "sources/Mixed.test",
)
"""A CI-sized sample: windows, maps with NULL, renamed window projections, selection, source
expansion, inline and TCP sources, inline sinks (24 queries; the folders hold 134)."""


def streamctl(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamctl.cli", *args],
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.spark
@pytest.mark.slow
@needs_suite
def test_a_sample_of_the_suite_passes_completely_through_the_coordinator(
    tmp_path: Path,
):
    state = tmp_path / "state"
    up = streamctl(
        "up", "--detach", "--state-dir", str(state),
        "--port", str(free_port()), "--ui-port", str(free_port()),
        "--file-root", str(SUITE / "testdata"),
    )  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    info = read_stack(state)
    assert info is not None
    try:
        result = streamctl(
            "systest", *(str(SUITE / name) for name in SAMPLE),
            "--json", "-j", "2", "--address", info.address, "--state-dir", str(state),
        )  # fmt: skip
        report = json.loads(result.stdout)
        problems = [q for q in report["queries"] if q["status"] != "passed"]
        assert problems == [], json.dumps(problems, indent=1)[:4000]
        assert result.returncode == 0
        assert (report["passed"], report["failed"], report["unsupported"]) == (24, 0, 0)
        assert set(report["folders"]) == {
            "guide",
            "operator/map",
            "operator/projection",
            "operator/selection",
            "operator/union",
            "sinks",
            "sources",
        }
    finally:
        streamctl("down", "--state-dir", str(state), timeout=120)


@pytest.mark.quick
def test_an_option_joins_the_set_clause_or_starts_one():
    option = "'/d/a.csv' AS `SOURCE`.FILE_PATH"
    assert with_option("CREATE PHYSICAL SOURCE FOR s TYPE File;", option) == (
        "CREATE PHYSICAL SOURCE FOR s TYPE File SET('/d/a.csv' AS `SOURCE`.FILE_PATH)"
    )
    assert with_option("CREATE PHYSICAL SOURCE FOR s TYPE File SET('|' AS X) ;", option) == (
        "CREATE PHYSICAL SOURCE FOR s TYPE File SET('/d/a.csv' AS `SOURCE`.FILE_PATH, '|' AS X)"
    )


@pytest.mark.quick
def test_testdata_relative_paths_become_absolute_and_absolute_ones_stay(tmp_path: Path):
    inline = (
        "SELECT * FROM File('small/a.csv' AS `SOURCE`.FILE_PATH, "
        "'/abs/b.csv' as `SOURCE`.`FILE_PATH`) INTO File()"
    )
    assert in_testdata(inline, tmp_path) == (
        f"SELECT * FROM File('{tmp_path}/small/a.csv' AS `SOURCE`.FILE_PATH, "
        "'/abs/b.csv' as `SOURCE`.`FILE_PATH`) INTO File()"
    )
    generator = "SET('SEQUENCE UINT64 0 2 1, WORDLIST small/w.csv' AS `SOURCE`.GENERATOR_SCHEMA)"
    assert in_testdata(generator, tmp_path) == (
        f"SET('SEQUENCE UINT64 0 2 1, WORDLIST {tmp_path}/small/w.csv' AS "
        "`SOURCE`.GENERATOR_SCHEMA)"
    )


@pytest.mark.quick
def test_a_file_reads_into_statements_queries_and_groups(tmp_path: Path):
    (tmp_path / "testdata").mkdir()
    folder = tmp_path / "mine"
    folder.mkdir()
    path = folder / "one.test"
    path.write_text(
        "# name: mine/one.test\n# groups: [Window, Join]\n\n"
        "CREATE LOGICAL SOURCE s(a INT32);\nCREATE PHYSICAL SOURCE FOR s TYPE File;\n"
        "ATTACH INLINE\n1\n2\n\nCREATE SINK o(a INT32) TYPE File;\n\n"
        "SELECT a FROM s INTO o;\n----\n1\n2\n\nSELECT b FROM s INTO o;\n----\nERROR 2003\n"
    )
    systest = read_systest(path, tmp_path)
    assert (systest.name, systest.folder, systest.groups) == (
        "mine/one.test",
        "mine",
        ("Window", "Join"),
    )
    [first, second] = systest.queries
    assert (first.expected_rows, second.expected_error) == (["1", "2"], 2003)
    statements = [b for b in systest.blocks if b not in systest.queries]
    assert statements[1].inline_rows == ["1", "2"]  # type: ignore[union-attr]


@pytest.mark.quick
def test_the_summary_ends_with_passed_and_failed_counts():
    summary = Summary(
        [
            Outcome("guide/a.test", 3, 1, "passed"),
            Outcome("guide/a.test", 9, 2, "failed", "1 expected rows, 0 actual"),
            Outcome("sources/b.test", 4, 1, "unsupported", "TCP source"),
        ]
    )
    assert summary.line() == "1 passed, 1 failed, 1 unsupported"
    assert summary.as_json()["folders"] == {
        "guide": {"passed": 1, "failed": 1, "unsupported": 0},
        "sources": {"passed": 0, "failed": 0, "unsupported": 1},
    }
