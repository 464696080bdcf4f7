"""``streamctl bench differential``: generated cases run by the coordinator on Spark and by the
reference engine; their rows must match as multisets.

What a run does
---------------
1. Generates cases (:mod:`.differential_cases`: schema, bounded data, a NebulaStream query).
2. Starts a private stack (Temporal dev server, coordinator worker, one Spark agent process,
   as ``streamctl up`` does; :mod:`.stack`), SQLite catalog, the run's directory as a file root.
3. Runs the cases ``concurrency`` at a time (the agent's capacity; a deploy costs ~0.7 s, so
   the queries overlap): per case, its own logical sources with a CSV file each (NES CSV: an
   empty field is NULL), the query ``SELECT ... INTO File()`` through ``CreateQuery``, a wait
   until the coordinator reports it ``FINISHED`` or ``FAILED``, its sink's committed rows
   (:mod:`streamctl.sink_files`); then it drops what it created. The same bound plan runs on
   :func:`streamctl.reference.run_reference` (DuckDB) over the same rows.
4. Compares (:func:`compare_rows`): the row multisets must be equal, integers and strings
   exactly, floats within a tolerance (the sink writes six decimals, and the reference sums
   floats in double precision in another order; see :mod:`streamctl.reference`).

Outcomes per case: ``agreed`` (equal rows, or the query ``FAILED`` where the reference raises
:class:`~streamctl.reference.NesQueryFailure`: NES documents an error), ``refused_by_planner``
(``CreateQuery`` answered ``NOT_SUPPORTED``), ``refused_by_reference``
(:class:`~streamctl.reference.ReferenceUnsupported`: the NES docs leave the answer open; the
product does not run it), ``disagreed`` (with the case: query, schemas, rows, and the rows
only one side has, or the product's error). ``refused_as_unsupported`` is the sum of the two
refusals. ``inconclusive``: the stack did not run the query (it did not end within the
timeout, or an activity timed out on an overloaded machine); such a case runs once more at
the end, and what stays inconclusive is counted apart, neither agreed nor disagreed.
:func:`shrink` makes a disagreeing case minimal by delta debugging over its rows, rerunning
candidates concurrently.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from streamctl.bench.differential_cases import (
    BASE_SHAPES,
    FLOAT_TYPES,
    Case,
    Source,
    bind_case,
    generate_cases,
)
from streamctl.bench.query_runs import (
    TERMINAL_STATES,
    QueryWaitTimeout,
    inline_sink_rows,
    wait_for_alive_agent,
    wait_for_state,
)
from streamctl.bench.stack import bench_supervisor
from streamctl.client.client import CoordinatorClient
from streamctl.error_codes import NOT_SUPPORTED
from streamctl.planner.planning_errors import PlannerError
from streamctl.protocol import messages as m
from streamctl.reference import NesQueryFailure, ReferenceUnsupported, run_reference

__all__ = [
    "Outcome",
    "Runner",
    "compare_rows",
    "run_differential",
    "shrink",
    "summarize",
]

AGREED: Final = "agreed"
REFUSED_BY_PLANNER: Final = "refused_by_planner"
REFUSED_BY_REFERENCE: Final = "refused_by_reference"
DISAGREED: Final = "disagreed"
INCONCLUSIVE: Final = "inconclusive"
_INFRASTRUCTURE: Final = re.compile(
    r"ScheduleToStart|StartToClose|timeout|AgentBusy|\[SPARK_LOST\]|\[CONTAINED\]|"
    r"not finished within"
)
"""Product errors that say nothing about the query's semantics: the stack did not run it
(an overloaded machine: activities timed out, the agent's Spark was lost)."""
REL_TOLERANCE: Final = 1e-5
ABS_TOLERANCE: Final = 1.5e-6
"""The File sink writes floats with six decimals (nes_text.format_float): a rounding of 5e-7."""


# --- comparing -------------------------------------------------------------------------------


def _close(expected: Any, actual: Any, type_name: str) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if type_name not in FLOAT_TYPES:
        return bool(expected == actual)
    want, got = float(expected), float(actual)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return want == got
    return abs(want - got) <= ABS_TOLERANCE + REL_TOLERANCE * max(abs(want), abs(got))


def _row_close(expected: Sequence[Any], actual: Sequence[Any], types: Sequence[str]) -> bool:
    return len(expected) == len(actual) and all(
        _close(e, a, t) for e, a, t in zip(expected, actual, types, strict=True)
    )


def compare_rows(
    expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]], types: Sequence[str]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows only the reference has (missing) and only the product has (extra), as
    multisets: exact on every column but floats, which match within the tolerance."""
    exact = [i for i, t in enumerate(types) if t not in FLOAT_TYPES]

    def key(row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(row[i] for i in exact)

    missing, extra = Counter(map(tuple, expected)), Counter(map(tuple, actual))
    common = missing & extra
    missing -= common
    extra -= common
    unmatched: list[tuple[Any, ...]] = []
    by_key: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in extra.elements():
        by_key.setdefault(key(row), []).append(row)
    for row in missing.elements():
        candidates = by_key.get(key(row), [])
        match = next((c for c in candidates if _row_close(row, c, types)), None)
        if match is None:
            unmatched.append(row)
        else:
            candidates.remove(match)
    leftover = [row for rows in by_key.values() for row in rows]
    return sorted(unmatched, key=repr), sorted(leftover, key=repr)


# --- outcomes --------------------------------------------------------------------------------


@dataclass
class Outcome:
    case: Case
    status: str
    reason: str = ""
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    extra: list[tuple[Any, ...]] = field(default_factory=list)
    product_state: str = ""
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            **self.case.describe(),
            "status": self.status,
            "reason": self.reason,
            "product_state": self.product_state,
            "missing_from_product": [list(map(_plain, r)) for r in self.missing[:20]],
            "extra_in_product": [list(map(_plain, r)) for r in self.extra[:20]],
        }


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def summarize(outcomes: Sequence[Outcome], details: int = 20) -> dict[str, Any]:
    statuses = Counter(o.status for o in outcomes)
    by_shape: dict[str, dict[str, int]] = {}
    for o in outcomes:
        shape = by_shape.setdefault(o.case.shape, {})
        shape[o.status] = shape.get(o.status, 0) + 1
    refusals = Counter(o.reason for o in outcomes if o.status.startswith("refused"))
    return {
        "cases": len(outcomes),
        "agreed": statuses[AGREED],
        "refused_as_unsupported": statuses[REFUSED_BY_PLANNER] + statuses[REFUSED_BY_REFERENCE],
        "refused_by_planner": statuses[REFUSED_BY_PLANNER],
        "refused_by_reference": statuses[REFUSED_BY_REFERENCE],
        "disagreed": statuses[DISAGREED],
        "inconclusive": statuses[INCONCLUSIVE],
        "failed_as_documented": sum(
            1 for o in outcomes if o.status == AGREED and o.product_state == "FAILED"
        ),
        "by_shape": by_shape,
        "refusal_reasons": dict(refusals.most_common(15)),
        "disagreements": [o.as_json() for o in outcomes if o.status == DISAGREED][:details],
    }


# --- running ---------------------------------------------------------------------------------


def _csv_field(value: Any) -> str:
    if value is None:
        return ""  # NES CSV: only an empty field is NULL (null_handling.md)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_csv(source: Source, path: Path) -> None:
    lines = [",".join(_csv_field(v) for v in row) for row in source.rows]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


class Runner:
    """Runs cases through a coordinator (on its agent) and the reference."""

    def __init__(
        self,
        client: CoordinatorClient,
        directory: Path,
        concurrency: int,
        timeout_s: float,
        log_path: Path | None = None,
    ) -> None:
        self.client = client
        self.directory = directory
        self.slots = asyncio.Semaphore(concurrency)
        self.timeout_s = timeout_s
        self.log_path = log_path

    async def run_many(self, cases: Sequence[Case]) -> list[Outcome]:
        return list(await asyncio.gather(*(self.run(case) for case in cases)))

    async def run(self, case: Case) -> Outcome:
        started = time.monotonic()
        outcome = await self._run(case)
        outcome.seconds = round(time.monotonic() - started, 2)
        if self.log_path is not None:  # one JSON line per case, as it ends
            line = json.dumps({**outcome.as_json(), "seconds": outcome.seconds}, default=str)
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(line + "\n")
        return outcome

    async def _run(self, case: Case) -> Outcome:
        prefix = f"d{uuid.uuid4().hex[:10]}"
        names = case.names(prefix)
        expected: list[tuple[Any, ...]] | None = None
        expected_failure = ""
        try:
            bound = bind_case(case, names)
        except PlannerError as error:
            if error.code != NOT_SUPPORTED:
                return Outcome(case, DISAGREED, f"the planner refused a generated query: {error}")
            bound = None
        if bound is not None:
            rows = {name: source.rows for name, source in zip(names, case.sources, strict=True)}
            try:
                expected = await asyncio.to_thread(run_reference, bound, rows)
            except ReferenceUnsupported as error:
                return Outcome(case, REFUSED_BY_REFERENCE, error.reason)
            except NesQueryFailure as error:
                expected_failure = error.reason
        async with self.slots:  # only the product's runs take a slot of the agent
            try:
                return await self._product(case, names, bound, expected, expected_failure)
            finally:
                await self._drop(names)

    async def _product(
        self,
        case: Case,
        names: list[str],
        bound: Any,
        expected: list[tuple[Any, ...]] | None,
        expected_failure: str,
    ) -> Outcome:
        for name, source in zip(names, case.sources, strict=True):
            path = self.directory / f"{name}.csv"
            await asyncio.to_thread(write_csv, source, path)
            await self.client.ask(
                m.CreateLogicalSource(name, tuple(c.spec() for c in source.columns))
            )
            await self.client.ask(m.CreatePhysicalSource(name, "FILE", {"file_path": str(path)}))
        response = await self.client.ask_response(m.CreateQuery(case.statement(names)))
        if not response.ok:
            if response.error_code == NOT_SUPPORTED:
                return Outcome(case, REFUSED_BY_PLANNER, _first_line(response.error_message))
            return Outcome(
                case, DISAGREED, f"CreateQuery: {response.error_code}: {response.error_message}"
            )
        if bound is None:
            return Outcome(case, DISAGREED, "the local planner refused what the coordinator took")
        query_id = int(response.result["id"])
        try:
            state, error = await self._wait(query_id)
            if state != "FINISHED":
                if expected_failure and state == "FAILED":
                    return Outcome(case, AGREED, expected_failure, product_state=state)
                reason = f"product {state}: {error}"
                status = INCONCLUSIVE if _INFRASTRUCTURE.search(reason) else DISAGREED
                return Outcome(case, status, reason, product_state=state)
            if expected_failure:
                return Outcome(
                    case,
                    DISAGREED,
                    f"NES fails this query ({expected_failure}); the product FINISHED",
                    product_state=state,
                )
            actual = await inline_sink_rows(self.client, str(response.result["sink"]), query_id)
            types = [f.type for f in bound.output]
            assert expected is not None
            missing, extra = compare_rows(expected, actual, types)
            status = AGREED if not missing and not extra else DISAGREED
            return Outcome(case, status, "", missing, extra, state)
        finally:
            await self.client.ask_response(m.DropQuery(query_id))

    async def _wait(self, query_id: int) -> tuple[str, str]:
        deadline = time.monotonic() + self.timeout_s
        try:
            answer = await wait_for_state(self.client, query_id, TERMINAL_STATES, deadline)
        except QueryWaitTimeout as timeout:
            await self.client.ask_response(m.StopQuery(query_id))
            return f"not finished within {self.timeout_s:.0f} s ({timeout.last_state})", ""
        return str(answer["current_state"]), str(answer.get("error") or "")

    async def _drop(self, names: list[str]) -> None:
        for name in names:
            await self.client.ask_response(m.DropLogicalSource(name, cascade=True))


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if text else ""


# --- shrinking -------------------------------------------------------------------------------


def _without(case: Case, source_index: int, start: int, stop: int) -> Case:
    source = case.sources[source_index]
    rows = source.rows[:start] + source.rows[stop:]
    sources = list(case.sources)
    sources[source_index] = replace(source, rows=rows)
    return replace(case, sources=tuple(sources))


async def shrink(runner: Runner, outcome: Outcome, max_rounds: int = 12) -> Outcome:
    """A smaller disagreeing case: delta debugging over each source's rows (chunks removed
    while the case still disagrees; the candidates of a round run concurrently)."""
    best = outcome
    for _ in range(max_rounds):
        candidates: list[Case] = []
        for index, source in enumerate(best.case.sources):
            count = len(source.rows)
            if count == 0:
                continue
            for parts in (2, 4, 8):
                chunk = max(1, math.ceil(count / parts))
                candidates.extend(
                    _without(best.case, index, start, start + chunk)
                    for start in range(0, count, chunk)
                )
                if chunk == 1:
                    break
        if not candidates:
            return best
        results = await runner.run_many(list(dict.fromkeys(candidates)))
        failing = [r for r in results if r.status == DISAGREED]
        if not failing:
            return best
        best = min(failing, key=lambda r: sum(len(s.rows) for s in r.case.sources))
    return best


# --- a run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DifferentialSettings:
    cases: int = 100
    seed: int = 0
    concurrency: int = 6
    master: str = "local[2]"
    shapes: tuple[str, ...] = BASE_SHAPES
    shrink: bool = True
    timeout_s: float = 300.0
    """Longest wait for one query to end."""
    log_path: str | None = None
    """A file that gets one JSON line per case as it ends (progress of long runs)."""


async def run_cases(cases: Sequence[Case], settings: DifferentialSettings) -> dict[str, Any]:
    """Run ``cases`` on a private stack; the summary (:func:`summarize`) with ``seconds`` and,
    for each disagreement (up to 3 when shrinking), its shrunk case."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamctl-differential-") as directory:
        root = Path(directory)
        catalog = f"sqlite:///{root / 'catalog.db'}"
        async with bench_supervisor(
            catalog,
            agents=1,
            master=settings.master,
            capacity=settings.concurrency,
            file_roots=(root,),
        ) as supervisor:
            client = await CoordinatorClient(supervisor.address).connect()
            try:
                await wait_for_alive_agent(client, time.monotonic() + settings.timeout_s)
                startup = time.monotonic() - started
                log = Path(settings.log_path) if settings.log_path else None
                runner = Runner(client, root, settings.concurrency, settings.timeout_s, log)
                outcomes = await runner.run_many(cases)
                # a case the stack did not run (timeouts of an overloaded machine) runs again
                again = [i for i, o in enumerate(outcomes) if o.status == INCONCLUSIVE]
                for i, outcome in zip(
                    again, await runner.run_many([outcomes[i].case for i in again]), strict=True
                ):
                    outcomes[i] = outcome
                summary = summarize(outcomes)
                summary["startup_seconds"] = round(startup, 1)
                summary["case_seconds"] = _quantiles([o.seconds for o in outcomes])
                if settings.shrink:
                    disagreeing = [o for o in outcomes if o.status == DISAGREED][:3]
                    shrunk = [await shrink(runner, o) for o in disagreeing]
                    summary["shrunk"] = [o.as_json() for o in shrunk]
            finally:
                # the client's thread must not outlive the stack (it would retry forever)
                await asyncio.to_thread(client.close, 1.0)
    summary["seconds"] = round(time.monotonic() - started, 1)
    summary["seed"] = settings.seed
    summary["shapes"] = list(settings.shapes)
    return summary


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values) or [0.0]
    return {
        q: ordered[min(len(ordered) - 1, int(f * len(ordered)))]
        for q, f in (("p50", 0.5), ("p90", 0.9), ("max", 1.0))
    }


async def run_differential(settings: DifferentialSettings) -> dict[str, Any]:
    cases = await asyncio.to_thread(generate_cases, settings.cases, settings.seed, settings.shapes)
    return await run_cases(cases, settings)
