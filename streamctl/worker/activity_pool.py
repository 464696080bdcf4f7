"""The coordinator worker's process pool for catalog work, which outlives its processes.

A :class:`concurrent.futures.ProcessPoolExecutor` whose process dies (killed, out of memory)
is broken for good: every later submit raises ``BrokenProcessPool``, so one lost process would
fail every pass after it. :class:`RenewingProcessPool` hands out the same interface and
replaces a broken pool with a new one on the next submit. The work that was running in the
dead process fails (its activity attempt fails and Temporal retries it, on the new pool);
nothing else is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, ParamSpec, TypeVar

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class RenewingProcessPool(Executor):
    """``new_pool()`` makes the pool; a broken one is shut down and made again."""

    def __init__(self, new_pool: Callable[[], ProcessPoolExecutor]) -> None:
        self._new_pool = new_pool
        self._lock = threading.Lock()
        self._pool = new_pool()
        self.renewals = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            pool = self._pool
        try:
            return pool.submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            return self._renewed(pool).submit(fn, *args, **kwargs)

    def _renewed(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is broken:  # not renewed by another caller in the meantime
                log.warning("a catalog work process died; starting a new process pool")
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                self.renewals += 1
            return self._pool

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            pool = self._pool
        pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __exit__(self, *exc: Any) -> None:
        self.shutdown(wait=True)
