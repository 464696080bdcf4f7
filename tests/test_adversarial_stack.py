"""Property, end to end: hostile messages through every door never stop the coordinator.

Hypothesis draws hostile cases (:mod:`streamctl.bench.adversarial_cases`) and sends each one
through the client library, the REST gateway, a raw Temporal update or a raw signal, in turn,
to one coordinator on the real Temporal dev server (SQLite and PostgreSQL catalogs). After each
case a canary request must be answered within 10 s, no sender may hang past its deadline, the
gateway never answers a 5xx other than 503, and at the end the workflow's history (every run)
has no failed workflow task. 250 cases per catalog, 500 in all; ``streamctl bench adversarial
--cases N`` runs the same property at any size. On f29f918 a signal with two arguments, or a
corrupt compressed payload, failed every workflow task from then on.
"""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.bench.adversarial import PATHS, AdversarialRun
from streamctl.bench.adversarial_cases import generate_case

CASES_PER_CATALOG = 250

pytestmark = pytest.mark.slow


async def test_hostile_messages_through_every_door(start_coordinator, catalog_url, temporal_client):
    coordinator = await start_coordinator(catalog_url)
    serials = itertools.count()
    async with AdversarialRun(
        coordinator.address, temporal_client, coordinator.workflow_id, seed=1
    ) as run:

        @settings(
            max_examples=CASES_PER_CATALOG,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(st.randoms(use_true_random=False))
        def one_case(rng: random.Random) -> None:
            # Hypothesis runs examples synchronously: each one is handed to the test's loop.
            serial = next(serials)
            case = run.case(generate_case(rng, serial), PATHS[serial % len(PATHS)])
            answered = asyncio.run_coroutine_threadsafe(case, loop).result()
            assert answered, "the canary after this case was not answered within 10 s"
            assert run.hangs == 0, "a sender did not return by its deadline"

        loop = asyncio.get_running_loop()
        await asyncio.to_thread(one_case)
        summary = await run.summary()
    assert summary["cases"] >= CASES_PER_CATALOG
    assert summary["failed_workflow_tasks"] == 0, summary
    assert summary["gateway_5xx"] == 0, summary
    assert summary["wedged"] == 0, summary
