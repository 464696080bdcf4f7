"""How streamctl's own processes run Python's cyclic garbage collector.

Every ``streamctl`` process (the command line, the coordinator worker, the agents, the gateway,
the benchmarks: :func:`streamctl.cli.main` calls :func:`collect_young_garbage_less_often`)
and the coordinator's pass processes
(:func:`streamctl.worker.coordinator_worker.prepare_activity_process`,
which also calls :func:`freeze_what_is_loaded`) handle messages in bulk: a request's decoded
JSON, its future, its response object and its ORM rows are containers that live for one round
trip or one pass, long enough to survive a young collection. Under CPython's default
thresholds (700, 10, 10) the collector runs one young collection every 700 surviving
containers and an older one every ten of those, each walking everything promoted so far: in
``bench requests``' client process it takes about half of the process's CPU.

The young threshold is :data:`YOUNG_GENERATION_THRESHOLD` (100,000), not a mere 10,000: the
collector's count is container allocations *minus deallocations*, and the deaths of older
objects (the previous round trip's) count against it, so with thousands of requests in flight
the young generation holds tens of thousands of objects whenever it is collected, and each
young collection pauses the client's loop for 20-70 ms while collecting nothing. Young
collections then happen every hundred thousand surviving containers: the memory held by
unreachable cycles stays bounded by that (a few tens of MB at most), and nothing else changes.
The figures are in docs/decisions.md.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION_THRESHOLD = 100_000
"""Surviving container allocations between young collections (CPython's default: 700)."""


def collect_young_garbage_less_often() -> None:
    """Raise the young generation's threshold to :data:`YOUNG_GENERATION_THRESHOLD` (never lower
    it: a process may have chosen a higher one); the older generations keep theirs."""
    young, middle, old = gc.get_threshold()
    if young != 0:  # 0 means the collector is off: leave it off
        gc.set_threshold(max(young, YOUNG_GENERATION_THRESHOLD), middle, old)


def freeze_what_is_loaded() -> None:
    """Collect once, then move everything alive (the imported modules, what startup built) out
    of the collector's sight for good: the older collections no longer walk it. For processes
    whose startup state lives as long as they do; what they allocate later is collected as
    usual. In the pass processes, walking the imported modules makes the passes that run an
    old collection ~1.6x slower (mean pass 157 ms frozen, 200 ms not, in a 2,000-request pass
    benchmark)."""
    gc.collect()
    gc.freeze()
