"""``streamctl bench adversarial``: hostile messages through every door, and a canary after each.

Each case (:mod:`streamctl.bench.adversarial_cases`) travels one of four ways, in turn:

* ``client``: the client library's raw-envelope ask (``CoordinatorClient.ask_envelope``);
* ``gateway``: the REST gateway's routes, in process over ASGI, with the case's fields as the
  JSON body or path;
* ``update``: a raw Temporal ``submit`` update, with the ids and payload as a raw caller may
  send them (sometimes mismatched, sometimes not JSON at all);
* ``signal``: a raw ``events`` signal (sometimes with the wrong number or shape of arguments,
  sometimes a corrupt compressed payload).

After every case a canary request (``ListWorkers``, from a client of its own) must be answered
within :data:`CANARY_TIMEOUT` seconds; a canary that is not counts the coordinator as
``wedged`` for that case. At the end every run of the workflow's history is read for failed
workflow tasks. A sender that does not return within :data:`SEND_TIMEOUT` counts as a hang
(clients must return by their deadline). What the coordinator answers is not judged here: only
that it answers, goes on answering, and never fails a workflow task.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import statistics
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue

from streamctl.bench.adversarial_cases import AdversarialCase, generate_case
from streamctl.bench.stack import bench_catalog, bench_stack
from streamctl.client.client import CoordinatorClient
from streamctl.gateway.app import GatewaySettings, create_app
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Envelope
from streamctl.raw_payloads import json_payload
from streamctl.worker.coordinator_worker import ensure_coordinator

PATHS = ("client", "gateway", "update", "signal")
CANARY_TIMEOUT = 10.0
SEND_TIMEOUT = 20.0


async def failed_workflow_tasks(temporal: Client, workflow_id: str) -> int:
    """Failed workflow tasks across every run of ``workflow_id``."""
    failures = 0
    async for execution in temporal.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await temporal.get_workflow_handle(
            workflow_id, run_id=execution.run_id
        ).fetch_history()
        failures += sum(
            1
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        )
    return failures


def _json_bytes(value: Any) -> bytes:
    # A raw caller may write what JSON cannot hold (NaN), or text that is not valid UTF-8.
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


def _gateway_call(case: AdversarialCase) -> tuple[str, str, Any]:
    """The HTTP method, path and JSON body a gateway caller would send for ``case``."""
    envelope = case.envelope
    body = envelope.get("body")
    fields = body if isinstance(body, dict) else {}
    kind = case.kind

    def path_part(name: str) -> str:
        return urllib.parse.quote(str(fields.get(name, "x"))[:2000], safe="")

    if kind == "ExecuteStatement":
        return "POST", "/v1/statements", {"text": fields.get("text", body)}
    routes: dict[str, tuple[str, str, Any]] = {
        "CreateLogicalSource": (
            "POST",
            "/v1/logical-sources",
            {"name": fields.get("name"), "columns": fields.get("schema")},
        ),
        "CreatePhysicalSource": ("POST", "/v1/physical-sources", body),
        "CreateSink": (
            "POST",
            "/v1/sinks",
            {**fields, "columns": fields.get("schema")} if fields else body,
        ),
        "CreateQuery": ("POST", "/v1/queries", body),
        "GetLogicalSource": ("GET", f"/v1/logical-sources/{path_part('name')}", None),
        "DropLogicalSource": ("DELETE", f"/v1/logical-sources/{path_part('name')}", None),
        "GetPhysicalSource": ("GET", f"/v1/physical-sources/{path_part('id')}", None),
        "DropPhysicalSource": ("DELETE", f"/v1/physical-sources/{path_part('id')}", None),
        "GetSink": ("GET", f"/v1/sinks/{path_part('name')}", None),
        "DropSink": ("DELETE", f"/v1/sinks/{path_part('name')}", None),
        "GetQuery": ("GET", f"/v1/queries/{path_part('id')}", None),
        "DropQuery": ("DELETE", f"/v1/queries/{path_part('id')}", None),
        "StartQuery": ("POST", f"/v1/queries/{path_part('id')}/start", None),
        "StopQuery": ("POST", f"/v1/queries/{path_part('id')}/stop", None),
        "GetWorker": ("GET", f"/v1/workers/{path_part('name')}", None),
        "DrainWorker": ("POST", f"/v1/workers/{path_part('name')}/drain", None),
        "Reoptimize": ("POST", "/v1/reoptimize", body),
    }
    return routes.get(kind, ("POST", "/v1/statements", body))


class _Doors:
    """The four ways a case reaches the coordinator."""

    def __init__(
        self,
        client: CoordinatorClient,
        http: httpx.AsyncClient,
        handle: WorkflowHandle[Any, Any],
        rng: random.Random,
    ) -> None:
        self.client = client
        self.http = http
        self.handle = handle
        self.rng = rng
        self.sender = f"adversarial-{uuid.uuid4().hex[:8]}"
        self.seq = 0
        self.gateway_5xx = 0

    async def send(self, path: str, case: AdversarialCase) -> None:
        await getattr(self, f"_{path}")(case)

    async def _client(self, case: AdversarialCase) -> None:
        raw = case.envelope
        envelope = Envelope(raw.get("id"), raw.get("kind"), raw.get("body"), raw.get("v"))  # type: ignore[arg-type]
        await self.client.ask_envelope(envelope)

    async def _gateway(self, case: AdversarialCase) -> None:
        method, path, body = _gateway_call(case)
        content = None if body is None else _json_bytes(body)
        response = await self.http.request(
            method, path, content=content, headers={"content-type": "application/json"}
        )
        if response.status_code >= 500 and response.status_code != 503:
            self.gateway_5xx += 1

    async def _update(self, case: AdversarialCase) -> None:
        raw = case.envelope
        ids: Any = [raw.get("id")]
        data = _json_bytes([raw])
        roll = self.rng.random()
        if roll < 0.05:
            ids = [*ids, "extra-id"]  # more ids than envelopes
        elif roll < 0.1:
            data = os.urandom(self.rng.randrange(1, 64))  # not JSON at all
        elif roll < 0.13:
            ids = "not a list"
        await self.handle.execute_update("submit", args=[ids, RawValue(json_payload(data).payload)])

    async def _signal(self, case: AdversarialCase) -> None:
        self.seq += 1
        batch = {"sender": self.sender, "seq": self.seq, "events": [case.envelope]}
        roll = self.rng.random()
        if roll < 0.05:
            await self.handle.signal("events", args=[])
        elif roll < 0.1:
            await self.handle.signal("events", args=[batch, batch])
        elif roll < 0.15:
            corrupt = Payload(metadata={"encoding": b"binary/zlib"}, data=os.urandom(40))
            await self.handle.signal("events", RawValue(corrupt))
        elif roll < 0.2:
            await self.handle.signal("events", {"sender": 5, "seq": "x", "events": 3})
        else:
            payload = Payload(metadata={"encoding": b"json/plain"}, data=_json_bytes(batch))
            await self.handle.signal("events", RawValue(payload))


class AdversarialRun:
    """Hostile cases against one coordinator, a canary after each, and the tally."""

    def __init__(self, address: str, temporal: Client, workflow_id: str, seed: int) -> None:
        self.address = address
        self.temporal = temporal
        self.workflow_id = workflow_id
        self.rng = random.Random(seed)
        self.outcomes: Counter[str] = Counter()
        self.by_path: Counter[str] = Counter()
        self.canary_ms: list[float] = []
        self.wedged = 0
        self.hangs = 0
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> AdversarialRun:
        client = await CoordinatorClient(
            self.address, workflow_id=self.workflow_id, request_timeout=SEND_TIMEOUT / 2
        ).connect()
        self._stack.push_async_callback(asyncio.to_thread, client.close)
        self.canary = await CoordinatorClient(
            self.address, workflow_id=self.workflow_id, request_timeout=CANARY_TIMEOUT
        ).connect()
        self._stack.push_async_callback(asyncio.to_thread, self.canary.close)
        app = create_app(
            GatewaySettings(
                self.address, workflow_id=self.workflow_id, request_timeout=SEND_TIMEOUT / 2
            )
        )
        await self._stack.enter_async_context(app.router.lifespan_context(app))
        http = await self._stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")
        )
        handle = self.temporal.get_workflow_handle(self.workflow_id)
        self.doors = _Doors(client, http, handle, self.rng)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stack.aclose()

    async def case(self, case: AdversarialCase, path: str) -> bool:
        """Send ``case`` by ``path``, then the canary; whether the canary was answered."""
        self.by_path[path] += 1
        try:
            await asyncio.wait_for(self.doors.send(path, case), SEND_TIMEOUT)
            self.outcomes["sent"] += 1
        except TimeoutError:
            self.hangs += 1
        except Exception as error:  # refused: what a hostile caller should get
            self.outcomes[type(error).__name__] += 1
        started = time.perf_counter()
        try:
            await asyncio.wait_for(self.canary.ask(m.ListWorkers()), CANARY_TIMEOUT + 1)
        except Exception:
            self.wedged += 1
            return False
        self.canary_ms.append((time.perf_counter() - started) * 1000)
        return True

    async def run(self, cases: int) -> None:
        for serial in range(cases):
            await self.case(generate_case(self.rng, serial), PATHS[serial % len(PATHS)])

    async def summary(self) -> dict[str, Any]:
        await asyncio.sleep(1.0)  # visibility catches up with the last run
        return {
            "cases": sum(self.by_path.values()),
            "by_path": dict(self.by_path),
            "outcomes": dict(self.outcomes),
            "wedged": self.wedged,
            "hangs": self.hangs,
            "failed_workflow_tasks": await failed_workflow_tasks(self.temporal, self.workflow_id),
            "gateway_5xx": self.doors.gateway_5xx,
            "canary_p50_ms": round(statistics.median(self.canary_ms), 1)
            if self.canary_ms
            else None,
            "slowest_canary_ms": round(max(self.canary_ms), 1) if self.canary_ms else None,
        }


async def _run(cases: int, seed: int, catalog_url: str) -> dict[str, Any]:
    async with bench_stack(catalog_url) as (address, temporal):
        workflow_id = f"bench-adversarial-{uuid.uuid4().hex[:8]}"
        handle = await ensure_coordinator(temporal, workflow_id=workflow_id)
        try:
            async with AdversarialRun(address, temporal, workflow_id, seed) as run:
                await run.run(cases)
                return {"seed": seed, **await run.summary()}
        finally:
            await handle.terminate("benchmark done")


@contextlib.contextmanager
def _one_payload_key() -> Iterator[None]:
    """The stack, the bench's clients and its gateway share one payload key (as every
    process of a deployment must), so answers that carry secrets decode here too."""
    if os.environ.get("STREAMCTL_PAYLOAD_KEY"):
        yield
        return
    os.environ["STREAMCTL_PAYLOAD_KEY"] = base64.b64encode(os.urandom(32)).decode()
    try:
        yield
    finally:
        del os.environ["STREAMCTL_PAYLOAD_KEY"]


def run_adversarial_bench(cases: int, seed: int, catalogs: list[str | None]) -> dict[str, Any]:
    """One run per catalog (None: a SQLite file; a PostgreSQL URL: a scratch database)."""
    runs: dict[str, Any] = {}
    for catalog in catalogs:
        with bench_catalog(catalog) as catalog_url, _one_payload_key():
            name = "sqlite" if catalog_url.startswith("sqlite") else "postgresql"
            runs[name] = asyncio.run(_run(cases, seed, catalog_url))
    totals = {
        key: sum(run[key] for run in runs.values())
        for key in ("cases", "wedged", "hangs", "failed_workflow_tasks", "gateway_5xx")
    }
    slowest = [run["slowest_canary_ms"] for run in runs.values() if run["slowest_canary_ms"]]
    return {
        **totals,
        "slowest_canary_ms": max(slowest) if slowest else None,
        "ok": totals["wedged"] == 0 and totals["failed_workflow_tasks"] == 0,
        "runs": runs,
    }
