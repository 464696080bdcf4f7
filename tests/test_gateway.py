"""The REST gateway against a real Temporal dev server and coordinator, served by uvicorn.

Calls go through ``curl`` (acceptance c: create a sink and read it back, 401 without a token,
problem+json 422 for a malformed body) and httpx. Every response a test receives is checked
against the gateway's own OpenAPI document: the status is declared for the route, with the
content type it came with, and the body validates against the declared schema.
``jsonschema`` is not installed here, so :func:`schema_errors` is a small validator of the
keywords the document uses; :func:`test_openapi_document_covers_every_route` fails if the
document starts using one it does not know.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import wait_until
from fastapi.routing import APIRoute
from typer.testing import CliRunner

from streamctl import config
from streamctl.cli import app as cli_app
from streamctl.gateway.app import (
    GatewayRefused,
    GatewaySettings,
    checked_settings,
    create_app,
)
from streamctl.gateway.problems import PROBLEM_MEDIA_TYPE
from streamctl.local_ports import free_port

SCHEMA = [
    {"name": "id", "type": "UINT64", "nullable": False},
    {"name": "amount", "type": "INT64", "nullable": False},
]
SINK = {"name": "big", "schema": SCHEMA, "type": "File", "config": {"file_path": "out/big"}}

# --- a minimal JSON Schema validator (the keywords FastAPI/pydantic emit) ---------------------

VALIDATED = {"$ref", "anyOf", "allOf", "type", "properties", "required", "additionalProperties"}
VALIDATED |= {"items", "enum", "const", "minimum", "maximum"}
ANNOTATIONS = {"title", "description", "default", "examples", "format", "contentMediaType"}

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def resolve(document: dict[str, Any], ref: str) -> dict[str, Any]:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return dict(node)


def schema_errors(
    value: Any, schema: dict[str, Any], document: dict[str, Any], at: str = "$"
) -> list[str]:
    """Where ``value`` breaks ``schema`` (empty: it validates)."""
    if "$ref" in schema:
        return schema_errors(value, resolve(document, schema["$ref"]), document, at)
    errors: list[str] = []
    if "anyOf" in schema and all(schema_errors(value, s, document, at) for s in schema["anyOf"]):
        errors.append(f"{at}: matches none of {schema['anyOf']}")
    for sub in schema.get("allOf", []):
        errors += schema_errors(value, sub, document, at)
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{at}: {value!r} is not {schema['const']!r}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return [*errors, f"{at}: {value!r} is not of type {types}"]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{at}: {value!r} is below the minimum {schema['minimum']}")
    if number and "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{at}: {value!r} is above the maximum {schema['maximum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [
            f"{at}: {name!r} missing" for name in schema.get("required", []) if name not in value
        ]
        for name, item in value.items():
            extra = schema.get("additionalProperties", True)
            if name in properties:
                errors += schema_errors(item, properties[name], document, f"{at}.{name}")
            elif extra is False:
                errors.append(f"{at}: {name!r} is not allowed")
            elif isinstance(extra, dict):
                errors += schema_errors(item, extra, document, f"{at}.{name}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], document, f"{at}[{index}]")
    return errors


def schema_keywords(node: Any, found: set[str]) -> set[str]:
    """Every keyword used in a schema tree (property names are not keywords)."""
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(key)
            if key == "properties":
                for sub in value.values():
                    schema_keywords(sub, found)
            else:
                schema_keywords(value, found)
    elif isinstance(node, list):
        for item in node:
            schema_keywords(item, found)
    return found


def check_response(
    document: dict[str, Any], method: str, route: str, status: int, content_type: str, body: Any
) -> None:
    """The response is one the document declares for the route, and its body validates."""
    operation = document["paths"][route][method.lower()]
    declared = operation["responses"]
    assert str(status) in declared, f"{method} {route}: {status} is not declared ({list(declared)})"
    content = declared[str(status)]["content"]
    media = content_type.split(";")[0].strip()
    assert media in content, f"{method} {route} {status}: {media} declared as {list(content)}"
    if status >= 400:
        assert media == PROBLEM_MEDIA_TYPE
    errors = schema_errors(body, content[media]["schema"], document)
    assert not errors, f"{method} {route} {status}: {errors}\n{body}"


def all_routes(routes: list[Any]) -> Iterator[Any]:
    """The app's routes, those of included routers too (FastAPI 0.13x+ keeps an included
    router as one route holding ``original_router``)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from all_routes(included.routes)
        else:
            yield route


# --- the gateway under test ------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Gateway:
    url: str
    token: str | None
    document: dict[str, Any] = field(default_factory=dict)

    async def curl(
        self,
        method: str,
        route: str,
        *,
        data: str | None = None,
        token: str | None = "default",
        check: bool = True,
        **path: Any,
    ) -> Reply:
        """One call through the curl binary, checked against the OpenAPI document."""
        args = ["curl", "-sS", "-i", "-X", method, self.url + route.format(**path)]
        token = self.token if token == "default" else token
        if token is not None:
            args += ["-H", f"Authorization: Bearer {token}"]
        if data is not None:
            args += ["-H", "Content-Type: application/json", "--data-binary", data]
        process = await asyncio.create_subprocess_exec(
            *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        head, _, payload = out.decode().partition("\r\n\r\n")
        status_line, *lines = head.split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        reply = Reply(int(status_line.split()[1]), headers, json.loads(payload))
        if check:
            self.check(method, route, reply)
        return reply

    async def call(
        self,
        method: str,
        route: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        check: bool = True,
        **path: Any,
    ) -> Reply:
        """One call through httpx, checked against the OpenAPI document."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            response = await http.request(
                method, route.format(**path), json=body, params=params, headers=headers
            )
        reply = Reply(response.status_code, dict(response.headers), response.json())
        if check:
            self.check(method, route, reply)
        return reply

    def check(self, method: str, route: str, reply: Reply) -> None:
        check_response(
            self.document, method, route, reply.status, reply.headers["content-type"], reply.body
        )


@contextlib.asynccontextmanager
async def served(settings: GatewaySettings) -> AsyncIterator[Gateway]:
    """The gateway app under uvicorn in a thread of this process, on a free port."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="gateway", daemon=True)
    thread.start()
    try:
        await wait_until(lambda: server.started or not thread.is_alive())
        assert server.started, "the gateway did not start (see the log above)"
        gateway = Gateway(f"http://127.0.0.1:{port}", settings.token)
        async with httpx.AsyncClient() as http:
            gateway.document = (await http.get(gateway.url + "/openapi.json")).json()
        yield gateway
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 30)


@pytest.fixture
async def gateway(start_coordinator: Any, sqlite_url: str) -> AsyncIterator[Gateway]:
    coordinator = await start_coordinator(sqlite_url)
    settings = GatewaySettings(
        coordinator.address, workflow_id=coordinator.workflow_id, token=uuid.uuid4().hex
    )
    async with served(settings) as running:
        yield running


# --- tests -----------------------------------------------------------------------------------


async def test_curl_creates_a_sink_and_reads_it_back(gateway: Gateway) -> None:
    created = await gateway.curl("POST", "/v1/sinks", data=json.dumps(SINK))
    assert created.status == 201, created.body
    expected = {
        "name": "big",
        "schema": SCHEMA,
        "type": "FILE",
        "config": created.body["config"],
        "created_version": created.body["created_version"],
    }
    assert created.body == expected
    assert created.body["config"]["file_path"] == str(config.files_dir() / "out" / "big")
    assert created.headers["location"] == gateway.url + "/v1/sinks/big"

    read = await gateway.curl("GET", "/v1/sinks/{name}", name="big")
    assert (read.status, read.body) == (200, expected)
    listed = await gateway.curl("GET", "/v1/sinks")
    assert (listed.status, listed.body) == (200, [expected])


async def test_calls_without_the_token_get_401(gateway: Gateway) -> None:
    for token in (None, "wrong-" + (gateway.token or "")):
        for method, route, data in (
            ("GET", "/v1/sinks", None),
            ("POST", "/v1/sinks", json.dumps(SINK)),
            ("POST", "/v1/sinks", "{not json"),  # refused before the body is read
            ("GET", "/v1/no-such-route", None),  # no hint which routes exist
        ):
            reply = await gateway.curl(method, route, data=data, token=token, check=False)
            assert reply.status == 401, (token, route, reply.body)
            assert reply.headers["content-type"] == PROBLEM_MEDIA_TYPE
            assert reply.headers["www-authenticate"].startswith("Bearer")
            assert reply.body["code"] == "UNAUTHORIZED"
            if route == "/v1/sinks":
                gateway.check(method, route, reply)
    unauthenticated = await gateway.curl("GET", "/v1/sinks", token=None, check=False)
    assert "Authorization: Bearer" in unauthenticated.body["detail"]
    assert (await gateway.call("GET", "/v1/sinks")).body == []  # nothing was created
    health = await gateway.curl("GET", "/healthz", token=None)
    assert (health.status, health.body) == (200, {"status": "ok"})


async def test_malformed_bodies_get_problem_422(gateway: Gateway) -> None:
    broken = await gateway.curl("POST", "/v1/sinks", data='{"name": "big", "schema": [')
    assert broken.status == 422
    assert broken.headers["content-type"] == PROBLEM_MEDIA_TYPE
    assert broken.body["code"] == "INVALID_REQUEST"
    assert broken.body["errors"][0]["pointer"] == "#"
    assert "invalid JSON at position" in broken.body["detail"]

    wrong_type = {**SINK, "schema": [{"name": "id", "type": 5}], "config": "x"}
    typed = await gateway.curl("POST", "/v1/sinks", data=json.dumps(wrong_type))
    assert typed.status == 422 and typed.body["code"] == "INVALID_REQUEST"
    pointers = {item["pointer"] for item in typed.body["errors"]}
    assert pointers == {"#/schema/0/type", "#/config"}, typed.body
    assert "#/schema/0/type" in typed.body["detail"]

    missing = await gateway.curl("POST", "/v1/queries", data='{"sink": "big", "extra": 1}')
    assert {item["pointer"] for item in missing.body["errors"]} == {"#/statement", "#/extra"}

    # bodies the JSON parser gives up on (not a syntax error): deeply nested, a 5,000-digit
    # number; they were 400 BAD_REQUEST, a code the API does not document
    for unreadable in (
        '{"name": ' + "[" * 5_000 + "]" * 5_000 + "}",
        '{"limit": 1' + "0" * 5000 + "}",
    ):
        refused = await gateway.curl("POST", "/v1/sinks", data=unreadable)
        assert refused.status == 422, refused.body
        assert refused.body["code"] == "INVALID_REQUEST", refused.body

    not_an_id = await gateway.curl("GET", "/v1/queries/{id}", id="seven")
    assert not_an_id.status == 422
    assert not_an_id.body["errors"] == [
        {"parameter": "id", "in": "path", "detail": not_an_id.body["errors"][0]["detail"]}
    ]
    assert (await gateway.call("GET", "/v1/sinks")).body == []


async def test_coordinator_refusals_are_problems_with_its_code(gateway: Gateway) -> None:
    unknown = await gateway.call("GET", "/v1/sinks/{name}", name="nowhere")
    assert (unknown.status, unknown.body["code"]) == (404, "NOT_FOUND")
    assert "nowhere" in unknown.body["detail"]
    assert unknown.body["title"] == "Not Found" and unknown.body["type"] == "about:blank"

    assert (await gateway.call("POST", "/v1/sinks", body=SINK)).status == 201
    again = await gateway.call("POST", "/v1/sinks", body=SINK)
    assert (again.status, again.body["code"]) == (409, "ALREADY_EXISTS")

    bad_name = await gateway.call("POST", "/v1/sinks", body={**SINK, "name": "no spaces"})
    assert (bad_name.status, bad_name.body["code"]) == (422, "INVALID_NAME")
    bad_type = await gateway.call("POST", "/v1/sinks", body={**SINK, "type": "Pigeon"})
    assert (bad_type.status, bad_type.body["code"]) == (422, "INVALID_REQUEST")
    assert "unknown sink type 'Pigeon'" in bad_type.body["detail"]

    syntax = await gateway.call("POST", "/v1/statements", body={"text": "SELEC 1"})
    assert (syntax.status, syntax.body["code"]) == (422, "SYNTAX_ERROR")
    assert "line 1, column 1" in syntax.body["detail"]

    no_route = await gateway.call("GET", "/v1/sinks/big/nothing", check=False)
    assert (no_route.status, no_route.body["code"]) == (404, "NOT_FOUND")
    assert no_route.headers["content-type"] == PROBLEM_MEDIA_TYPE
    problem_schema = {"$ref": "#/components/schemas/Problem"}
    assert not schema_errors(no_route.body, problem_schema, gateway.document)
    wrong_method = await gateway.call("PUT", "/v1/sinks", body=SINK, check=False)
    assert (wrong_method.status, wrong_method.body["code"]) == (405, "METHOD_NOT_ALLOWED")
    assert not schema_errors(wrong_method.body, problem_schema, gateway.document)


async def test_every_route_answers_as_documented(gateway: Gateway) -> None:
    call = gateway.call
    statements = await call(
        "POST",
        "/v1/statements",
        body={
            "text": "CREATE LOGICAL SOURCE orders(id UINT64 NOT NULL, amount INT64 NOT NULL);"
            " SHOW LOGICAL SOURCES"
        },
    )
    assert [s["statement"] for s in statements.body["statements"]] == [
        "CREATE LOGICAL SOURCE",
        "SHOW LOGICAL SOURCES",
    ]

    logical = await call("POST", "/v1/logical-sources", body={"name": "clicks", "schema": SCHEMA})
    assert logical.status == 201 and logical.headers["location"].endswith("/logical-sources/clicks")
    listed = await call("GET", "/v1/logical-sources")
    # A name in a statement is an SQL identifier: it is stored in upper case.
    assert [s["name"] for s in listed.body] == ["ORDERS", "clicks"]
    assert (await call("GET", "/v1/logical-sources/{name}", name="clicks")).body == logical.body
    # ?limit pages in key order; the Link header names the next page while there is one
    first = await call("GET", "/v1/logical-sources", params={"limit": 1})
    assert [s["name"] for s in first.body] == ["ORDERS"]
    following = first.headers["link"].removeprefix("<").split(">;")[0]
    assert first.headers["link"].endswith('rel="next"') and "after=ORDERS" in following
    second = await call("GET", "/v1/logical-sources", params={"limit": 1, "after": "ORDERS"})
    assert [s["name"] for s in second.body] == ["clicks"] and "link" not in second.headers
    too_many = await call("GET", "/v1/logical-sources", params={"limit": 0}, check=False)
    assert too_many.status == 422
    paged_show = await call(
        "POST", "/v1/statements", body={"text": "SHOW LOGICAL SOURCES", "limit": 1}
    )
    [show] = paged_show.body["statements"]
    assert [r["name"] for r in show["result"]["rows"]] == ["ORDERS"]
    assert show["result"]["next"] == "ORDERS"  # the cursor: the same text with after=next
    rest = await call(
        "POST",
        "/v1/statements",
        body={"text": "SHOW LOGICAL SOURCES", "limit": 1, "after": show["result"]["next"]},
    )
    assert [r["name"] for r in rest.body["statements"][0]["result"]["rows"]] == ["clicks"]

    physical = await call(
        "POST",
        "/v1/physical-sources",
        body={"logical_source": "ORDERS", "type": "File", "config": {"file_path": "in/"}},
    )
    source_id = physical.body["id"]
    assert physical.headers["location"].endswith(f"/physical-sources/{source_id}")
    assert (await call("GET", "/v1/physical-sources/{id}", id=source_id)).body == physical.body
    only = await call("GET", "/v1/physical-sources", params={"logical_source": "clicks"})
    assert only.body == []

    await call("POST", "/v1/sinks", body=SINK)
    query = await call(
        "POST", "/v1/queries", body={"statement": "SELECT id, amount FROM orders INTO big"}
    )
    query_id = query.body["id"]
    assert (query.status, query.body["current_state"]) == (201, "CREATED")  # no agent yet
    detail = await call("GET", "/v1/queries/{id}", id=query_id)
    assert detail.body["sources"] == ["ORDERS"]
    assert [q["id"] for q in (await call("GET", "/v1/queries")).body] == [query_id]
    stopped = await call("POST", "/v1/queries/{id}/stop", id=query_id)
    assert stopped.body["desired_state"] == "STOPPED"
    no_room = await call("POST", "/v1/queries/{id}/start", id=query_id)
    assert (no_room.status, no_room.body["code"]) == (503, "UNAVAILABLE")  # no agent to run it
    assert "no alive agent" in no_room.body["detail"]

    refused = await call("DELETE", "/v1/logical-sources/{name}", name="ORDERS")
    assert (refused.status, refused.body["code"]) == (409, "HAS_DEPENDENTS")
    dropped = await call(
        "DELETE", "/v1/logical-sources/{name}", name="ORDERS", params={"cascade": "true"}
    )
    assert dropped.body == {
        "logical_sources": ["ORDERS"],
        "physical_sources": [source_id],
        "queries": [query_id],
    }
    gone = await call("DELETE", "/v1/queries/{id}", id=query_id)
    assert (gone.status, gone.body["code"]) == (404, "NOT_FOUND")
    assert (await call("DELETE", "/v1/sinks/{name}", name="big")).body == {
        "sinks": ["big"],
        "queries": [],
    }
    assert (await call("DELETE", "/v1/logical-sources/{name}", name="clicks")).status == 200
    missing = await call("DELETE", "/v1/physical-sources/{id}", id=source_id)
    assert missing.body["code"] == "NOT_FOUND"

    assert (await call("GET", "/v1/workers")).body == []
    worker = await call("GET", "/v1/workers/{name}", name="a1")
    assert (worker.status, worker.body["code"]) == (404, "NOT_FOUND")
    drained = await call("POST", "/v1/workers/{name}/drain", name="a1")
    assert (drained.status, drained.body["code"]) == (404, "NOT_FOUND")

    assert (await call("POST", "/v1/reoptimize")).body == {"decisions": []}
    changes = await call("GET", "/v1/changes", params={"entity": "sink", "limit": "2"})
    assert [(c["key"], c["action"]) for c in changes.body] == [("big", "create"), ("big", "drop")]
    too_many = await call("GET", "/v1/changes", params={"limit": "0"})
    assert (too_many.status, too_many.body["code"]) == (422, "INVALID_REQUEST")


async def test_openapi_document_covers_every_route(gateway: Gateway) -> None:
    document = gateway.document
    unknown = schema_keywords(list(document["components"]["schemas"].values()), set())
    for path_item in document["paths"].values():
        for operation in path_item.values():
            for response in operation["responses"].values():
                for media in response.get("content", {}).values():
                    schema_keywords(media["schema"], unknown)
    assert unknown - VALIDATED - ANNOTATIONS == set(), "teach schema_errors these keywords"

    # The validator can fail: a sink without its name, a problem with a string status.
    sink_schema = {"$ref": "#/components/schemas/Sink"}
    assert schema_errors({"schema": [], "type": "X", "config": {}}, sink_schema, document)
    problem_schema = {"$ref": "#/components/schemas/Problem"}
    bad_problem = {"type": "about:blank", "title": "x", "status": "404", "detail": "", "code": ""}
    assert schema_errors(bad_problem, problem_schema, document)

    routes = list(all_routes(create_app(GatewaySettings("unused", token="t")).routes))
    api_routes = [r for r in routes if isinstance(r, APIRoute)]
    assert len(api_routes) == 26  # 25 under /v1 and /healthz
    documented = {(p, m) for p, item in document["paths"].items() for m in item}
    assert documented == {(r.path, m.lower()) for r in api_routes for m in r.methods or ()}
    for route in api_routes:
        for method in route.methods or ():
            operation = document["paths"][route.path][method.lower()]
            if not route.path.startswith("/v1/"):
                continue
            assert operation["security"] == [{"HTTPBearer": []}], route.path
            errors = {s: r for s, r in operation["responses"].items() if int(s) >= 400}
            assert {"401", "422", "500", "503"} <= set(errors), (method, route.path)
            for status, response in errors.items():
                assert list(response["content"]) == [PROBLEM_MEDIA_TYPE], (route.path, status)
                assert response["content"][PROBLEM_MEDIA_TYPE]["schema"] == problem_schema
    assert "/docs" in {getattr(r, "path", None) for r in routes}
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_no_coordinator_is_503_and_no_auth_serves_on_loopback(temporal: Any) -> None:
    settings = GatewaySettings(
        temporal.address, workflow_id=f"absent-{uuid.uuid4().hex[:8]}", request_timeout=1.0
    )
    async with served(checked_settings(settings, "127.0.0.1", insecure_no_auth=True)) as gateway:
        reply = await gateway.curl("GET", "/v1/sinks", token=None)
    assert (reply.status, reply.body["code"]) == (503, "COORDINATOR_UNAVAILABLE")


@pytest.mark.quick
def test_gateway_refuses_to_start_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMCTL_GATEWAY_TOKEN", raising=False)
    settings = GatewaySettings("unused")
    with pytest.raises(GatewayRefused, match="STREAMCTL_GATEWAY_TOKEN"):
        checked_settings(settings, "127.0.0.1", insecure_no_auth=False)
    with pytest.raises(GatewayRefused, match="loopback"):
        checked_settings(settings, "0.0.0.0", insecure_no_auth=True)
    assert checked_settings(settings, "::1", insecure_no_auth=True) == settings

    runner = CliRunner()
    refused = runner.invoke(cli_app, ["gateway", "--address", "127.0.0.1:1"])
    assert refused.exit_code == 2 and "STREAMCTL_GATEWAY_TOKEN" in refused.output
    exposed = runner.invoke(cli_app, ["gateway", "--insecure-no-auth", "--host", "0.0.0.0"])
    assert exposed.exit_code == 2 and "loopback" in exposed.output


async def test_streamctl_gateway_command(start_coordinator: Any, sqlite_url: str) -> None:
    coordinator = await start_coordinator(sqlite_url)
    port, token = free_port(), uuid.uuid4().hex
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streamctl.cli",
        "gateway",
        "--port",
        str(port),
        "--address",
        coordinator.address,
        "--workflow-id",
        coordinator.workflow_id,
        env={**os.environ, "STREAMCTL_GATEWAY_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    gateway = Gateway(f"http://127.0.0.1:{port}", token)
    try:

        async def healthy() -> bool:
            assert process.returncode is None, "streamctl gateway exited"
            with contextlib.suppress(httpx.TransportError):
                async with httpx.AsyncClient() as http:
                    gateway.document = (await http.get(gateway.url + "/openapi.json")).json()
                    return True
            return False

        await wait_until(healthy, timeout=60)
        assert (await gateway.curl("POST", "/v1/sinks", data=json.dumps(SINK))).status == 201
        assert (await gateway.curl("GET", "/v1/sinks/{name}", name="big")).body["name"] == "big"
        assert (await gateway.curl("GET", "/v1/sinks", token=None, check=False)).status == 401
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    # uvicorn shuts down gracefully (the lifespan closes the coordinator client), then raises
    # the signal it caught again, so the process ends as terminated by SIGTERM.
    assert process.returncode in (0, -signal.SIGTERM), output.decode()
    assert "Application shutdown complete" in output.decode()
