"""How streamctl's own processes run Python's cyclic garbage collector.

Every ``streamctl`` process (the command line, the coordinator worker, the agents, the gateway,
the benchmarks: :func:`streamctl.cli.main` calls :func:`collect_young_garbage_less_often`)
and the coordinator's pass processes
(:func:`streamctl.worker.coordinator_worker.prepare_activity_process`,
which also calls :func:`freeze_what_is_loaded`) handle messages in bulk: a request's decoded
JSON, its future, its response object and its ORM rows are containers that live for one round
trip or one pass, long enough to survive a young collection. Under CPython's default
thresholds (700, 10, 10) the collector then ran one young collection every 700 surviving
containers and an older one every ten of those, each walking everything promoted so far.

Measured in ``bench requests``' client process (4,000 callers, 40,000 requests, the client
library as shipped): the collector took 1.1-1.2 s of the process's 2.3-2.45 s of CPU (515 young,
47 middle and 4 full collections; the full ones ~140 ms each). With the young threshold at
10,000 the process used 1.6-1.7 s (about 20 young collections, one
or two older) and the coordinator answered 9,350-9,530 requests/s instead of 8,370-8,520 in the
same session.

Ten thousand was still too few for a client with thousands of requests in flight (``bench
requests``' 8,000 callers). The collector's count is container allocations *minus
deallocations*, and the deaths of older objects (the previous round trip's) count against it,
so the young generation held 30,000-100,000 objects whenever it was collected: each young
collection took 20-70 ms (a pause of the client's loop, collecting nothing), about 20 of them
in a 6 s measurement, ~0.6 s of the process's CPU in all. At :data:`YOUNG_GENERATION_THRESHOLD`
= 100,000 the same run had 4 collections, 137 ms in all; in 4 interleaved pairs of runs the
client's CPU per request went from 41.3/34.7/39.6/37.2 to 29.6/29.3/31.3/38.1 us and the
coordinator answered 12,125/12,755/11,755/12,808 against 12,987/13,252/13,067/10,843
requests/s (the last pair ran while the machine slowed: every process's CPU per request rose).
Young collections then happen every hundred thousand surviving containers: the memory held by
unreachable cycles stays bounded by that (a few tens of MB at most), and nothing else changes.
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
    usual. In the pass processes, walking the imported modules made the passes that ran an
    old collection ~1.6x slower (mean pass 200 -> 157 ms in a 2,000-request pass benchmark)."""
    gc.collect()
    gc.freeze()
