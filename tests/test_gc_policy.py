"""streamctl's processes collect young garbage less often, and never against a process's own
choice (:mod:`streamctl.gc_policy`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from streamctl.gc_policy import YOUNG_GENERATION_THRESHOLD, collect_young_garbage_less_often

pytestmark = pytest.mark.quick


@pytest.fixture(autouse=True)
def _thresholds_restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_default_young_threshold_is_raised_and_the_older_ones_kept() -> None:
    gc.set_threshold(700, 10, 10)
    collect_young_garbage_less_often()
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, 10, 10)


def test_a_higher_threshold_a_process_chose_is_kept() -> None:
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD * 5, 7, 3)
    collect_young_garbage_less_often()
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD * 5, 7, 3)


def test_a_collector_switched_off_by_threshold_stays_off() -> None:
    gc.set_threshold(0, 10, 10)
    collect_young_garbage_less_often()
    assert gc.get_threshold()[0] == 0
