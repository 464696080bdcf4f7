"""The conformance harness as tests: every guide/ and operator/ query of the NebulaStream suite
runs through parser -> binder -> translate on local Spark (``trigger(availableNow=True)``) and
must produce the expected rows. Queries the planner refuses as NOT_SUPPORTED are skipped with
the reason. ``python tests/planner/conformance_harness.py`` prints the per-folder counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.conformance_harness import Harness, _FileState
from planner.systest_files import Query, Statement, read_systest, suite_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CASES = [
    pytest.param(path, block.index, id=f"{path.relative_to(path.parents[2])}#{block.index}")
    for path in suite_files("guide", "operator")
    for block in read_systest(path).queries
]


@pytest.mark.parametrize(("path", "index"), CASES)
def test_conformance_query(spark: Any, tmp_path: Path, path: Path, index: int) -> None:
    systest = read_systest(path)
    state = _FileState()
    for block in systest.blocks:
        if isinstance(block, Statement):
            state.apply(block)
        elif isinstance(block, Query) and block.index == index:
            outcome = Harness(spark, tmp_path).run_block(systest, block, state)
            break
    if outcome.status == "unsupported":
        pytest.skip(outcome.detail)
    assert outcome.status == "passed", outcome.detail
