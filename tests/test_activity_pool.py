"""The coordinator's catalog-work pool survives the death of its processes."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from streamctl.worker.activity_pool import RenewingProcessPool


def _die() -> None:
    os._exit(9)  # what a kill -9 or the OOM killer leaves: no cleanup, no answer


def _pid() -> int:
    return os.getpid()


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))


def test_a_dead_process_fails_its_own_work_and_the_pool_goes_on() -> None:
    with RenewingProcessPool(_pool) as pool:
        before = pool.submit(_pid).result(timeout=60)
        with pytest.raises(BrokenProcessPool):
            pool.submit(_die).result(timeout=60)
        # a plain ProcessPoolExecutor would refuse every submit from now on
        after = [pool.submit(_pid).result(timeout=60) for _ in range(3)]
        assert pool.renewals == 1
        assert before not in after
