"""Property: no message, however hostile, fails a pass or costs another message its answer.

Hypothesis draws batches of hostile envelopes (:mod:`streamctl.bench.adversarial_cases`:
every kind, every field with extreme and wrong values, hostile statements and ids) and sends
each batch through the pass activity on SQLite and on PostgreSQL, between two canary requests.
Each pass must return; every request must get exactly one answer; both canaries must be
answered ``ok``; and a request id used before must never be applied twice. The catalog
accumulates across examples, as a real coordinator's does. The Temporal-level version of this
property is ``streamctl bench adversarial`` and ``tests/test_adversarial_stack.py``.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.activities.pass_activity import CatalogWork
from streamctl.bench.adversarial_cases import generate_case
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Envelope
from streamctl.protocol.pass_io import PassInput, PendingMessage

EXAMPLES = 300
"""Per catalog backend: 600 cases in all in CI, each a pass of up to eight hostile messages."""


def _payload(batch: list[dict[str, object]]) -> bytes:
    # What a raw Temporal caller may send: the standard library writes NaN and Infinity too.
    return json.dumps([batch]).encode()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_hostile_batches_never_fail_a_pass(backend, sqlite_url, request):
    url = sqlite_url if backend == "sqlite" else request.getfixturevalue("pg_url")
    activities = CatalogWork(url)
    pass_numbers = itertools.count(1)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=True,
    )
    @given(st.randoms(use_true_random=False), st.integers(1, 8))
    def check(rng: random.Random, size: int) -> None:
        pass_no = next(pass_numbers)
        cases = [generate_case(rng, serial) for serial in range(size)]
        before = m.ListWorkers().to_envelope(f"canary-a-{pass_no}")
        after = m.GetLogicalSource("nothing").to_envelope(f"canary-b-{pass_no}")
        requests: list[dict[str, object]] = [
            {"id": before.id, "kind": before.kind, "v": before.v, "body": before.body}
        ]
        events: list[PendingMessage] = []
        for case in cases:
            if case.channel == "event":
                raw = case.envelope
                events.append(
                    PendingMessage(
                        Envelope(raw["id"], raw["kind"], raw["body"], raw["v"]),  # type: ignore[arg-type]
                        1000.0,
                        len(repr(raw["body"])),
                    )
                )
            else:
                requests.append(case.envelope)
        requests.append({"id": after.id, "kind": after.kind, "v": after.v, "body": after.body})
        result = activities.apply_pass(
            PassInput("adversarial", pass_no, 1000.0 + pass_no, events, [1000.0], 30.0, 60.0),
            _payload(requests),
        )
        answers = json.loads(result.responses[0])
        assert len(answers) == len(requests)
        assert answers[0]["ok"], answers[0]
        assert answers[-1]["error_code"] == "NOT_FOUND", answers[-1]
        for answer in answers:
            assert answer["ok"] or answer["error_code"], answer
        assert len(result.responses[0]) < 4 * 1024 * 1024

    check()
